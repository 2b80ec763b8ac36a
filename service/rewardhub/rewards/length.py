"""``length``: length shaping terms, added by the trainer to a correctness reward (algorithms.md §5.4).

``dapo_overlong`` — DAPO's soft overlong punishment (arXiv 2503.14476; TRL
``get_soft_overlong_punishment``), with ``L_max = max_length`` and ``L_cache = cache_length``::

    R = 0                                  if L ≤ L_max − L_cache
      = ((L_max − L_cache) − L) / L_cache  if L_max − L_cache < L ≤ L_max     (0 → −1, linear)
      = −1                                 if L > L_max

A hard −1 for truncated answers punishes reasoning that was merely cut off; the ramp warns the policy
before the cliff. DAPO used L_max 20480 and L_cache 4096 tokens.

``cosine`` — the cosine length reward of "Demystifying Long Chain-of-Thought Reasoning in LLMs" (arXiv
2502.03373, App. C.1; TRL ``get_cosine_scaled_reward``)::

    R = v_min + ½ (v_max − v_min) (1 + cos(π · min(L / L_max, 1)))

``R`` is ``v_max`` at L = 0 and ``v_min`` from L ≥ L_max on (progress is clamped, so the cosine never
wraps). Correct: ``(v_min, v_max) = (min_value_correct, max_value_correct) = (0.5, 1.0)``: shorter
correct answers earn more. Wrong: ``(min_value_wrong, max_value_wrong) = (−0.5, −1.0)``: the bounds
are swapped so a *short* wrong answer is punished most, and the policy is pushed to think longer when
it is failing rather than give up early. This term replaces the correctness reward, it already carries it.

The names follow algorithms.md §5.4 (by where they apply: ``max_value_*`` at L = 0, ``min_value_*`` at
L ≥ L_max). open-r1's ``get_cosine_scaled_reward`` (and the paper's code) names the wrong-answer bounds by
value, ``min_value_wrong=-1.0, max_value_wrong=-0.5``, and swaps them inside: its ``min_value_wrong`` is
this ``max_value_wrong`` and the other way round. A config ported from it literally reverses the
incentive for wrong answers (short ones punished least), so swap the two when porting; the
correct-answer names mean the same in both.

Correctness is not judged here; it comes with the item, read in this order: ``metadata[correct_key]``
(a bool, 0/1, or "true"/"false"), the reference ``{"correct": true}``, or the reference string
"true"/"false" (the wire protocol has no bare boolean reference; any other string, "1" or "yes" too, is
a gold answer, not a flag: ``parse_error``). The metadata goes first so a batch can carry the gold
answer in ``reference`` for another reward. None of them: ``missing_reference``.

Units: ``chars``, ``words`` (whitespace-separated, each CJK ideograph or kana one, and each letter of Thai, Lao,
Khmer or Myanmar, written without spaces between words: about three to a Thai word, so a ``max_length`` in
words holds less of them, as it holds less Chinese; :func:`.text.length_words`), or ``tokens`` (the trainer's count in
``metadata[token_count_key]``; see :mod:`rewardhub.rewards.units`). Component ``length``: L.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.units import LengthUnit, UnitError, completion_length

__all__ = ["LengthConfig", "LengthReward", "cosine_length", "dapo_overlong", "read_correct"]

_COSINE_FIELDS = (
    "min_value_correct",
    "max_value_correct",
    "min_value_wrong",
    "max_value_wrong",
    "correct_key",
)
_REFERENCE_FLAGS = frozenset({"true", "false"})
_TRUE, _FALSE = (
    frozenset({"true", "1", "yes", "correct"}),
    frozenset({"false", "0", "no", "incorrect", "wrong"}),
)


class LengthConfig(RewardConfig):
    mode: Literal["dapo_overlong", "cosine"] = Field(
        description="dapo_overlong: DAPO soft overlong punishment; cosine: cosine length reward by correctness."
    )
    max_length: int = Field(gt=0, description="L_max, in `unit`.")
    cache_length: int | None = Field(
        None, gt=0, description="dapo_overlong: L_cache, the ramp before max_length (required there)."
    )
    unit: LengthUnit = Field(
        "tokens", description="chars | words | tokens (tokens: the count in metadata[token_count_key])."
    )
    token_count_key: str = Field(
        "completion_tokens", min_length=1, description="Metadata key of the token count."
    )
    min_value_correct: float = Field(
        0.5, allow_inf_nan=False, description="cosine: reward of a correct answer at L ≥ max_length."
    )
    max_value_correct: float = Field(
        1.0, allow_inf_nan=False, description="cosine: reward of a correct answer at L = 0."
    )
    min_value_wrong: float = Field(
        -0.5,
        allow_inf_nan=False,
        description="cosine: reward of a wrong answer at L ≥ max_length. NOT open-r1's min_value_wrong: "
        "open-r1's get_cosine_scaled_reward names the wrong-answer bounds by value (min -1.0, max -0.5) and "
        "swaps them; its max_value_wrong is this field. Copied over as they are, they reward short wrong "
        "answers.",
    )
    max_value_wrong: float = Field(
        -1.0,
        allow_inf_nan=False,
        description="cosine: reward of a wrong answer at L = 0. NOT open-r1's max_value_wrong: its "
        "min_value_wrong is this field (see min_value_wrong).",
    )
    correct_key: str = Field(
        "correct", min_length=1, description="cosine: metadata key of the correctness flag."
    )

    @model_validator(mode="after")
    def _mode_fields(self) -> LengthConfig:
        if self.mode == "dapo_overlong":
            if self.cache_length is None:
                raise ValueError("dapo_overlong needs cache_length")
            if self.cache_length >= self.max_length:
                raise ValueError("cache_length must be smaller than max_length")
            stray = [f for f in _COSINE_FIELDS if f in self.model_fields_set]
            if stray:
                raise ValueError(f"{stray[0]} applies to mode cosine only")
        elif self.cache_length is not None:
            raise ValueError("cache_length applies to mode dapo_overlong only")
        return self


def dapo_overlong(length: int, max_length: int, cache_length: int) -> float:
    """DAPO soft overlong punishment (module docstring)."""
    threshold = max_length - cache_length
    if length <= threshold:
        return 0.0
    if length <= max_length:
        return (threshold - length) / cache_length
    return -1.0


def cosine_length(length: int, max_length: int, v_min: float, v_max: float) -> float:
    """Cosine length reward: v_max at 0, v_min from max_length on (module docstring)."""
    progress = min(length / max_length, 1.0)
    return v_min + 0.5 * (v_max - v_min) * (1.0 + math.cos(math.pi * progress))


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise UnitError(
        Reason.PARSE_ERROR, f"{where} must be a boolean (or 0/1, 'true'/'false'), got {value!r:.80}"
    )


def read_correct(item: ScoreItem, key: str) -> bool:
    """The item's correctness flag (module docstring); raises :class:`UnitError` without a readable one."""
    meta = item.metadata or {}
    ref = item.reference
    if key in meta:
        return _as_bool(meta[key], f"metadata[{key!r}]")
    if isinstance(ref, dict) and "correct" in ref:
        return _as_bool(ref["correct"], "reference.correct")
    if isinstance(ref, str) and ref.strip().lower() in _REFERENCE_FLAGS:
        return ref.strip().lower() == "true"
    if isinstance(ref, str):
        # only the two documented words: "1", "0", "yes", "no" are as often another reward's gold answer
        # (a math answer, a BoolQ label), which read as a flag scored every response right or wrong
        raise UnitError(
            Reason.PARSE_ERROR,
            f"a reference string is a correctness flag only as 'true' or 'false', got {ref!r:.80}; "
            f"send the flag as metadata[{key!r}] when the reference is a gold answer",
        )
    if ref is None:
        raise UnitError(
            Reason.MISSING_REFERENCE,
            f"cosine needs the answer's correctness: metadata[{key!r}] or reference {{'correct': bool}}",
        )
    raise UnitError(Reason.PARSE_ERROR, "reference must be {'correct': bool} or 'true'/'false'")


@register
class LengthReward(Reward[LengthConfig]):
    name: ClassVar[str] = "length"
    # 1.0.1: a token count past the floats is a parse_error (10**400 raised OverflowError out of the batch)
    # 1.0.2: words count each CJK ideograph or kana as a word (a Chinese answer was a handful of words)
    # 1.0.3: a reference string is a correctness flag only as "true"/"false" (case-insensitive): a gold
    # answer "1", "0", "yes", "no" was read as one (parse_error now, as "42" was)
    # 1.0.4: words: the prolonged sound mark ー is a kana, not glued to a Latin word or number after it
    # 1.0.5: words: each letter of Thai, Lao, Khmer or Myanmar is a word (.text.length_words), as each CJK
    # character is: written without spaces between words, a Thai paragraph was a handful of words
    version: ClassVar[str] = "1.0.5"
    description: ClassVar[str] = (
        "Length shaping: DAPO soft overlong punishment, or the cosine length reward (shorter correct "
        "answers earn more, shorter wrong answers lose more); chars, words or trainer-supplied tokens."
    )
    config_model = LengthConfig
    reads = ("response", "reference", "metadata")

    async def score(
        self, items: Sequence[ScoreItem], config: LengthConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        out: list[Outcome] = []
        for item in items:
            try:
                length = completion_length(item, config.unit, config.token_count_key)
                details: dict[str, Any] = {"length": length, "unit": config.unit}
                if config.mode == "dapo_overlong":
                    assert config.cache_length is not None  # the config validator guarantees it
                    score = dapo_overlong(length, config.max_length, config.cache_length)
                else:
                    correct = read_correct(item, config.correct_key)
                    details["correct"] = correct
                    lo, hi = (
                        (config.min_value_correct, config.max_value_correct)
                        if correct
                        else (config.min_value_wrong, config.max_value_wrong)
                    )
                    score = cosine_length(length, config.max_length, lo, hi)
            except UnitError as exc:
                out.append(exc.outcome())
                continue
            out.append(Outcome(score, components={"length": float(length)}, details=details))
        return out
