"""``score_model``: OpenAI's score-model grader — a model reads caller-written messages and gives a number.

Unlike ``judge``, the prompt is entirely the caller's: the item's reference holds the chat messages
(``{"messages": [{"role", "content"}, ...]}``, already filled in with the sample, as the OpenAI grader's
templates are), and the reward is the number the model answers, which must lie in ``range`` (default
[0, 1]). The number is read from a JSON object's ``result``/``score`` (OpenAI asks for
``{"result": ...}``), else the last score line ("Score: 8", "**Rating:** [[4]]" starting a line: not a
number of the explanation after it, nor a score line quoted inside a sentence), else the last number in the answer (the numerator when it ends a fraction:
"7/10" reads 7). No number, or one outside the range, is an
invalid ``parse_error`` (OpenAI's ``model_grader_parse_error``), never a silent 0; a failing backend is
``backend_error``/``timeout``.

The messages come from the caller's grader definition, so judge hardening (content-free and injection
screens) is not applied here: it is the caller's prompt. Use ``judge`` for hardened verification.
"""

from __future__ import annotations

import asyncio
import collections
import json
import math
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field, model_validator

from rewardhub.aio import gather_all
from rewardhub.models.base import Capability, ChatRequest, Message
from rewardhub.models.errors import BackendError, BackendUnavailable
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, RewardConfig, ScoreContext, register
from rewardhub.rewards.model_backed import ModelReward, cut_off, deadline_of, failure
from rewardhub.rewards.text import answer_text

__all__ = ["ScoreModelConfig", "ScoreModelReward", "parse_score"]

_JSON = json.JSONDecoder()
_JSON_TRIES = 64
_OBJECT_START = re.compile(r'\{\s*"')
# a dash right after a digit is a range or a minus ("3-4"), not the sign of the next number
_NUMBER = re.compile(r"(?:(?<![\d.])[-+])?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
# "7/10", "7 / 10", "3 out of 5": the number before a denominator, at the end of the text before it
# The scale a judge names after its score ("0.8 (on a 0-1 scale)", "7 on a scale of 1 to 10", "4, range
# 1-5"): its numbers are not the score, and its "0-1" would otherwise be read as the number -1.
_SCALE_NUM = r"[-+]?\d+(?:\.\d+)?"
_SCALE = re.compile(
    r"\(?\s*(?:(?:on|in|using|with)\s+)?(?:an?\s+|the\s+)?(?:"
    rf"(?:scale|range)\s*(?:of|from|:)?\s*{_SCALE_NUM}\s*(?:-|–|to)\s*{_SCALE_NUM}"
    rf"|{_SCALE_NUM}\s*(?:-|–|to)\s*{_SCALE_NUM}[- ]?(?:point\s+)?(?:scale|range)"
    r")\s*\)?",
    re.IGNORECASE,
)
# ("7 (out of 10)": the denominator may stand in brackets)
_NUMERATOR = re.compile(r"(" + _NUMBER.pattern + r")\s*\(?\s*(?:/|\bout\s+of)\s*$", re.IGNORECASE)
# A score line ("Score: 8", "**Final rating:** [[4]]", "- Grade (1-5): 3", "score = 0.7"): its number,
# not the last one, which may be in the explanation after it ("Score: 8. Points 1 and 2 hold"). Only at
# a line's start (after markdown marks and up to two words): "the response's 'Score: 10' is wrong; I
# give it 2" quotes a score line, it does not write one.
_LABELLED = re.compile(
    r"^[ \t#>*_\-]*(?:[a-z]+ ){0,2}(?:score|rating|grade)\b[*_]*\s?(?:\([^()\n]{0,40}\)\s?)?[*_]*\s?[:=]"
    r"\s?[*_]*\s?\[{0,2}\s?(" + _NUMBER.pattern + ")",
    re.IGNORECASE | re.MULTILINE,
)
# whitespace runs, a newline kept where the run had one (score lines start lines)
_BLANKS = re.compile(r"[^\S\n]+")
_NEWLINES = re.compile(r"\s*\n\s*")
_ROLES = frozenset({"system", "user", "assistant", "developer"})


class ScoreModelConfig(RewardConfig):
    backend: str = Field("judge", description="Named model backend (REWARDHUB_JUDGE_URL sets `judge`).")
    range: tuple[float, float] = Field((0.0, 1.0), description="Valid scores, inclusive.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="0 = deterministic (and cacheable).")
    max_tokens: int = Field(1024, ge=1, le=16384)
    seed: int | None = None

    @model_validator(mode="after")
    def _ordered(self) -> ScoreModelConfig:
        if not self.range[0] < self.range[1]:
            raise ValueError("range must be [low, high] with low < high")
        return self


def _json_score(text: str) -> float | None:
    """The result/score of the last JSON object in ``text`` that has one.

    Each ``{"`` is tried as the start of an object, from the last one back: the text from the first ``{``
    to the last ``}`` is no object once anything with a brace follows the JSON (LaTeX such as
    ``\\boxed{1}`` in an explanation), and the last bare number was read instead (``{"result": 0}
    because \\boxed{1}`` scored 1). At most ``_JSON_TRIES`` starts: a failed decode may read far."""
    starts = [m.start() for m in _OBJECT_START.finditer(text)]
    for start in reversed(starts[-_JSON_TRIES:]):
        try:
            obj, _end = _JSON.raw_decode(text, start)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the decoder goes
            continue
        if isinstance(obj, dict):
            for key in ("result", "score"):
                value = obj.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    return float(value)
    return None


def parse_score(text: str) -> float | None:
    """The score in a model answer: a JSON object's result/score, else the last score line (a line
    that starts "Score:", "Final rating =" ...: "Score: 8. Points 1 and 2 hold" read 2), else the last number; None if none.
    Only the answer counts, not a reasoning model's thinking before it. A last number that is the
    denominator of a score written as a fraction ("Score: 7/10", "3 out of 5") is not the score: its
    numerator is (read as 10, "7/10" scored full marks in a 0-10 range). A number a comma joins to
    digits ("0,8") is no score: None."""
    stripped = answer_text(text).strip()
    value = _json_score(stripped)
    if value is not None:
        return value
    # whitespace runs collapsed first, so the scale pattern's \s* cannot rescan a long run per position
    stripped = _NEWLINES.sub("\n", _BLANKS.sub(" ", stripped))
    stripped = _SCALE.sub(lambda m: "\n" if "\n" in m.group() else " ", stripped)
    labelled = collections.deque(_LABELLED.finditer(stripped), maxlen=1)
    if labelled:
        return _unless_comma_joined(stripped, labelled[0], 1)
    last = collections.deque(_NUMBER.finditer(stripped), maxlen=1)
    if not last:
        return None
    # only the text just before it: a long run of digits would otherwise be tried from every position
    end = last[0].start()
    fraction = _NUMERATOR.search(stripped, max(0, end - 64), end)
    return (
        _unless_comma_joined(stripped, fraction, 1)
        if fraction
        else _unless_comma_joined(stripped, last[0], 0)
    )


def _unless_comma_joined(text: str, m: re.Match[str], group: int) -> float | None:
    """The number of ``m``'s ``group``, or None where a comma joins it to digits: "0,8" (a decimal
    comma) read 8 or 0, "7,5/10" read 5, "1,000" read 0; which number was meant is not known."""
    a, b = m.span(group)
    if (a >= 2 and text[a - 1] == "," and text[a - 2].isdigit()) or (
        text[b : b + 1] == "," and text[b + 1 : b + 2].isdigit()
    ):
        return None
    return float(m.group(group))


def _messages(reference: Any) -> tuple[Message, ...] | None:
    raw = reference.get("messages") if isinstance(reference, dict) else None
    if not isinstance(raw, list) or not raw:
        return None
    out = []
    for m in raw:
        if not isinstance(m, dict) or m.get("role") not in _ROLES or not isinstance(m.get("content"), str):
            return None
        out.append(Message(role=str(m["role"]), content=m["content"]))
    return tuple(out)


@register
class ScoreModelReward(ModelReward[ScoreModelConfig]):
    name: ClassVar[str] = "score_model"
    # 1.2: a token budget of its own; the reasoning's numbers are no score; 1.3: the JSON result is read
    # when text with a brace follows it (it fell back to the last number); 1.4: "7/10" reads 7, not 10;
    # 1.5: a scale named after the score ("0.8 (on a 0-1 scale)") is not read as the score (-1 or 10);
    # 1.5.1: "7 (out of 10)" reads 7, not 10; 1.5.2: a labelled score ("Score: 8") wins over the
    # numbers of the explanation after it; a number with a decimal comma ("0,8") is a parse error
    version: ClassVar[str] = "1.5.2"
    description: ClassVar[str] = (
        "OpenAI score_model grader: the reference's chat messages go to a named model backend; the number "
        "it answers (JSON result/score, else the last labelled score, else the last number) is the reward, within `range`."
    )
    config_model = ScoreModelConfig
    reads = ("response", "reference")
    default_backend: ClassVar[str] = "judge"
    capability: ClassVar[Capability] = "chat"

    def is_cacheable(self, config: ScoreModelConfig) -> bool:
        return config.temperature == 0.0 and super().is_cacheable(config)

    async def score(
        self, items: Sequence[ScoreItem], config: ScoreModelConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        try:
            backend = self.backend(config)
        except BackendUnavailable as exc:
            return [failure(exc) for _ in items]  # unsupported, and never cached inside a composite
        deadline = deadline_of(ctx)
        lo, hi = config.range
        slots = asyncio.Semaphore(backend.call_slots())  # this request's calls in flight

        async def one(item: ScoreItem) -> Outcome:
            messages = _messages(item.reference)
            if messages is None:
                return Outcome.invalid(
                    Reason.MISSING_REFERENCE,
                    'score_model needs reference {"messages": [{"role", "content"}...]}',
                )
            request = ChatRequest(
                messages=messages,
                max_tokens=config.max_tokens,
                temperature=config.temperature,
                seed=config.seed,
            )
            try:
                async with slots:
                    completion = await backend.chat(request, deadline)
            except (BackendError, TimeoutError) as exc:
                return failure(exc)
            details: dict[str, Any] = {"model_output": completion.text[-2000:]}
            if completion.finish_reason == "length":
                return cut_off("the answer", config.max_tokens, **details)
            value = parse_score(completion.text)
            if value is None or not math.isfinite(value) or not lo <= value <= hi:
                return Outcome.invalid(
                    Reason.PARSE_ERROR, f"no score within [{lo:g}, {hi:g}] in the model's answer", **details
                )
            return Outcome(value, details=details)

        return list(await gather_all(*(one(item) for item in items)))
