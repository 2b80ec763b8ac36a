"""``f1``: SQuAD token F1 between the (extracted) response and the best of its references.

The response is read outside its reasoning (``<think>…</think>`` and an unclosed ``<think>`` left
out), an ``extract`` pattern searching that text too, as in :mod:`.exact_match`. Both sides are
normalised as in the SQuAD v1.1 evaluation script (:func:`.text.squad_tokens`: lower case, by full
case folding, no punctuation or articles), split into tokens at whitespace and, as MLQA's script splits Chinese, around
each CJK ideograph or kana (:func:`.text.split_cjk`: "東京都" is three tokens, so against "東京" it scores
0.8, where one token each scored 0.0), and compared as *bags* of tokens, so a repeated token counts once
per occurrence on each side::

    common    = |Counter(pred) & Counter(gold)|        (multiset intersection size)
    precision = common / |pred|,  recall = common / |gold|
    F1        = 2·P·R / (P + R)          (0 when common = 0)

Edge cases follow the SQuAD v2 script: both token lists empty → 1.0; exactly one empty → 0.0. No reference
compared has no tokens, though: a blank one is dropped, and one that SQuAD's normalisation would empty
("A", an option letter, is an article; "The") is tokenised with its articles kept, and the response alike
(:func:`.text.squad_pair`), so an empty response, or one cut off in its reasoning, does not match it.
An unanswerable question (a SQuAD v2 row whose answer texts are empty, or a blank reference with
``empty_reference_unanswerable``) scores 1 for an abstention (a blank answer or one of
``no_answer_phrases``) and 0 for any other answer, as in :mod:`.exact_match`; a blank reference is
otherwise ``missing_reference``.
With several references the item gets the maximum F1, and ``components`` carry the precision and
recall of that best reference. F1 gives partial credit where exact match is all-or-nothing, which gives
a denser signal for free-form short answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field, field_validator

from rewardhub.protocol import ScoreItem
from rewardhub.rewards.base import Outcome, Reward, ScoreContext, register
from rewardhub.rewards.exact_match import AnswerConfig, read_items
from rewardhub.rewards.patterns import validate_pattern
from rewardhub.rewards.text import split_cjk, squad_pair

__all__ = ["F1Config", "F1Reward", "token_f1"]


class F1Config(AnswerConfig):
    extract: str | None = Field(
        None,
        description="Optional regex; its first group that took part in the match (or the whole match), last "
        "occurrence, is scored instead of the whole response, e.g. '<answer>(.*?)</answer>'. No match "
        "scores 0 (no_answer).",
    )

    @field_validator("extract")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        return validate_pattern(v) if v is not None else None


def token_f1(pred: Sequence[str], gold: Sequence[str]) -> tuple[float, float, float]:
    """(F1, precision, recall) of two token lists, as bags (see the module docstring for edge cases)."""
    if not pred or not gold:
        same = float(not pred and not gold)
        return same, same, same
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0, 0.0, 0.0
    precision = common / len(pred)
    recall = common / len(gold)
    return 2 * precision * recall / (precision + recall), precision, recall


def _f1(span: str, ref: str) -> tuple[float, float, float]:
    pred, gold = squad_pair(span, ref)
    return token_f1(split_cjk(pred), split_cjk(gold))


@register
class F1Reward(Reward[F1Config]):
    name: ClassVar[str] = "f1"
    # 1.1.1: an extract pattern searches the answer outside the reasoning, not drafts inside <think>
    # 1.1.2: a reference SQuAD normalises to nothing ("A", "The") is not matched by any answer that does;
    # Unicode punctuation (’ “ ” 。) is dropped, not only ASCII's
    # 1.1.3: a SQuAD v2 unanswerable row (answer texts []) scores an abstention 1, any other answer 0 (it
    # was missing_reference); a blank reference ("") is missing_reference unless empty_reference_unanswerable
    # (an empty answer scored 1.0 against it); the answers column alone ({"text": [...]}) is read
    # 1.1.4: invisible format characters (Cf: zero-width space, soft hyphen, BOM...) are dropped before
    # tokenising: "Par\u200bis" was another token than "Paris"; a reference of invisible characters only is
    # blank, as in exact_match
    # 1.1.5: each CJK ideograph or kana is a token (MLQA's segmentation of Chinese): a Chinese or Japanese
    # answer was one token, its F1 0 unless exact ("東京都" against "東京": 0.0, now 0.8); an extract
    # pattern's first group that took part in the match is scored (alternatives: group 1 could be None)
    # 1.1.6: tokens are case-folded, not lower-cased: "STRASSE" was another token than "Straße"; the
    # prolonged sound mark ー is a kana token ("サッカーW杯" had the token "ーw")
    # 1.1.7: the capital dotted I is the token i (.text.fold_case): casefold wrote "İ" as "i" and a
    # combining dot, so "İstanbul" was another token than "istanbul"; a no-answer phrase is compared as
    # exact_match compares it, a space between CJK characters none ("无法 回答" did not abstain)
    # 1.1.8: an extract pattern on a long response is matched in a CPU worker, resource_limit past 64 MB
    # (as exact_match 1.1.8)
    version: ClassVar[str] = "1.1.8"
    description: ClassVar[str] = (
        "SQuAD token F1 (bag-of-tokens overlap after SQuAD normalisation) of the (extracted) response, "
        "max over the references; components: precision, recall."
    )
    config_model = F1Config
    reads = ("response", "reference")

    async def score(self, items: Sequence[ScoreItem], config: F1Config, ctx: ScoreContext) -> list[Outcome]:
        out: list[Outcome] = []
        empty: dict[str, float | None] = {"precision": 0.0, "recall": 0.0}
        for read in await read_items(items, config.extract, self, config, ctx, empty=empty):
            if isinstance(read, Outcome):
                out.append(read)
                continue
            refs, span = read
            best_ref, (f1, precision, recall) = max(
                ((ref, _f1(span, ref)) for ref in refs), key=lambda pair: pair[1][0]
            )
            out.append(
                Outcome(
                    f1,
                    components={"precision": precision, "recall": recall},
                    details={"extracted": span, "best_reference": best_ref},
                )
            )
        return out
