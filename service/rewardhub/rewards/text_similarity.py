"""``text_similarity``: OpenAI's text-similarity grader as a reward, score in [0, 1].

Metrics (``metric``):

* ``fuzzy_match`` — normalised Indel similarity (rapidfuzz ``fuzz.ratio`` / 100);
* ``bleu`` — sentence BLEU-4 on whitespace tokens with add-one smoothing (NLTK ``method1``), so short
  texts don't collapse to 0;
* ``gleu`` — Google-BLEU (NLTK ``sentence_gleu``);
* ``rouge_1`` … ``rouge_5``, ``rouge_l`` — ROUGE F-measure (Google's ``rouge-score``, no stemming), on
  lower-cased Unicode words, each CJK character a word of its own (``rouge-score``'s own tokenizer keeps
  only ``[a-z0-9]``: a Russian or Chinese answer had no tokens and scored 0.0 against itself);
* ``cosine`` — embedding cosine, delegated to the ``similarity`` reward (a local embedding model) when it
  is available, else invalid ``unsupported``;
* ``meteor`` — needs the WordNet corpus, which is not shipped offline; used when NLTK can load it,
  otherwise invalid ``unsupported`` (never a silent 0).

Reference: a string, ``{"text": ...}``/``{"answer": ...}``, or a list of strings (several acceptable
answers: the best one counts, ``details.best_reference`` says which), as for ``similarity``. A blank
reference is no reference (invalid ``parse_error``): an empty response scored 1.0 against it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, ClassVar, Literal

from pydantic import Field

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.similarity import no_reference, reference_texts

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


# CJK ideographs, kana and compatibility ideographs: written without spaces, one word each (as
# sacrebleu's zh tokenizer does); every other run of letters and digits is one word.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")


class _UnicodeTokenizer:
    """ROUGE's words: lower-cased runs of Unicode letters and digits. On ASCII text the same words as
    ``rouge-score``'s default, which drops every other character (``"кошка"`` had no words at all)."""

    def tokenize(self, text: str) -> list[str]:
        return _WORD.findall(text.lower())


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


def similarity_score(metric: str, text: str, reference: str) -> float | None:
    """The metric in [0, 1], or None when this metric cannot be computed here (meteor without WordNet)."""
    if metric == "fuzzy_match":
        from rapidfuzz import fuzz

        return float(fuzz.ratio(text, reference)) / 100.0
    if metric == "bleu":
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

        hyp, ref = text.split(), reference.split()
        if not hyp or not ref:
            return 1.0 if hyp == ref else 0.0
        return float(sentence_bleu([ref], hyp, smoothing_function=SmoothingFunction().method1))
    if metric == "gleu":
        from nltk.translate.gleu_score import sentence_gleu

        hyp, ref = text.split(), reference.split()
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
    version: ClassVar[str] = "1.1.0"
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
        out = []
        for item in items:
            refs = reference_texts(item.reference)
            if refs is None:
                out.append(no_reference(self.name, item.reference))
                continue
            values = [similarity_score(config.metric, item.response, ref) for ref in refs]
            if any(v is None for v in values):
                # this server's lack: a composite zeroing it must not cache the 0
                out.append(
                    Outcome.invalid(
                        Reason.UNSUPPORTED,
                        "meteor needs the NLTK WordNet corpus, not installed",
                        transient=True,
                    )
                )
                continue
            scores = [v for v in values if v is not None]
            best = max(scores)
            details: dict[str, Any] = {"metric": config.metric, "best_reference": scores.index(best)}
            if len(scores) > 1:
                details["scores"] = [round(v, 6) for v in scores]
            out.append(Outcome(best, details=details))
        return out

    async def _cosine(self, items: Sequence[ScoreItem], ctx: ScoreContext) -> list[Outcome]:
        registry = self.runtime.reward_registry()
        if "similarity" not in registry.names():
            return [
                Outcome.invalid(Reason.UNSUPPORTED, "cosine needs the `similarity` reward") for _ in items
            ]
        similarity = registry.get("similarity")
        outcomes = await similarity.score(items, similarity.parse_config({}), ctx)
        for o in outcomes:
            if o.score is not None:
                o.score = max(0.0, min(1.0, o.score))
        return outcomes
