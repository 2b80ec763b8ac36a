"""An OpenAI-compatible HTTP backend: vLLM, SGLang, TGI, llama.cpp server, OpenAI itself.

``url`` is the API base *including* ``/v1`` (what the OpenAI SDK calls ``base_url``), e.g.
``http://judge:8000/v1``. Judges use ``POST {url}/chat/completions`` with ``logprobs: true`` and
``top_logprobs: k`` when the reward scores from logprobs; ``POST {url}/embeddings`` serves ``embed``.
A reasoning parser's thinking (``reasoning_content`` or ``reasoning``) comes back as the completion's
``reasoning``, apart from its text. The answer's length limit goes as ``max_tokens``, which every
OpenAI-compatible server reads; OpenAI's reasoning models (o1, o3, gpt-5...) refuse it and ask for
``max_completion_tokens``, so on that refusal the backend switches to ``max_completion_tokens`` for
good and sends the call again.
Everything about timeouts, retries, concurrency and the circuit breaker is in
:mod:`rewardhub.models.remote`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import structlog

from rewardhub.models.base import Capability, ChatRequest, Completion, Embedding, TokenLogprob
from rewardhub.models.errors import BackendError, BackendRejected
from rewardhub.models.remote import (
    RemoteBackend,
    RemoteClient,
    RemoteOptions,
    in_parts,
    rows_by_index,
)

__all__ = ["OpenAIBackend", "parse_chat_completion"]

log = structlog.get_logger("rewardhub.models.openai")

# OpenAI rejects top_logprobs above 20; vLLM's default --max-logprobs is 20 as well.
MAX_TOP_LOGPROBS = 20
# OpenAI's limits of one /embeddings request: 2048 inputs, 300,000 tokens summed over them
MAX_EMBED_INPUTS = 2048
MAX_EMBED_CHARS = 100_000


class OpenAIBackend(RemoteBackend):
    kind: ClassVar[str] = "openai"
    capabilities: frozenset[Capability] = frozenset({"chat", "embed"})
    # sent on (vLLM and SGLang continue; a server without continue_final_message answers 400)
    continues_messages: ClassVar[bool] = True

    def __init__(self, name: str, url: str, model: str, api_key: str | None, options: RemoteOptions):
        super().__init__(name, model)
        self.client = RemoteClient(name, url, api_key, options)
        self.limit_field = "max_tokens"  # or "max_completion_tokens", once the server asked for it

    def ready(self) -> dict[str, Any]:
        # An open breaker is worth seeing in /ready, but it does not make the service unready: every
        # other reward still works, and the judge's items say backend_error until the server is back.
        # (A model the server no longer lists does: RemoteBackend.ready.)
        return super().ready()

    async def chat(self, request: ChatRequest, deadline: float) -> Completion:
        await self.learn_served(deadline)
        payload: dict[str, Any] = {
            **self.model_field,
            "messages": [m.as_dict() for m in request.messages],
            self.limit_field: request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "n": 1,
        }
        if request.seed is not None:
            payload["seed"] = request.seed
        if request.top_logprobs > 0:
            payload["logprobs"] = True
            payload["top_logprobs"] = min(request.top_logprobs, MAX_TOP_LOGPROBS)
        if request.stop:
            payload["stop"] = list(request.stop)
        if request.continue_final:
            # vLLM's and SGLang's chat extras: render the last (assistant) message open, without the
            # generation prompt of a new turn; servers without them answer 400 (OpenAI: an unknown
            # parameter), which is the caller's BackendRejected
            payload["continue_final_message"] = True
            payload["add_generation_prompt"] = False
        try:
            answer = await self.client.post("/chat/completions", payload, deadline)
        except BackendRejected as exc:
            # "Unsupported parameter: 'max_tokens' is not supported with this model. Use
            # 'max_completion_tokens' instead." (OpenAI's o-series and gpt-5): every item failed
            if "max_tokens" not in payload or "max_completion_tokens" not in str(exc):
                raise
            if self.limit_field == "max_tokens":
                self.limit_field = "max_completion_tokens"
                log.info("openai_limit_field", backend=self.name, field=self.limit_field)
            payload["max_completion_tokens"] = payload.pop("max_tokens")
            answer = await self.client.post("/chat/completions", payload, deadline)
        return parse_chat_completion(self.name, answer)

    async def embed(self, texts: Sequence[str], deadline: float) -> list[Embedding | BackendError]:
        """Batched ``/embeddings`` calls, at once. vLLM and OpenAI refuse the whole request (400) when
        one input exceeds the context, which failed every item of the batch for one long rollout: after
        such a refusal the texts are asked for one by one, so only the refused ones fail.

        OpenAI also refuses a request of more than 2048 inputs or 300,000 tokens summed over them, with
        a 400 about the request (every text of a large similarity request failed): the texts go in parts
        of at most :data:`MAX_EMBED_INPUTS` texts and :data:`MAX_EMBED_CHARS` characters (under the token
        limit even at three tokens a character, a rare CJK character's worst); a longer text goes alone
        (:func:`~rewardhub.models.remote.in_parts`)."""
        await self.learn_served(deadline)
        return await in_parts(
            lambda batch: self._embed(batch, deadline), texts, MAX_EMBED_INPUTS, MAX_EMBED_CHARS, len
        )

    async def _embed(self, texts: Sequence[str], deadline: float) -> list[Embedding]:
        answer = await self.client.post("/embeddings", {**self.model_field, "input": list(texts)}, deadline)
        rows = rows_by_index(self.name, "/embeddings", answer, len(texts), "embedding")
        try:
            vectors = [[float(x) for x in row] for row in rows]
        except (TypeError, ValueError) as exc:
            raise BackendError(f"backend {self.name!r}: malformed /embeddings answer ({exc!r})") from None
        return [Embedding(v) for v in vectors]  # whether the server cut a text is not in the answer


def parse_chat_completion(name: str, answer: Any) -> Completion:
    """The first choice of a chat completion; anything malformed is a :class:`BackendError`."""
    try:
        choice = answer["choices"][0]
        # ``content`` is required but nullable in OpenAI's schema; servers that drop null fields
        # (omitempty) leave it out of a refusal or a reasoning model's cut-off answer: the same as null
        text = _content_text(choice["message"].get("content"))
        tokens: tuple[TokenLogprob, ...] | None = None
        lp = choice.get("logprobs")
        if isinstance(lp, dict) and isinstance(lp.get("content"), list):
            tokens = tuple(
                TokenLogprob(
                    token=str(t["token"]),
                    logprob=_logprob(t["logprob"]),
                    top=tuple((str(a["token"]), _logprob(a["logprob"])) for a in t.get("top_logprobs") or ()),
                )
                for t in lp["content"]
            )
        return Completion(
            text=text,
            tokens=tokens,
            finish_reason=choice.get("finish_reason"),
            reasoning=_reasoning_text(choice["message"]),
        )
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise BackendError(
            f"backend {name!r}: malformed chat completion ({type(exc).__name__}: {exc})"
        ) from None


def _content_text(content: Any) -> str:
    """The answer text of ``message.content``: a string; null when nothing was written (a refusal, or a
    reasoning model cut off while it reasoned); or a list of parts (Mistral's reasoning models send
    ``[{"type": "thinking", ...}, {"type": "text", "text": ...}]``), whose text parts are the answer and
    whose thinking is a draft, not a verdict."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        )
    raise TypeError("message.content is neither a string nor a list of parts")


def _reasoning_text(message: dict[str, Any]) -> str | None:
    """The thinking a server with a reasoning parser returns apart from ``content``: vLLM's
    ``reasoning_content`` (``reasoning`` in newer versions, which may send both, the same text) and
    OpenRouter's ``reasoning``. None when there is none."""
    for key in ("reasoning", "reasoning_content"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _logprob(value: Any) -> float:
    """A token's logprob; null is what some servers (llama.cpp) write for a probability of 0."""
    return -math.inf if value is None else float(value)
