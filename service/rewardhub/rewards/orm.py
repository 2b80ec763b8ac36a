"""``orm``: an outcome reward model (a sequence classifier with one output) scores the whole response.

The prompt and the response go through the model's chat template (user turn, assistant turn; a
``system_prompt`` first when configured) when its tokenizer has one, else they are joined by a blank
line; an empty prompt is none (no user turn, the input of an item without one), and so is a blank one
(whitespace, invisible characters) or one of only control-token strings (``<|im_end|>``), which reach
the model as nothing. The score is the logit
of output ``label``: unset, the one output of the usual ``num_labels=1`` reward model; a head of 2+
outputs needs it named (its class 0 is a bad/good head's "bad": refused per item, ``unsupported``),
optionally normalised:

* ``none``: the raw logit (Bradley–Terry reward models are trained on differences, so the scale is arbitrary);
* ``sigmoid``: ``1 / (1 + e^{-x})`` in (0, 1);
* ``softmax``: the probability of class ``label`` over all the head's outputs, for a classifier trained
  with two or more classes (a 2-label "bad/good" head: ``label: 1``). ``sigmoid`` of one of its logits
  is not that probability (logits -0.13 and -0.19: sigmoid 0.47, the class probability 0.49). A
  one-output head has no classes to choose between: refused per item (``unsupported``), use ``sigmoid``;
* ``zscore``: ``(x - mean) / std`` with the configured ``mean``/``std`` (e.g. measured on a reference set),
  which puts rewards from different RMs on one scale without per-batch statistics. Both are required
  (the defaults 0 and 1 would return the raw logit as if it were normalised), and apply to ``zscore``
  only (with another ``normalize`` they would be silently ignored): a config that says otherwise is refused.

``response: "answer"`` sends the answer outside the reasoning (``<think>…</think>``, and an unclosed
``<think>`` it ends in) instead of the whole response (``"full"``, the default): a long trace no longer
makes the item too long (``unsupported``), and an RM trained on final answers reads one. A response with
no answer (empty, blank: whitespace, invisible characters or only control-token strings, which reach the
model as nothing; in ``answer`` mode also one cut off inside its reasoning) is not given to the model,
whose number for nothing is arbitrary and which a policy learns to earn by saying nothing: it scores the
scale's floor with ``reason: no_answer`` (valid). ``sigmoid`` and ``softmax`` have a floor, 0; a raw or
z-scored logit has none (no logit is the lowest), so ``floor`` sets it for ``none``/``zscore`` (on the
score's own scale: e.g. the RM's lowest logit on a reference set, or -3 on ``zscore``), and without one
such an item is not scored (``unsupported``, the message naming ``floor``) rather than given a number.

``components.raw`` holds the raw logit (for no answer: the logit that normalises to the floor, null on
sigmoid/softmax, where none does; from a server that returns probabilities, see below). Backend ``orm`` by default: ``REWARDHUB_ORM_MODEL`` (in
process) or ``REWARDHUB_ORM_URL`` (a vLLM server's ``/classify``).

A ``vllm_pooling`` backend with ``returns_probabilities`` knows a head of 2+ outputs' logits only up to
a constant per item (the softmax took it away): it gives the log-probabilities, the logit less the
item's log-sum-exp. ``softmax`` is the same from them; ``none``, ``sigmoid`` and ``zscore`` of a logit
are not (they scored log p, another number for every item than the in-process model's), so they are
refused per item (``unsupported``, naming the fixes: serve raw logits, or ``softmax``), and
``components.raw`` and ``details.log_probs`` hold the log-probability. A one-output head is exact,
except where its probability is 1 (or 0) to the server's precision: that gives no logit back, only a
bound (±16.1, the clamp's), which the score keeps (the items' order holds) and ``details.saturated``
flags.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from rewardhub.models.base import Capability, Message
from rewardhub.models.errors import BackendError, BackendUnavailable
from rewardhub.models.vllm_pooling import SATURATED_LOGIT
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, RewardConfig, ScoreContext, register
from rewardhub.rewards.model_backed import ModelReward, deadline_of, failure, finite
from rewardhub.rewards.text import answer_text, blank

__all__ = ["ORMConfig", "ORMReward", "normalise"]

_ZSCORE_FIELDS = ("mean", "std")


class ORMConfig(RewardConfig):
    backend: str = Field("orm", min_length=1, description="Name of the model backend (see REWARDHUB_ORM_*).")
    normalize: Literal["none", "sigmoid", "softmax", "zscore"] = Field(
        "none", description="none | sigmoid | softmax (class `label`'s probability, 2+ outputs) | zscore."
    )
    mean: float = Field(
        0.0, allow_inf_nan=False, description="zscore (required): the reward model's mean logit."
    )
    std: float = Field(
        1.0, gt=0, allow_inf_nan=False, description="zscore (required): the reward model's logit std."
    )
    label: int | None = Field(
        None,
        ge=0,
        description="Which output of the classifier is the reward: required on a head of 2+ outputs "
        "(a bad/good head: 1); unset, the one output of the usual reward model.",
    )
    system_prompt: str | None = Field(None, max_length=10_000, description="A system turn before the prompt.")
    response: Literal["full", "answer"] = Field(
        "full",
        description="full: the whole response; answer: only the answer outside the reasoning (<think>...</think>).",
    )
    floor: float | None = Field(
        None,
        allow_inf_nan=False,
        description="none/zscore: the score of a response with no answer (no_answer); unset, such an item is "
        "unsupported (sigmoid/softmax: 0).",
    )

    @model_validator(mode="after")
    def _zscore_fields(self) -> ORMConfig:
        """mean/std only mean something to zscore, and zscore nothing without them: refused, not ignored."""
        given = [f for f in _ZSCORE_FIELDS if f in self.model_fields_set]
        if self.normalize == "zscore":
            missing = [f for f in _ZSCORE_FIELDS if f not in given]
            if missing:
                raise ValueError(f"normalize 'zscore' needs {' and '.join(missing)}")
        elif given:
            raise ValueError(f"{given[0]} applies to normalize 'zscore' only")
        if self.floor is not None and self.normalize in ("sigmoid", "softmax"):
            # their floor is 0; another would be ignored, or put no answer inside their range
            raise ValueError(
                f"floor applies to normalize 'none' or 'zscore' only ('{self.normalize}' has its own: 0)"
            )
        return self


def normalise(x: float, config: ORMConfig, logits: Sequence[float] = ()) -> float:
    """The reward for raw output ``x`` (``logits``: the whole row, which ``softmax`` needs)."""
    if config.normalize == "softmax":
        top = max(logits)
        return math.exp(x - top) / math.fsum(math.exp(v - top) for v in logits)
    if config.normalize == "sigmoid":
        return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
    if config.normalize == "zscore":
        return (x - config.mean) / config.std
    return x


def no_answer(config: ORMConfig, message: str) -> Outcome:
    """A response without an answer: the scale's floor (``no_answer``), or unscored on a logit scale
    without a ``floor``: the model's number for nothing is arbitrary, and above a wrong answer's it pays
    a policy to say nothing; 0 on a raw logit is the middle of the scale, not its bottom."""
    if config.normalize in ("sigmoid", "softmax"):
        return Outcome(0.0, Reason.NO_ANSWER, {"raw": None}, {"message": message})
    if config.floor is None:
        return Outcome.invalid(
            Reason.UNSUPPORTED,
            f"{message}: a raw or z-scored logit has no floor to score no answer with; set floor (the score "
            "of no answer) or normalize 'sigmoid'/'softmax'",
        )
    raw = config.mean + config.floor * config.std if config.normalize == "zscore" else config.floor
    return Outcome(config.floor, Reason.NO_ANSWER, {"raw": raw}, {"message": message})


@register
class ORMReward(ModelReward[ORMConfig]):
    name: ClassVar[str] = "orm"
    # 1.2: an empty prompt (or one of only control tokens) is no prompt (it was an empty user turn:
    # another input, another score)
    # 1.3: a vllm_pooling backend with returns_probabilities asks for probabilities (a server honouring
    # use_activation answered logits, read as probabilities: 2.3 became 16.1); 1.3.1: an input of no
    # tokens (no prompt, an empty response, no chat template) is an item error (it scored a pad's output);
    # label is required on a head of several outputs (it read class 0, a bad/good head's "bad")
    # 1.3.2: a blank prompt (whitespace, a zero-width space) is no prompt (it was a user turn of its own)
    # 1.3.3: none/sigmoid/zscore on a 2+-output head whose server returns probabilities are unsupported
    # (they scored log p, the logit shifted by each item's log-sum-exp)
    # 1.3.4: an empty or blank response is no_answer at the floor (it scored the model's number for
    # nothing); response "answer" scores the answer outside <think> (the reasoning went to the model)
    # 1.3.5: a one-output head's saturated probability from a probabilities server is flagged
    # (details.saturated: its logit is the clamp's bound, ±16.1)
    version: ClassVar[str] = "1.3.5"
    description: ClassVar[str] = (
        "Outcome reward model: a sequence classifier's scalar for prompt + response (chat template), "
        "optionally sigmoid, softmax (a class's probability) or z-score normalised; in process or vLLM "
        "/classify."
    )
    config_model = ORMConfig
    reads = ("prompt", "response")
    default_backend: ClassVar[str] = "orm"
    capability: ClassVar[Capability] = "classify"

    async def score(self, items: Sequence[ScoreItem], config: ORMConfig, ctx: ScoreContext) -> list[Outcome]:
        deadline = deadline_of(ctx)
        try:
            backend = self.backend(config)
        except BackendUnavailable as exc:
            return [failure(exc) for _ in items]
        try:
            clean = await backend.cleaner(deadline)  # what its tokenizer removes before the model reads
        except BackendError as exc:
            return [failure(exc) for _ in items]
        inputs: list[tuple[Message, ...]] = []
        outcomes: list[Outcome | None] = [None] * len(items)
        for i, item in enumerate(items):
            response = answer_text(item.response) if config.response == "answer" else item.response
            # nothing the model would read (blank, or control tokens only): no answer, not the RM's number
            # for an empty string, which a policy learns to earn by saying nothing
            if blank(clean(response)):
                cut = config.response == "answer" and not blank(clean(item.response))
                outcomes[i] = no_answer(
                    config, "no answer outside the reasoning" if cut else "empty response"
                )
                continue
            msgs: list[Message] = []
            if config.system_prompt:
                msgs.append(Message("system", config.system_prompt))
            # "" (or only control tokens, "" once removed) is no prompt: an empty user turn is a turn of
            # its own in a chat template, another input than none; so is a blank one (whitespace, a
            # zero-width space), which says nothing either
            if item.prompt and not blank(clean(item.prompt)):
                msgs.append(Message("user", item.prompt))
            msgs.append(Message("assistant", response))
            inputs.append(tuple(msgs))
        results: list[list[float] | BackendError] = []
        if inputs:  # none when every item had no answer
            try:
                results = finite(await backend.classify(inputs, deadline))
            except BackendError as exc:
                results = [exc for _ in inputs]
        # rows of 2+ outputs that are log-probabilities (a server's softmax undone up to a constant)
        log_probs = backend.classify_log_probs
        scored: list[Outcome] = []
        for res in results:
            if isinstance(res, BackendError):
                scored.append(failure(res))
            elif config.label is None and len(res) != 1:
                # class 0 of a 2-label bad/good head is "bad": a reward a policy would learn to maximise
                scored.append(
                    Outcome.invalid(
                        Reason.UNSUPPORTED,
                        f"the model has {len(res)} outputs: set label to the one that is the reward "
                        "(a 2-label bad/good head: label 1)",
                    )
                )
            elif config.label is not None and config.label >= len(res):
                scored.append(
                    Outcome.invalid(
                        Reason.UNSUPPORTED, f"the model has {len(res)} outputs; label {config.label} asked"
                    )
                )
            elif config.normalize == "softmax" and len(res) < 2:
                scored.append(
                    Outcome.invalid(
                        Reason.UNSUPPORTED,
                        "normalize 'softmax' needs a classifier with 2 or more outputs; this model has 1 "
                        "(use 'sigmoid')",
                    )
                )
            elif log_probs and len(res) >= 2 and config.normalize != "softmax":
                scored.append(
                    Outcome.invalid(
                        Reason.UNSUPPORTED,
                        f"backend {backend.name!r} answers probabilities (returns_probabilities), which give "
                        f"a head of {len(res)} outputs its logits only up to a constant: normalize "
                        f"{config.normalize!r} needs the logit itself. Use normalize 'softmax', or serve raw "
                        "logits (a vLLM that honours use_activation, >= 0.11.1, or a pooler without "
                        "activation: --pooler-config '{\"use_activation\": false}', --override-pooler-config "
                        "on older vLLM) and remove returns_probabilities from the backend's spec",
                    )
                )
            else:
                raw = res[config.label or 0]
                row = "log_probs" if log_probs and len(res) >= 2 else "logits"
                details: dict[str, object] = {row: res}
                if log_probs and len(res) == 1 and abs(raw) >= SATURATED_LOGIT * (1 - 1e-9):
                    # P 1 (or 0) to the server's precision: a bound, not the logit
                    details["saturated"] = True
                scored.append(Outcome(normalise(raw, config, res), None, {"raw": raw}, details))
        it = iter(scored)
        return [o if o is not None else next(it) for o in outcomes]
