"""``group_length``: Kimi k1.5's group-relative length penalty (algorithms.md §5.4).

"Kimi k1.5: Scaling Reinforcement Learning with LLMs" (arXiv 2501.12599, §2.3.3). Within the group of
responses to one prompt, with lengths len_i and min_len / max_len the group's extremes::

    λ_i = 0.5 − (len_i − min_len) / (max_len − min_len)
    r_i = λ_i             if response i is correct
        = min(0, λ_i)     if it is wrong
    r_i = 0 for every member when all lengths are equal (max_len = min_len)

The shortest response gets +0.5, the longest −0.5, linearly between. Correct answers are pushed to be
short; a wrong answer is never *rewarded* for being short (min(0, ·)), only punished for being long, so
the policy cannot farm the term with terse wrong answers. Kimi adds this term to the correctness reward
(use a ``composite``) after a warm-up, as it slows early training.

Correctness (``correctness``): ``verifier`` (default) calls the configured verifier (``math`` by
default) through the registry once for the whole batch, on the full responses (a group verifier such as
``majority_vote`` on every member of each group, those whose length cannot be read included: their
answers still vote); ``metadata`` reads the trainer's flag exactly as the ``length`` reward does
(``metadata[correct_key]``, then the reference ``{"correct": bool}`` or ``"true"``/``"false"``). Lengths: ``chars``, ``words`` or ``tokens``
(``metadata[token_count_key]``), see :mod:`rewardhub.rewards.units`.

min_len and max_len range over the members whose length is known, whatever their correctness. A member
whose length or correctness cannot be read is invalid with that reason; the others are still scored.
Items without a ``group`` are invalid (``unsupported``): a group of one has no relative length. For the
same reason, when only one member of a group has a known length (a group of one, or its other members'
lengths unreadable), that member is ``unsupported`` too, not 0: min = max there because nothing was
compared, not because the lengths are equal (a composite that should keep its other terms for such an
item gives this part ``on_invalid: "skip"``).
Components: ``length``, ``lambda``, ``correct``. Details: ``min_length``, ``max_length``, ``unit``.
Not cacheable: an item's score depends on the other members.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, model_validator

from rewardhub.groups import group_indices
from rewardhub.protocol import Reason, RewardSpec, ScoreItem
from rewardhub.rewards.base import Outcome, RewardConfig, ScoreContext, register
from rewardhub.rewards.composed import ComposedReward, Part, resolve, run_part
from rewardhub.rewards.length import read_correct
from rewardhub.rewards.units import LengthUnit, UnitError, completion_length

__all__ = ["GroupLengthConfig", "GroupLengthReward", "kimi_length_reward"]

_METADATA_FIELDS = ("correct_key",)
_VERIFIER_FIELDS = ("verifier", "correct_threshold")


class GroupLengthConfig(RewardConfig):
    unit: LengthUnit = Field(
        "tokens", description="chars | words | tokens (tokens: the count in metadata[token_count_key])."
    )
    token_count_key: str = Field(
        "completion_tokens", min_length=1, description="Metadata key of the token count."
    )
    correctness: Literal["verifier", "metadata"] = Field(
        "verifier", description="verifier: call `verifier` on the responses; metadata: the trainer's flag."
    )
    verifier: str | RewardSpec = Field(
        "math", description="correctness=verifier: a reward name or {name, config}."
    )
    correct_threshold: float = Field(
        1.0,
        allow_inf_nan=False,
        description="Verifiers without a `correct` component: correct iff score ≥ this.",
    )
    correct_key: str = Field("correct", min_length=1, description="correctness=metadata: the metadata key.")

    _part: Part | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _mode_fields(self) -> GroupLengthConfig:
        stray_names = _METADATA_FIELDS if self.correctness == "verifier" else _VERIFIER_FIELDS
        stray = [f for f in stray_names if f in self.model_fields_set]
        if stray:
            other = "metadata" if self.correctness == "verifier" else "verifier"
            raise ValueError(f"{stray[0]} applies to correctness {other!r} only")
        return self


def kimi_length_reward(length: int, min_len: int, max_len: int, correct: bool) -> tuple[float, float]:
    """(reward, λ) of one member (module docstring)."""
    if max_len == min_len:
        return 0.0, 0.0
    lam = 0.5 - (length - min_len) / (max_len - min_len)
    return (lam if correct else min(0.0, lam)), lam


@register
class GroupLengthReward(ComposedReward[GroupLengthConfig]):
    name: ClassVar[str] = "group_length"
    # 1.0.1: a group verifier (majority_vote) sees the whole group, members of unknown length included
    # 1.0.2: a token count past the floats is a parse_error (10**400 raised OverflowError out of the batch)
    # 1.0.3: a member whose length is the group's only known one is unsupported (it scored 0)
    # 1.0.4: words count each CJK ideograph or kana as a word (a Chinese answer was a handful of words)
    # 1.0.5: with correctness=metadata a reference string is a flag only as "true"/"false" (length 1.0.3)
    # 1.0.6: words: the prolonged sound mark ー is a kana, not glued to a Latin word or number after it
    # 1.0.7: words: each letter of Thai, Lao, Khmer or Myanmar is a word, as each CJK character is (length 1.0.5)
    version: ClassVar[str] = "1.0.7"
    description: ClassVar[str] = (
        "Kimi k1.5 group-relative length penalty: λ = 0.5 − (len − min)/(max − min) if correct, "
        "min(0, λ) if wrong; correctness from a verifier (math) or metadata; needs `group` and two "
        "members of known length in it; not cacheable."
    )
    config_model = GroupLengthConfig
    reads = ("response", "reference", "group", "metadata")
    cacheable = False
    group_aware: ClassVar[bool] = True

    def parse_config(self, raw: dict[str, Any]) -> GroupLengthConfig:
        config = super().parse_config(raw)
        if config.correctness == "verifier":
            config._part = resolve(self.runtime, config.verifier, "reward.config.verifier", self.name)
        return config

    def parts(self, config: GroupLengthConfig) -> Sequence[Part]:
        return (config._part,) if config._part is not None else ()

    async def score(
        self, items: Sequence[ScoreItem], config: GroupLengthConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        n = len(items)
        out: list[Outcome | None] = [None] * n
        lengths: list[int | None] = [None] * n
        for i, item in enumerate(items):
            if item.group is None:
                out[i] = Outcome.invalid(
                    Reason.UNSUPPORTED,
                    "group_length needs a `group` id on every item (lengths are group-relative)",
                )
                continue
            try:
                lengths[i] = completion_length(item, config.unit, config.token_count_key)
            except UnitError as exc:
                out[i] = exc.outcome()
        correct = await self._correctness(items, [i for i in range(n) if out[i] is None], config, ctx, out)
        for idx in group_indices(items).values():
            known = [n for n in (lengths[i] for i in idx) if n is not None]
            if len(known) < 2:
                for i in idx:
                    if out[i] is None and lengths[i] is not None:
                        out[i] = Outcome.invalid(
                            Reason.UNSUPPORTED,
                            "group_length needs two members of known length in the group (it has 1 member "
                            "of known length): a lone length has no relative length",
                        )
                continue
            lo, hi = min(known), max(known)
            for i in idx:
                length, ok = lengths[i], correct.get(i)
                if out[i] is not None or length is None or ok is None:
                    continue
                score, lam = kimi_length_reward(length, lo, hi, ok)
                out[i] = Outcome(
                    score,
                    components={"length": float(length), "lambda": lam, "correct": 1.0 if ok else 0.0},
                    details={"min_length": lo, "max_length": hi, "unit": config.unit},
                )
        return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in out]

    async def _correctness(
        self,
        items: Sequence[ScoreItem],
        todo: list[int],
        config: GroupLengthConfig,
        ctx: ScoreContext,
        out: list[Outcome | None],
    ) -> dict[int, bool]:
        """Correctness of the ``todo`` items; an unreadable one gets its invalid outcome in ``out``."""
        correct: dict[int, bool] = {}
        part = config._part
        if part is None:
            for i in todo:
                try:
                    correct[i] = read_correct(items[i], config.correct_key)
                except UnitError as exc:
                    out[i] = exc.outcome()
            return correct
        # A group verifier (majority_vote) judges an item against its group: it sees every member, the
        # ones whose length could not be read included (their answers still vote).
        sent = (
            [i for i, it in enumerate(items) if it.group is not None]
            if part.reward.uses_groups(part.config)
            else todo
        )
        wanted = set(todo)
        verdicts = await run_part(part, [items[i] for i in sent], ctx)
        for i, v in zip(sent, verdicts, strict=True):
            if i not in wanted:
                continue
            if v.score is None:
                assert v.reason is not None
                message = v.details.get("message")
                out[i] = Outcome.invalid(
                    v.reason,
                    f"verifier {part.reward.name!r} could not score the response"
                    + (f": {message}" if message else ""),
                )
                continue
            flag = v.components.get("correct")
            correct[i] = flag >= 0.5 if flag is not None else v.score >= config.correct_threshold
        return correct
