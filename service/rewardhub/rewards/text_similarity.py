"""``text_similarity``: OpenAI's text-similarity grader as a reward, score in [0, 1].

Metrics (``metric``):

* ``fuzzy_match`` — normalised Indel similarity (rapidfuzz ``fuzz.ratio`` / 100);
* ``bleu`` — sentence BLEU-4 on whitespace tokens (each CJK ideograph or kana a token of its own, as
  sacrebleu's ``zh`` tokenizer splits them: a Chinese answer written without spaces was one token, so its
  BLEU was exact match), an n-gram order with no match counted as 0.1 matches
  (NLTK's ``method1`` smoothing), so short texts don't collapse to 0, and a response under four words
  weighed over the orders it has (NLTK's ``auto_reweigh``, sacrebleu's effective order): with the four
  orders, a copy of a one-word reference scored 0.18 and of a three-word one 0.56, never 1.0;
* ``gleu`` — Google-BLEU (NLTK ``sentence_gleu``), on BLEU's tokens;
* ``rouge_1`` … ``rouge_5``, ``rouge_l`` — ROUGE F-measure (Google's ``rouge-score``, no stemming), on
  case-folded Unicode words (after NFKC, so full-width ``ＰＡＲＩＳ`` is ``paris``, and without invisible
  format characters such as a zero-width space; a word keeps its combining marks, Devanagari's vowel signs,
  Arabic's harakat), each CJK character a word of its own (``rouge-score``'s own tokenizer keeps
  only ``[a-z0-9]``: a Russian or Chinese answer had no tokens and scored 0.0 against itself);
* ``cosine`` — embedding cosine, delegated to the ``similarity`` reward (a local embedding model) when it
  is available, else invalid ``unsupported``;
* ``meteor`` — needs the WordNet corpus, which is not shipped offline; used when NLTK can load it,
  otherwise invalid ``unsupported`` (never a silent 0).

The response is read outside its reasoning, as the hosted grader reads ``output_text``: after its last
``</think>`` and before a ``<think>`` that never closes (:func:`~.text.answer_text`).

Reference: a string, ``{"text": ...}``/``{"answer": ...}``, or a list of strings (several acceptable
answers: the best one counts, ``details.best_reference`` says which), as for ``similarity``. A blank
reference (``""``, ``[""]``, ``{"text": ""}``) is no reference (``missing_reference``, as for
``exact_match`` and ``string_check``), and a blank beside real texts (``["Paris", ""]``) is dropped
(``details.best_reference`` and ``details.scores``, null for it, count positions in the list as written): compared as written, an empty response scored 1.0 against it, a
row whose gold was lost rewarding a policy for saying nothing. ``compare_blank_reference`` compares it
as written, as OpenAI documents its grader (a reference string, no exception for an empty one), and
the ``/compat/openai`` graders route sets it, so that a grader carried over from OpenAI scores as there
and a ``multi`` grader is not failed whole by one sub-grader's empty ``{{ item.x }}``. ``cosine`` refuses a blank reference whatever the setting (``similarity`` does): an
embedding of nothing stands for no meaning to compare with.

Where it runs: ROUGE-L and METEOR align every word of the response with every word of the reference,
pure Python, so their cost grows with the product of the lengths (3,000 words against 3,000: 3.6 s). A
request whose estimated work (:func:`_cost`) is small is scored inline; a bigger one goes to the CPU
worker pool as one batch, each item under the request's deadline (an item past it is ``timeout``), so
long texts never hold the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, ClassVar, Literal

import regex
from pydantic import Field

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.similarity import no_reference, reference_texts
from rewardhub.rewards.text import CJK_SCRIPTS, answer_text, fold_case, fold_forms, split_cjk

__all__ = ["TextSimilarityConfig", "TextSimilarityReward", "similarity_score"]

Metric = Literal[
    "fuzzy_match",
    "bleu",
    "gleu",
    "meteor",
    "cosine",
    "rouge_1",
    "rouge_2",
    "rouge_3",
    "rouge_4",
    "rouge_5",
    "rouge_l",
]


class TextSimilarityConfig(RewardConfig):
    metric: Metric = Field("fuzzy_match", description="The similarity metric (see the reward's description).")
    compare_blank_reference: bool = Field(
        False,
        description="A blank reference ('', [''], {'text': ''}) is a data error (missing_reference) by "
        "default: an empty response would score 1.0 against it. true compares it as written, as OpenAI's "
        "hosted grader does (the /compat/openai graders route sets it); not for cosine.",
    )


# CJK ideographs (all of \p{Han}: 々, the extensions past the BMP) and kana: written without spaces, one
# word each (as sacrebleu's zh tokenizer does, and as f1's and bleu's tokens are: text.split_cjk); every
# other run of letters, digits and combining marks is one word. (A code point range held the punctuation
# ・ and ゠, words of their own.)
# The ``regex`` engine's \w holds the marks (Mn, Mc), ``re``'s does not: a Hindi or vowelled Arabic word
# was cut at each vowel sign or haraka ("नमस्ते" two words, "مَرْحَبًا" five).
_WORD = regex.compile(f"[{CJK_SCRIPTS}]|[^\\W_{CJK_SCRIPTS}]+")


class _UnicodeTokenizer:
    """ROUGE's words: case-folded runs of Unicode letters and digits, read after NFKC and without invisible
    format characters, as exact_match and f1 read text. On ASCII text the same words as ``rouge-score``'s
    default, which drops every other character (``"кошка"`` had no words at all); full-width
    ``"ＰＡＲＩＳ"``, the ligature in ``"ﬁsh"`` and ``"Par\u200bis"`` (a zero-width space) were other
    words than ``"paris"``, ``"fish"``, and "STRASSE" (lower-cased, not case-folded) than "Straße"; case is
    folded as :func:`.text.fold_case` folds it ("İstanbul" is "istanbul")."""

    def tokenize(self, text: str) -> list[str]:
        if not text.isascii():
            text = fold_forms(text)
        return _WORD.findall(fold_case(text))


@lru_cache(maxsize=8)
def _rouge(kind: str) -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer([kind], use_stemmer=False, tokenizer=_UnicodeTokenizer())


@lru_cache(maxsize=1)
def _wordnet_available() -> bool:
    try:
        from nltk.corpus import wordnet

        wordnet.ensure_loaded()
        return True
    except (LookupError, OSError):
        return False


# Work (about one per word pair for the aligning metrics, one per character for the others) a request
# may do on the event loop; about 50 ms. Above it the batch goes to the CPU workers.
_INLINE_WORK = 100_000
_ALIGNING = frozenset({"rouge_l", "meteor"})


def _words(metric: str, text: str) -> int:
    """The number of words the aligning metric reads: ROUGE's tokens (each CJK character one, words on
    separate lines too), METEOR's whitespace words. Counting spaces took a CJK text or one word a line
    for a single word, and aligned 5,000 against 5,000 on the event loop."""
    if metric == "meteor":
        return len(text.split()) + 1
    return sum(1 for _ in _WORD.finditer(text)) + 1


def _cost(metric: str, text: str, refs: Sequence[str]) -> int:
    """Rough work of one item: words x words for the aligning metrics, characters for the others."""
    if metric in _ALIGNING:
        n = _words(metric, text)
        return sum(n * _words(metric, r) for r in refs)
    return len(text) + sum(len(r) for r in refs)


def best_similarity(payload: tuple[str, str, tuple[str, ...]]) -> list[float | None]:
    """``similarity_score`` of the response against each reference (a CPU-pool task: module level)."""
    metric, text, refs = payload
    return [similarity_score(metric, text, ref) for ref in refs]


def similarity_score(metric: str, text: str, reference: str) -> float | None:
    """The metric in [0, 1], or None when this metric cannot be computed here (meteor without WordNet)."""
    if metric == "fuzzy_match":
        from rapidfuzz import fuzz

        return float(fuzz.ratio(text, reference)) / 100.0
    if metric == "bleu":
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

        hyp, ref = split_cjk(text), split_cjk(reference)
        if not hyp or not ref:
            return 1.0 if hyp == ref else 0.0
        smoothing = SmoothingFunction().method1
        return float(sentence_bleu([ref], hyp, smoothing_function=smoothing, auto_reweigh=True))
    if metric == "gleu":
        from nltk.translate.gleu_score import sentence_gleu

        hyp, ref = split_cjk(text), split_cjk(reference)
        if not hyp or not ref:
            return 1.0 if hyp == ref else 0.0
        return float(sentence_gleu([ref], hyp))
    if metric.startswith("rouge_"):
        kind = "rougeL" if metric == "rouge_l" else f"rouge{metric[-1]}"
        return float(_rouge(kind).score(reference, text)[kind].fmeasure)
    if metric == "meteor":
        if not _wordnet_available():
            return None
        from nltk.translate.meteor_score import meteor_score

        return float(meteor_score([reference.split()], text.split()))
    raise ValueError(f"unknown metric {metric!r}")


@register
class TextSimilarityReward(Reward[TextSimilarityConfig]):
    name: ClassVar[str] = "text_similarity"
    # 1.1: ROUGE reads Unicode words (non-ASCII text scored 0.0); lists and {"text": ...} references; a
    # blank reference is invalid (was 1.0 for an empty response)
    # 1.1.1: the answer outside the reasoning is scored, not the reasoning's words too
    # 1.1.2: a blank reference is missing_reference (was parse_error) unless compare_blank_reference; a
    # blank beside real texts (["Paris", ""]) is dropped (the list was parse_error), positions kept in details
    # 1.1.3: bleu weighs a response under four words over the n-gram orders it has: a copy of a short
    # reference scored 0.18 (one word) to 0.56 (three), a reward whose 1.0 short answers never reached;
    # bleu and gleu read each CJK ideograph or kana as a token (a Chinese answer was one: exact match)
    # 1.1.4: ROUGE reads words after NFKC, case-folded and without invisible format characters: full-width
    # "ＰＡＲＩＳ", "ﬁsh", "Par\u200bis" and "STRASSE" were other words than "paris", "fish", "straße";
    # a word keeps its combining marks (a Devanagari or vowelled Arabic word was cut at each one); bleu
    # and gleu read the prolonged sound mark ー as a kana token, as ROUGE does (it was glued to "W" in "ーW");
    # ROUGE's CJK words are f1's: the punctuation ・ was a word, an ideograph past the BMP glued to the next
    # 1.1.5: ROUGE folds the capital dotted I to i (.text.fold_case): casefold wrote "İ" as "i" and a
    # combining dot, so "İstanbul" was another word than "istanbul"
    version: ClassVar[str] = "1.1.5"
    description: ClassVar[str] = (
        "OpenAI text_similarity grader: fuzzy_match, bleu, gleu, rouge_1..5, rouge_l, cosine (via `similarity`), meteor."
    )
    config_model = TextSimilarityConfig

    def is_cacheable(self, config: TextSimilarityConfig) -> bool:
        # cosine delegates to another reward (its model), whose version is not part of this key
        return config.metric != "cosine"

    def unavailable_for(self, config: TextSimilarityConfig) -> str | None:
        """meteor without WordNet, or cosine without a ``similarity`` that can run: every item would come
        back ``unsupported``, so ``POST /v1/rewards/check`` says so before a run starts on them."""
        if config.metric == "meteor" and not _wordnet_available():
            return (
                "meteor needs the NLTK WordNet corpus, which this server does not have (download it into "
                "a directory on NLTK_DATA: python -m nltk.downloader wordnet), or choose another `metric`"
            )
        if config.metric == "cosine":
            registry = self.runtime.reward_registry()
            if "similarity" not in registry.names():
                return "cosine needs the `similarity` reward, which this server does not have"
            similarity = registry.get("similarity")
            why = similarity.unavailable_for(similarity.parse_config({}))
            if why is not None:
                return f"cosine needs the `similarity` reward, which cannot run here: {why}"
        return None

    def timeout_for(self, config: TextSimilarityConfig) -> float | None:
        """cosine is a model call: the ``similarity`` reward's deadline (60 s), not the rule verifiers'
        ``REWARDHUB_ITEM_TIMEOUT_S``, under which the first cosine after a start timed out while the
        embedded MiniLM loaded (5-6 s on a 2-core machine) although ``similarity`` itself waited."""
        if config.metric == "cosine":
            registry = self.runtime.reward_registry()
            if "similarity" in registry.names():
                similarity = registry.get("similarity")
                return similarity.timeout_for(similarity.parse_config({}))
        return super().timeout_for(config)

    async def score(
        self, items: Sequence[ScoreItem], config: TextSimilarityConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        if config.metric == "cosine":
            return await self._cosine(items, ctx)
        out: list[Outcome | None] = [None] * len(items)
        todo: list[int] = []
        payloads: list[tuple[str, str, tuple[str, ...]]] = []
        # each item's kept references' positions in its list as written, and the list's length
        positions: list[tuple[list[int], int]] = []
        for i, item in enumerate(items):
            refs = reference_texts(item.reference, keep_blank=config.compare_blank_reference)
            if refs is None:
                hint = "; to compare it as written, set compare_blank_reference"
                out[i] = no_reference(self.name, item.reference, hint)
                continue
            todo.append(i)
            kept = [(n, t) for n, t in enumerate(refs) if t is not None]
            positions.append(([n for n, _ in kept], len(refs)))
            payloads.append((config.metric, answer_text(item.response), tuple(t for _, t in kept)))
        if sum(_cost(m, text, refs) for m, text, refs in payloads) <= _INLINE_WORK:
            for i, payload, where in zip(todo, payloads, positions, strict=True):
                out[i] = self._outcome(config, best_similarity(payload), *where)
        elif payloads:
            results = await self.runtime.cpu_pool.run(best_similarity, payloads, ctx.deadline_s)
            for i, res, where in zip(todo, results, positions, strict=True):
                out[i] = (
                    self._outcome(config, res.value, *where)
                    if res.ok
                    else Outcome.pool_failure(res.error, res.message or res.error)
                )
        return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in out]

    @staticmethod
    def _outcome(
        config: TextSimilarityConfig, values: list[float | None], positions: list[int], size: int
    ) -> Outcome:
        """The item's outcome from its scores against each kept reference (None: the metric cannot run
        here), ``positions`` theirs in the reference's list of ``size`` as written: a dropped blank's
        score in ``details.scores`` is null, and ``best_reference`` counts it."""
        if any(v is None for v in values):
            # this server's lack: a composite zeroing it must not cache the 0
            return Outcome.invalid(
                Reason.UNSUPPORTED, "meteor needs the NLTK WordNet corpus, not installed", transient=True
            )
        scores = [v for v in values if v is not None]
        best = max(scores)
        details: dict[str, Any] = {"metric": config.metric, "best_reference": positions[scores.index(best)]}
        if size > 1:
            by_position: list[float | None] = [None] * size
            for n, v in zip(positions, scores, strict=True):
                by_position[n] = round(v, 6)
            details["scores"] = by_position
        return Outcome(best, details=details)

    async def _cosine(self, items: Sequence[ScoreItem], ctx: ScoreContext) -> list[Outcome]:
        registry = self.runtime.reward_registry()
        if "similarity" not in registry.names():
            return [
                Outcome.invalid(Reason.UNSUPPORTED, "cosine needs the `similarity` reward") for _ in items
            ]
        similarity = registry.get("similarity")
        answers = [it.model_copy(update={"response": answer_text(it.response)}) for it in items]
        outcomes = await similarity.score(answers, similarity.parse_config({}), ctx)
        for o in outcomes:
            if o.score is not None:
                o.score = max(0.0, min(1.0, o.score))
        return outcomes
