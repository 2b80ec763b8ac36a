"""``calibration``: correctness plus a proper scoring rule on the verbalized confidence (RLCR).

"Beyond Binary Rewards: Training LMs to Reason About Their Uncertainty" (arXiv 2507.16806;
algorithms.md §3). The response carries ``<answer>…</answer>`` and ``<confidence>…</confidence>`` (tag
names configurable). With c = 1[the answer is correct] and q the confidence::

    rlcr  (default)   R = c − (q − c)²                       (paper form; R ∈ [−1, 1])
    brier             R = 1 − (q − c)²                       (the calibration term alone, RLCR's code form)
    log               R = c + λ · ln(max(p, ε)),  p = q if c else 1 − q
                      ε = log_epsilon (0.01), λ = log_scale (default 1/|ln ε|, so λ·ln ∈ [−1, 0])

plus ``format_weight · 1`` when the format is valid; a format failure scores 0. Why a *bounded* rule:
correctness plus any bounded proper scoring rule makes the optimum both accurate and calibrated — with
an honest q = p the expected RLCR reward is p², increasing in p. The raw log score is unbounded and
breaks the accuracy incentive (E = p − H(p) < 0 at p = 0.5, so a deliberately wrong answer with q ≈ 0
would win), hence the floor ε on the probability assigned to the outcome and the scale λ, which must
keep λ·|ln ε| ≤ 1 (else a correct answer at low q scores below a wrong one: a 422). Brier-only is
shifted by +1 so that every valid response beats a format failure (−(q − c)² ≤ 0 would not).

Note the incentive at the format boundary: a wrong answer at q = 1 scores −1 under ``rlcr``, below a
format failure (0). RLCR trains with a separate +0.5 format term for that reason; ``format_weight: 1``
restores "any well-formed response ≥ a malformed one".

Format (valid iff all hold): the last complete answer tag exists and holds visible text (no answer tag,
or an empty one, is a format failure: there is nothing to verify; a zero-width space or another invisible
format/control character is no text, :func:`~rewardhub.rewards.text.blank`), the last complete
confidence tag parses (:mod:`rewardhub.rewards.confidence`), and it comes after that answer tag: the
confidence is about the final answer (RLCR's format: answer, analysis, confidence), so one stated before
it, for an earlier answer or inside it, does not count; and no answer or confidence tag opens after the
last complete one of its kind (a revision never closed: the closed tag before it is no longer the
response's final word, ``... actually <confidence>0.2``). With ``after_think`` (default) only the
text after the last ``</think>`` and before a ``<think>`` it never closes is searched, so tags the model
mentions while thinking don't count (a response cut off inside its reasoning has none to read).
Without it the whole response is searched, and the text the verifier gets (below) has its ``<think>``
and ``</think>`` tags dropped: a verifier reads only the text after the reasoning, so it would find no
answer where this reward found one (a response written entirely inside ``<think>``).

Correctness: a configured verifier (``math`` by default, or ``exact_match``, ``multiple_choice``...) is
called through the registry **once for the whole batch**, on the format-valid items only (a group
verifier such as ``majority_vote`` also on the members whose confidence failed: their answers vote),
with the answer tag's content as the response and the item's ``reference``. ``verifier_input``: ``answer`` sends
the bare content; ``answer_tagged`` wraps it as ``<answer>…</answer>`` (a verifier with its own
extraction, like ``math``, then finds a ``\\boxed{}`` inside it or takes the whole content, rather than
falling back to the last number of ``\\frac{1}{2}``); ``response`` sends the full response; ``auto``
(default) is ``answer_tagged`` for verifiers with an ``extraction`` setting (``math``), ``response`` for
verifiers with an ``extract`` pattern (``exact_match``, ``f1``: the pattern was written for the response,
``<answer>(.*?)</answer>`` or ``Answer: (.*)``), ``answer`` otherwise (``json_schema``, ``code`` and
``sql`` too: their ``extract`` is a mode that finds the JSON or the program in the answer); inside a
wrapper (``composite``, ``noisy_corrected``) each verifier gets its own (``math`` beside an
``exact_match`` without ``extract``: the tagged answer for one, the bare answer for the other), and the
wrapper itself the one its parts share, else ``answer``. An explicit ``verifier_input`` is what every verifier gets. c is the
verifier's ``correct`` component when it has one, else ``score ≥ correct_threshold``.
A verifier that cannot score an item (timeout, missing reference...) makes the item invalid with the
same reason (transient when the verifier's failure is: a composite zeroing it does not cache its 0).

Components: ``correct`` (c), ``confidence`` (q), ``brier`` ((q − c)², the item's Brier score: lower is
better), ``format_ok`` (1/0). A format failure is decided before verification, so its ``correct`` and
``brier`` are null (``confidence`` too when it is the confidence that failed). The request's
``metrics.calibration`` (Brier, ECE, AUROC over the batch) is computed from these components.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal, get_origin

from pydantic import Field, PrivateAttr, field_validator, model_validator

from rewardhub.protocol import Reason, RewardSpec, ScoreItem
from rewardhub.rewards.base import Outcome, RewardConfig, ScoreContext, register
from rewardhub.rewards.composed import ComposedReward, Part, resolve, run_part
from rewardhub.rewards.confidence import last_tag_span, parse_confidence, tag_content
from rewardhub.rewards.text import THINK_CLOSE, answer_text, blank

__all__ = ["CalibrationConfig", "CalibrationReward", "calibration_score"]

_TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")
_LOG_FIELDS = ("log_epsilon", "log_scale")
_MAX_ANSWER_DETAIL = 200

Scoring = Literal["rlcr", "brier", "log"]
VerifierInput = Literal["auto", "answer", "answer_tagged", "response"]


class CalibrationConfig(RewardConfig):
    verifier: str | RewardSpec = Field(
        "math",
        description="The correctness verifier: a reward name or {name, config} (math, exact_match...).",
    )
    verifier_input: VerifierInput = Field(
        "auto",
        description="What the verifier sees: the answer tag's content (answer), the content re-wrapped as "
        "<answer>…</answer> (answer_tagged), the full response; auto: answer_tagged for verifiers with "
        "an `extraction` setting (math), response for an `extract` pattern (exact_match, f1), else "
        "answer; inside a wrapper (composite) each verifier gets its own.",
    )
    answer_tag: str = Field("answer", description="Tag holding the final answer.")
    confidence_tag: str = Field("confidence", description="Tag holding the confidence.")
    after_think: bool = Field(
        True,
        description="Search only after the last </think> and before an unclosed <think> (when there are); "
        "false: search the whole response, and the verifier gets its text without the think tags.",
    )
    scoring: Scoring = Field(
        "rlcr", description="rlcr: c − (q − c)²; brier: 1 − (q − c)²; log: c + λ·ln(max(p, ε))."
    )
    format_weight: float = Field(
        0.0, allow_inf_nan=False, description="Added to the score of every format-valid response."
    )
    correct_threshold: float = Field(
        1.0,
        allow_inf_nan=False,
        description="Verifiers without a `correct` component: correct iff score ≥ this.",
    )
    log_epsilon: float = Field(
        0.01, gt=0.0, lt=1.0, description="log: floor ε on the probability assigned to the outcome."
    )
    log_scale: float | None = Field(
        None,
        gt=0.0,
        allow_inf_nan=False,
        description="log: λ, at most 1/|ln ε| (the default, so λ·ln p ∈ [−1, 0]).",
    )

    _part: Part | None = PrivateAttr(None)

    @field_validator("answer_tag", "confidence_tag")
    @classmethod
    def _tag_name(cls, v: str) -> str:
        if not _TAG_NAME.fullmatch(v):
            raise ValueError(f"not a tag name (letters, digits, _ . : -, max 64): {v!r}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> CalibrationConfig:
        if self.answer_tag == self.confidence_tag:
            raise ValueError("answer_tag and confidence_tag must differ")
        if self.scoring != "log":
            stray = [f for f in _LOG_FIELDS if f in self.model_fields_set]
            if stray:
                raise ValueError(f"{stray[0]} applies to scoring 'log' only")
        elif self.lam * abs(math.log(self.log_epsilon)) > 1.0 + 1e-12:
            raise ValueError(
                f"log_scale {self.lam} times |ln log_epsilon| exceeds 1: a correct answer could score "
                f"below a wrong one; use log_scale ≤ {1.0 / abs(math.log(self.log_epsilon))!r}"
            )
        return self

    @property
    def lam(self) -> float:
        return self.log_scale if self.log_scale is not None else 1.0 / abs(math.log(self.log_epsilon))


def calibration_score(correct: bool, q: float, config: CalibrationConfig) -> float:
    """The score of a format-valid response (module docstring), format weight included."""
    c = 1.0 if correct else 0.0
    if config.scoring == "rlcr":
        s = c - (q - c) ** 2
    elif config.scoring == "brier":
        s = 1.0 - (q - c) ** 2
    else:
        p = q if correct else 1.0 - q
        s = c + config.lam * math.log(max(p, config.log_epsilon))
    return s + config.format_weight


def _auto_input(part: Part) -> VerifierInput:
    """``verifier_input: auto`` for a verifier (module docstring): ``answer_tagged`` for one with an
    ``extraction`` setting (``math``, ``majority_vote``), ``response`` for one with an ``extract`` pattern
    (``exact_match``, ``f1``: written for the response), else ``answer``; a wrapper (``composite``,
    ``noisy_corrected``) hands the text on to its parts, so it takes theirs when they all agree."""
    inner = part.reward.parts(part.config)
    if inner:
        modes = {_auto_input(p) for p in inner}
        return modes.pop() if len(modes) == 1 else "answer"
    if "extraction" in type(part.config).model_fields:
        return "answer_tagged"
    extract = type(part.config).model_fields.get("extract")
    # a pattern (free text), not a mode: the `extract` of code, sql and json_schema is a Literal ("auto",
    # "fenced"...) that finds the program or the JSON in the bare answer; in the whole response it found
    # the tags around it (json_schema: not JSON, code: a syntax error)
    pattern = extract is not None and get_origin(extract.annotation) is not Literal
    if pattern and isinstance(getattr(part.config, "extract", None), str):
        return "response"
    return "answer"


def _leaf_inputs(part: Part) -> dict[int, VerifierInput]:
    """``verifier_input: auto`` for each verifier at the bottom of a wrapper's tree, by ``id`` of its part."""
    inner = part.reward.parts(part.config)
    if not inner:
        return {id(part): _auto_input(part)}
    out: dict[int, VerifierInput] = {}
    for p in inner:
        out.update(_leaf_inputs(p))
    return out


@dataclass(slots=True)
class _Parsed:
    answer: str | None
    confidence: float | None
    error: str | None  # the format failure, if any


@register
class CalibrationReward(ComposedReward[CalibrationConfig]):
    name: ClassVar[str] = "calibration"
    # 1.0.2: a group verifier (majority_vote) counts the answers of every member, format failures included
    # 1.0.3: in a group whose id is "" too
    # 1.0.4: an answer of zero-width (invisible format/control) characters is empty: a format failure
    # 1.0.5: a whole-number confidence with leading zeros is read by its value ("0100" is 100%, it was out
    # of range while "080" was 80%)
    # 1.0.6: verifier_input auto looks through a wrapper (composite, noisy_corrected) of math: math got the
    # bare answer and read "\\frac{1}{2}" by its last number, 2; an exact_match or f1 with an `extract`
    # pattern gets the response it was written for (it found no answer in the bare one: correct 0 for all);
    # a confidence before the final answer (stated for an earlier one) is a format failure
    # 1.0.7: after_think false: a verifier given the response (an `extract` pattern) read only the text
    # after the reasoning, where this reward had read the answer in it: it gets the text without think tags;
    # verifier_input auto gives each verifier inside a wrapper its own input: math beside an exact_match
    # without `extract` got the bare answer, as the exact_match did, and read "\\frac{1}{2}" as 2;
    # json_schema, code and sql (an `extract` mode, not a pattern) get the bare answer, not the response
    version: ClassVar[str] = "1.0.8"
    description: ClassVar[str] = (
        "RLCR calibration reward: 1[correct] − (confidence − 1[correct])² from <answer> and "
        "<confidence> tags, correctness by a configured verifier (math by default); Brier-only and "
        "clipped log-score variants; batch Brier/ECE/AUROC in metrics.calibration."
    )
    config_model = CalibrationConfig
    reads = ("response", "reference")

    def parse_config(self, raw: dict[str, Any]) -> CalibrationConfig:
        config = super().parse_config(raw)
        config._part = resolve(self.runtime, config.verifier, "reward.config.verifier", self.name)
        return config

    def parts(self, config: CalibrationConfig) -> Sequence[Part]:
        assert config._part is not None, "parse_config resolves the verifier"
        return (config._part,)

    def _parse(self, text: str, config: CalibrationConfig) -> _Parsed:
        if config.after_think:
            text = answer_text(text)
        answer_span = last_tag_span(text, config.answer_tag)
        answer = tag_content(text, answer_span, config.answer_tag)
        conf_span = last_tag_span(text, config.confidence_tag)
        raw_conf = tag_content(text, conf_span, config.confidence_tag)
        conf = parse_confidence(raw_conf) if raw_conf is not None else None
        q = conf.value if conf is not None else None
        if answer is None:
            return _Parsed(None, q, f"no <{config.answer_tag}> tag")
        if blank(answer):
            return _Parsed(None, q, f"the <{config.answer_tag}> tag is empty")
        if conf is None:
            return _Parsed(answer, None, f"no <{config.confidence_tag}> tag")
        for tag, span in ((config.answer_tag, answer_span), (config.confidence_tag, conf_span)):
            # a revision opened after the last closed tag and never closed ("... actually
            # <confidence>0.2"): the closed one before it is no longer the response's final word
            if span is not None and text.find(f"<{tag}>", span[1]) >= 0:
                return _Parsed(answer, None, f"the last <{tag}> tag is not closed")
        if q is None:
            return _Parsed(answer, None, f"unreadable confidence: {conf.error}")
        assert answer_span is not None and conf_span is not None
        if conf_span[0] < answer_span[1]:  # the confidence must be about the final answer: after it
            return _Parsed(
                answer, None, f"the <{config.confidence_tag}> tag comes before the <{config.answer_tag}> tag"
            )
        return _Parsed(answer, q, None)

    def _verifier_text(
        self, item: ScoreItem, answer: str, config: CalibrationConfig, mode: VerifierInput
    ) -> str:
        if mode == "answer_tagged":
            text = f"<answer>{answer}</answer>"
        elif mode == "response":
            text = item.response
        else:
            text = answer
        if not config.after_think:
            # every verifier reads only the text after the reasoning (text.answer_text): without the
            # think tags it reads the whole text, as this reward read it, and finds the same answer
            text = text.replace("<think>", "").replace(THINK_CLOSE, "")
        return text

    async def score(
        self, items: Sequence[ScoreItem], config: CalibrationConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        part = self.parts(config)[0]
        parsed = [self._parse(item.response, config) for item in items]
        todo = [i for i, p in enumerate(parsed) if p.error is None]
        if part.reward.uses_groups(part.config):
            # A group verifier (majority_vote) judges an answer against its group's: every member with an
            # answer votes, those whose confidence could not be read included (their own score stays 0).
            todo = [
                i
                for i, p in enumerate(parsed)
                if p.error is None or (items[i].group is not None and p.answer)  # "" is a group id too
            ]
        mode = config.verifier_input if config.verifier_input != "auto" else _auto_input(part)
        sub_items = [
            items[i].model_copy(
                update={"response": self._verifier_text(items[i], parsed[i].answer or "", config, mode)}
            )
            for i in todo
        ]
        ctx = replace(ctx, part_items=None)  # an outer calibration's choice is not for this verifier
        leaves = _leaf_inputs(part) if config.verifier_input == "auto" else {}
        if len(set(leaves.values())) > 1:
            # verifiers inside a wrapper that read different texts (math beside an exact_match without
            # `extract`): each one gets its own, not the one they would otherwise share (answer)
            sources = {id(sub): i for sub, i in zip(sub_items, todo, strict=True)}

            def own_input(p: Part, batch: Sequence[ScoreItem]) -> Sequence[ScoreItem]:
                leaf = leaves.get(id(p))
                if leaf is None or leaf == mode:
                    return batch
                return [
                    sub
                    if (i := sources.get(id(sub))) is None
                    else sub.model_copy(
                        update={
                            "response": self._verifier_text(items[i], parsed[i].answer or "", config, leaf)
                        }
                    )
                    for sub in batch
                ]

            ctx = replace(ctx, part_items=own_input)
        verdicts = dict(zip(todo, await run_part(part, sub_items, ctx), strict=True))
        out: list[Outcome] = []
        for i, p in enumerate(parsed):
            details: dict[str, Any] = {"answer": (p.answer or "")[:_MAX_ANSWER_DETAIL] or None}
            if p.error is not None:
                details["format_error"] = p.error
                components = {"correct": None, "confidence": p.confidence, "brier": None, "format_ok": 0.0}
                out.append(Outcome(0.0, Reason.FORMAT, components, details))
                continue
            assert p.confidence is not None
            v = verdicts[i]
            details["verifier"] = v.details
            if v.score is None:
                assert v.reason is not None
                message = v.details.get("message")
                out.append(
                    Outcome.invalid(
                        v.reason,
                        f"verifier {part.reward.name!r} could not score the answer"
                        + (f": {message}" if message else ""),
                        transient=v.transient,
                        **details,
                    )
                )
                continue
            flag = v.components.get("correct")
            correct = flag >= 0.5 if flag is not None else v.score >= config.correct_threshold
            c = 1.0 if correct else 0.0
            q = p.confidence
            components = {"correct": c, "confidence": q, "brier": (q - c) ** 2, "format_ok": 1.0}
            score = calibration_score(correct, q, config)
            # a verifier's stand-in score (a composite's zeroed judge) is this request's only: not cached
            out.append(Outcome(score, None, components, details, v.latency_ms, v.transient))
        return out
