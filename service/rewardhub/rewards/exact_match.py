"""``exact_match``: the response (or an extracted part of it) equals a reference after normalisation.

The compared text is the response outside its reasoning: after the last ``</think>`` and before a
``<think>`` that never closes (:func:`.text.answer_text`), as every answer-reading reward reads it; a
reasoning model's "the answer is…" inside ``<think>`` is a draft. An ``extract`` pattern searches that
text too, so an ``<answer>`` drafted in the reasoning of a response cut off there is no answer.

Normalisation is configurable: ``squad`` (lower case, no punctuation or articles, collapsed spaces; the
SQuAD EM definition, but a reference it would empty, such as the option letter "A", keeps its articles:
:func:`.text.squad_pair`), ``whitespace`` (collapse and strip only) or ``none``. The reference is a string, a
list of acceptable strings, ``{"answers": [...]}``, or a Hugging Face SQuAD row's
``{"answers": {"text": [...], "answer_start": [...]}}``; the item scores 1 if any matches. A number among
them is read as its text, a whole float as the integer (42.0 is "42").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.patterns import (
    MATCH_TIMEOUT_S,
    MatchBudget,
    PatternTimeout,
    last_match,
    validate_pattern,
)
from rewardhub.rewards.text import after_think_at, answer_text, squad_pair

__all__ = ["ExactMatchConfig", "ExactMatchReward", "extract_span", "read_item", "reference_strings"]


class ExactMatchConfig(RewardConfig):
    normalize: Literal["squad", "whitespace", "none"] = Field(
        "squad", description="squad: lower, strip punctuation/articles, collapse spaces; whitespace; none."
    )
    case_sensitive: bool = Field(False, description="Only for normalize=whitespace|none.")
    extract: str | None = Field(
        None,
        description="Optional regex; its first group (or whole match), last occurrence, is compared "
        "instead of the whole response, e.g. '<answer>(.*?)</answer>'.",
    )

    @field_validator("extract")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        return validate_pattern(v) if v is not None else None

    @model_validator(mode="after")
    def _case_needs_a_case_keeping_normalisation(self) -> ExactMatchConfig:
        if self.case_sensitive and self.normalize == "squad":  # squad lower-cases: it was ignored, silently
            raise ValueError(
                "case_sensitive applies to normalize 'whitespace' or 'none'; 'squad' lower-cases"
            )
        return self


def _text(x: str | int | float) -> str:
    """A reference as text; a whole float is written as the integer it is: a dataset read by pandas
    gives 42.0, which SQuAD's normalisation made "420" and no answer "42" matched."""
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def reference_strings(reference: Any) -> list[str] | None:
    """Acceptable answers: a string, a list of strings or numbers, {"answers": [...]} or {"answer": ...},
    or a Hugging Face SQuAD row's {"answers": {"text": [...], "answer_start": [...]}} (its texts)."""
    if isinstance(reference, str):
        return [reference]
    if isinstance(reference, list):
        out = [_text(x) for x in reference if isinstance(x, str | int | float)]
        return out or None
    if isinstance(reference, dict):
        answers = reference.get("answers")
        if isinstance(answers, dict) and isinstance(answers.get("text"), list):
            answers = answers["text"]  # the datasets layout of SQuAD (and TriviaQA-style rows)
        if isinstance(answers, list):
            return reference_strings(answers)
        if "answer" in reference:
            answer = reference["answer"]
            return reference_strings(answer if isinstance(answer, str | list) else [answer])
    return None


def extract_span(text: str, pattern: str | None, budget: MatchBudget | None = None) -> str | None:
    """The text outside its reasoning (:func:`.text.answer_text`), or the last match of ``pattern`` in it
    (its first group if it has one).

    Raises:
        PatternTimeout: the match ran past its time budget (or ``budget``, the call's, was spent).
    """
    answer = answer_text(text)
    if pattern is None:
        # without the whitespace after </think> ("</think>\n\n" in R1 and Qwen3): normalize "none"
        # compared it, so no reasoning model's answer was equal to its reference
        return answer.lstrip() if after_think_at(text) > 0 else answer
    text = answer
    m = last_match(pattern, text, budget=budget)
    if m is None:
        return None
    span: str | None = m.group(1) if m.re.groups else m.group(0)
    return span


def read_item(
    item: ScoreItem,
    pattern: str | None,
    reward: str,
    empty: dict[str, float | None] | None = None,
    budget: MatchBudget | None = None,
) -> tuple[list[str], str] | Outcome:
    """The item's acceptable references and the response span to compare, or the outcome that ends it.

    Shared by the string-matching rewards: a missing reference is invalid, a pattern that ran past its
    time budget (or found ``budget``, the call's, spent) is a timeout, and a response where the pattern
    finds nothing is a valid 0 (no answer), with ``empty`` as its components.
    """
    refs = reference_strings(item.reference)
    if refs is None:
        return Outcome.invalid(Reason.MISSING_REFERENCE, f"{reward} needs a reference string")
    try:
        span = extract_span(item.response, pattern, budget)
    except PatternTimeout as exc:
        return Outcome.invalid(Reason.TIMEOUT, str(exc))
    if span is None:
        return Outcome(0.0, Reason.NO_ANSWER, components=dict(empty or {}), details={"extracted": None})
    return refs, span


def _norm(text: str, cfg: ExactMatchConfig) -> str:
    if cfg.normalize == "whitespace":
        text = " ".join(text.split())
    return text if cfg.case_sensitive else text.casefold()


def _equal(span: str, ref: str, cfg: ExactMatchConfig) -> bool:
    if cfg.normalize == "squad":
        pred, key = squad_pair(span, ref)
        return pred == key
    return _norm(span, cfg) == _norm(ref, cfg)


@register
class ExactMatchReward(Reward[ExactMatchConfig]):
    name: ClassVar[str] = "exact_match"
    # 1.1.1: an extract pattern searches the answer outside the reasoning, not drafts inside <think>
    # 1.1.2: a reference SQuAD normalises to nothing ("A", "The") is not matched by any answer that does;
    # squad drops Unicode punctuation (’ “ ” 。), not only ASCII's; the whitespace after </think> is
    # not compared (normalize "none")
    version: ClassVar[str] = "1.1.2"
    description: ClassVar[str] = "1 if the (extracted) response equals any reference after normalisation."
    config_model = ExactMatchConfig

    async def score(
        self, items: Sequence[ScoreItem], config: ExactMatchConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        out: list[Outcome] = []
        budget = MatchBudget(min(MATCH_TIMEOUT_S, ctx.deadline_s))  # a match runs inside the item's deadline
        for item in items:
            read = read_item(item, config.extract, self.name, budget=budget)
            if isinstance(read, Outcome):
                out.append(read)
                continue
            refs, span = read
            hit = next((r for r in refs if _equal(span, r, config)), None)
            out.append(Outcome(1.0 if hit is not None else 0.0, details={"extracted": span, "matched": hit}))
        return out
