"""The embedded default backend: a Hugging Face model in this process (CPU, or CUDA when present).

The model is loaded from a local directory with ``from_pretrained`` (no hub access) at the app's
lifespan start, so a misconfigured path fails the start with a message naming the setting instead of
failing every request. The one exception is the built-in MiniLM embedding default, loaded on first use
(``lazy=True``) so that a service which never scores ``similarity`` never pays for importing torch.

All model work runs in a dedicated model process per backend (:mod:`rewardhub.models.model_process`):
a forward pass is thousands of small operator calls that would otherwise fight the event loop for the
GIL, and in the service process that made a batched forward ~15x slower than on an idle machine. Each
capability has its own :class:`~rewardhub.models.batcher.MicroBatcher` in front of that process, so items
from concurrent requests share forward passes, and one message per batch crosses the process boundary.
(Subclasses whose engine already runs elsewhere, like in-process vLLM, set ``isolate = False`` and use a
thread.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Literal, TypeVar

import structlog

from rewardhub.models import hf_compute
from rewardhub.models.base import (
    Capability,
    ChatRequest,
    Completion,
    Embedding,
    Message,
    ModelBackend,
    StepQuery,
)
from rewardhub.models.batcher import MicroBatcher
from rewardhub.models.errors import BackendError, BackendTimeout, BackendUnavailable, ForwardCrashed
from rewardhub.models.fingerprint import checkpoint_fingerprint, local_dir
from rewardhub.models.model_process import ModelProcess
from rewardhub.models.specials import GENERIC, Scrubber

__all__ = ["BatchOptions", "TransformersBackend"]

log = structlog.get_logger("rewardhub.models.transformers")

T = TypeVar("T")

_CAPABILITIES: dict[str, frozenset[Capability]] = {
    "generate": frozenset({"chat", "steps"}),
    "token_classification": frozenset({"steps"}),
    "value_head": frozenset({"steps"}),
    "sequence_classification": frozenset({"classify"}),
    "embedding": frozenset({"embed"}),
}


@dataclass(frozen=True, slots=True)
class BatchOptions:
    max_batch: int = 32
    max_wait_ms: float = 5.0
    queue_max: int = 1024
    max_tokens: int | None = 65_536
    in_flight: int = 2


def _chars(messages: Sequence[Message]) -> int:
    return sum(len(m.content) for m in messages)


def _step_len(q: StepQuery) -> int:
    # A cheap token estimate (about 4 characters per token) for sorting and the token budget: exact
    # counts would mean tokenizing on the event loop.
    if q.messages is not None:  # with the pieces an implicit PRM's query continues it by
        chars = _chars(q.messages) + sum(len(p) for p in q.pieces or ())
    elif q.pieces is not None:
        chars = sum(len(p) for p in q.pieces) + q.steps  # a tag token after each step
    else:
        chars = len(q.text or "")
    return chars // 4 + 8


@dataclass(frozen=True, slots=True)
class _InProcess:
    """Stands for a model loaded in the model process (its facts, for describe())."""

    device: str
    dtype: str
    max_length: int
    share_prefix: bool
    pass_overhead: float
    prefix_cache_mb: float = 0.0


class TransformersBackend(ModelBackend):
    kind: ClassVar[str] = "transformers"
    isolate: ClassVar[bool] = True  # run the model in its own process (see the module docstring)
    # from_pretrained(local_files_only=True): a directory, or a hub id already in the local cache
    local_files_only: ClassVar[bool] = True
    task_capabilities: ClassVar[dict[str, frozenset[Capability]]] = _CAPABILITIES  # what each task serves
    # stop strings end each row of a batched generate; continue_final renders the chat template's
    # continue_final_message (verdict "continued", ThinkPRM's two calls)
    continues_messages: ClassVar[bool] = True

    def __init__(
        self,
        name: str,
        path: str,
        task: hf_compute.Task,
        *,
        device: str = "auto",
        dtype: str = "auto",
        trust_remote_code: bool = False,
        max_length: int | None = None,
        threads: int = 0,
        share_prefix: bool | Literal["auto"] = "auto",
        prefix_cache_mb: float = 0.0,
        batch: BatchOptions | None = None,
        observe_batch: Callable[[str, int], None] | None = None,
        lazy: bool = False,
        stall_s: float | None = None,
    ):
        super().__init__(name, path)
        self.task = task
        self.capabilities = self.task_capabilities[task]
        self._load_args: dict[str, Any] = {
            "device": device,
            "dtype": dtype,
            "trust_remote_code": trust_remote_code,
            "max_length": max_length,
            "threads": threads,
            "share_prefix": share_prefix,
            "prefix_cache_mb": prefix_cache_mb,
        }
        self.batch = batch or BatchOptions()
        self._observe = observe_batch
        self.lazy = lazy
        self._stall_s = stall_s  # a batch not back after this long: the model process hangs
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"model-{name}")
        self._process: ModelProcess | None = None
        self._loaded: Any = None
        self._load_task: asyncio.Task[Any] | None = None
        self._load_error: str | None = None
        self._load_failed: type[BackendError] = BackendError  # the kind of error the load ended in
        self.batchers: dict[Capability, MicroBatcher[Any, Any]] = {}
        self._fingerprint = checkpoint_fingerprint(path)
        self._scrubber: Scrubber | None = None  # cleaner(): built once per start of the model process
        self._scrubbed: dict[str, Any] | None = None  # the process info it was built from
        # Called when its model process died and is restarted (the hub counts it in /metrics)
        self.on_process_restart: Callable[[], None] | None = None
        # Given the model's counters after each batch (hf_compute.Loaded.counters; the hub exports them)
        self.on_model_counters: Callable[[dict[str, int]], None] | None = None

    def identity(self) -> str:
        """The model and the settings that change its outputs (task, device and dtype, context length,
        remote code), and a fingerprint of the checkpoint's files: a checkpoint saved over the same
        directory, or the same one read with 32 instead of 256 tokens, is another model for the cache.

        Device and dtype are the ones the model loaded with: "auto" is float32 on a CPU host and bf16 on
        a GPU host, whose scores differ, and replicas of both kinds may share one Redis."""
        a = self._load_args
        device, dtype = a["device"], a["dtype"]
        if isinstance(self._loaded, hf_compute.Loaded | _InProcess):
            device, dtype = self._loaded.device, self._loaded.dtype
        return (
            f"{super().identity()}|{self.task}|{device}|{dtype}|{a['max_length']}"
            f"|{a['trust_remote_code']}|{self._fingerprint}"
        )

    def _process_restarted(self) -> None:
        """Before a restarted model process reloads: the checkpoint may have been saved over since the
        start (a retrained reward model), and the new weights must not be cached as the old ones."""
        self._fingerprint = checkpoint_fingerprint(self.model)
        if self.on_process_restart is not None:
            self.on_process_restart()

    @property
    def identity_settled(self) -> bool:
        """False until an "auto" device or dtype has resolved (a lazily loaded model before its first
        load): results are not cached under the unresolved name."""
        a = self._load_args
        return self._loaded is not None or "auto" not in (a["device"], a["dtype"])

    # --- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        self._make_batchers()
        if not self.lazy:
            if self.local_files_only and local_dir(self.model) is None:
                # from_pretrained's own words for this were about the hub ("Repo id must be in the form
                # 'repo_name' or 'namespace/repo_name'"), for a directory that is simply not there
                raise BackendUnavailable(
                    f"backend {self.name!r}: cannot load {self.model!r}: no such model directory (nor the id "
                    "of a model in the local Hugging Face cache)"
                )
            try:
                await self._ensure_loaded(None)
            except BackendError as exc:
                raise BackendUnavailable(
                    f"backend {self.name!r}: cannot load {self.model!r}: {exc}"
                ) from None

    async def close(self) -> None:
        # Every part is closed even when the task closing it is cancelled meanwhile (a shutdown bounded in
        # time): its cancellation goes on once they all are. Stopped at the first, the model process was
        # left running, with the model's memory, for the life of the service.
        cancelled: asyncio.CancelledError | None = None
        for b in self.batchers.values():
            try:
                await b.close()
            except asyncio.CancelledError as exc:
                cancelled = exc
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._process is not None:
            try:
                await self._process.close()
            except asyncio.CancelledError as exc:
                cancelled = exc
            self._process = None
        self._loaded = None
        if cancelled is not None:
            raise cancelled

    def describe(self) -> dict[str, Any]:
        restart_failed = self._process is not None and self._process.error is not None
        d = {
            **super().describe(),
            "task": self.task,
            "loaded": self._loaded is not None and not restart_failed,
        }
        if isinstance(self._loaded, hf_compute.Loaded | _InProcess):
            d.update(
                device=self._loaded.device,
                dtype=self._loaded.dtype,
                max_length=self._loaded.max_length,
                share_prefix=self._loaded.share_prefix,
                prefix_cache_mb=self._loaded.prefix_cache_mb,
                # length buckets on CPU: a pass's fixed cost in tokens (null: batches stay whole)
                pass_overhead_tokens=None
                if math.isinf(self._loaded.pass_overhead)
                else round(self._loaded.pass_overhead, 1),
            )
        if self._process is not None:
            d["process_restarts"] = self._process.restarts
        d["batchers"] = {cap: b.stats.as_dict() for cap, b in self.batchers.items()}
        return d

    def ready(self) -> dict[str, Any]:
        # The first load's error, else a failed restart of a model process that died: either way every
        # batch fails until a load succeeds, so the probe must not say ready.
        error = self._load_error
        if error is None and self._process is not None:
            error = self._process.error
        if error is not None:
            # A lazily loaded default (MiniLM) that fails only disables its reward, not the service.
            return {"ok": self.lazy, "error": error, **self.describe()}
        return {"ok": self._loaded is not None or self.lazy, **self.describe()}

    def call_slots(self) -> int:
        # half the queue: one request never fills it alone, and leaves room for others
        return max(1, min(super().call_slots(), self.batch.queue_max // 2))

    def queue_depth(self) -> int:
        return sum(b.depth() for b in self.batchers.values())

    def _make_batchers(self) -> None:
        if self.batchers:  # started again after close(): a closed batcher fails its items until started
            for batcher in self.batchers.values():
                batcher.start()
            return
        b = self.batch

        def make(cap: Capability, run: Callable[[list[Any]], Any], length: Callable[[Any], int]) -> None:
            label = f"{self.name}:{cap}"
            observe = self._observe

            def on_batch(n: int) -> None:
                if observe is not None:
                    observe(label, n)

            self.batchers[cap] = MicroBatcher(
                f"{self.name}:{cap}",
                run,
                max_batch=b.max_batch,
                max_wait_ms=b.max_wait_ms,
                queue_max=b.queue_max,
                length=length,
                max_tokens=b.max_tokens,
                on_batch=on_batch,
                in_flight=b.in_flight,
            )

        if "chat" in self.capabilities:
            make("chat", self._run_chat, lambda r: _chars(r.messages) // 4 + r.max_tokens)
        if "steps" in self.capabilities:
            make("steps", partial(self._run, self._compute("steps")), _step_len)
        if "classify" in self.capabilities:
            make("classify", partial(self._run, self._compute("classify")), lambda m: _chars(m) // 4 + 8)
        if "embed" in self.capabilities:
            make("embed", partial(self._run, self._compute("embed")), lambda t: len(t) // 4 + 2)
        for batcher in self.batchers.values():
            batcher.start()

    async def _ensure_loaded(self, deadline: float | None) -> Any:
        if self._loaded is not None:
            return self._loaded
        if self._load_error is not None:
            # the first failure's kind, every time: torch not installed is unavailable (unsupported),
            # not a model failing on this item (a plain BackendError read backend_error from the
            # second request on)
            raise self._load_failed(self._load_error)
        if self._load_task is None:
            loop = asyncio.get_running_loop()
            fn = self._loader()

            async def load() -> Any:
                if not self.isolate:
                    return await loop.run_in_executor(self._executor, fn)
                process = ModelProcess(
                    self.name,
                    fn,
                    on_restart=self._process_restarted,
                    stall_s=self._stall_s,
                    on_counters=self.on_model_counters,
                )
                info = await process.start()
                self._process = process
                return _InProcess(
                    str(info.get("device")),
                    str(info.get("dtype")),
                    int(info.get("max_length", 0)),
                    bool(info.get("share_prefix", False)),
                    float(info.get("pass_overhead", math.inf)),
                    float(info.get("prefix_cache_mb", 0.0)),
                )

            self._load_task = loop.create_task(load(), name=f"load:{self.name}")
        try:
            if deadline is None:
                loaded = await asyncio.shield(self._load_task)
            else:
                loaded = await asyncio.wait_for(
                    asyncio.shield(self._load_task), max(0.0, deadline - time.monotonic())
                )
        except TimeoutError:
            raise BackendTimeout(f"backend {self.name!r} is still loading {self.model!r}") from None
        except BackendError as exc:
            self._load_error = str(exc)
            self._load_failed = BackendUnavailable if isinstance(exc, BackendUnavailable) else BackendError
            raise
        except Exception as exc:  # OSError (no such path), ValueError (bad config)...
            self._load_error = f"{type(exc).__name__}: {exc}"[:500]
            raise BackendError(self._load_error) from None
        if self._loaded is None:
            self._loaded = loaded
            log.info(
                "model_loaded",
                backend=self.name,
                **{k: v for k, v in self.describe().items() if k != "batchers"},
            )
        return self._loaded

    async def cleaner(self, deadline: float) -> Scrubber:
        """The tokenizer's own special tokens, the ones :func:`hf_compute.sanitize` removes before the
        model sees a text (told by the model process when it loaded, again after a restart): "<pad>" or
        "<unk>" are none of the generic shapes, yet reach the model as nothing. Loads the model."""
        loaded = await self._ensure_loaded(deadline)
        if self._process is None:  # the model in this process: the scrubber sanitize itself uses
            tok = self._tokenizer(loaded)
            return GENERIC if tok is None else hf_compute.scrubber(tok)
        info = self._process.info  # a new dict at each (re)start of the process
        told = info.get("specials")
        if told is None:
            return GENERIC
        if self._scrubbed is not info:
            self._scrubber, self._scrubbed = Scrubber([str(t) for t in told]), info
        assert self._scrubber is not None
        return self._scrubber

    # --- hooks (the vLLM backend swaps in its own loading and compute functions) --------------------
    def _tokenizer(self, loaded: Any) -> Any:
        """The tokenizer of a model loaded in this process (None if it has none)."""
        return getattr(loaded, "tokenizer", None)

    def _loader(self) -> Callable[[], Any]:
        return partial(hf_compute.load, self.model, self.task, **self._load_args)

    def _compute(self, cap: Capability) -> Callable[[Any, list[Any]], list[Any]]:
        fns: dict[Capability, Callable[[Any, list[Any]], list[Any]]] = {
            "chat": hf_compute.generate_chat,
            "steps": hf_compute.step_probs,
            "classify": hf_compute.classify,
            "embed": hf_compute.embed,
        }
        return fns[cap]

    # --- batched work (the batchers call these; the model runs on the backend's thread) ---------
    async def _run(self, fn: Callable[[Any, list[Any]], list[T]], items: list[Any]) -> list[T]:
        loaded = self._loaded
        if loaded is None:
            raise BackendError(f"backend {self.name!r} is not loaded")
        if self._process is not None:
            return await self._process.call(fn, items)
        loop = asyncio.get_running_loop()
        out = await loop.run_in_executor(self._executor, self._call, fn, loaded, items)
        if self.on_model_counters is not None and isinstance(loaded, hf_compute.Loaded):
            self.on_model_counters(loaded.counters())
        return out

    @staticmethod
    def _call(fn: Callable[[Any, list[Any]], list[T]], loaded: Any, items: list[Any]) -> list[T]:
        """On the model thread: no autograd graph (grad mode is thread-local, so set per call)."""
        with hf_compute.inference():
            try:
                return fn(loaded, items)
            except Exception as exc:
                oom = ForwardCrashed.out_of_memory(exc)
                if oom is None:
                    raise
                raise oom from exc  # the batcher retries it in halves

    async def _run_chat(self, requests: list[ChatRequest]) -> list[Completion | BackendError]:
        # One generate() per sampling configuration: temperature and max_tokens are per call.
        groups: dict[tuple[float, float, int, int, int | None], list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(r.sampling_key(), []).append(i)
        out: list[Completion | BackendError] = [BackendError("not run")] * len(requests)
        for idx in groups.values():
            try:
                results = await self._run(self._compute("chat"), [requests[i] for i in idx])
            except ForwardCrashed:  # the batcher splits the batch: the item that crashes fails alone
                raise
            except Exception as exc:  # one group's failure is its own items' (not the other requests')
                results = [BackendError.of(exc)] * len(idx)
            for i, res in zip(idx, results, strict=True):
                out[i] = res
        return out

    async def _submit(self, cap: Capability, items: Sequence[Any], deadline: float) -> list[Any]:
        self.require(cap)
        await self._ensure_loaded(deadline)
        return await self.batchers[cap].submit_many(items, deadline)

    # --- the capabilities ----------------------------------------------------------------------
    async def chat(self, request: ChatRequest, deadline: float) -> Completion:
        # generation stops at the deadline: nobody reads an answer after it, and the next batch waits
        (res,) = await self._submit("chat", [dataclasses.replace(request, deadline=deadline)], deadline)
        if isinstance(res, BackendError):
            raise res
        assert isinstance(res, Completion)
        return res

    async def classify(
        self, inputs: Sequence[tuple[Message, ...]], deadline: float
    ) -> list[list[float] | BackendError]:
        return await self._submit("classify", inputs, deadline)

    async def step_probs(
        self, queries: Sequence[StepQuery], deadline: float
    ) -> list[list[float] | BackendError]:
        return await self._submit("steps", queries, deadline)

    async def embed(self, texts: Sequence[str], deadline: float) -> list[Embedding | BackendError]:
        return await self._submit("embed", texts, deadline)
