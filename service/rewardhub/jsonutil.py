"""JSON encoding for values that come from callers.

orjson is fast and used everywhere on the hot path, but it refuses integers outside the signed/unsigned
64-bit range, which JSON itself allows (a reference may hold ``-9223372036854775809``). Every place that
encodes caller-supplied data goes through :func:`dumps`, which falls back to the standard library for
such values instead of failing the request (writing ``NaN`` and ``±Infinity``, which callers can send, as
``null`` just as orjson does). A lone surrogate (``"\\ud800"``, which the standard library's parser reads
from a JSON escape on the drop-in ``/compat`` routes; the API's own read bodies as ``/v1/score`` does,
see :mod:`rewardhub.routes.body`) cannot be UTF-8: such a value is written with
``\\u`` escapes, as the caller sent it. A given value always takes the same path, so hashes of it
(cache keys, group fingerprints) stay stable.

What is hashed goes through :func:`canonical` instead: it spells the non-finite floats out, so a
reference holding ``NaN`` does not share a cache key with one holding ``null``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

__all__ = ["canonical", "dumps", "lone_surrogate_at", "loads_exact"]


def dumps(value: Any, *, sort_keys: bool = False) -> bytes:
    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        try:
            return _stdlib_dumps(_non_finite_as_null(value), sort_keys=sort_keys, allow_nan=False)
        except RecursionError:
            raise _too_deep() from None


def loads_exact(text: str | bytes) -> Any:
    """JSON as Python's ``json`` reads it, for values a Python program is handed (an OpenAI grader's
    ``sample.output_json``): an integer of any size exact, where orjson reads one past 64 bits as a
    float (25! became 1.5511210043330986e+25). ``NaN`` and ``Infinity`` are not JSON. Raises ValueError
    (``json.JSONDecodeError`` among them) for text that is none, RecursionError for one nested too deep."""

    def not_json(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=not_json)


def _too_deep() -> Exception:
    """orjson writes at most 254 levels of nesting and the standard library as many as the stack
    allows; a body the standard library's parser read (a ``/compat`` route; ``/v1/score``'s parser stops
    at 200 levels) can nest deeper than that. A request error (422), not a crash."""
    from rewardhub.errors import InvalidRequest  # (errors -> responses -> this module)

    return InvalidRequest("the request nests JSON values too deeply (at most 200 levels)")


def _stdlib_dumps(value: Any, *, sort_keys: bool, allow_nan: bool) -> bytes:
    def write(ascii_only: bool) -> str:
        return json.dumps(
            value,
            sort_keys=sort_keys,
            separators=(",", ":"),
            ensure_ascii=ascii_only,
            default=str,
            allow_nan=allow_nan,
        )

    try:
        return write(False).encode()
    except UnicodeEncodeError:  # a lone surrogate: escape it (and all non-ASCII) instead of failing
        return write(True).encode()


def canonical(value: Any) -> bytes:
    """Sorted-key JSON of ``value`` for hashing (cache keys, group fingerprints): equal values give equal
    bytes and, unlike :func:`dumps`, a non-finite float is not written as ``null`` but as ``NaN``,
    ``Infinity`` or ``-Infinity``."""
    out = dumps(value, sort_keys=True)
    if b"null" in out and _has_non_finite(value):
        try:
            return _stdlib_dumps(value, sort_keys=True, allow_nan=True)
        except RecursionError:
            raise _too_deep() from None
    return out


def lone_surrogate_at(value: Any) -> str | None:
    """The dotted path of a string (value or key) in ``value`` holding a lone surrogate, or None.
    ``/v1/score``'s parser refuses one as invalid JSON; a body parsed by the standard library keeps it.
    (Iterative: the value may nest deeper than the stack allows recursion.)"""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            if not (v.isascii() or _encodes(v)):
                return path
        elif isinstance(v, dict):
            for k, child in v.items():
                if isinstance(k, str) and not _encodes(k):
                    return path  # (the key itself cannot be written in a message)
                stack.append((child, f"{path}.{k}" if path else str(k)))
        elif isinstance(v, list | tuple):
            stack.extend((child, f"{path}.{n}" if path else str(n)) for n, child in enumerate(v))
    return None


def _encodes(s: str) -> bool:
    try:
        s.encode()
    except UnicodeEncodeError:
        return False
    return True


def _has_non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float):
            if not math.isfinite(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
    return False


def _non_finite_as_null(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (what orjson writes for them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _non_finite_as_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_non_finite_as_null(v) for v in value]
    return value
