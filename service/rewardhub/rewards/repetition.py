"""``repetition``: an n-gram repetition penalty (algorithms.md §5.5).

From "Demystifying Long Chain-of-Thought Reasoning in LLMs" (arXiv 2502.03373, App. C.2; TRL/open-r1
``get_repetition_penalty_reward(ngram_size=3, max_penalty=-1.0)``)::

    R = (1 − #unique n-grams / #n-grams) · max_penalty          (0 with fewer than n tokens)

Long-CoT training with length rewards invites degenerate loops ("wait, let me check again..." over and
over) that are cheap ways to grow; this term makes each repeated n-gram cost something. It is 0 for a
text without repeats and approaches ``max_penalty`` as the text becomes one repeated n-gram: token ids
``[5, 5, 5, 5, 5]`` with n = 2 have 4 bigrams, 1 unique, so R = (1 − 1/4) · −1 = −0.75.

Tokens: case-folded whitespace ``words`` of the response (as open-r1 does), or the policy's own
``token_ids`` sent by the trainer in ``metadata[token_ids_key]`` (what the paper uses; the service has
no tokenizer to compute them). Component ``repetition``: the repeated fraction ``1 − unique/total``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import ClassVar, Literal

from pydantic import Field

from rewardhub.protocol import ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.units import UnitError, metadata_int_list

__all__ = ["RepetitionConfig", "RepetitionReward", "repeated_fraction"]


class RepetitionConfig(RewardConfig):
    ngram_size: int = Field(3, ge=1, le=64, description="n of the n-grams.")
    max_penalty: float = Field(
        -1.0, le=0.0, allow_inf_nan=False, description="The penalty of a fully repetitive text (≤ 0)."
    )
    unit: Literal["words", "token_ids"] = Field(
        "words", description="words: case-folded whitespace words; token_ids: metadata[token_ids_key]."
    )
    token_ids_key: str = Field(
        "completion_ids", min_length=1, description="Metadata key of the completion's token ids."
    )


def repeated_fraction(tokens: Sequence[Hashable], n: int) -> tuple[float, int, int]:
    """(1 − unique/total, total, unique) over the n-grams of ``tokens``; (0, 0, 0) with fewer than n."""
    total = len(tokens) - n + 1
    if total <= 0:
        return 0.0, 0, 0
    unique = len({tuple(tokens[i : i + n]) for i in range(total)})
    return 1.0 - unique / total, total, unique


@register
class RepetitionReward(Reward[RepetitionConfig]):
    name: ClassVar[str] = "repetition"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "N-gram repetition penalty (1 − unique/total n-grams) · max_penalty over words or trainer-supplied "
        "token ids; 0 without repeats."
    )
    config_model = RepetitionConfig
    reads = ("response", "metadata")

    async def score(
        self, items: Sequence[ScoreItem], config: RepetitionConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        out: list[Outcome] = []
        for item in items:
            tokens: Sequence[Hashable]
            if config.unit == "words":
                tokens = item.response.casefold().split()
            else:
                try:
                    tokens = metadata_int_list(item, config.token_ids_key)
                except UnitError as exc:
                    out.append(exc.outcome())
                    continue
            fraction, total, unique = repeated_fraction(tokens, config.ngram_size)
            out.append(
                Outcome(
                    fraction * config.max_penalty + 0.0,  # + 0.0 turns -0.0 into 0.0
                    components={"repetition": fraction},
                    details={"ngrams": total, "unique_ngrams": unique, "tokens": len(tokens)},
                )
            )
        return out
