"""The one interface every model backend implements, and the values that cross it.

A backend is a named model endpoint (``judge``, ``prm``, ``orm``, ``embedding``, or any name from the
backends file). Rewards pick a backend by name only (never by URL: a request can not point the service
at an arbitrary host) and call the capability they need:

* ``chat``: one chat completion, with per-token top logprobs when asked (judges);
* ``classify``: raw per-label logits of a sequence classifier (outcome reward models);
* ``step_probs``: the positive-class probability at every step tag of a PRM input (process reward models),
  or, for an implicit PRM's query (``StepQuery.likelihood``), each step's log-likelihood under the model;
* ``embed``: one L2-normalised vector per text (similarity).

A backend declares what it can do in ``capabilities``; asking for anything else raises
:class:`~rewardhub.models.errors.BackendUnavailable` with a message a person can act on.

Every call takes an absolute ``deadline`` (``time.monotonic()`` seconds): HTTP backends clamp their
per-attempt timeouts and retries to it, batched local backends drop items whose deadline passed before
their forward pass. Batch calls return one entry per input, either the value or the
:class:`~rewardhub.models.errors.BackendError` that input failed with, so one bad input never fails its
neighbours.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from rewardhub.models.errors import BackendError, BackendTimeout, BackendUnavailable

if TYPE_CHECKING:  # specials imports Message from here
    from rewardhub.models.specials import Scrubber

__all__ = [
    "Capability",
    "ChatRequest",
    "Completion",
    "Message",
    "Embedding",
    "ModelBackend",
    "StepQuery",
    "TokenLogprob",
    "remaining",
    "step_rows",
]

Capability = Literal["chat", "classify", "steps", "embed"]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat completion. ``top_logprobs=0`` asks for no logprobs.

    ``stop``: strings the generation ends before (not included in the text). ``continue_final``: the
    last message is the assistant's, to be continued as written rather than answered by a new turn
    (vLLM's and SGLang's ``continue_final_message``). A backend that cannot do these refuses the
    request (:class:`~rewardhub.models.errors.BackendRejected`) rather than answer another question.
    """

    messages: tuple[Message, ...]
    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    top_logprobs: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    continue_final: bool = False
    # The caller's ``time.monotonic()`` deadline, for in-process generation to stop at (Linux's
    # monotonic clock is system-wide, so the model process reads it too); not part of the sampling key.
    deadline: float | None = None

    def sampling_key(self) -> tuple[float, float, int, int, int | None]:
        """Requests with equal keys can share one batched ``generate`` call."""
        return (self.temperature, self.top_p, self.max_tokens, self.top_logprobs, self.seed)


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A generated token, its logprob, and the top alternatives at that position (chosen one included)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Completion:
    """A chat completion. ``text`` is the answer; ``reasoning`` the thinking a server with a reasoning
    parser (vLLM, SGLang, OpenRouter) returned apart from it, None when it sent none (a local backend's
    thinking stays in ``text``, between ``<think>`` tags). A verdict is read from ``text`` only: the
    thinking holds drafts."""

    text: str
    tokens: tuple[TokenLogprob, ...] | None = None
    finish_reason: str | None = None
    reasoning: str | None = None

    @property
    def full_text(self) -> str:
        """The whole output as the model wrote it: ``reasoning`` put back in front of ``text`` between
        think tags (``<think>`` left open when no answer followed, as a thinking the generation stopped
        in), so that readers of the whole output (a thinking PRM's step labels) see one text whichever
        way the server returned it. The opening tag is written back with the newline DeepSeek-R1's chat
        template puts after it (the thinking's own leading newlines dropped)."""
        if not self.reasoning:
            return self.text
        thinking = "<think>\n" + self.reasoning.lstrip("\n")
        return f"{thinking}</think>{self.text}" if self.text else thinking


@dataclass(frozen=True, slots=True)
class Embedding:
    """One text's L2-normalised vector. ``truncated``: the text was longer than the model's context and
    only its start was embedded (as sentence-transformers does); None when the backend cannot tell (an
    HTTP ``/embeddings`` server). A reward reports it: a long reasoning trace embedded from its start
    says nothing about the answer at its end. ``empty``: the model read nothing of the text, its
    tokenizer having dropped every character (MiniLM's drops U+FFFD, and combining marks as it strips
    accents): the vector is the empty text's, and says nothing of an answer; False when the backend
    cannot tell."""

    vector: list[float]
    truncated: bool | None = None
    empty: bool = False


@dataclass(frozen=True, slots=True)
class StepQuery:
    """One PRM input, already formatted by its convention (see :mod:`rewardhub.prm.conventions`).

    Either ``messages`` (rendered with the model's chat template) or ``text`` (used verbatim). The
    ``step_tag`` occurs once after every step and nowhere else (the convention strips it from user
    text). ``label_tokens`` is ``(positive, negative)`` for a PRM that reads the LM head at the tag
    (Math-Shepherd: ``("+", "-")``); None for a classifier head whose class ``positive_index`` is the
    "step is correct" class (Qwen2.5-Math-PRM: class 1 of 2).

    ``pieces`` (instead of ``messages`` or ``text``): the question's piece, then one per step, each
    tokenized on its own and the steps each followed by the ``step_tag`` token, where the score is read
    (Skywork-o1-Open-PRM builds its input so; one string tokenized whole would merge "." and the newline
    into one token). The tokenizer's BOS text goes before the first piece. ``value_head``: the score is
    the sigmoid of a scalar value head at that token (Skywork), not a class or label-token probability.

    ``predicts`` (with ``messages``): the step tag is a placeholder for this text, written in after the
    conversation is rendered, and the score is read at the token before it, the position that predicts
    it (RLHFlow's PRMs: every assistant turn is ``"+"``, read where the model predicts it). A
    placeholder, because the text itself may occur in user text ("2 + 3"), where it is no step.

    ``likelihood`` (with ``messages`` and ``pieces``): an implicit PRM's query (PRIME). ``messages`` is
    the prompt conversation, rendered with the generation prompt; ``pieces`` continue it as written,
    the first an uncounted context (the response before its first step), then one per step with the
    text between it and the step before. The answer per step is not a probability but the step's
    log-likelihood: the sum of the model's log-probabilities of the tokens that start in it, each
    given everything before it. The reward compares two models' answers (policy-like and reference).
    """

    step_tag: str
    steps: int
    messages: tuple[Message, ...] | None = None
    text: str | None = None
    label_tokens: tuple[str, str] | None = None
    positive_index: int = 1
    pieces: tuple[str, ...] | None = None
    value_head: bool = False
    predicts: str | None = None
    likelihood: bool = False

    @property
    def reads_class(self) -> bool:
        """Whether the score is a classifier head's class at step tags in the text (Qwen2.5-Math-PRM):
        all that a vLLM pooling model serves. A +/- PRM (``label_tokens``, RLHFlow's ``predicts``
        among them), a value-head PRM over ``pieces`` or an implicit PRM (``likelihood``, over ``pieces``
        too) needs the transformers backend."""
        return self.label_tokens is None and not self.value_head and self.pieces is None


def step_rows(rows: int, tokens: int, tags: Sequence[int]) -> list[int] | None:
    """Which of a tokenwise pooler's ``rows`` hold the step scores of an input of ``tokens`` tokens with
    step tags at positions ``tags``. vLLM pools as ALL (a row per token: the rows at the tags) or as STEP
    (its default for ``Qwen2ForProcessRewardModel``: only the rows at the tokens equal to the pooler's
    ``step_tag_id``, in order: every row). None when the count fits neither (a STEP pooler whose
    ``step_tag_id`` is another token than the convention's tag)."""
    if rows == tokens:
        return list(tags)
    if rows == len(tags):
        return list(range(rows))
    return None


def remaining(deadline: float) -> float:
    """Seconds left before ``deadline``; raises :class:`BackendTimeout` when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise BackendTimeout("the item's deadline passed before the backend answered")
    return left


UNNAMED_MODEL = "default"  # the model name of a remote backend configured by URL alone


class ModelBackend:
    """Base of every backend. Subclasses override the capabilities they list in ``capabilities``."""

    kind: ClassVar[str]
    capabilities: frozenset[Capability] = frozenset()
    # Whether ``chat`` honours ChatRequest's ``stop`` and ``continue_final`` (a server's
    # continue_final_message); one that does not refuses such a request.
    continues_messages: ClassVar[bool] = False
    # The setting that configured it (see ModelHub.origins), for messages that point at the setting.
    origin: str | None = None

    def __init__(self, name: str, model: str):
        self.name = name
        self.model = model

    def identity(self) -> str:
        """What the results depend on (kind and model): part of the cache key of rewards using it."""
        return f"{self.kind}:{self.model}"

    @property
    def identity_settled(self) -> bool:
        """Whether :meth:`identity` is final; rewards do not cache results while it is not."""
        return True

    @property
    def classify_log_probs(self) -> bool:
        """Whether :meth:`classify`'s rows of 2+ outputs are log-probabilities, not logits: a server that
        answers softmax probabilities gives the logits only up to a per-row constant (log p is the logit
        less the row's log-sum-exp), enough for a class probability but not for a logit's own value. A
        one-output row is the exact logit either way (the sigmoid is undone exactly)."""
        return False

    def describe(self) -> dict[str, Any]:
        """Public facts for logs and ``/ready`` (never secrets)."""
        return {"kind": self.kind, "model": self.model, "capabilities": sorted(self.capabilities)}

    async def start(self) -> None:
        """Load the model / open connections (the app's lifespan calls it once)."""

    async def close(self) -> None:
        """Release what :meth:`start` acquired."""

    def ready(self) -> dict[str, Any]:
        return {"ok": True, **self.describe()}

    async def recheck(self) -> None:
        """``/ready`` calls it before :meth:`ready`: a backend that is not ready for a reason only an
        ask finds gone (a remote model no longer listed) asks again here."""

    def queue_depth(self) -> int:
        """Items waiting in this backend's batcher(s) (0 for unbatched backends)."""
        return 0

    def call_slots(self) -> int:
        """How many single-item calls (``chat``) one request should have in flight at once.

        Rewards that call per item (a judge: one call per item, two per pairwise item, one per rubric
        criterion) send at most this many at a time. More would only fill queues; and a request with
        more calls than a model's queue holds would be refused (429) on every retry, since its calls
        arrive one by one and the first ones fill the queue the later ones need.
        """
        return 128

    def require(self, capability: Capability) -> None:
        if capability not in self.capabilities:
            can = ", ".join(sorted(self.capabilities)) or "nothing"
            raise BackendUnavailable(
                f"backend {self.name!r} ({self.kind}) cannot do {capability!r}; it can do: {can}"
            )

    async def cleaner(self, deadline: float) -> Scrubber:
        """How this backend removes control-token strings from user text before its tokenizer sees it.

        A reward that must know what of a text reaches the model (a PRM step of only control tokens is
        an empty step there) asks the backend, whose tokenizer decides: the generic shapes here, the
        tokenizer's own special tokens where the backend knows them. May load the model (``deadline``).
        """
        from rewardhub.models.specials import GENERIC

        return GENERIC

    async def chat(self, request: ChatRequest, deadline: float) -> Completion:
        self.require("chat")
        raise NotImplementedError  # pragma: no cover

    async def classify(
        self, inputs: Sequence[tuple[Message, ...]], deadline: float
    ) -> list[list[float] | BackendError]:
        """Raw per-label logits for each conversation (a single text is one user message); see
        :attr:`classify_log_probs` for a backend that can only give them up to a constant."""
        self.require("classify")
        raise NotImplementedError  # pragma: no cover

    async def step_probs(
        self, queries: Sequence[StepQuery], deadline: float
    ) -> list[list[float] | BackendError]:
        """P(step is correct) at each step tag, in order, one list per query."""
        self.require("steps")
        raise NotImplementedError  # pragma: no cover

    async def embed(self, texts: Sequence[str], deadline: float) -> list[Embedding | BackendError]:
        self.require("embed")
        raise NotImplementedError  # pragma: no cover
