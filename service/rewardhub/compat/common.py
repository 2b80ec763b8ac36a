"""What the compat translators share: reading task specs out of labels, and scoring without raising.

Peers' clients retry on any non-200 (OpenRLHF 5 times, slime 10 times with backoff, then crash), so an
overloaded or failing service that answered 429/5xx would turn into a retry storm. Compat endpoints
therefore answer 200 and mark each affected item invalid in the peer's own terms.
"""

from __future__ import annotations

import asyncio
import bisect
import re
from collections.abc import Hashable, Sequence
from typing import Any

import orjson
import structlog
from pydantic import ValidationError

from rewardhub import jsonutil
from rewardhub.admission import Admission
from rewardhub.aio import gather_all
from rewardhub.errors import InvalidRequest, Overloaded, RewardHubError
from rewardhub.protocol import RewardSpec, ScoreItem, ScoreOptions, ScoreRequest
from rewardhub.security import Caller
from rewardhub.serving import ScoringService
from rewardhub_client import prompts
from rewardhub_client.prompts import user_turn

__all__ = [
    "DEADLINE_EXCEEDED",
    "EOS_MARKERS",
    "ScoreOutcome",
    "as_reference",
    "parse_label",
    "prompt_text",
    "reply_start",
    "score_or_flag",
    "strip_eos",
    "user_turn",
]

# End-of-sequence markers that decoders leave at the end of a response (skip_special_tokens=False): the
# tokens generation stops at. GLM-4 stops at the next turn's tag (<|user|>, <|observation|>), gpt-oss at
# <|return|>, and Llama 3.1 ends a tool turn with <|eom_id|>.
EOS_MARKERS = (
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|user|>",
    "<|observation|>",
    "<|return|>",
    "<|end|>",
    "</s>",
    "<eos>",
    "<end_of_turn>",
    "<｜end▁of▁sentence｜>",
    "<|end▁of▁sentence|>",
)

log = structlog.get_logger("rewardhub.compat")

# The reason of an item a request's deadline left unscored (score_or_flag's ``deadline_s``).
DEADLINE_EXCEEDED = "deadline_exceeded"

_SPEC_KEYS = ("reward", "verifier", "rm_type")
_REF_KEYS = ("reference", "answer", "ground_truth", "label", "solution")
# an object made of these keys alone (verl's reward_model column, {"ground_truth": ..., "style": "rule"})
# is a wrapper around its reference; "label" is not among them ({"label": k} is ProcessBench's reference,
# read by prm) and any other key (code's "tests", a SQuAD row's "answers") makes the object the reward's own
_WRAPPER_REF_KEYS = ("ground_truth", "reference", "solution")
_WRAPPER_KEYS = frozenset({*_WRAPPER_REF_KEYS, "style"})


def strip_eos(text: str) -> str:
    """Drop trailing end-of-sequence and padding markers (repeatedly) and surrounding whitespace."""
    out = text.rstrip()
    changed = True
    while changed:
        changed = False
        for marker in EOS_MARKERS + ("<|pad|>", "<pad>"):
            if out.endswith(marker):
                out = out[: -len(marker)].rstrip()
                changed = True
    return out


# Where a user turn ends and the assistant's reply begins, in the same templates: the boundary, the tags
# that open a turn (the nearest one before a boundary says whose turn it closes), and the user's tag.
_REPLY_BOUNDARIES = (
    (re.compile(r"<\|im_end\|>\s*<\|im_start\|>assistant\n"), ("<|im_start|>",), "<|im_start|>user"),
    (
        re.compile(r"<\|eot_id\|><\|start_header_id\|>assistant<\|end_header_id\|>\n\n"),
        ("<|start_header_id|>",),
        "<|start_header_id|>user",
    ),
    (re.compile(r"<end_of_turn>\s*<start_of_turn>model\n"), ("<start_of_turn>",), "<start_of_turn>user"),
    (re.compile(r"<\|end\|>\s*<\|assistant\|>\n?"), ("<|user|>", "<|assistant|>", "<|system|>"), "<|user|>"),
    (re.compile(r"<｜Assistant｜>"), ("<｜User｜>", "<｜Assistant｜>"), "<｜User｜>"),
    (re.compile(r"\[/INST\]"), ("[INST]", "[/INST]"), "[INST]"),
)


def reply_start(conversation: str) -> int | None:
    """Where the reply begins in a chat-templated conversation: past the last assistant header that
    closes a user turn (None: no such boundary of a known template).

    A query sent without its prompt (OpenRLHF before 0.5.8 posts ``query`` alone) holds the rendered
    prompt, the response and its padding; this boundary is the one place the template says where the
    response starts. Linear in the text (a response is the policy's, and may repeat a tag thousands of
    times): the turn tags are found in one pass, and each boundary's nearest one by bisection."""
    for boundary, tags, user in _REPLY_BOUNDARIES:
        found = list(boundary.finditer(conversation))
        if not found:
            continue
        opened = [m.start() for m in re.finditer("|".join(map(re.escape, tags)), conversation)]
        for b in reversed(found):
            i = bisect.bisect_left(opened, b.start()) - 1
            if i >= 0 and conversation.startswith(user, opened[i]):
                return b.end()
    return None


def prompt_text(prompt: Any) -> str | None:
    """A prompt as the question (see :func:`rewardhub_client.prompts.prompt_text`), its messages read as
    a JSON body holds them (lists and dicts)."""
    return prompts.prompt_text(prompt, json_types=True)


def parse_label(
    label: Any, default_reward: str, specs: dict[bytes, str | RewardSpec] | None = None
) -> tuple[str | RewardSpec, Any]:
    """A label is either the reference itself or a task spec selecting the reward.

    Task spec: a JSON object (or a string holding one) with ``reward``/``verifier`` (a name or
    ``{"name", "config"}``), optional ``config``, and the reference under ``reference``/``answer``/
    ``ground_truth``/``label``/``solution``; e.g. ``{"verifier": "math", "answer": "32"}``. An object
    without a spec made only of ``ground_truth``, ``reference``, ``solution`` and ``style`` keys is that
    reference's value for the default reward (verl's ``reward_model`` column, ``{"ground_truth": "32",
    "style": "rule"}``); one with any other key (``answer``, code's ``tests``, ProcessBench's ``label``) is
    the reward's own. Anything else is the reference for the default reward.

    ``specs``: the specs already read from a batch's labels, by their raw spec and config; an equal one
    is the same :class:`RewardSpec` object, validated once (a 4,096-item batch with one spec in every
    label built 4,096 of them, and the calls keyed each one apart, :func:`_duplicates_together`).
    """
    obj = label
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            obj = orjson.loads(label)
        except orjson.JSONDecodeError:
            obj = label
    if isinstance(obj, dict) and any(k in obj for k in _SPEC_KEYS):
        raw_spec = next(obj[k] for k in _SPEC_KEYS if k in obj)
        config = obj.get("config") or {}
        memo = _spec_memo_key(raw_spec, config) if specs is not None else None
        known = specs.get(memo) if specs is not None and memo is not None else None
        spec: str | RewardSpec
        try:
            if known is not None:
                spec = known
            elif isinstance(raw_spec, dict):
                spec = RewardSpec.model_validate({"config": config, **raw_spec})
            else:
                spec = RewardSpec(name=str(raw_spec), config=config) if config else str(raw_spec)
        except ValidationError as exc:
            raise InvalidRequest(
                f"label: not a valid task spec: {exc.errors()[0].get('msg')}", param="labels"
            ) from None
        if specs is not None and memo is not None:
            specs[memo] = spec
        reference = next((obj[k] for k in _REF_KEYS if k in obj), None)
        return spec, as_reference(reference)
    if isinstance(obj, dict) and obj.keys() <= _WRAPPER_KEYS:
        # a row's reference column without a spec, e.g. verl's reward_model {"ground_truth", "style"}:
        # no reward reads these keys of a reference object, so the whole object was refused (parse_error)
        held = next((k for k in _WRAPPER_REF_KEYS if k in obj), None)
        if held is not None:
            return default_reward, as_reference(obj[held])
    return default_reward, as_reference(obj)


def _spec_memo_key(raw_spec: Any, config: Any) -> bytes | None:
    """A label's spec and config as a key equal exactly when they are (None: not encodable as JSON, read
    on its own)."""
    try:
        return jsonutil.canonical([raw_spec, config])
    except (RewardHubError, TypeError, ValueError):
        return None


def as_reference(value: Any) -> str | dict[str, Any] | list[Any] | None:
    """A reference of any JSON type as one a ScoreItem holds: scalars become their JSON text."""
    if value is None or isinstance(value, str | dict | list):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ScoreOutcome:
    """One result dict per item. Items that could not be scored carry ``valid: False``, ``score: None``,
    ``reason`` (a Reason code, or ``overloaded``/an error type for request-level failures) and ``error``."""

    def __init__(self, results: list[dict[str, Any]]):
        self.results = results


def _flag(reason: str, message: str) -> dict[str, Any]:
    return {
        "score": None,
        "valid": False,
        "reason": reason,
        "error": message,
        "components": {},
        "details": {},
    }


def _check_text(item: ScoreItem) -> None:
    """A lone surrogate ("\\ud800"), which JSON's escapes can write but UTF-8 cannot: ``/v1/score``'s
    parser refuses it (422); a peer's body is parsed by the standard library, which keeps it."""
    if jsonutil.lone_surrogate_at(item.model_dump(exclude_none=True)) is not None:
        raise InvalidRequest("the item's text is not valid Unicode (a lone surrogate)")


def _duplicates_together(
    scoring: ScoringService, items: Sequence[ScoreItem | RewardHubError], part: list[int]
) -> list[int]:
    """``part`` in the order of each item's first occurrence, identical items next to it.

    The scoring service computes identical items once within a call, but the calls of a part run
    together, so two identical items in two calls were both computed (neither call finds the other's
    result in the cache yet). With identical items adjacent, a call's slice splits such a run only at
    its edge. Identical means what the service deduplicates by: the same reward spec and the same values
    of the fields that reward reads (a math verifier's items with one response and one reference but
    different prompts are one scoring). A spec whose items are never deduplicated keeps each item on its
    own (and a group reward's groups in place). One dictionary pass: O(n), the order otherwise stable.

    A spec's key (its config's canonical JSON) is computed once per spec, not once per item: a name by
    its text, a :class:`RewardSpec` by identity (one object the items share, e.g. a request-level
    reward; every object of ``items`` lives through this call, so no id is reused)."""
    fields: dict[tuple[str, bytes], tuple[str, ...] | None] = {}
    spec_keys: dict[str | int, tuple[str, bytes]] = {}
    runs: dict[Hashable, list[int]] = {}
    for i in part:
        item = items[i]
        assert isinstance(item, ScoreItem)  # (``part`` holds the items that passed validation)
        spec = item.reward
        assert spec is not None  # (every compat item names its reward)
        raw = spec if isinstance(spec, str) else id(spec)
        spec_key = spec_keys.get(raw)
        if spec_key is None:
            name, config = (spec, {}) if isinstance(spec, str) else (spec.name, spec.config)
            spec_key = spec_keys[raw] = (name, jsonutil.canonical(config))  # (the service's key of a spec)
            if spec_key not in fields:
                fields[spec_key] = scoring.dedupe_fields(spec)
        reads = fields[spec_key]
        key: Hashable = i if reads is None else (spec_key, *(_hashable(getattr(item, f)) for f in reads))
        runs.setdefault(key, []).append(i)
    return [i for run in runs.values() for i in run]


def _hashable(value: Any) -> Hashable:
    """An item field as a dictionary key equal exactly when the cache key's encoding of it is: text and
    None as they are, a JSON object or list (a reference, metadata) as its canonical bytes."""
    if value is None or isinstance(value, str):
        return value
    return jsonutil.canonical(value)


async def score_or_flag(
    scoring: ScoringService,
    admission: Admission,
    caller: Caller,
    items: Sequence[ScoreItem | RewardHubError],
    options: ScoreOptions | None = None,
    *,
    deadline_s: float | None = None,
    progress_items: int | None = None,
) -> ScoreOutcome:
    """Score, turning request-level failures into per-item data (never an HTTP error for the peer).

    Each item's reward spec is checked on its own first, so one label naming an unknown reward or a bad
    config flags that item only; an entry that is already an error (a label that could not be read) is
    flagged as is.

    ``progress_items``: score each part in calls of this many items, run together, each cached as it
    ends (None: one call per part, cached at its end). A peer that gives up on a slow answer and sends
    the whole batch again (OpenRLHF) then finds the items scored before it hung up in the cache; with
    one call, hanging up cancelled it and every try started over. Identical items go in one call
    (:func:`_duplicates_together`), where the service computes them once.

    ``deadline_s``: answer within this many seconds, for such a peer. A part that finds the service full
    (429: admission, a full queue) waits ``Retry-After`` and is tried again, its items scored so far kept;
    at the deadline the calls still running or waiting are cancelled, and their items and those of parts
    not yet started are flagged :data:`DEADLINE_EXCEEDED` (None: no deadline, and a full service flags the
    items ``overloaded`` at once).
    """
    if not items:
        return ScoreOutcome([])
    opts = options or ScoreOptions()
    results: list[dict[str, Any] | None] = [None] * len(items)
    good: list[int] = []
    # Each distinct spec is resolved once (a name by its text, a RewardSpec by identity: every object of
    # ``items`` lives through this call), with the error it raised, if any: a 4,096-item batch with one
    # composite spec validated its config 4,096 times. An item's own limits are checked every time.
    resolved: dict[str | int, RewardHubError | None] = {}
    for i, item in enumerate(items):
        if isinstance(item, RewardHubError):
            results[i] = _flag(item.error_type, item.message)
            continue
        try:
            _check_text(item)
            request = ScoreRequest(reward=None, items=[item], options=opts)
            scoring.check_limits(request)
            spec = item.reward
            memo = spec if isinstance(spec, str) else id(spec)
            if memo not in resolved:
                try:
                    scoring.check_rewards(request)  # (its limits were checked just above)
                    resolved[memo] = None
                except RewardHubError as exc:
                    resolved[memo] = exc
            known = resolved[memo]
            if known is not None:
                results[i] = _flag(known.error_type, known.message)
                continue
            good.append(i)
        except RewardHubError as exc:
            results[i] = _flag(exc.error_type, exc.message)

    async def score_part(part: list[int]) -> None:
        """Score these items in calls of ``progress_items`` at once, each call's results kept as soon
        as it ends."""
        step = progress_items or len(part)
        if step < len(part):
            part = _duplicates_together(scoring, items, part)

        async def call(chunk: list[int]) -> None:
            request = ScoreRequest(reward=None, items=[items[i] for i in chunk], options=opts)
            out = await scoring.score(request, tenant=caller.key_id)
            for i, r in zip(chunk, out["results"], strict=True):
                results[i] = r

        await gather_all(*(call(part[k : k + step]) for k in range(0, len(part), step)))

    if good:
        # A peer's batch has no size limit of its own: score it in parts of REWARDHUB_MAX_ITEMS, each
        # admitted on its own (a batch over REWARDHUB_MAX_INFLIGHT_ITEMS admitted whole was refused
        # whenever anything else was in flight, however often the peer retried).
        size = scoring.settings.max_items
        parts = [good[k : k + size] for k in range(0, len(good), size)]
        timeout = asyncio.timeout(deadline_s)
        try:
            async with timeout:
                for part in parts:
                    while True:
                        try:
                            async with admission.admit(caller, len(part)):
                                await score_part(part)
                            break
                        except Overloaded as exc:
                            # A full service is a moment's lack of room, not a verdict on the items: a
                            # peer with a deadline (OpenRLHF, which cannot mask an item and trains on its
                            # 0.0) waits for room within it, its unscored items tried again
                            if deadline_s is None:
                                raise
                            part = [i for i in part if results[i] is None]
                            if not part:
                                break
                            await asyncio.sleep(exc.retry_after_s)
        except TimeoutError:
            if not timeout.expired():
                raise
            late = [i for i in good if results[i] is None]
            log.warning(
                "compat_deadline_exceeded", deadline_s=deadline_s, items=len(good), unscored=len(late)
            )
            for i in late:
                results[i] = _flag(
                    DEADLINE_EXCEEDED, f"not scored within the request's {deadline_s:g} s deadline"
                )
        except RewardHubError as exc:
            # Only the items that were sent share the request's failure; an item already flagged keeps
            # its own reason (an unreadable label is not "overloaded": retrying will not fix it).
            reason = "overloaded" if isinstance(exc, Overloaded) else exc.error_type
            for i in good:
                if results[i] is None:
                    results[i] = _flag(reason, exc.message)
    return ScoreOutcome([r if r is not None else _flag("internal_error", "not scored") for r in results])
