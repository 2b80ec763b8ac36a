"""``repetition``: an n-gram repetition penalty (algorithms.md §5.5).

From "Demystifying Long Chain-of-Thought Reasoning in LLMs" (arXiv 2502.03373, App. C.2; TRL/open-r1
``get_repetition_penalty_reward(ngram_size=3, max_penalty=-1.0)``)::

    R = (1 − #unique n-grams / #n-grams) · max_penalty          (0 with fewer than n tokens)

Long-CoT training with length rewards invites degenerate loops ("wait, let me check again..." over and
over) that are cheap ways to grow; this term makes each repeated n-gram cost something. It is 0 for a
text without repeats and approaches ``max_penalty`` as the text becomes one repeated n-gram: token ids
``[5, 5, 5, 5, 5]`` with n = 2 have 4 bigrams, 1 unique, so R = (1 − 1/4) · −1 = −0.75.

Tokens: case-folded whitespace ``words`` of the response (as open-r1 does), each CJK ideograph or kana a
word of its own (:func:`.text.split_cjk`; open-r1 segments Chinese with jieba: whitespace made a Chinese
loop, "我爱你我爱你...", one word and no n-gram, never penalised), invisible format characters
dropped (:func:`.text.drop_invisible`: zero-width spaces between repeats do not make them new words), or
the policy's own ``token_ids`` sent by the trainer in ``metadata[token_ids_key]`` (what the paper uses;
the service has no tokenizer to compute them). Component ``repetition``: the repeated fraction ``1 − unique/total``.

Counting n-grams is pure Python, about a microsecond a token (more for a large n): a request whose
work is small (:func:`runs_inline`, its words counted) is scored inline, a bigger one (a batch of
long-CoT rollouts: 10 million tokens took 7 s) in the CPU workers, each item under the request's
deadline (``timeout`` past it), so it never holds the event loop.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import ClassVar, Literal

from pydantic import Field

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.text import drop_invisible, fold_case, split_cjk, word_count
from rewardhub.rewards.units import UnitError, metadata_int_list

__all__ = ["RepetitionConfig", "RepetitionReward", "repeated_fraction", "repetition_outcome", "runs_inline"]


class RepetitionConfig(RewardConfig):
    ngram_size: int = Field(3, ge=1, le=64, description="n of the n-grams.")
    max_penalty: float = Field(
        -1.0, le=0.0, allow_inf_nan=False, description="The penalty of a fully repetitive text (≤ 0)."
    )
    unit: Literal["words", "token_ids"] = Field(
        "words",
        description="words: case-folded whitespace words (invisible format characters dropped); "
        "token_ids: metadata[token_ids_key].",
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


# Work a request may do on the event loop (:func:`_cost`): about 0.1 s.
_INLINE_WORK = 4_000_000


def _cost(tokens: Sequence[Hashable] | str, n: int, *, count_words: bool = False) -> int:
    """Work of one item: tokens x (16 + n); a text's words taken as one per 8 characters (one per
    character past ASCII: a CJK character is a word), or counted (``count_words``: :func:`.text.word_count`,
    about 7 ms a MB of ASCII)."""
    if isinstance(tokens, str):
        if count_words:
            count = word_count(tokens)
        else:
            count = len(tokens) // 8 if tokens.isascii() else len(tokens)
    else:
        count = len(tokens)
    return count * (16 + n)


def runs_inline(texts: Sequence[Sequence[Hashable] | str], n: int) -> bool:
    """Whether a request's items are cheap enough to count on the event loop (:data:`_INLINE_WORK`).

    One word per 8 characters is prose; a text of one-letter or one-digit words (a string of bits or
    digits, "1 0 1 1 0 ...") has one per 2, and 1 MB of it at ngram_size 8 held the loop for 0.4 s where
    0.1 s was meant. So a request the rough estimate lets through (1.9 MB of text at most, 0.2 M
    characters past ASCII, where a CJK character is a word) has its words counted, in 13 ms at most (30
    ms for CJK); one it does not goes to the workers uncounted (counting a 64 MB request would itself
    take 0.45 s).
    """
    if sum(_cost(t, n) for t in texts) > _INLINE_WORK:
        return False
    return sum(_cost(t, n, count_words=True) for t in texts) <= _INLINE_WORK


def repetition_outcome(payload: tuple[Sequence[Hashable] | str, int, float]) -> Outcome:
    """One item's outcome from its token ids, or its response text split into case-folded words (a
    CPU-pool task: module level)."""
    tokens, n, max_penalty = payload
    if isinstance(tokens, str):
        tokens = split_cjk(fold_case(drop_invisible(tokens)))
    fraction, total, unique = repeated_fraction(tokens, n)
    return Outcome(
        fraction * max_penalty + 0.0,  # + 0.0 turns -0.0 into 0.0
        components={"repetition": fraction},
        details={"ngrams": total, "unique_ngrams": unique, "tokens": len(tokens)},
    )


@register
class RepetitionReward(Reward[RepetitionConfig]):
    name: ClassVar[str] = "repetition"
    # 1.0.1: words drop invisible format characters (Cf): zero-width spaces between repeats made them new
    # words, dodging the penalty
    # 1.0.2: each CJK ideograph or kana is a word: a Chinese or Japanese loop was one whitespace word, no
    # n-gram, never penalised
    # 1.0.3: the prolonged sound mark ー is a kana word, not glued to a Latin word or number after it
    # 1.0.4: words fold the capital dotted I to i (.text.fold_case): "İstanbul" and "istanbul" were other
    # words (casefold wrote "İ" as "i" and a combining dot), a repeat that escaped the penalty
    version: ClassVar[str] = "1.0.4"
    description: ClassVar[str] = (
        "N-gram repetition penalty (1 − unique/total n-grams) · max_penalty over words or trainer-supplied "
        "token ids; 0 without repeats."
    )
    config_model = RepetitionConfig
    reads = ("response", "metadata")

    async def score(
        self, items: Sequence[ScoreItem], config: RepetitionConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        out: list[Outcome | None] = [None] * len(items)
        todo: list[int] = []
        payloads: list[tuple[Sequence[Hashable] | str, int, float]] = []
        for i, item in enumerate(items):
            tokens: Sequence[Hashable] | str = item.response  # words: split where it is scored
            if config.unit == "token_ids":
                try:
                    tokens = metadata_int_list(item, config.token_ids_key)
                except UnitError as exc:
                    out[i] = exc.outcome()
                    continue
            todo.append(i)
            payloads.append((tokens, config.ngram_size, config.max_penalty))
        if runs_inline([tokens for tokens, _, _ in payloads], config.ngram_size):
            for i, payload in zip(todo, payloads, strict=True):
                out[i] = repetition_outcome(payload)
        else:
            results = await self.runtime.cpu_pool.run(repetition_outcome, payloads, ctx.deadline_s)
            for i, res in zip(todo, results, strict=True):
                out[i] = res.value if res.ok else Outcome.pool_failure(res.error, res.message or res.error)
        return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in out]
