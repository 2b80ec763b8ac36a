"""``json_schema``: the response is JSON that validates against a JSON Schema.

For structured-output / tool-call training. The JSON is taken from (``extract``):

* ``auto`` (default) the last fenced block tagged ``json`` (```` ```json ... ``` ````) if there is one,
  else the whole response; ``fenced`` that block only (none: 0, reason ``format``); ``whole`` the whole
  response. Surrounding whitespace is ignored; ``NaN``/``Infinity`` are not JSON and do not parse.
  In every mode a reasoning model's thinking is not the response: only the text after the last
  ``</think>`` and before a ``<think>`` that never closes is read (:func:`~.text.answer_text`), so a
  draft in the reasoning is not the answer and a response cut off in its reasoning has none.

The schema: ``config.schema`` when given (one schema for the whole batch; checked when the request
arrives, its references resolved too, so a bad one, or one referring to nothing or to a remote URL, is a
422); otherwise the item's reference, either ``{"schema": {...}}`` (or ``{"schema": "<the schema as JSON
text>"}``) or the schema object itself (a top-level ``"schema"`` key is always read as the wrapper, whatever
it holds), or a JSON string of either. **The config wins**: with ``config.schema`` set the reference is ignored.
A missing schema (no reference, a blank one, or the wrapper holding null or blank text) is
``missing_reference``; an unreadable one (bad JSON, fails the metaschema, an unresolvable ``$ref``: remote
references are never fetched) is ``parse_error``, since the data, not the model, is at fault.

Validation uses the draft the schema declares in ``$schema``, Draft 2020-12 when it declares none.
``pattern`` / ``patternProperties`` / ``additionalProperties`` regexes (and those ``unevaluatedProperties``
reads; and with ``check_formats`` a document's ``format: regex`` strings, :func:`_is_document_regex`) are checked (so ECMA-262's ``\\p{L}`` and ``(?<name>...)``, which Python's ``re`` rejects, are
read, and ``\\d``, ``\\w`` and ``\\b`` are ECMA-262's ASCII ones and ``\\s`` its white space, :func:`_ecma`:
``^\\d{5}$`` takes no full-width digits) and run by the ``regex`` engine with a timeout (see :mod:`rewardhub.rewards.patterns`): schemas come from callers, and the stock
validator's ``re.search`` on a hostile pattern and response would stall the event loop. Every search of
one request draws on one :class:`~rewardhub.rewards.patterns.MatchBudget`: a document with many keys
or strings runs many searches, each under its own limit, and one item of 40 keys under a slow
``patternProperties`` pattern held the loop for 10 s; once the budget is spent, the items left are
``timeout``.

Score: 1 when valid; 0 when it does not parse or does not validate (reason ``format``), or 0.5 for JSON
that parses but does not validate with ``partial_credit``. Components ``parses`` and ``valid``; details
list the first ``max_errors`` validation errors with their JSON paths.

Validation is pure Python (a 1 MB array of 250,000 objects takes over a second): a request whose
responses, and the distinct schemas its references carry (each checked against its metaschema first),
total more than ``_INLINE_CHARS`` characters is validated in the CPU workers, each item
under the request's deadline (``timeout`` past it), so big documents never hold the event loop. A small
one can still take long under a hostile schema (nested applicators make validation exponential in the
schema's depth): validation on the event loop checks a clock at every keyword, and past
``_INLINE_VALIDATION_S`` for the request the items left are ``timeout``.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from functools import lru_cache
from itertools import islice
from typing import Any, ClassVar, Literal

import jsonschema._keywords
import jsonschema._legacy_keywords
import jsonschema._utils
import referencing.jsonschema
import regex
from jsonschema import Draft202012Validator, FormatChecker, ValidationError
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for
from pydantic import Field, field_validator
from referencing import Registry
from referencing.exceptions import Unresolvable

from rewardhub import jsonutil
from rewardhub.errors import InvalidRequest
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.patterns import (
    MATCH_TIMEOUT_S,
    MatchBudget,
    PatternTimeout,
    capped_match,
    capped_outcome,
    check_size,
    compile_pattern,
    full_case_folding,
    runs_inline,
)
from rewardhub.rewards.text import answer_text, blank

__all__ = ["JsonSchemaConfig", "JsonSchemaReward", "extract_json_text", "json_in_answer"]

Schema = dict[str, Any] | bool


# A config's schema is checked when the request is read, on the event loop: at most this many characters
# of JSON (about a second the first time; then cached). Real structured-output schemas are a few kB.
_CONFIG_SCHEMA_CHARS = 200_000


class JsonSchemaConfig(RewardConfig):
    json_schema: Schema | None = Field(
        None,
        alias="schema",
        description="The JSON Schema for every item; when absent each item's reference holds its schema.",
    )
    extract: Literal["auto", "fenced", "whole"] = Field(
        "auto", description="auto: last ```json block if any, else the whole response; fenced; whole."
    )
    partial_credit: bool = Field(False, description="Score 0.5 for JSON that parses but does not validate.")
    check_formats: bool = Field(
        False,
        description="Assert `format` keywords: date, date-time, time, email, idn-email, idn-hostname, ipv4, "
        "ipv6, uuid, regex (others, such as uri or hostname, are not checked).",
    )
    max_errors: int = Field(3, ge=0, le=20, description="Validation errors listed in details.")

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, v: Schema | None) -> Schema | None:
        if isinstance(v, dict):  # true/false are valid schemas
            key = _schema_key(v)
            if len(key) > _CONFIG_SCHEMA_CHARS:
                # checked against its metaschema here, on the event loop, before any item is read (about
                # 6 s per MB the first time it is seen); a schema in the references is checked with them
                raise ValueError(
                    f"the config's schema is {len(key):,} characters of JSON, over {_CONFIG_SCHEMA_CHARS:,}; "
                    "send a schema this large in each item's reference ({'schema': ...}) instead"
                )
            try:
                _checked(key)  # once per distinct schema: a run sends its schema every batch
            except SchemaError as exc:
                raise ValueError(f"not a valid JSON Schema: {exc.message[:300]}") from None
            except Exception as exc:  # malformed input makes jsonschema raise assorted types ($schema: 5)
                raise ValueError(f"not a valid JSON Schema: {type(exc).__name__}: {exc}"[:300]) from None
            problem = _unresolvable_ref(key)
            if problem is not None:
                raise ValueError(f"not a usable JSON Schema: {problem}"[:400])
        return v


# ECMA-262's \d, \w and \b (and their negations) are ASCII's, with or without its u flag; the engine's
# are Unicode's. Outside a class each is scoped ASCII, (?a:\d); inside one \d and \w are their ranges.
_ASCII_ESCAPES = frozenset("dDwWbB")
# ECMA-262's \s: its WhiteSpace and LineTerminator, which hold the byte order mark U+FEFF and not NEL
# (U+0085); the engine's Unicode \s is the other way round.
_ECMA_SPACE = "\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_CLASS_RANGES = {"d": "0-9", "w": "A-Za-z0-9_", "s": _ECMA_SPACE}
_SPACE_ESCAPES = {"s": f"[{_ECMA_SPACE}]", "S": f"[^{_ECMA_SPACE}]"}


@lru_cache(maxsize=1024)
def _ecma(pattern: str) -> str:
    """``pattern`` with ECMA-262's ASCII ``\\d``, ``\\w``, ``\\b``, its ``\\s`` and their negations: a five-digit
    pattern ``^\\d{5}$`` took full-width "１２３４５" and ``^\\w+$`` took "café", which an ECMA validator
    (the one a schema's consumer runs) rejects. ``\\p{...}`` stays Unicode, as in ECMA with ``u``; a
    negated escape inside a class (``[\\D]``) stays the engine's. Classes and ``(?#...)`` comments are
    read as :func:`.patterns.pattern_units` reads them, so an escaped backslash or a comment is left as
    written; an invalid pattern stays invalid."""
    if "\\" not in pattern:
        return pattern
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            esc = pattern[i + 1]
            if esc in _ASCII_ESCAPES and not in_class:
                out.append(f"(?a:\\{esc})")
            elif esc in _SPACE_ESCAPES and not in_class:
                out.append(_SPACE_ESCAPES[esc])
            elif in_class and esc in _CLASS_RANGES:
                # a hyphen beside a class escape is the character ([\w-.]), not a range: kept one
                if out and out[-1] == "-":
                    out[-1] = "\\-"
                out.append(_CLASS_RANGES[esc])
                if pattern.startswith("-", i + 2):
                    out.append("\\-")
                    i += 1
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if pattern.startswith("[:", i):  # a POSIX class, [:alpha:], ends at its own ":]"
                close = pattern.find(":]", i + 2)
                if close >= 0:
                    out.append(pattern[i : close + 2])
                    i = close + 2
                    continue
            in_class = ch != "]"
            out.append(ch)
            i += 1
        elif ch == "[":
            start = i + 1
            if start < n and pattern[start] == "^":
                start += 1
            if start < n and pattern[start] == "]":
                start += 1  # a leading "]" is the character
            out.append(pattern[i:start])
            in_class = True
            i = start
        elif pattern.startswith("(?#", i):
            end = i + 3
            while end < n and pattern[end] != ")":  # "\)" does not end the comment
                end += 2 if pattern[end] == "\\" else 1
            end = min(end + 1, n)
            out.append(pattern[i:end])
            i = end
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _is_pattern(value: object) -> bool:
    """The metaschema's ``format: regex`` (``pattern`` and ``patternProperties`` keys), checked with the
    engine that runs the patterns: it reads ECMA-262 syntax Python's ``re`` rejects (``\\p{L}``,
    ``(?<name>...)``). A pattern turning on the engine's version 1 (``(?V1)``: no ECMA-262 syntax) is
    refused as one that does not compile is, not with the engine's ValueError text."""
    if isinstance(value, str):
        compile_pattern(_ecma(value), False, version0=True)
    return True


@lru_cache(maxsize=16)
def _metaschema_formats(cls: type[Validator]) -> FormatChecker:
    checker = FormatChecker(())
    # ValueError: (?V1), which compile_pattern refuses in a JSON Schema pattern
    checker.checkers = {**cls.FORMAT_CHECKER.checkers, "regex": (_is_pattern, (regex.error, ValueError))}
    return checker


def _is_document_regex(value: object) -> bool:
    """``format: regex`` of a document's string (``check_formats``), in place of jsonschema's
    ``re.compile``: the string comes from the model, and ``re`` raised OverflowError on ``a{4294967295}``
    (out of the reward, failing the request's every item) and took 11 s over 3,000 case-insensitive
    classes, on the event loop. The engine that runs the schema's patterns reads it, uncached, under the
    size bound of :func:`compile_pattern`; full case folding (``(?f)``, no flag of ECMA-262 or ``re``,
    and as slow to compile: 15 s for 19,000 classes) is no regular expression here."""
    if not isinstance(value, str):
        return True
    if full_case_folding(value):
        raise regex.error("full case folding (?f) is not a flag of ECMA-262 regular expressions")
    check_size(value)
    regex.compile(value, regex.V0, cache_pattern=False)
    return True


# RFC 3339 date-time, as rfc3339-validator reads it (jsonschema's checker when that package is installed):
# upper-cased first, T between date and time, an offset required, seconds up to 59.
_RFC3339 = re.compile(
    r"([0-9]{4})-(0[1-9]|1[0-2])-([0-9]{2})T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
    r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])",
    re.ASCII,
)


def _is_datetime(value: object) -> bool:
    """``format: date-time`` (RFC 3339), for a jsonschema without rfc3339-validator, which passed any
    string for a date-time."""
    if not isinstance(value, str):
        return True
    m = _RFC3339.fullmatch(value.upper())
    if m is None:
        return False
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    return year > 0 and 1 <= day <= calendar.monthrange(year, month)[1]


def _is_time(value: object) -> bool:
    """``format: time`` (drafts 7 on): an RFC 3339 full-time, with its offset."""
    return not isinstance(value, str) or _is_datetime("1970-01-01T" + value)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII | re.IGNORECASE)


def _is_uuid(value: object) -> bool:
    """``format: uuid`` (drafts 2019-09 on): RFC 4122's string form, 8-4-4-4-12 ASCII hex digits.
    jsonschema's check is Python's ``UUID()``, which reads any Unicode digit (full-width "２") as a hex
    digit and drops every hyphen, then the hyphens' positions: a full-width digit or an extra hyphen passed."""
    return not isinstance(value, str) or _UUID.fullmatch(value) is not None


# Drafts that define format: time (draft 3's is another, HH:MM:SS, which jsonschema checks itself).
_TIME_DRAFTS = ("draft-07", "2019-09", "2020-12")


@lru_cache(maxsize=16)
def _document_formats(cls: type[Validator]) -> FormatChecker:
    """The draft's format checker for documents: ``regex`` read by :func:`_is_document_regex`,
    ``date-time`` / ``time`` asserted where jsonschema, without its optional packages, asserts nothing, and
    ``uuid`` read as RFC 4122 writes it (:func:`_is_uuid`)."""
    checker = FormatChecker(())
    raises = (regex.error, ValueError, OverflowError)  # ValueError: an incompatible flag such as (?V1)
    checkers = {**cls.FORMAT_CHECKER.checkers, "regex": (_is_document_regex, raises)}
    checkers.setdefault("date-time", (_is_datetime, ()))
    if "uuid" in checkers:
        checkers["uuid"] = (_is_uuid, ())
    if any(draft in str(cls.META_SCHEMA.get("$schema", "")) for draft in _TIME_DRAFTS):
        checkers.setdefault("time", (_is_time, ()))
    checker.checkers = checkers
    return checker


def _check_schema(cls: type[Validator], schema: dict[str, Any]) -> None:
    """``cls.check_schema``, with patterns checked as :func:`_search` will run them.

    Raises:
        SchemaError: the schema fails its metaschema.
    """
    # (the Validator protocol leaves out check_schema's format_checker, every draft's class has it)
    cls.check_schema(schema, format_checker=_metaschema_formats(cls))  # type: ignore[call-arg]


def extract_json_text(text: str, mode: str) -> str | None:
    """The text to parse: the last closed ```json block (auto/fenced) or the whole response, outside the
    reasoning (after the last ``</think>``, before an unclosed ``<think>``)."""
    return json_in_answer(answer_text(text), mode)


def json_in_answer(text: str, mode: str) -> str | None:
    """:func:`extract_json_text` of a response's answer already cut from its reasoning."""
    if mode != "whole":
        block: list[str] | None = None
        last: list[str] | None = None
        for line in text.splitlines():
            stripped = line.strip()
            if block is None:
                if stripped.startswith("```") and stripped[3:].strip().lower() == "json":
                    block = []
            elif stripped.startswith("```"):
                last, block = block, None
            else:
                block.append(line)
        if last is not None:
            return "\n".join(last).strip()
        if mode == "fenced":
            return None
    return text.strip()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# The budget of the request being scored; the validators are cached across requests, so the keyword
# functions below find it here rather than on the validator.
_budget: ContextVar[MatchBudget | None] = ContextVar("rewardhub_json_schema_budget", default=None)


class ValidationTimeout(Exception):
    """Validation on the event loop ran past the request's budget."""


# When validation on the event loop must stop (a time.perf_counter() reading); None in a CPU worker,
# which is killed past the item's deadline instead.
_stop_at: ContextVar[float | None] = ContextVar("rewardhub_json_schema_stop_at", default=None)


def _timed(fn: Any) -> Any:
    """A keyword function that first checks the clock. Applicators (``$ref``, ``allOf``, ``anyOf``...)
    validate a subschema by calling its keywords, so validation is bounded by the clock at every level:
    a schema's nesting can make it exponential, and 16 levels of ``allOf`` + ``unevaluatedProperties``
    (a 1 kB schema) took 50 s on an 8-byte response, on the event loop."""

    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        stop = _stop_at.get()
        if stop is not None and time.perf_counter() > stop:
            raise ValidationTimeout("validation used up this request's time on the event loop")
        return fn(validator, value, instance, schema)

    return keyword


# Set in a CPU worker (:func:`validate_in_worker`): a pattern's match there is bounded in memory too.
_capped: ContextVar[bool] = ContextVar("rewardhub_json_schema_capped", default=False)


class _OffLoop(Exception):
    """A pattern met a string too long to match on the event loop (:func:`.patterns.runs_inline`): the item
    is validated again in a CPU worker, where the match's memory is capped."""


def _search(pattern: str, text: str) -> bool:
    try:
        compiled = compile_pattern(_ecma(pattern), False, version0=True)
    except (regex.error, ValueError) as exc:  # ValueError: (?V1), refused by the metaschema check first
        raise SchemaError(f"pattern {pattern[:80]!r} does not compile: {exc}") from None
    budget = _budget.get()
    if budget is not None:
        if not runs_inline(compiled, text):
            raise _OffLoop
        return budget.run(pattern, compiled.search, text) is not None
    if _capped.get():  # raises PatternTimeout, or PatternMemory past MATCH_MEMORY_BYTES
        return capped_match(pattern, compiled.search, text) is not None
    try:
        return compiled.search(text, timeout=MATCH_TIMEOUT_S) is not None
    except TimeoutError:
        raise PatternTimeout(f"schema pattern {pattern[:80]!r} ran past {MATCH_TIMEOUT_S}s") from None


class _GuardedRe:
    """Stands in for ``re`` in jsonschema's helper modules. ``unevaluatedProperties`` (drafts 2019-09 and
    2020-12) finds the keys a ``patternProperties`` pattern covers with its own ``re.search``, out of
    reach of the keyword overrides below: an ECMA-262 pattern (``\\p{L}``) raised ``re.error`` out of the
    reward and a hostile one ran untimed on the event loop. Their ``re`` is used for nothing else today;
    anything else a later jsonschema asks of it is ``re``'s own, so a release that does cannot break the
    reward (only leave that use unguarded)."""

    search = staticmethod(_search)

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)


for _module in (jsonschema._utils, jsonschema._legacy_keywords):
    setattr(_module, "re", _GuardedRe())  # noqa: B010  (the modules declare no such attribute for mypy)


def _pattern(validator: Validator, patrn: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(patrn, instance):
        yield ValidationError(f"{instance[:80]!r} does not match {patrn!r}")


def _pattern_properties(
    validator: Any, pp: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "object"):
        for patrn, subschema in pp.items():
            for k, v in instance.items():
                if _search(patrn, k):
                    yield from validator.descend(v, subschema, path=k, schema_path=patrn)


def _additional_properties(validator: Any, ap: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    props, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in props and not any(_search(p, k) for p in patterns)]
    if validator.is_type(ap, "object"):
        for k in extras:
            yield from validator.descend(instance[k], ap, path=k)
    elif not ap and extras:
        yield ValidationError(f"additional properties are not allowed ({', '.join(map(repr, extras[:5]))})")


def _frozen(value: Any) -> Any:
    """A hashable form of a JSON value, equal iff the values are equal as JSON Schema compares them:
    ``1`` and ``1.0`` alike, ``true`` and ``1`` not, objects whatever their key order."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)  # 1 == 1.0 and hash(1) == hash(1.0)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_frozen(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _frozen(v)) for k, v in value.items()))
    return ("null", None)


def _unique_items(validator: Validator, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """``uniqueItems`` in linear time: the stock check compares every pair of items that do not sort
    (objects, arrays), so 3,000 distinct objects held the event loop for 8 s."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: dict[Any, int] = {}
    for i, item in enumerate(instance):
        first = seen.setdefault(_frozen(item), i)
        if first != i:
            yield ValidationError(f"has non-unique elements (items {first} and {i} are equal)")
            return


def _unevaluated_properties(find: Any) -> Any:
    """jsonschema's ``unevaluatedProperties`` for a draft, with its ``find`` of the evaluated keys, which
    it then looked each key up in as a list: quadratic, and a document of 18,000 keys held the event loop
    for 2 s. The same keys, errors and messages, looked up in a set."""

    def keyword(validator: Any, uneval: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        evaluated = set(find(validator, instance, schema))
        keys = []
        for k in instance:
            if k not in evaluated:
                # one entry per error, as jsonschema's own message lists them
                keys += [k for _ in validator.descend(instance[k], uneval, path=k, schema_path=k)]
        if not keys:
            return
        if uneval is False:
            message = "Unevaluated properties are not allowed (%s %s unexpected)"
            yield ValidationError(message % jsonschema._utils.extras_msg(sorted(keys, key=str)))
        else:
            message = (
                "Unevaluated properties are not valid under the given schema (%s %s unevaluated and invalid)"
            )
            yield ValidationError(message % jsonschema._utils.extras_msg(keys))

    return keyword


def _unevaluated_items(find: Any) -> Any:
    """jsonschema's ``unevaluatedItems`` for a draft, with its ``find`` of the evaluated indexes, which it
    then looked each index up in as a list: quadratic, and an array of 60,000 zeros (180 kB, under the
    inline limit) held the event loop for 13 s. The same items and message, looked up in a set."""

    def keyword(validator: Any, uneval: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "array"):
            return
        evaluated = set(find(validator, instance, schema))
        items = [item for index, item in enumerate(instance) if index not in evaluated]
        if items:
            message = "Unevaluated items are not allowed (%s %s unexpected)"
            yield ValidationError(message % jsonschema._utils.extras_msg(items))

    return keyword


# jsonschema's own keyword function -> ours (drafts 2019-09 and 2020-12 have these keywords)
_UNEVALUATED = {
    jsonschema._keywords.unevaluatedItems: _unevaluated_items(
        jsonschema._utils.find_evaluated_item_indexes_by_schema
    ),
    jsonschema._legacy_keywords.unevaluatedItems_draft2019: _unevaluated_items(
        jsonschema._legacy_keywords.find_evaluated_item_indexes_by_schema
    ),
    jsonschema._keywords.unevaluatedProperties: _unevaluated_properties(
        jsonschema._utils.find_evaluated_property_keys_by_schema
    ),
    jsonschema._legacy_keywords.unevaluatedProperties_draft2019: _unevaluated_properties(
        jsonschema._legacy_keywords.find_evaluated_property_keys_by_schema
    ),
}

_SAFE_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}


def _schema_key(schema: Schema) -> str:
    """The canonical text :func:`_checked` and :func:`_validator` cache a schema under."""
    return json.dumps(schema, sort_keys=True)


@lru_cache(maxsize=256)
def _checked(schema_json: str) -> tuple[type[Validator], Any]:
    """The draft's validator class and the schema of a canonical schema text, checked against its
    metaschema (cached: the check costs about what validating a document of the schema's size does, and
    a config's schema comes with every request of a run).

    Raises:
        SchemaError: the schema fails its metaschema.
    """
    schema = json.loads(schema_json)
    base = validator_for(schema, default=Draft202012Validator)
    _check_schema(base, schema)
    return base, schema


@lru_cache(maxsize=256)
def _validator(schema_json: str, check_formats: bool) -> Validator:
    """A validator for a canonical schema text (cached: a dataset reuses a handful of schemas).

    Raises:
        SchemaError: the schema fails its metaschema.
    """
    base, schema = _checked(schema_json)
    keywords: dict[str, Any] = dict(_SAFE_KEYWORDS)
    for name in ("unevaluatedItems", "unevaluatedProperties"):
        own = base.VALIDATORS.get(name)
        if own in _UNEVALUATED:
            keywords[name] = _UNEVALUATED[own]
    timed = {name: _timed(fn) for name, fn in {**base.VALIDATORS, **keywords}.items()}
    cls = extend(base, timed)  # type: ignore[no-untyped-call]
    # An empty registry, which jsonschema combines with the metaschemas it ships: a reference to anything
    # else is Unresolvable. Without one, jsonschema's default registry GETs an unknown URI with urllib
    # (deprecated, with a warning): a caller's schema made the service fetch any URL it could reach, on
    # the event loop and without a timeout.
    return cls(  # type: ignore[no-any-return]
        schema, registry=Registry(), format_checker=_document_formats(base) if check_formats else None
    )


_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")


@lru_cache(maxsize=256)
def _unresolvable_ref(schema_json: str) -> str | None:
    """Why a reference in a (checked) schema cannot be resolved, or None: a ``$ref`` (``$dynamicRef``,
    ``$recursiveRef``) in any subschema, resolved as validation would resolve it (remote references never
    are). Validation resolves a reference only when it reaches it, so a config's bad one made every item
    ``parse_error``; found as the request is read, it is the config error it is. Best effort: a schema this
    walk cannot read (an older draft's oddity) is left to validation."""
    validator = _validator(schema_json, False)
    resolver = getattr(validator, "_resolver", None)  # jsonschema's own (private), so the same resolution
    if resolver is None:
        return None
    dialect = str(validator.META_SCHEMA.get("$schema", ""))
    try:
        spec = referencing.jsonschema.specification_with(dialect)  # the draft the validator reads
        stack = [(resolver, spec.create_resource(validator.schema))]
        while stack:
            here, resource = stack.pop()
            contents = resource.contents
            if isinstance(contents, dict):
                for keyword in _REFERENCES:
                    ref = contents.get(keyword)
                    if isinstance(ref, str):
                        try:
                            here.lookup(ref)
                        except Unresolvable as exc:
                            remote = " (remote references are never fetched)" if "://" in ref else ""
                            return f"{keyword} {ref!r} cannot be resolved{remote}: {type(exc).__name__}"
            stack.extend((here.in_subresource(sub), sub) for sub in resource.subresources())
    except Exception:  # a shape the walk does not know (an unknown dialect): validation will tell
        return None
    return None


def _load(schema: Schema, check_formats: bool) -> Validator | Outcome:
    """The validator of a schema, or the invalid outcome of an item that carries a bad one."""
    try:
        return _validator(_schema_key(schema), check_formats)
    except SchemaError as exc:
        return Outcome.invalid(Reason.PARSE_ERROR, f"not a valid JSON Schema: {exc.message[:300]}")
    except _OffLoop:  # a metaschema pattern on a long string: the item goes to a worker
        raise
    except Exception as exc:  # an untrusted schema may break jsonschema in assorted ways ($schema: 5, depth)
        return Outcome.invalid(
            Reason.PARSE_ERROR, f"not a valid JSON Schema: {type(exc).__name__}: {exc}"[:300]
        )


class _NoSchema(Exception):
    """The reference holds no schema: blank text, or the wrapper with nothing (null, blank text) in it."""


def _reference_schema(reference: Any) -> Schema:
    """The schema an item's reference holds.

    A top-level ``schema`` key is the wrapper whatever it holds (no JSON Schema keyword has that name):
    read as the schema, ``{"schema": null}`` (a dataset row whose schema is missing) was a schema of one
    unknown keyword, which every document satisfies.

    Raises:
        _NoSchema: the reference, or its wrapper's ``schema``, is null or blank text.
        ValueError: it is not a JSON Schema (unreadable JSON text, or a value that is no schema).
    """
    if isinstance(reference, str):
        if blank(reference):
            raise _NoSchema
        reference = json.loads(reference)
    if isinstance(reference, dict) and "schema" in reference:
        inner = reference["schema"]
        if inner is None or isinstance(inner, str) and blank(inner):
            raise _NoSchema
        if isinstance(inner, str):  # the wrapper with the schema as JSON text (a dataset's string column)
            inner = json.loads(inner)
        if not isinstance(inner, dict | bool):
            raise ValueError("the reference's `schema` is not a JSON Schema object")
        return inner
    if not isinstance(reference, dict | bool):
        raise ValueError("the reference is not a JSON Schema object")
    return reference


# Seconds the validation of one request's items may hold the event loop (wall time) before the items
# left are ``timeout``: a hostile schema's alone (documents under _INLINE_CHARS take well under 1 s).
_INLINE_VALIDATION_S = 5.0

# Response characters a request may validate on the event loop (about 0.3 s for the cheapest-per-byte
# documents, many tiny objects); above it the batch goes to the CPU workers.
_INLINE_CHARS = 200_000


def _inline_chars(items: Sequence[ScoreItem], config: JsonSchemaConfig) -> int:
    """What validating ``items`` on the event loop would cost, in characters (see ``_INLINE_CHARS``): the
    responses, and once each distinct schema the references carry. Checking a schema against its
    metaschema costs about what validating a document of its size does (4.6 ms a 3.4 kB schema), and
    4,096 items each with its own schema held the loop for 19 s when only the responses counted."""
    chars = sum(len(item.response) for item in items)
    if config.json_schema is not None:
        return chars
    seen: set[str | bytes] = set()
    for item in items:
        ref = item.reference
        try:
            text = ref if isinstance(ref, str) else jsonutil.dumps(ref)
        except InvalidRequest:  # nests too deeply to write: _one finds it no schema, cheaply
            continue
        if text not in seen:
            seen.add(text)
            chars += len(text)
    return chars


def validate_in_worker(payload: tuple[ScoreItem, JsonSchemaConfig]) -> Outcome:
    """One item's outcome, in a CPU worker (a module-level function: the pool pickles it by reference)."""
    item, config = payload
    token = _capped.set(True)
    try:
        shared = None if config.json_schema is None else _load(config.json_schema, config.check_formats)
        return JsonSchemaReward._one(item, config, shared)
    finally:
        _capped.reset(token)


@register
class JsonSchemaReward(Reward[JsonSchemaConfig]):
    name: ClassVar[str] = "json_schema"
    # 1.1.2: unevaluatedProperties reads patternProperties with the guarded engine
    # 1.1.3: a remote $ref is parse_error (jsonschema's default registry fetched it and validated against it);
    # check_formats reads a document's format: regex with the regex engine (ECMA-262's \p{L} is a regex, (?f)
    # is not, and what re raised OverflowError on is a format failure); and asserts date-time and time (RFC 3339:
    # without jsonschema's optional rfc3339-validator any string passed)
    # 1.1.4: a schema pattern turning on version 1, (?V1), is "not a 'regex'" as a pattern that does not
    # compile is (its message was the engine's "ValueError: VERSION0 and VERSION1 flags are ..."); a reference {"schema": null} (or a number, a list) was read as a schema of one unknown keyword, which
    # every document satisfies (1.0): the wrapper with nothing in it, or a blank reference, is
    # missing_reference, with what is no schema parse_error; a schema pattern's \d, \w and \b are ECMA-262's,
    # ASCII (^\d{5}$ took a full-width "１２３４５", ^\w+$ "café"); check_formats reads a uuid as RFC 4122's
    # 8-4-4-4-12 ASCII hex digits (a full-width digit or an extra hyphen passed)
    # 1.1.6: a schema pattern on a string too long for the event loop (characters x (groups + 1) over
    # 262,144) is matched in a CPU worker under the regex reward's 64 MB cap, resource_limit past it: ten
    # nested groups on a 190 kB string grew the service by 146 MB; (.)* on 1 MB a worker by hundreds
    version: ClassVar[str] = "1.1.6"
    description: ClassVar[str] = (
        "1 if the response (or its last ```json block) is JSON valid against a JSON Schema from the "
        "config or the item's reference; optional 0.5 for JSON that parses but does not validate."
    )
    config_model = JsonSchemaConfig
    reads = ("response", "reference")

    async def score(
        self, items: Sequence[ScoreItem], config: JsonSchemaConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        shared = None if config.json_schema is None else _load(config.json_schema, config.check_formats)
        if isinstance(shared, Outcome) or _inline_chars(items, config) <= _INLINE_CHARS:
            token = _budget.set(MatchBudget(min(MATCH_TIMEOUT_S, ctx.deadline_s)))
            stop = _stop_at.set(time.perf_counter() + min(_INLINE_VALIDATION_S, ctx.deadline_s))
            out: list[Outcome | None] = []
            try:
                for item in items:
                    try:
                        out.append(self._one(item, config, shared))
                    except _OffLoop:  # a long string under a pattern: in a worker, its memory capped
                        out.append(None)
            finally:
                _stop_at.reset(stop)
                _budget.reset(token)
            off = [i for i, o in enumerate(out) if o is None]
            if off:
                results = await self.runtime.cpu_pool.run(
                    validate_in_worker, [(items[i], config) for i in off], ctx.deadline_s
                )
                for i, r in zip(off, results, strict=True):
                    out[i] = r.value if r.ok else Outcome.pool_failure(r.error, r.message or r.error)
            return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in out]
        # Validation is pure Python: a big batch runs in the CPU workers, each item under the deadline
        # (its pattern searches under their own limit each, the worker killed past the deadline).
        results = await self.runtime.cpu_pool.run(
            validate_in_worker, [(item, config) for item in items], ctx.deadline_s
        )
        return [r.value if r.ok else Outcome.pool_failure(r.error, r.message or r.error) for r in results]

    @staticmethod
    def _one(item: ScoreItem, config: JsonSchemaConfig, shared: Validator | Outcome | None) -> Outcome:
        validator = shared
        if validator is None:
            if item.reference is None:
                return Outcome.invalid(Reason.MISSING_REFERENCE, "no schema in the config or the reference")
            try:
                schema = _reference_schema(item.reference)
            except _NoSchema:
                return Outcome.invalid(
                    Reason.MISSING_REFERENCE, "no schema in the config, and the reference's is empty"
                )
            except (ValueError, RecursionError) as exc:
                return Outcome.invalid(Reason.PARSE_ERROR, f"unreadable schema in the reference: {exc}"[:300])
            validator = _load(schema, config.check_formats)
        if isinstance(validator, Outcome):
            return validator

        text = extract_json_text(item.response, config.extract)
        fail: dict[str, float | None] = {"parses": 0.0, "valid": 0.0}
        if text is None:
            return Outcome(0.0, Reason.FORMAT, components=fail, details={"error": "no ```json block"})
        try:
            doc = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            return Outcome(0.0, Reason.FORMAT, components=fail, details={"error": f"not JSON: {exc}"[:300]})

        try:
            # a pattern past its time (or its memory, in a worker) is the invalid outcome
            errors = capped_outcome(
                lambda: list(islice(validator.iter_errors(doc), max(1, config.max_errors)))
            )
        except ValidationTimeout as exc:
            return Outcome.invalid(Reason.TIMEOUT, str(exc))
        except (Unresolvable, SchemaError) as exc:
            return Outcome.invalid(Reason.PARSE_ERROR, f"schema cannot be applied: {exc}"[:300])
        except RecursionError:
            return Outcome.invalid(Reason.RESOURCE_LIMIT, "the document or schema nests too deeply")
        if isinstance(errors, Outcome):
            return errors
        if not errors:
            return Outcome(1.0, components={"parses": 1.0, "valid": 1.0}, details={"errors": []})
        messages = [f"{e.json_path}: {e.message[:200]}" for e in errors[: config.max_errors]]
        return Outcome(
            0.5 if config.partial_credit else 0.0,
            Reason.FORMAT,
            components={"parses": 1.0, "valid": 0.0},
            details={"errors": messages},
        )
