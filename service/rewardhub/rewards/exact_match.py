"""``exact_match``: the response (or an extracted part of it) equals a reference after normalisation.

The compared text is the response outside its reasoning: after the last ``</think>`` and before a
``<think>`` that never closes (:func:`.text.answer_text`), as every answer-reading reward reads it; a
reasoning model's "the answer is…" inside ``<think>`` is a draft. An ``extract`` pattern searches that
text too, so an ``<answer>`` drafted in the reasoning of a response cut off there is no answer.

Normalisation is configurable: ``squad`` (lower case, no punctuation or articles, collapsed spaces; the
SQuAD EM definition, but a reference it would empty, such as the option letter "A", keeps its articles:
:func:`.text.squad_pair`; a space between CJK characters is no difference, as in MLQA's EM for Chinese and
in f1's tokens: "東京 タワー" is "東京タワー"), ``whitespace`` (collapse and strip only) or ``none``. ``squad`` and
``whitespace`` drop invisible format characters (:func:`.text.drop_invisible`: "Par\u200bis" is "Paris")
and fold compatibility forms (NFKC: full-width "Ｐａｒｉｓ" and "４２" are "Paris" and "42", the ligature
"ﬁ" is "fi"), with ``case_sensitive`` too (NFKC keeps letter case); ``none`` compares as written.
``whitespace`` and ``none`` ignore case (``casefold``, the capital dotted I "İ" folded to "i" as squad folds
it: :func:`.text.fold_case`) unless ``case_sensitive``.
The reference is a string, a list of acceptable strings, ``{"answers": [...]}``, or a Hugging Face SQuAD row's
``{"answers": {"text": [...], "answer_start": [...]}}`` (or that row's ``answers`` column alone,
``{"text": [...], "answer_start": [...]}``); the item scores 1 if any matches. A number among them is
read as its text, a whole float as the integer (42.0 is "42").

Unanswerable questions (SQuAD v2): a SQuAD-layout reference with no answer text (``"text": []``) is one.
Only an abstention scores 1 on it: a blank answer, as in the official SQuAD v2 script, or one of
``no_answer_phrases`` ("unanswerable", "no answer" by default: what SQuAD v2 prompts ask a model to say),
compared after SQuAD normalisation (a space between CJK characters no difference, as in ``squad``'s
answers); any other answer scores 0, and so does a response cut off inside its reasoning (its answer is
blank because it never gave one). A blank reference in any other layout (``""``,
``[""]``, ``{"answer": ""}``) is a data error, ``missing_reference``: read as "unanswerable" it would
reward a policy for saying nothing. ``empty_reference_unanswerable`` opts in to SQuAD v2's reading for data
sets that write their unanswerable questions so. A blank among real answers is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import regex
from pydantic import Field, field_validator, model_validator

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.patterns import (
    MATCH_TIMEOUT_S,
    MatchBudget,
    PatternTimeout,
    capped_last_match,
    capped_outcome,
    compile_pattern,
    first_group,
    last_match,
    runs_inline,
    validate_pattern,
)
from rewardhub.rewards.text import (
    after_think_at,
    answer_span,
    answer_text,
    blank,
    fold_case,
    fold_forms,
    join_cjk,
    split_cjk,
    squad_normalize,
    squad_pair,
)

__all__ = [
    "AnswerConfig",
    "ExactMatchConfig",
    "ExactMatchReward",
    "answer_references",
    "extract_in_worker",
    "extract_span",
    "read_items",
    "reference_strings",
]


class AnswerConfig(RewardConfig):
    """What exact_match and f1 share: how an unanswerable question is read and answered."""

    no_answer_phrases: tuple[str, ...] = Field(
        ("unanswerable", "no answer"),
        max_length=32,
        description="Answers that abstain on an unanswerable question (a SQuAD v2 row whose answer texts "
        "are empty), compared after SQuAD normalisation ('Unanswerable.' is 'unanswerable'; a space between "
        "CJK characters is none); a blank "
        "answer always abstains. On an unanswerable question an abstention scores 1 and any other answer 0; "
        "on an answerable one these phrases are ordinary (wrong) answers.",
    )
    empty_reference_unanswerable: bool = Field(
        False,
        description="A blank reference outside the SQuAD layout ('', [''], [], {'answer': ''}) is a data "
        "error (missing_reference) by default, so that a policy saying nothing is not rewarded by accident; "
        "true reads it as SQuAD v2's unanswerable question, scored as the SQuAD layout's empty answer texts.",
    )

    @field_validator("no_answer_phrases")
    @classmethod
    def _phrases_have_words(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for phrase in v:
            if not squad_normalize(phrase):  # "the", "?": nothing would be compared
                raise ValueError(f"no-answer phrase {phrase!r} is empty after SQuAD normalisation")
        return v


class ExactMatchConfig(AnswerConfig):
    normalize: Literal["squad", "whitespace", "none"] = Field(
        "squad",
        description="squad: lower, strip punctuation/articles, collapse spaces; whitespace: collapse spaces "
        "(both fold compatibility forms, NFKC, and drop invisible characters); none: as written.",
    )
    case_sensitive: bool = Field(
        False, description="Only for normalize=whitespace|none, which otherwise ignore case (casefold)."
    )
    extract: str | None = Field(
        None,
        description="Optional regex; its first group that took part in the match (or the whole match), "
        "last occurrence, is compared instead of the whole response, e.g. '<answer>(.*?)</answer>', or "
        "'<answer>(.*?)</answer>|\\\\boxed\\{(.*?)\\}' for either form.",
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


def _blank(reference: Any) -> bool:
    """A reference that holds no answer: a blank string (:func:`.text.blank`: whitespace and invisible
    characters only), or a list or answer object of blanks only."""
    if isinstance(reference, str):
        return blank(reference)
    if isinstance(reference, list):
        return all(_blank(x) for x in reference)
    if isinstance(reference, dict):
        if "answers" in reference:
            return isinstance(reference["answers"], list) and _blank(reference["answers"])
        if "answer" in reference:
            return isinstance(reference["answer"], str) and _blank(reference["answer"])
    return False


def _squad_texts(reference: Any) -> list[Any] | None:
    """The answer texts of a SQuAD-layout reference: ``{"answers": {"text": [...], ...}}``, or the
    ``answers`` column alone, ``{"text": [...], "answer_start": [...]}``; None for another layout."""
    if not isinstance(reference, dict):
        return None
    answers = reference.get("answers")
    if isinstance(answers, dict) and isinstance(answers.get("text"), list):
        texts: list[Any] = answers["text"]
        return texts
    if isinstance(reference.get("text"), list) and isinstance(reference.get("answer_start"), list):
        texts = reference["text"]
        return texts
    return None


def answer_references(reference: Any, empty_unanswerable: bool = False) -> list[str] | None:
    """The answers an exact_match or f1 item accepts: ``[]`` for an unanswerable question, None for a
    missing reference (see the module docstring). A blank answer is dropped: the SQuAD v2 script drops it
    too, and among real answers it would let an empty response match."""
    texts = _squad_texts(reference)
    if texts is not None:
        refs = [_text(x) for x in texts if isinstance(x, str | int | float)]
        if len(refs) < len(texts):
            return None  # an answer text that is not text: an unreadable row, not an unanswerable one
        return [r for r in refs if not blank(r)]
    strings = reference_strings(reference)
    kept = [r for r in strings if not blank(r)] if strings is not None else []
    if kept:
        return kept
    return [] if empty_unanswerable and _blank(reference) else None


def _span(m: regex.Match[str] | None) -> str | None:
    """An extract pattern's answer in its last match ``m``: the first of its groups that took part in the
    match (:func:`.patterns.first_group`), the whole match for a pattern without groups, None if no group
    took part or nothing matched."""
    if m is not None and not m.re.groups:
        whole: str = m.group(0)
        return whole
    return first_group(m)


def extract_span(text: str, pattern: str | None, budget: MatchBudget | None = None) -> str | None:
    """The text outside its reasoning (:func:`.text.answer_text`), or the answer ``pattern``'s last match
    in it gives (:func:`_span`), matched on the event loop.

    Raises:
        PatternTimeout: the match ran past its time budget (or ``budget``, the call's, was spent).
    """
    answer = answer_text(text)
    if pattern is None:
        # without the whitespace after </think> ("</think>\n\n" in R1 and Qwen3): normalize "none"
        # compared it, so no reasoning model's answer was equal to its reference
        return answer.lstrip() if after_think_at(text) > 0 else answer
    return _span(last_match(pattern, answer, budget=budget))


def extract_in_worker(payload: tuple[str, str, float]) -> str | None | Outcome:
    """In a CPU worker (module level, pickled by reference): the answer an ``extract`` pattern reads in
    a long text (``payload``: the pattern, the text outside the reasoning, the match's timeout), bounded
    in time and in memory (:func:`.patterns.capped_last_match`), or the invalid outcome past either."""
    pattern, text, timeout_s = payload
    return capped_outcome(lambda: _span(capped_last_match(pattern, text, timeout_s=timeout_s)))


def _references(item: ScoreItem, reward: str, config: AnswerConfig) -> list[str] | Outcome:
    """The item's acceptable references ([] for an unanswerable question), or why it has none."""
    refs = answer_references(item.reference, config.empty_reference_unanswerable)
    if refs is not None:
        return refs
    if _blank(item.reference):
        return Outcome.invalid(
            Reason.MISSING_REFERENCE,
            f"{reward}: the reference is blank; if blank means an unanswerable question (SQuAD v2), "
            "set empty_reference_unanswerable",
        )
    return Outcome.invalid(Reason.MISSING_REFERENCE, f"{reward} needs a reference string")


def _settle(
    item: ScoreItem,
    refs: list[str],
    span: str | None,
    config: AnswerConfig,
    empty: dict[str, float | None] | None,
) -> tuple[list[str], str] | Outcome:
    """The references and span to compare, or the outcome that ends the item (see :func:`read_items`)."""
    if span is None:
        return Outcome(0.0, Reason.NO_ANSWER, components=dict(empty or {}), details={"extracted": None})
    if refs:
        return refs, span
    details: dict[str, object] = {"extracted": span, "unanswerable": True}
    if blank(span) and answer_span(item.response)[1] < len(item.response):
        # blank because the response ended inside its reasoning: it gave no answer, it did not abstain
        return Outcome(0.0, Reason.NO_ANSWER, components=dict(empty or {}), details=details)
    # as squad compares answers: no space beside a CJK character ("无法 回答" is "无法回答")
    phrases = {join_cjk(squad_normalize(p)) for p in config.no_answer_phrases}
    abstained = blank(span) or join_cjk(squad_normalize(span)) in phrases
    score = 1.0 if abstained else 0.0
    return Outcome(score, components=dict.fromkeys(empty or {}, score), details=details)


async def read_items(
    items: Sequence[ScoreItem],
    pattern: str | None,
    reward: Reward[Any],
    config: AnswerConfig,
    ctx: ScoreContext,
    empty: dict[str, float | None] | None = None,
) -> list[tuple[list[str], str] | Outcome]:
    """Each item's acceptable references and the response span to compare, or the outcome that ends it.

    Shared by exact_match and f1: a missing reference is invalid, a pattern that ran past its time budget
    (or found the call's shared budget spent) is a timeout, and a response where the pattern finds nothing
    is a valid 0 (no answer), with ``empty`` as its components. An unanswerable question ends here too:
    1 for an abstention, else 0, every component of ``empty`` equal to the score (SQuAD v2's F1 of no
    answer against no answer is 1, with precision and recall 1).

    A text too long to match on the event loop (:func:`.patterns.runs_inline`) is matched in a CPU worker,
    where the match may add ``MATCH_MEMORY_BYTES`` (past it the item is ``resource_limit``), as the
    ``regex`` reward matches one: ``(.)*`` on a 5 MB response grew the service by some 480 MB.
    """
    budget = MatchBudget(min(MATCH_TIMEOUT_S, ctx.deadline_s))  # a match runs inside the item's deadline
    rx = compile_pattern(pattern) if pattern is not None else None
    out: list[tuple[list[str], str] | Outcome | None] = [None] * len(items)
    todo: list[tuple[int, list[str]]] = []  # the long items, matched in the workers
    payloads: list[tuple[str, str, float]] = []
    for i, item in enumerate(items):
        refs = _references(item, reward.name, config)
        if isinstance(refs, Outcome):
            out[i] = refs
            continue
        if pattern is not None and rx is not None:
            text = answer_text(item.response)
            if not runs_inline(rx, text):  # its memory could be hundreds of MB: in a worker, capped
                todo.append((i, refs))
                payloads.append((pattern, text, budget.per_match_s))
                continue
        try:
            span = extract_span(item.response, pattern, budget)
        except PatternTimeout as exc:
            out[i] = Outcome.invalid(Reason.TIMEOUT, str(exc))
            continue
        out[i] = _settle(item, refs, span, config, empty)
    if payloads:
        results = await reward.runtime.cpu_pool.run(extract_in_worker, payloads, ctx.deadline_s)
        for (i, refs), res in zip(todo, results, strict=True):
            if not res.ok:
                out[i] = Outcome.pool_failure(res.error, res.message or res.error)
            elif isinstance(res.value, Outcome):
                out[i] = res.value
            else:
                out[i] = _settle(items[i], refs, res.value, config, empty)
    return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in out]


def _norm(text: str, cfg: ExactMatchConfig) -> str:
    if cfg.normalize == "whitespace":
        # NFKC, as squad's normalisation and majority_vote's whitespace do: full-width "Ｐａｒｉｓ" or
        # "４２" (CJK output), the ligature "ﬁ" are their ASCII forms; a zero-width space is no character
        text = " ".join(fold_forms(text).split())
    return text if cfg.case_sensitive else fold_case(text)


def _equal(span: str, ref: str, cfg: ExactMatchConfig) -> bool:
    if cfg.normalize == "squad":
        pred, key = squad_pair(span, ref)
        # compared as f1's tokens (MLQA's white_space_fix for Chinese): each CJK ideograph or kana a token,
        # so a space between two ("東京 タワー") is no difference, as it is none to f1 (1.0) either
        return pred == key or split_cjk(pred) == split_cjk(key)
    return _norm(span, cfg) == _norm(ref, cfg)


@register
class ExactMatchReward(Reward[ExactMatchConfig]):
    name: ClassVar[str] = "exact_match"
    # 1.1.1: an extract pattern searches the answer outside the reasoning, not drafts inside <think>
    # 1.1.2: a reference SQuAD normalises to nothing ("A", "The") is not matched by any answer that does;
    # squad drops Unicode punctuation (’ “ ” 。), not only ASCII's; the whitespace after </think> is
    # not compared (normalize "none")
    # 1.1.3: a SQuAD v2 unanswerable row (answer texts []) scores an abstention 1, any other answer 0 (it
    # was missing_reference); a blank reference ("") is missing_reference unless empty_reference_unanswerable
    # (an empty answer matched it, 1.0); the answers column alone ({"text": [...], "answer_start": [...]})
    # is read
    # 1.1.4: squad and whitespace drop invisible format characters (Cf: zero-width space, soft hyphen,
    # BOM...): "Par\u200bis" was not "Paris"; a reference of invisible characters only is blank
    # (missing_reference, or dropped among real answers), and so is such an answer (it abstains)
    # 1.1.5: an extract pattern's first group that took part in the match is compared: with alternatives,
    # "<answer>(.*?)</answer>|\\boxed\{(.*?)\}", group 1 was None for a boxed answer (no_answer, 0)
    # 1.1.6: whitespace is NFKC-normalised, as squad is: full-width "Ｐａｒｉｓ", "４２" and the ligature
    # "ﬁ" were not "Paris", "42", "fi" (none still compares as written); squad case-folds, as whitespace
    # does ("STRASSE" was not "Straße" under squad, though it was under whitespace); squad compares CJK
    # text as f1's tokens, as MLQA's EM does: "東京 タワー" was not "東京タワー", though its F1 was 1.0
    # 1.1.7: ignoring case, the capital dotted I is i (.text.fold_case): casefold wrote "İ" as "i" and a
    # combining dot, so "İstanbul" was not "istanbul" under squad, whitespace or none; a no-answer phrase
    # is compared as squad compares answers, a space between CJK characters none ("无法 回答" did not abstain)
    # 1.1.8: an extract pattern on a long response is matched in a CPU worker, resource_limit past 64 MB:
    # (.)* on a 5 MB response grew the service by 483 MB (then timed out), on 1 MB by 172 MB
    version: ClassVar[str] = "1.1.8"
    description: ClassVar[str] = "1 if the (extracted) response equals any reference after normalisation."
    config_model = ExactMatchConfig

    async def score(
        self, items: Sequence[ScoreItem], config: ExactMatchConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        out: list[Outcome] = []
        for read in await read_items(items, config.extract, self, config, ctx):
            if isinstance(read, Outcome):
                out.append(read)
                continue
            refs, span = read
            hit = next((r for r in refs if _equal(span, r, config)), None)
            out.append(Outcome(1.0 if hit is not None else 0.0, details={"extracted": span, "matched": hit}))
        return out
