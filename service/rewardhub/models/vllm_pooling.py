"""Remote reward models on a vLLM server's pooling API (``vllm serve <model> --runner pooling``).

* ``classify`` (outcome reward models, verl's RM path): ``POST /classify``. A bare text goes in one
  batched request (``"input": [...]``); a conversation goes as ``"messages"`` so that the *server*
  applies the model's chat template. ``"use_activation": false`` asks for raw logits (the reward applies
  its own normalisation); for a server that ignores the flag and returns probabilities (sigmoid for one
  label, softmax for more), set ``returns_probabilities: true`` in the backend spec: probabilities are
  then asked for (``"use_activation": true``, so a server that does honour it answers the same) and
  turned back into logits, and an answer outside [0, 1] is an error, not a clamped certainty. One
  label's logit comes back exactly; a head of 2+ labels' only up to a constant per item (the
  log-probabilities), so ``orm`` can take a class probability from it (``softmax``) and nothing that
  needs a logit's value (:attr:`~rewardhub.models.base.ModelBackend.classify_log_probs`).
* ``steps`` (process reward models with a classifier head, e.g. Qwen2.5-Math-PRM served as
  ``Qwen2ForProcessRewardModel``): vLLM returns class probabilities per token (``ALL`` pooling) or only
  at the tokens equal to its ``step_tag_id`` (``STEP`` pooling, vLLM's default for
  ``Qwen2ForProcessRewardModel``, tag 151651), and not the token ids. So the backend asks
  ``POST /tokenize`` for the ids of the formatted input (the chat template applied server-side,
  ``add_generation_prompt: false``) and of the step tag (which must be a single token), sends the ids to
  ``POST /pooling`` with ``"task": "token_classify"``, and keeps the rows at the tag positions: all of
  them when there is one row per step tag, the STEP shape. The request asks for probabilities
  (``"use_activation": true``); rows that are still not probabilities (a server that ignores the flag)
  are soft-maxed here. An input longer than the ``max_model_len`` that ``/tokenize`` reports is an
  error for that item alone (:class:`InputTooLong`, ``unsupported``) and is not sent: vLLM refuses a
  whole ``/pooling`` request when one of its inputs is too long, which would fail every item of the
  batch.

A batch goes to ``/pooling`` (and its bare texts to ``/classify``; a conversation is a request of its
own) in parts of at most :data:`PART_ITEMS` inputs and :data:`PART_TOKENS` tokens, sent at once up to
the backend's ``concurrency`` (:func:`~rewardhub.models.remote.in_parts`). Each part is its own call, with its own
attempts under its own per-attempt timeout, and a part that fails fails its own items only: a
1024-rollout batch sent as one request ran past ``timeout_s`` on a healthy server, failed every item,
counted against the breaker, and a retry sent all of it again. A part's attempt still waits behind the
other parts in flight in the server's queue: ``concurrency`` bounds how much work that is.

Math-Shepherd-style PRMs, which read the LM head's ``+``/``-`` logits, need a generative model and are
served in process (:mod:`rewardhub.models.transformers_backend`), not over the pooling API.

The server applies the chat template and tokenizes, so a ``<|im_end|>`` typed inside a response would
become the real control token there (the response closing its own turn and forging the next one). So
user text is cleaned before it is sent, with the server's own special tokens when the server says what
they are: on first use, and again after a redeploy (:meth:`~VLLMPoolingBackend.forget_server`), the
backend asks ``GET /tokenizer_info`` (vLLM serves it when started with
``--enable-tokenizer-info-endpoint``; it is the tokenizer's ``tokenizer_config.json``) and removes
exactly those strings (:func:`server_specials`). A server without the endpoint (404) gets the control-
token shapes of the chat templates reward models are built on: ``<|...|>`` (ChatML/Qwen, Llama 3, Phi,
gpt-oss), ``<｜...｜>`` with full-width bars (DeepSeek V3/R1 and their distills), ``<start_of_turn>`` /
``<end_of_turn>`` / ``<bos>`` / ``<eos>`` (Gemma), and ``[INST]`` / ``[/INST]`` / ``<<SYS>>`` / ``<s>`` /
``</s>`` (Llama 2, Mistral); none is something a math or code answer needs, but a tokenizer with other
control tokens is only covered through the endpoint. Either way the PRM's own step tag is kept, and
:meth:`VLLMPoolingBackend.describe` says which cleaning is in force.

``url`` is the server root (``http://prm:8000``; a trailing ``/v1`` is ignored).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from rewardhub.models.base import Capability, Message, StepQuery, step_rows
from rewardhub.models.errors import BackendError, BackendUnavailable, InputTooLong
from rewardhub.models.remote import (
    RemoteBackend,
    RemoteClient,
    RemoteOptions,
    in_parts,
    rows_by_index,
)
from rewardhub.models.specials import GENERIC, Scrubber, clean_messages

__all__ = ["PART_ITEMS", "PART_TOKENS", "VLLMPoolingBackend", "probs_to_logits", "server_specials", "softmax"]

# A batch goes to /pooling and /classify in parts of at most PART_ITEMS inputs and PART_TOKENS tokens
# (/pooling: the ids themselves; /classify: texts, at _CHARS_PER_TOKEN characters a token, English's
# average), sent at once up to the backend's concurrency. 65,536 token ids are about 450 KB of JSON,
# under nginx's default 1 MB body limit, and 16 rollouts of 4,096 tokens.
PART_ITEMS = 64
PART_TOKENS = 65_536
_CHARS_PER_TOKEN = 4


class VLLMPoolingBackend(RemoteBackend):
    kind: ClassVar[str] = "vllm_pooling"
    capabilities: frozenset[Capability] = frozenset({"classify", "steps"})
    models_path: ClassVar[str] = "/v1/models"  # the client's base is the server's root

    def __init__(
        self,
        name: str,
        url: str,
        model: str,
        api_key: str | None,
        options: RemoteOptions,
        returns_probabilities: bool = False,
        part_items: int = PART_ITEMS,
        part_tokens: int = PART_TOKENS,
    ):
        super().__init__(name, model)
        url = url.rstrip("/")
        self.client = RemoteClient(name, url[: -len("/v1")] if url.endswith("/v1") else url, api_key, options)
        self.returns_probabilities = returns_probabilities
        self.part_items = part_items
        self.part_tokens = part_tokens
        self._tag_ids: dict[str, int] = {}
        self._scrubber: Scrubber | None = None  # None until /tokenizer_info answered or was found absent
        self._asking = asyncio.Lock()
        # how many times the server was found redeployed: what an ask begun before one learned is the
        # old weights' (their tokenizer), and is not kept
        self._redeploys = 0

    def forget_server(self) -> None:
        """A redeploy may bring another tokenizer: its special tokens (the cleaning) and the step tag's
        id are asked again. Kept, the old tokenizer's cleaning let the new one's control tokens through
        to the server, and the old tag id found no step in the new tokenization (every item an error)."""
        self._redeploys += 1
        self._scrubber = None
        self._tag_ids = {}

    def identity(self) -> str:
        # probabilities turned back into logits are other numbers than the server's logits
        return super().identity() + ("+probabilities" if self.returns_probabilities else "")

    @property
    def classify_log_probs(self) -> bool:
        # softmax probabilities give a head of 2+ outputs its logits up to a constant only
        return self.returns_probabilities

    @property
    def identity_settled(self) -> bool:
        """False until the server said which weights it serves (see RemoteBackend) and what its special
        tokens are (or that it does not say): before, a call cleans user text with the generic shapes
        for the moment, another input than the one the same item gets afterwards, and its score must
        not be cached as the item's."""
        return super().identity_settled and self._scrubber is not None

    def describe(self) -> dict[str, Any]:
        cleaning = "not yet asked" if self._scrubber is None else self._scrubber.describe()
        return {**super().describe(), "special_tokens": cleaning}

    async def cleaner(self, deadline: float) -> Scrubber:
        """How user text is cleaned for this server (see the module docstring); asked once, and again
        after a redeploy (:meth:`forget_server`)."""
        await self.learn_served(deadline)
        if self._scrubber is not None:
            return self._scrubber
        # Another call may be asking, with a later deadline than this one: wait for it no longer than
        # this call's own deadline (an unbounded wait held a 0.3 s call for the 3 s another spent on a
        # slow /tokenizer_info). Past it, this call's own requests time out without reaching the server.
        try:
            await asyncio.wait_for(self._asking.acquire(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return GENERIC
        try:
            if self._scrubber is None:
                redeploys = self._redeploys
                try:
                    info = await self.client.get_optional("/tokenizer_info", deadline)
                except BackendError:
                    return GENERIC  # the server could not be asked now: ask again on the next call
                learned = Scrubber(server_specials(info) or None)
                if redeploys != self._redeploys:
                    return GENERIC  # redeployed while asked: the answer may be the old tokenizer's
                self._scrubber = learned
            return self._scrubber
        finally:
            self._asking.release()

    # --- classify ----------------------------------------------------------------------------------
    async def classify(
        self, inputs: Sequence[tuple[Message, ...]], deadline: float
    ) -> list[list[float] | BackendError]:
        out: list[list[float] | BackendError | None] = [None] * len(inputs)
        clean = await self.cleaner(deadline)
        texts = [
            (i, clean(msgs[0].content))
            for i, msgs in enumerate(inputs)
            if len(msgs) == 1 and msgs[0].role == "user"
        ]
        chats = [
            (i, msgs) for i, msgs in enumerate(inputs) if not (len(msgs) == 1 and msgs[0].role == "user")
        ]

        async def batch_texts() -> None:
            if not texts:
                return

            async def post(batch: Sequence[str]) -> list[list[float]]:
                payload = {**self.model_field, "input": list(batch), "use_activation": self._activation}
                return self._rows(await self.client.post("/classify", payload, deadline), len(batch))

            chars = self.part_tokens * _CHARS_PER_TOKEN
            rows = await in_parts(post, [t for _, t in texts], self.part_items, chars, len)
            for (i, _), row in zip(texts, rows, strict=True):
                out[i] = row

        async def one_chat(i: int, msgs: tuple[Message, ...]) -> None:
            payload = {
                **self.model_field,
                "messages": clean_messages(clean, msgs),
                "use_activation": self._activation,
            }
            try:
                out[i] = self._rows(await self.client.post("/classify", payload, deadline), 1)[0]
            except BackendError as exc:
                out[i] = exc

        await asyncio.gather(batch_texts(), *(one_chat(i, m) for i, m in chats))
        return [o if o is not None else BackendError("no answer") for o in out]

    @property
    def _activation(self) -> bool:
        """The ``use_activation`` a /classify request asks for: raw logits, or, for a server said to
        return probabilities (``returns_probabilities``), probabilities. Asking such a server for logits
        too made one that honours the flag (vLLM >= 0.11.1) answer logits, which were then read as
        probabilities: a logit of 2.3 (P 0.909) became 16.1, silently."""
        return self.returns_probabilities

    def _rows(self, answer: Any, n: int) -> list[list[float]]:
        probs = rows_by_index(self.name, "/classify", answer, n, "probs")
        try:
            rows = [[float(x) for x in r] for r in probs]
        except (TypeError, ValueError) as exc:
            raise BackendError(f"backend {self.name!r}: malformed /classify answer ({exc!r})") from None
        if not self.returns_probabilities:
            return rows
        for r in rows:
            if not all(0.0 <= x <= 1.0 for x in r):
                # a regression head (no activation), or logits: clamped, they became a certain 0 or 1
                raise BackendError(
                    f"backend {self.name!r}: /classify answered {r[:4]}, not probabilities, although its "
                    "spec sets returns_probabilities: remove it for this server and model"
                )
        return [probs_to_logits(r) for r in rows]

    # --- steps ---------------------------------------------------------------------------------
    async def step_probs(
        self, queries: Sequence[StepQuery], deadline: float
    ) -> list[list[float] | BackendError]:
        if not all(q.reads_class for q in queries):
            # something this backend cannot do (unsupported), not a failure a later try may get past
            refused = BackendUnavailable(
                f"backend {self.name!r} (vllm_pooling) serves classifier-head PRMs only; a PRM that reads "
                "+/- token logits (Math-Shepherd, RLHFlow), a value head (Skywork) or token log-likelihoods "
                "(an implicit PRM) needs a transformers backend"
            )
            return [refused for _ in queries]
        clean = await self.cleaner(deadline)
        ids = await asyncio.gather(
            *(self._tokenize(clean, q, deadline) for q in queries), return_exceptions=True
        )
        out: list[list[float] | BackendError] = [BackendError("no answer")] * len(queries)
        todo: list[tuple[int, list[int], list[int]]] = []  # (query, token ids, tag positions)
        for i, (q, got) in enumerate(zip(queries, ids, strict=True)):
            if isinstance(got, BaseException):
                out[i] = got if isinstance(got, BackendError) else BackendError(repr(got))
                continue
            token_ids, tag_id, limit = got
            if limit is not None and len(token_ids) > limit:
                out[i] = InputTooLong(
                    f"the input is {len(token_ids)} tokens, more than the model's max_model_len {limit}"
                )
                continue
            positions = [k for k, t in enumerate(token_ids) if t == tag_id]
            if len(positions) != q.steps:
                out[i] = BackendError(
                    f"backend {self.name!r}: {len(positions)} step tags in the tokenized input, expected {q.steps}"
                )
                continue
            todo.append((i, token_ids, positions))
        if not todo:
            return out
        per_input = await in_parts(
            lambda batch: self._pool(batch, deadline),
            [t for _, t, _ in todo],
            self.part_items,
            self.part_tokens,
            len,
        )
        for (i, token_ids, positions), rows in zip(todo, per_input, strict=True):
            if isinstance(rows, BackendError):
                out[i] = rows
                continue
            try:
                q = queries[i]
                at = step_rows(len(rows), len(token_ids), positions)
                if at is None:
                    raise ValueError(
                        f"{len(rows)} rows for {len(token_ids)} tokens and {len(positions)} step tags"
                    )
                out[i] = [softmax([float(x) for x in rows[k]])[q.positive_index] for k in at]
            except (IndexError, KeyError, TypeError, ValueError) as exc:
                out[i] = BackendError(f"backend {self.name!r}: malformed /pooling rows ({exc!r})")
        return out

    async def _pool(self, inputs: Sequence[list[int]], deadline: float) -> list[Any]:
        """The per-token rows of each input, from one ``/pooling`` request: one part of the batch
        (:func:`~rewardhub.models.remote.in_parts`). A part the server refuses for its size (413 from a
        proxy) or for one input's length is sent again input by input by the caller."""
        # Probabilities asked for, not guessed: a pooler configured without an activation answers logits,
        # and logits that happen to lie in [0, 1] and sum to 1 would pass for probabilities.
        payload = {
            **self.model_field,
            "input": list(inputs),
            "task": "token_classify",
            "use_activation": True,
        }
        answer = await self.client.post("/pooling", payload, deadline)
        return rows_by_index(self.name, "/pooling", answer, len(inputs), "data")

    async def _tokenize(
        self, clean: Scrubber, q: StepQuery, deadline: float
    ) -> tuple[list[int], int, int | None]:
        """The query's token ids, its step tag's id, and the server's ``max_model_len`` if it says."""
        tag_id = self._tag_ids.get(q.step_tag)
        if tag_id is None:
            redeploys = self._redeploys
            got = await self.client.post(
                "/tokenize",
                {**self.model_field, "prompt": q.step_tag, "add_special_tokens": False},
                deadline,
            )
            tags = _tokens(self.name, got)
            if len(tags) != 1:
                raise BackendError(
                    f"backend {self.name!r}: the step tag {q.step_tag!r} is {len(tags)} tokens for this model, not 1"
                )
            tag_id = tags[0]
            if redeploys == self._redeploys:  # (an answer from before a redeploy is used once, not kept)
                self._tag_ids[q.step_tag] = tag_id
        if q.messages is not None:
            payload: dict[str, Any] = {
                **self.model_field,
                "messages": clean_messages(clean, q.messages, q.step_tag),
                "add_generation_prompt": False,
            }
        else:
            payload = {
                **self.model_field,
                "prompt": clean(q.text or "", q.step_tag),
                "add_special_tokens": True,
            }
        answer = await self.client.post("/tokenize", payload, deadline)
        limit = answer.get("max_model_len") if isinstance(answer, dict) else None
        return _tokens(self.name, answer), tag_id, limit if isinstance(limit, int) else None


# tokenizer_config.json fields that name special tokens, one each or a list (or a name -> token map)
_SPECIAL_FIELDS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_SPECIAL_LISTS = ("additional_special_tokens", "extra_special_tokens")
# an XML-style tag (<think>, </tool_call>): content markup a model reads in responses, not a turn marker
_MARKUP_TAG = re.compile(r"</?[A-Za-z][\w-]*>")


def server_specials(info: Any) -> tuple[str, ...]:
    """The strings a server's tokenizer reads as control tokens, from its ``/tokenizer_info`` answer.

    vLLM answers with the tokenizer's ``init_kwargs`` (``tokenizer_config.json``) with every added token
    reduced to its text, which drops the ``special`` flag. So: the named special tokens and the
    additional ones, and every added token except XML-style tags (``<think>``, ``<tool_call>``: added but
    not special in Qwen's tokenizers, and part of the responses a reward model is trained on); where an
    added token still carries its flag (a server that sends the config as stored), the flag decides.
    Empty when the answer names none (then the caller falls back to the generic shapes).
    """
    if not isinstance(info, dict):
        return ()
    found: set[str] = set()

    def add(token: Any) -> None:
        text = token.get("content") if isinstance(token, dict) else token
        if isinstance(text, str) and text.strip():
            found.add(text)

    for field in _SPECIAL_FIELDS:
        add(info.get(field))
    for field in _SPECIAL_LISTS:
        listed = info.get(field)
        for token in listed.values() if isinstance(listed, dict) else listed or ():
            add(token)
    added = info.get("added_tokens_decoder")
    for token in added.values() if isinstance(added, dict) else ():
        if isinstance(token, dict):
            if token.get("special", True):
                add(token)
        elif isinstance(token, str) and not _MARKUP_TAG.fullmatch(token):
            add(token)
    return tuple(sorted(found))


def _tokens(name: str, answer: Any) -> list[int]:
    try:
        return [int(t) for t in answer["tokens"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise BackendError(f"backend {name!r}: malformed /tokenize answer ({exc!r})") from None


# How far from 1 a row of probabilities may sum: a server whose classifier head runs in bf16 (vLLM before
# its fp32 head, or with head_dtype "model") rounds each probability to 8 significant bits, so their sum
# is off by up to 2^-8 (0.0039): [0.65, 0.35] comes back as [0.6484375, 0.349609375], summing to 0.99805.
_PROB_SUM_TOLERANCE = 0.01


def softmax(row: list[float]) -> list[float]:
    """Probabilities from a row that may already be probabilities (vLLM applies the activation); those
    are renormalised (their rounding undone as far as it can be), not soft-maxed a second time: with a
    tolerance of 1e-3, bf16 probabilities were, and a step of P(correct) 0.35 scored 0.43."""
    total = sum(row)
    if row and all(0.0 <= x <= 1.0 for x in row) and abs(total - 1.0) <= _PROB_SUM_TOLERANCE:
        return [x / total for x in row]
    m = max(row)
    exps = [math.exp(x - m) for x in row]
    total = sum(exps)
    return [e / total for e in exps]


# Probabilities are clamped to [eps, 1 - eps] before a logit is taken from them: a probability of 1 (or 0)
# to the server's precision gives no logit back, only this bound, ±16.1 (:data:`SATURATED_LOGIT`).
PROBABILITY_EPS = 1e-7
SATURATED_LOGIT = math.log((1 - PROBABILITY_EPS) / PROBABILITY_EPS)


def probs_to_logits(probs: list[float]) -> list[float]:
    """Undo a classifier's activation (sigmoid for one label, softmax for more) so rewards always see
    logits. One label's logit comes back exactly; softmax's only up to a per-row constant: these are the
    log-probabilities (each logit less the row's log-sum-exp), which give the class probabilities and
    the differences of logits, never a logit's own value (:attr:`ModelBackend.classify_log_probs`)."""
    eps = PROBABILITY_EPS
    if len(probs) == 1:
        p = min(max(probs[0], eps), 1 - eps)
        return [math.log(p / (1 - p))]
    return [math.log(max(p, eps)) for p in probs]
