"""``prm``: a process reward model scores every reasoning step; one aggregate is the reward.

The response (after a ``<think>`` block by default, and none of a block that never closes) is split
into steps (``separator``, default a blank line, or a regular expression ``pattern``), each step keeps
its character span, and the PRM's input is built in the model's own convention (``qwen``:
Qwen2.5-Math-PRM, ``<extra_0>`` after each step, the positive-class probability; ``math_shepherd``:
``ки`` after each step, softmax over the ``+``/``-`` logits; ``skywork``: Skywork-o1-Open-PRM, each line
a step, tokenized on its own and followed by a newline, the sigmoid of its value head there;
``rlhflow``: RLHFlow's Llama3.1-8B-PRM-Mistral/-Deepseek-Data, a chat of one user turn per step (the
question before the first) each answered by an assistant ``+``, in the model's chat template, softmax
over the ``+``/``-`` logits where the model predicts each ``+``, all steps from one forward pass; on a
transformers backend only; ``implicit``: an implicit PRM as in PRIME, a causal LM ``pi_phi`` and its
reference ``pi_ref`` (backend ``reference_backend``, default ``prm_ref``: ``REWARDHUB_PRM_REF_MODEL``),
no tags: step k's process reward is ``r_k = beta * (log pi_phi(step k | before) - log pi_ref(step k |
before))``, summed over its tokens, and its score the implicit Q-value ``sigmoid(r_1 + ... + r_k)``, the
model's probability that the response is correct given its first k steps; ``last`` is PRIME's outcome
probability ``sigmoid(beta log pi_phi(y) / pi_ref(y))``, and ``details.steps`` has each step's
``process_reward`` (the dense reward PRIME's advantage sums) and ``q``). The question comes from ``prompt``.

The backend is named by ``backend`` (default ``prm``: ``REWARDHUB_PRM_MODEL`` +
``REWARDHUB_PRM_CONVENTION``, or ``REWARDHUB_PRM_URL`` for a vLLM ``/pooling`` server). Items from
concurrent requests share forward passes through the backend's micro-batcher. Splitting is pure Python:
a request of more than ~10,000 pieces is split in the CPU workers, each item under the deadline.

Result: ``score`` is the ``aggregation`` (``min`` default, ``prod``, ``last``, ``mean``, ``first_error``
with ``threshold``: the fraction of steps before the first step below it; ``soft_min`` with
``temperature``: PURE's min-form credit on ``2 s - 1``, in [-1, 1], whose per-step rewards are each step's
``reward`` in ``details.steps``); ``components`` has every aggregate; ``details.steps`` lists ``{index, start, end, score}`` per step, ``details.first_error`` the
0-based index of the first step below ``threshold`` (-1 if none, ProcessBench's prediction; of the
merged groups when there were more than ``max_steps`` steps, ``details.steps_before_merge`` of them). A step
that is only step tags, control-token strings (``<extra_0>``, ``<|im_end|>``, and whatever else the
backend's tokenizer reads as a special token: ``<pad>``, ``<unk>``) and invisible format characters (a
zero-width space) is no step: the model would score it
as an empty one, a score for writing nothing. A step that says nothing (``filler_steps`` ``skip``, the
default: "Let me think.", "Step 2:", "I hope it is correct." in any language, by the judge's
content-free check, or only a sign-off, "Thank you.", unless the question holds it; never one that
states a relation, ``=``) stays in the model's input and in ``details.steps`` (``filler: true``, its index
still the paragraph's), but no aggregate counts it: a PRM finds nothing wrong in it, so padding raised
``mean``, set ``last`` and delayed ``first_error``. A response with no step left (empty, or
only such strings or filler) is a valid 0 (``no_answer``), every aggregate at its floor in ``components`` (0, and
-1 for ``soft_min``, whose 0 is a middling step) and
``details.first_error`` 0 (no step before the first error); an input longer than the model's context is
``unsupported``; a failed or slow model is ``backend_error`` / ``timeout``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from rewardhub.aio import gather_all
from rewardhub.errors import InvalidRequest
from rewardhub.judging.hardening import HTML_TAG, RELATION, content_free, signs_off
from rewardhub.models.base import Capability, ModelBackend, StepQuery
from rewardhub.models.errors import BackendError, BackendUnavailable
from rewardhub.models.specials import Scrubber
from rewardhub.prm import CONVENTIONS, Aggregation, PRMConvention, Step, split_steps
from rewardhub.prm.aggregate import AGGREGATIONS, FLOORS, summarize
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, RewardConfig, ScoreContext, register
from rewardhub.rewards.model_backed import ModelReward, deadline_of, failure, finite, identity_digest
from rewardhub.rewards.patterns import (
    MATCH_TIMEOUT_S,
    MatchBudget,
    PatternTimeout,
    capped_match,
    capped_outcome,
    compile_pattern,
    runs_inline,
    validate_pattern,
)
from rewardhub.runtime.process_pool import ProcessPool

__all__ = ["PRMConfig", "PRMReward"]


class PRMConfig(RewardConfig):
    backend: str = Field("prm", min_length=1, description="Name of the model backend (see REWARDHUB_PRM_*).")
    convention: Literal["qwen", "math_shepherd", "skywork", "rlhflow", "implicit"] | None = Field(
        None,
        description="Input format of the PRM; default: the backend's (REWARDHUB_PRM_CONVENTION), else qwen.",
    )
    separator: str | None = Field(
        None,
        min_length=1,
        description="Steps are separated by this string; default a blank line (a newline for skywork).",
    )
    pattern: str | None = Field(
        None,
        max_length=500,
        description=(
            "Split on matches of this regular expression instead of `separator` (not both); an empty match "
            "splits too, as in re.split ((?=Step \\d+:) splits before each label). `.` does not match a "
            "newline (as in re.split); start the pattern with (?s) for that."
        ),
    )
    skip_think: bool = Field(
        True,
        description="Score only the text after the last </think> (and before a <think> that never closes).",
    )
    max_steps: int = Field(64, ge=1, le=512, description="More steps are merged into this many groups.")
    aggregation: Aggregation = Field("min", description="min | prod | last | mean | first_error | soft_min.")
    threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="τ of first_error (a step below it is an error)."
    )
    temperature: float = Field(
        0.1,
        ge=0.001,
        le=100.0,
        description="T of soft_min (PURE uses 0.1): lower is closer to the hard min of 2 s - 1.",
    )
    filler_steps: Literal["skip", "count"] = Field(
        "skip",
        description=(
            'skip: a step that says nothing ("Let me think.", "Step 2:", "I hope it is correct.", in '
            'any language; up to 200 characters; a sign-off, "Thank you.", unless the question holds it; '
            "never one with =, <) is scored in context but left out of the aggregate and "
            "first_error, and a response of only such steps is no_answer; count: aggregate it as any step."
        ),
    )

    reference_backend: str = Field(
        "prm_ref",
        min_length=1,
        description="implicit: the backend of the reference model pi_ref (see REWARDHUB_PRM_REF_MODEL).",
    )
    beta: float = Field(
        0.05,
        gt=0.0,
        le=10.0,
        description="implicit: beta of the reward beta * log pi_phi / pi_ref (PRIME trains with 0.05).",
    )

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str | None) -> str | None:
        return validate_pattern(v) if v is not None else None

    @model_validator(mode="after")
    def _one_splitter(self) -> PRMConfig:
        # Both given, the pattern would win and the separator be silently ignored.
        if self.pattern is not None and "separator" in self.model_fields_set:
            raise ValueError("separator and pattern exclude each other: give one of them")
        if self.implicit_only and self.convention not in (None, "implicit"):
            raise ValueError(f"{' and '.join(self.implicit_only)} apply to convention implicit only")
        return self

    @property
    def implicit_only(self) -> list[str]:
        """The fields given that only the implicit convention reads (sorted)."""
        return sorted({"beta", "reference_backend"} & self.model_fields_set)


def _whole_lines(text: str, steps: list[Step]) -> list[str]:
    """The steps with the blanks around them (spaces, tabs) that the split trimmed: Skywork's recipe
    tokenizes each line of ``response.split("\n")`` as written, and "    x = 5" tokenized as "x = 5" is
    an input the model was not scored on (an indented line's score differed). Spans stay trimmed."""
    out: list[str] = []
    floor = 0
    for k, s in enumerate(steps):
        ceil = steps[k + 1].start if k + 1 < len(steps) else len(text)
        a, b = s.start, s.end
        while a > floor and text[a - 1] in " \t":
            a -= 1
        while b < ceil and text[b] in " \t":
            b += 1
        out.append(text[a:b])
        floor = b
    return out


@register
class PRMReward(ModelReward[PRMConfig]):
    name: ClassVar[str] = "prm"
    # 1.2: a question that reaches the model empty is missing; an empty pattern match splits (re.split)
    # 1.3: a native token classifier with trust_remote_code keeps its head (scored noise, now cached apart)
    # 1.4: an infinite step logit is a backend_error (the softmax made it a certain 0.0 or 1.0); a step
    # tag written at a step's edge leaves no space behind in the model input
    # 1.5: a step (or question) of only the tokenizer's own special tokens ("<pad>") is none, as an empty
    # one; a <think> that never closes is skipped (a rollout cut off in its reasoning has no steps);
    # math_shepherd does not label a step that carries its own "Step k:" twice
    # 1.6: a response with no steps has every aggregate (0) in components, and details.first_error 0
    # 1.7: vLLM /pooling probabilities rounded to bf16 are not soft-maxed a second time (0.35 read 0.43);
    # the aggregates and first_error come from the step scores as details show them (6 decimals)
    # 1.8.0: soft_min (PURE's min-form credit, in [-1, 1]) with per-step rewards; no steps: soft_min -1;
    # convention skywork (value head, steps are lines)
    # 1.9.0: convention rlhflow (RLHFlow's multi-turn +/- PRMs, read before each assistant "+")
    # 1.9.1: a skywork PRM named by hub id reads its value head from the cached snapshot; skywork steps
    # keep their lines' indentation and trailing blanks in the model input, as Skywork's recipe does
    # 1.10.0: convention implicit (PRIME's implicit PRM: beta log-likelihood ratios against a reference)
    # 1.10.1: steps merged to max_steps are said (details.steps_before_merge): such an item is no
    # ProcessBench prediction (its first_error counts groups), and a cached one must say so too;
    # implicit: a token opening the first step with the blank before it (" The") is the step's;
    # a control-token string at a step's edge ("5.\n<|im_end|>") leaves no blank in the model input
    # 1.10.2: a step, response or question of only invisible format characters (a zero-width space) is
    # none, as everywhere else (it was a scored step, and such a response was scored, not no_answer)
    # 1.10.3: a step pattern on a long response is matched in a CPU worker, resource_limit past 64 MB (as
    # the regex reward's match): (.)* held hundreds of MB in the service
    # 1.11.0: filler_steps (default skip): a step that says nothing ("Let me think.") is left out of the
    # aggregates and first_error (padding raised mean and last, and moved first_error towards 1), and a
    # response of only such steps is no_answer; so is a sign-off ("Thank you.") the question does not hold
    # 1.11.1: a step that relates single letters with a sign only the content check reads as one (the
    # full-width "A ＝ a", NFKC's "=") was filler: content_free now reads such relations as content; a
    # letter's relation with itself ("So a ＝ a.") it reads as none, and that step is filler, as in 1.11.0
    version: ClassVar[str] = "1.11.1"
    description: ClassVar[str] = (
        "Process reward model: per-step scores with character spans and one aggregate (min, prod, last, "
        "mean, first_error, PURE soft_min); Qwen2.5-Math-PRM, Math-Shepherd, Skywork, RLHFlow and implicit (PRIME) "
        "conventions; in process or vLLM /pooling."
    )
    config_model = PRMConfig
    reads = ("prompt", "response")
    default_backend: ClassVar[str] = "prm"
    capability: ClassVar[Capability] = "steps"

    def _convention(self, config: PRMConfig) -> str:
        if config.convention is not None:
            return config.convention
        hub = self.runtime.models
        declared = hub.conventions.get(self.backend_name(config)) if hub is not None else None
        return declared or "qwen"

    def parse_config(self, raw: dict[str, Any]) -> PRMConfig:
        config = super().parse_config(raw)
        # PRMConfig refuses beta with another convention named; one defaulted from the backend too
        implicit_only = config.implicit_only
        name = self.backend_name(config)
        conv = self._convention(config)
        if implicit_only and config.convention is None and conv != "implicit" and self._why_not(name) is None:
            raise InvalidRequest(
                f"{self.name}: reward.config: {' and '.join(implicit_only)} apply to convention implicit "
                f"only, and backend {name!r} serves convention {conv}: set convention implicit, or leave "
                f"{' and '.join(implicit_only)} out",
                param=f"reward.config.{implicit_only[0]}",
            )
        return config

    def version_for(self, config: PRMConfig) -> str:
        # The convention changes the model's input, so it is part of the identity even when defaulted.
        version = f"{super().version_for(config)}+{self._convention(config)}"
        ref = self._reference(config)
        if isinstance(ref, ModelBackend):  # an implicit PRM's scores are as much the reference's
            version += f"+{identity_digest(ref)}"
        return version

    def _reference(self, config: PRMConfig) -> ModelBackend | BackendUnavailable | None:
        """The reference model of an implicit PRM (None for every other convention), or why not."""
        if self._convention(config) != "implicit":
            return None
        try:
            return self._capable_backend(config.reference_backend)
        except BackendUnavailable as exc:
            return exc

    def unavailable(self) -> str | None:
        # the catalog's answer is the default config's, the reference of an implicit PRM included
        return self.unavailable_for(PRMConfig())

    def unavailable_for(self, config: PRMConfig) -> str | None:
        ref = self._reference(config)
        why = str(ref) if isinstance(ref, BackendUnavailable) else None
        return super().unavailable_for(config) or why

    def is_cacheable(self, config: PRMConfig) -> bool:
        ref = self._reference(config)
        return super().is_cacheable(config) and (not isinstance(ref, ModelBackend) or ref.identity_settled)

    async def score(self, items: Sequence[ScoreItem], config: PRMConfig, ctx: ScoreContext) -> list[Outcome]:
        deadline = deadline_of(ctx)
        try:
            backend = self.backend(config)
        except BackendUnavailable as exc:
            return [failure(exc) for _ in items]
        conv = CONVENTIONS[self._convention(config)]
        ref = self._reference(config)
        if isinstance(ref, BackendUnavailable):
            return [failure(ref) for _ in items]
        try:
            clean = await backend.cleaner(deadline)  # what its tokenizer removes (a model process's)
        except BackendError as exc:
            return [failure(exc) for _ in items]
        blank = partial(conv.blank, clean=clean)
        filler = partial(filler_step, conv=conv, clean=clean) if config.filler_steps == "skip" else None
        outcomes: list[Outcome | None] = [None] * len(items)
        queries: list[StepQuery] = []
        todo: list[tuple[int, list[Step]]] = []
        split = partial(
            split_steps,
            separator=config.separator if config.separator is not None else conv.separator,
            pattern=config.pattern,
            skip_think=config.skip_think,
            max_steps=config.max_steps,
            blank=blank,
            filler=filler,
        )
        asked = [i for i, item in enumerate(items) if item.prompt and not blank(item.prompt)]
        for i in sorted(set(range(len(items))) - set(asked)):  # "<|im_end|>" alone reaches it as ""
            outcomes[i] = Outcome.invalid(Reason.UNSUPPORTED, "prm needs the question in `prompt`")
        splits = await self._split(items, asked, split, config, deadline)
        for i in asked:
            item = items[i]
            got = splits[i]
            if isinstance(got, Outcome):
                outcomes[i] = got
                continue
            steps = got
            if not steps:
                outcomes[i] = self._no_steps(config)
                continue
            if filler is not None:
                assert item.prompt is not None  # asked: the items with a question
                steps = _signed_off(steps, item.prompt, conv, clean)
            if all(s.filler for s in steps):  # "Let's solve this step by step." and nothing else
                outcomes[i] = self._no_steps(config, "no steps to score: every step says nothing")
                continue
            if ref is not None:
                texts = _as_written(item.response, steps)
            elif conv.tag_in_text:
                texts = [s.text for s in steps]
            else:
                texts = _whole_lines(item.response, steps)
            assert item.prompt is not None  # asked: the items with a question
            queries.append(conv.query(item.prompt, texts, clean))
            todo.append((i, steps))
        if queries and ref is not None:
            pairs = await _likelihoods(backend, ref, queries, deadline)
            for (i, steps), pair in zip(todo, pairs, strict=True):
                outcomes[i] = pair if isinstance(pair, Outcome) else self._implicit(config, steps, *pair)
        elif queries:
            results = await _step_scores(backend, queries, deadline)
            for (i, steps), res in zip(todo, results, strict=True):
                outcomes[i] = (
                    failure(res) if isinstance(res, BackendError) else self._outcome(config, steps, res)
                )
        return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in outcomes]

    async def _split(
        self,
        items: Sequence[ScoreItem],
        asked: list[int],
        split: partial[list[Step]],
        config: PRMConfig,
        deadline: float,
    ) -> dict[int, list[Step] | Outcome]:
        """The steps of the ``asked`` items' responses (or why not). Splitting is pure Python, some µs a
        piece: a batch of more than ``_INLINE_PIECES`` pieces is split in the CPU workers, each item
        under the request's deadline; a caller's pattern runs here, every item drawing on one match
        budget (which bounds the request's time), but on a long response (:func:`.patterns.runs_inline`)
        in the workers under the ``regex`` reward's memory cap: ``(.)*`` on a 5 MB response grew the
        service by hundreds of MB within its 0.5 s."""
        out: dict[int, list[Step] | Outcome] = {}
        separator = split.keywords["separator"]
        texts = [items[i].response for i in asked]
        checked = split.keywords.get("filler") is not None  # ~0.5 µs a character (content_free)
        if config.pattern is None and (
            splits_off_loop(texts, separator) or (checked and sum(map(len, texts)) > _FILLER_INLINE_CHARS)
        ):
            got = await split_in_workers(self.runtime.cpu_pool, texts, split.keywords, deadline)
            return dict(zip(asked, got, strict=True))
        # each match inside what is left of the request's deadline, as the split in the workers is
        budget = MatchBudget(min(MATCH_TIMEOUT_S, max(0.001, deadline - time.monotonic())))
        rx = compile_pattern(config.pattern, dotall=False) if config.pattern is not None else None
        long: list[int] = []  # a pattern's long texts, split in the workers under a memory cap
        for i in asked:
            try:
                if config.pattern is None:
                    out[i] = split(items[i].response)
                elif rx is not None and not runs_inline(rx, items[i].response):
                    long.append(i)
                else:
                    out[i] = budget.run(config.pattern, _timed(split), items[i].response)
            except PatternTimeout as exc:
                out[i] = Outcome.invalid(Reason.TIMEOUT, str(exc))
        if long:
            payloads = [(items[i].response, split.keywords, budget.per_match_s) for i in long]
            results = await self.runtime.cpu_pool.run(
                split_capped_in_worker, payloads, max(0.001, deadline - time.monotonic())
            )
            for i, res in zip(long, results, strict=True):
                out[i] = res.value if res.ok else Outcome.pool_failure(res.error, res.message or res.error)
        return out

    @staticmethod
    def _no_steps(config: PRMConfig, message: str = "no steps to score") -> Outcome:
        """Nothing to score: the valid 0 of every aggregate (no step before the first error). In the
        components too, which GDPO normalises: an absent one is "no signal" there, the group's mean,
        above a solution whose steps scored low."""
        details: dict[str, Any] = {
            "aggregation": config.aggregation,
            "steps": [],
            "first_error": 0,
            "message": message,
        }
        floors: dict[str, float | None] = {a: FLOORS[a] for a in AGGREGATIONS}
        return Outcome(FLOORS[config.aggregation], Reason.NO_ANSWER, floors, details)

    @staticmethod
    def _outcome(
        config: PRMConfig, steps: list[Step], scores: list[float], extra: dict[str, list[float]] | None = None
    ) -> Outcome:
        if len(scores) != len(steps):
            return Outcome.invalid(Reason.BACKEND_ERROR, f"{len(scores)} step scores for {len(steps)} steps")
        # rounded once, and everything computed from what details shows: a step at 0.4999996, shown as
        # 0.5, was still the first error at threshold 0.5
        scores = [round(p, 6) for p in scores]
        rows: list[dict[str, Any]] = [
            {"index": k, "start": s.start, "end": s.end, "score": p}
            for k, (s, p) in enumerate(zip(steps, scores, strict=True))
        ]
        for key, values in (extra or {}).items():
            for row, v in zip(rows, values, strict=True):
                row[key] = round(v, 6)
        # filler steps ("Let me think.") are shown, scored in context, and left out of every aggregate:
        # each one the model found nothing wrong in raised mean, set last, and delayed first_error
        counted = [k for k, s in enumerate(steps) if not s.filler]
        components, details = summarize(
            [rows[k] for k in counted],
            [scores[k] for k in counted],
            config.aggregation,
            config.threshold,
            config.temperature,
        )
        if len(counted) < len(steps):
            for k, s in enumerate(steps):
                if s.filler:
                    rows[k]["filler"] = True
                    if config.aggregation == "soft_min":
                        rows[k]["reward"] = 0.0  # no share of the score
            details["steps"] = rows
            if details["first_error"] >= 0:  # an index into the steps as shown (ProcessBench's)
                details["first_error"] = counted[details["first_error"]]
        split = sum(s.members for s in steps)
        if split > len(steps):  # first_error counts groups, not the solution's steps (ProcessBench's)
            details["steps_before_merge"] = split
        return Outcome(components[config.aggregation], None, components, details)

    @classmethod
    def _implicit(
        cls, config: PRMConfig, steps: list[Step], policy: list[float], reference: list[float]
    ) -> Outcome:
        """An implicit PRM's outcome from the two models' step log-likelihoods (PRIME): process
        rewards ``beta * (policy - reference)``, their running sums ``q`` and scores ``sigmoid(q)``."""
        if len(policy) != len(steps) or len(reference) != len(steps):
            return Outcome.invalid(
                Reason.BACKEND_ERROR,
                f"{len(policy)} and {len(reference)} step log-likelihoods for {len(steps)} steps",
            )
        rewards = [config.beta * (a - b) for a, b in zip(policy, reference, strict=True)]
        q = list(itertools.accumulate(rewards))
        outcome = cls._outcome(config, steps, [_sigmoid(x) for x in q], {"process_reward": rewards, "q": q})
        if outcome.details is not None:
            outcome.details["beta"] = config.beta
        return outcome


# Pieces (separators found) a request may split on the event loop: about 6 µs each, so ~60 ms.
_INLINE_PIECES = 10_000
# Text a request may check for filler steps on the event loop: content_free costs ~0.5 µs a character
# (~50 µs for a 100-character step, and ~20 µs more for the sign-off scan), so ~30-60 ms; a larger
# request splits in the CPU workers.
_FILLER_INLINE_CHARS = 64 * 1024
# A filler step is short: longer ones are not checked, which bounds the check's cost per step (~0.1 ms)
FILLER_MAX_CHARS = 200


def filler_step(text: str, conv: PRMConvention, clean: Scrubber) -> bool:
    """Whether a step says nothing (:func:`~rewardhub.judging.hardening.content_free`: only openers,
    filler words, a step's label or a verdict on nothing, in any language: "Let me think.", "Step 2:",
    "I hope it is correct.") in what reaches the model (its tags and control tokens removed).

    A PRM scores such a step as one with nothing wrong in it: padding a solution with them raised its
    ``mean``, one at the end was its ``last``, and a few before a wrong step moved ``first_error`` from
    0 towards 1 (the padding PURE saw policies learn against sum-form PRM rewards)."""
    return _checked(text) and content_free(conv.reaching(text, clean))


def _signed_off(steps: list[Step], question: str, conv: PRMConvention, clean: Scrubber) -> list[Step]:
    """``steps`` with those that only sign off ("Thank you.", "And we're done.", "Good luck!",
    :func:`~rewardhub.judging.hardening.signs_off`) marked filler too, unless the question holds the
    word ("Is the graph complete?": "Complete." answers it). Here, not in :func:`filler_step`, because
    it reads the question; a regex scan of each step (~20 µs) unless a sign-off is in it."""
    return [
        dataclasses.replace(s, filler=True)
        if not s.filler and _checked(s.text) and signs_off(conv.reaching(s.text, clean), question)
        else s
        for s in steps
    ]


def _checked(text: str) -> bool:
    """Whether a step may be filler at all, before any content check: short (:data:`FILLER_MAX_CHARS`)
    and stating no relation (:data:`~rewardhub.judging.hardening.RELATION`) outside its HTML tags, the
    ones content_free reads as markup (an attribute's "=" in "<span style=x>Okay.</span>" states nothing).

    A relation between two sides states something, whatever its letters: "So $\\sin A = a$." is a step
    (over 52,418 PRMBench and Qwen solution steps, the one real step content_free read as filler, before
    it read a relation between single letters). This guard is wider than content_free's: any relation
    sign, with or without letters on both sides ("Thus =" is not checked), as it was."""
    return len(text) <= FILLER_MAX_CHARS and RELATION.search(HTML_TAG.sub(" ", text)) is None


def _pieces(text: str, separator: str) -> int:
    """How many pieces :func:`split_steps` cuts ``text`` into at most (a newline of the separator also
    matches a CRLF one), counted in C."""
    if "\n" in separator and "\r\n" in text:
        return text.count("\n") + 1
    return text.count(separator) + 1


def splits_off_loop(texts: Sequence[str], separator: str) -> bool:
    """Whether splitting ``texts`` is too much work for the event loop (past ``_INLINE_PIECES``)."""
    return sum(_pieces(t, separator) for t in texts) > _INLINE_PIECES


async def split_in_workers(
    pool: ProcessPool, texts: Sequence[str], keywords: dict[str, Any], deadline: float
) -> list[list[Step] | Outcome]:
    """:func:`split_steps` of each text in the CPU workers, each under ``deadline`` (monotonic), or the
    outcome of a worker that could not (its deadline, a lost worker). Shared by ``prm`` and ``judge``."""
    results = await pool.run(
        split_in_worker, [(t, keywords) for t in texts], max(0.001, deadline - time.monotonic())
    )
    return [
        res.value if res.ok else Outcome.pool_failure(res.error, res.message or res.error) for res in results
    ]


def split_in_worker(payload: tuple[str, dict[str, Any]]) -> list[Step]:
    """:func:`split_steps` of one response, in a CPU worker (``payload``: the text and the keywords)."""
    text, kwargs = payload
    return split_steps(text, **kwargs)


def split_capped_in_worker(payload: tuple[str, dict[str, Any], float]) -> list[Step] | Outcome:
    """:func:`split_steps` of one long response on a caller's ``pattern``, in a CPU worker (``payload``:
    the text, the keywords and the match's timeout), bounded in time and in the memory the match may add
    as the ``regex`` reward's match is (:func:`.patterns.capped_match`); past either, the invalid outcome."""
    text, kwargs, timeout_s = payload
    split = _timed(partial(split_steps, **kwargs))
    return capped_outcome(lambda: capped_match(kwargs["pattern"], split, text, timeout_s))


def _as_written(text: str, steps: list[Step]) -> list[str]:
    """An implicit PRM's pieces: the response before its first step (context, not scored), then each
    step with what lies between it and the step before (the separator), so that the model reads the
    response exactly as the policy wrote it; what follows the last step is not read."""
    ends = [steps[0].start, *(s.end for s in steps)]
    return [text[: ends[0]], *(text[a:b] for a, b in itertools.pairwise(ends))]


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


async def _step_scores(
    backend: ModelBackend, queries: list[StepQuery], deadline: float
) -> list[list[float] | BackendError]:
    try:
        return finite(await backend.step_probs(queries, deadline))
    except BackendError as exc:
        return [exc for _ in queries]


async def _likelihoods(
    backend: ModelBackend, ref: ModelBackend, queries: list[StepQuery], deadline: float
) -> list[tuple[list[float], list[float]] | Outcome]:
    """Both models' step log-likelihoods of the same queries, the two passes at once; an item either
    failed is that failure, ``details.backend`` naming which (both fail alike: "more than the model's
    max_length" says nothing of which model's). A refusal of either pass (429: its model's queue is full)
    withdraws the other (:func:`~rewardhub.aio.gather_all`), which would otherwise run for nobody."""
    mine, theirs = await gather_all(
        _step_scores(backend, queries, deadline), _step_scores(ref, queries, deadline)
    )
    return [
        failure(a, backend=backend.name)
        if isinstance(a, BackendError)
        else failure(b, backend=ref.name)
        if isinstance(b, BackendError)
        else (a, b)
        for a, b in zip(mine, theirs, strict=True)
    ]


def _timed(split: Callable[..., list[Step]]) -> Callable[..., list[Step]]:
    """``split`` with the ``timeout=`` keyword :meth:`MatchBudget.run` passes, as ``timeout_s``."""

    def run(text: str, timeout: float) -> list[Step]:
        return split(text, timeout_s=timeout)

    return run
