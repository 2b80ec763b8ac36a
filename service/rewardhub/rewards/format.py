"""``format``: the response has the required tagged sections (``<think>…</think><answer>…</answer>``).

A format reward teaches the output shape a parser downstream depends on (DeepSeek-R1's
``^<think>.*?</think><answer>.*?</answer>$``; algorithms.md §5.3). Here the shape is a list of
``tags`` and a set of named *checks*, each reported in ``components`` as 1.0/0.0:

* ``<tag>:present``  an opening tag followed later by its closing tag (always checked);
* ``<tag>:once``     exactly one opening and one closing tag (``exactly_once``);
* ``<tag>:nonempty`` the first section holds visible text, more than whitespace and invisible format or
  control characters (``require_nonempty``: a zero-width space is no content);
* ``order``          the sections come in the listed order, none inside another (``order``, 2+ tags);
* ``strict``         nothing but whitespace outside the sections, none inside another (``strict``; with
  ``exactly_once`` off every section of a tag counts, each opening tag closed by the next closing tag).

The score is 1 if every check passes, else 0; with ``partial_credit`` it is the fraction passed, a
denser signal early in training. Any failed check gives reason ``format`` and the list ``failed``.

Presets fill in the defaults of ``tags``/``order``/``strict``/``exactly_once`` (explicit keys override
the flags; a preset and ``tags`` together are ambiguous and rejected); with neither, ``think_answer``
applies: ``<think>…</think>`` then ``<answer>…</answer>``, one each, only whitespace around them.
Tags are found with ``str.find`` (linear time), not a backtracking regex, so a long or adversarial
response cannot stall the event loop. Chat templates that open ``<think>`` in the prompt can pass
``response_prefix: "<think>"`` so the check sees the full text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.text import blank

__all__ = ["PRESETS", "FormatConfig", "FormatReward", "format_checks"]

Preset = Literal["think_answer", "answer", "think"]
PRESETS: dict[str, dict[str, Any]] = {
    "think_answer": {"tags": ("think", "answer"), "order": True, "strict": True, "exactly_once": True},
    "answer": {"tags": ("answer",), "order": True, "strict": False, "exactly_once": True},
    "think": {"tags": ("think",), "order": True, "strict": False, "exactly_once": True},
}
_TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")


class FormatConfig(RewardConfig):
    preset: Preset | None = Field(
        None,
        description="think_answer: exactly <think>…</think> then <answer>…</answer>, whitespace around; "
        "answer: one <answer>…</answer>; think: one <think>…</think>. Default when `tags` is not given: "
        "think_answer.",
    )
    tags: tuple[str, ...] = Field(
        (), max_length=16, description="Required tag names, e.g. ['think', 'answer']."
    )
    order: bool = Field(True, description="The sections must appear in the order of `tags`.")
    strict: bool = Field(False, description="No text outside the sections except whitespace.")
    exactly_once: bool = Field(True, description="Each tag opens and closes exactly once.")
    require_nonempty: bool = Field(
        True,
        description="Each section must hold visible text (not only whitespace or zero-width characters).",
    )
    partial_credit: bool = Field(False, description="Score the fraction of checks passed instead of 1/0.")
    response_prefix: str = Field(
        "",
        max_length=256,
        description="Text prepended to the response first (e.g. '<think>' from the prompt).",
    )

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if data.get("preset") is not None and "tags" in data:
            raise ValueError("give either `preset` or `tags`, not both")
        if "tags" not in data:
            preset = data.get("preset") or "think_answer"
            # an unknown preset (or one that is not a name) is reported by the field's own validation
            if isinstance(preset, str) and preset in PRESETS:
                data = {**PRESETS[preset], **data, "preset": preset}
        return data

    @field_validator("tags")
    @classmethod
    def _tag_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("at least one tag is required")
        bad = [t for t in v if not _TAG_NAME.fullmatch(t)]
        if bad:
            raise ValueError(f"not a tag name (letters, digits, _ . : -, max 64): {bad[0]!r}")
        if len(set(v)) != len(v):
            raise ValueError("tags must not repeat")
        return v


def _find_all(text: str, needle: str) -> list[int]:
    found: list[int] = []
    i = text.find(needle)
    while i != -1:
        found.append(i)
        i = text.find(needle, i + len(needle))
    return found


def _sections(opens: list[int], closes: list[int], open_len: int, close_len: int) -> list[tuple[int, int]]:
    """Every section of a tag: each opening tag with the first closing tag after it not already taken
    (both position lists ascending; linear)."""
    sections: list[tuple[int, int]] = []
    c = 0
    for o in opens:
        while c < len(closes) and closes[c] < o + open_len:
            c += 1
        if c == len(closes):
            break
        sections.append((o, closes[c] + close_len))
        c += 1
    return sections


def format_checks(text: str, config: FormatConfig) -> dict[str, bool]:
    """Every configured check by name (see the module docstring), True when it passes."""
    checks: dict[str, bool] = {}
    spans: list[tuple[int, int] | None] = []  # per tag: (start of <tag>, end of </tag>) of its first section
    # what strict allows around: the first sections, or with repeats allowed (not exactly_once) every one
    allowed: list[tuple[int, int]] = []
    for tag in config.tags:
        open_tag, close_tag = f"<{tag}>", f"</{tag}>"
        opens, closes = _find_all(text, open_tag), _find_all(text, close_tag)
        if config.strict and not config.exactly_once:
            allowed += _sections(opens, closes, len(open_tag), len(close_tag))
        span: tuple[int, int] | None = None
        if opens:
            body = opens[0] + len(open_tag)
            close = next((c for c in closes if c >= body), None)
            if close is not None:
                span = (opens[0], close + len(close_tag))
        spans.append(span)
        checks[f"{tag}:present"] = span is not None
        if config.exactly_once:
            checks[f"{tag}:once"] = len(opens) == 1 and len(closes) == 1
        if config.require_nonempty:
            checks[f"{tag}:nonempty"] = span is not None and not blank(
                text[span[0] + len(open_tag) : span[1] - len(close_tag)]
            )
    found = [s for s in spans if s is not None]
    complete = len(found) == len(spans)
    if config.order and len(spans) > 1:
        checks["order"] = complete and all(a[1] <= b[0] for a, b in zip(found, found[1:], strict=False))
    if config.strict:
        ok = complete
        pos = 0
        for start, end in sorted(allowed if not config.exactly_once else found):
            ok = ok and start >= pos and text[pos:start].strip() == ""
            pos = max(pos, end)
        checks["strict"] = ok and text[pos:].strip() == ""
    return checks


@register
class FormatReward(Reward[FormatConfig]):
    name: ClassVar[str] = "format"
    # 1.0.1: a section of zero-width characters (U+200B...) is empty, as one of whitespace is
    # 1.0.2: strict without exactly_once allows every section of a tag (a second one was text outside)
    version: ClassVar[str] = "1.0.2"
    description: ClassVar[str] = (
        "Required tagged sections (preset think_answer: <think>…</think><answer>…</answer>): presence, "
        "once, non-empty, order, nothing outside; 1/0 or the fraction of checks passed."
    )
    config_model = FormatConfig
    reads = ("response",)

    async def score(
        self, items: Sequence[ScoreItem], config: FormatConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        out: list[Outcome] = []
        for item in items:
            checks = format_checks(config.response_prefix + item.response, config)
            failed = [name for name, ok in checks.items() if not ok]
            if config.partial_credit:
                score = (len(checks) - len(failed)) / len(checks)
            else:
                score = 0.0 if failed else 1.0
            out.append(
                Outcome(
                    score,
                    Reason.FORMAT if failed else None,
                    components={name: float(ok) for name, ok in checks.items()},
                    details={"failed": failed},
                )
            )
        return out
