"""What the trainer adapters (:mod:`~rewardhub_client.slime`, :mod:`~rewardhub_client.verl`,
:mod:`~rewardhub_client.trl`) share: reading their options, and what a partly failed request keeps (and says).

Each adapter names its own environment variables; an error names the one to fix.
"""

from __future__ import annotations

import json
import math
import os
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from rewardhub_client.errors import RewardHubClientError
from rewardhub_client.types import ItemResult, RewardSpec

__all__ = [
    "env_flag",
    "env_number",
    "env_spec",
    "env_url",
    "service_url",
    "failure_mode",
    "partial_or_raise",
    "plain",
    "token_count_keys",
    "token_ids_keys",
    "token_reads",
    "warn_once",
]

_OFF = ("0", "false", "no", "off")
_warn_lock = threading.Lock()


def env_flag(value: bool | None, env: str) -> bool:
    """An on/off option: ``value`` when given, else the environment variable ``env`` (on unless it is
    ``0``/``false``/``no``/``off``)."""
    if value is not None:
        return value
    return os.environ.get(env, "1").strip().lower() not in _OFF


def service_url(url: str, what: str) -> str:
    """``url`` checked as configuration is read: a ``ValueError`` naming ``what`` (the argument or
    environment variable it came from) for one that is not ``http(s)://HOST`` (``localhost:8000`` reads
    as scheme ``localhost``; the client refused it only at the first sample)."""
    url = url.strip()
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"the service URL ({what}) {url!r} is not a URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"the service URL ({what}) {url!r} must be http://HOST:PORT or https://HOST:PORT")
    return url


def env_url(value: str | None, env: str = "REWARDHUB_URL") -> str:
    """The service URL: ``value``, else the environment variable ``env``, else ``http://127.0.0.1:8000``,
    checked (:func:`service_url`)."""
    if value:
        return service_url(value, "url")
    return service_url(os.environ.get(env) or "http://127.0.0.1:8000", env)


def env_number(value: float | str | None, env: str, default: float) -> float:
    """A finite number (``value``, else the environment variable ``env``, else ``default``); a
    ``ValueError`` naming ``env`` for anything else (a NaN reward would poison the trainer's statistics)."""
    raw: float | str = value if value is not None else os.environ.get(env, str(default))
    try:
        number = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{env} must be a number, not {raw!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{env} must be a finite number, not {raw!r}")
    return number


def env_spec(value: Any, env: str) -> str | RewardSpec:
    """A reward spec as configuration gives it (a name, a ``{"name", "config"}`` mapping or its JSON, a
    :class:`RewardSpec`), read when configuring: a ``ValueError`` naming ``env`` for one that is not (it
    failed at every sample, as a validation error that named no setting)."""
    if isinstance(value, RewardSpec):
        return value
    if isinstance(value, str):
        if not value.lstrip().startswith("{"):
            if not value.strip():
                raise ValueError(f"{env}: a reward name must not be empty")
            return value
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{env}: {value!r} is not JSON ({exc})") from None
    if not isinstance(value, Mapping):
        raise ValueError(f'{env}: a reward is a name or {{"name": ..., "config": {{...}}}}, not {value!r}')
    try:
        return RewardSpec.model_validate(value)
    except ValidationError as exc:
        raise ValueError(
            f'{env}: {dict(value)!r} is not a reward spec ({{"name": ..., "config": {{...}}}}): {exc}'
        ) from None


def failure_mode(value: str | None, env: str) -> str:
    """The ``on_request_failure`` option (``value``, else the environment variable ``env``, else
    ``invalid``): ``"invalid"`` or ``"raise"``; a ``ValueError`` naming ``env`` for anything else."""
    failure = (value or os.environ.get(env) or "invalid").strip().lower()
    if failure not in ("invalid", "raise"):
        raise ValueError(f"on_request_failure ({env}) must be 'invalid' or 'raise', not {failure!r}")
    return failure


def partial_or_raise(exc: RewardHubClientError, on_request_failure: str) -> list[ItemResult | None]:
    """What a partly failed request keeps: its results in item order, ``None`` where its chunk failed.
    Raises ``exc`` with ``on_request_failure="raise"``, or when nothing was answered (a step on no signal
    must not pass silently)."""
    partial = exc.partial_results
    if on_request_failure == "raise" or partial is None or all(r is None for r in partial):
        raise exc
    return partial


def plain(value: Any) -> Any:
    """``value`` with numpy arrays and scalars as Python lists and numbers, at any depth of its mappings
    and lists (numpy is not imported here: anything with ``tolist()``). A trainer that reads its dataset
    through pandas (verl, slime's parquet files) gives a structured reference's list fields as arrays: the
    request could not be built with one inside (pydantic cannot serialize it), and one at the top was
    sent as its ``str()``."""
    if isinstance(value, str | bytes):
        return value
    if callable(getattr(value, "tolist", None)):
        value = value.tolist()
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def warn_once(warned: list[bool], message: str, stacklevel: int = 1) -> None:
    """Warn ``message`` the first time only: ``warned`` (``[True]`` once it has warned) is the adapter's
    flag, per process or per reward function. ``stacklevel`` counts from the caller, as for
    :func:`warnings.warn`."""
    with _warn_lock:
        first = not warned
        warned[:] = [True]
    if first:
        warnings.warn(message, stacklevel=stacklevel + 1)


def _walk_configs(specs: tuple[Any, ...], visit: Any) -> None:
    """Call ``visit`` on every mapping in the specs (pydantic models dumped), at any depth."""

    def walk(value: Any) -> None:
        if isinstance(value, BaseModel):
            value = value.model_dump()
        if isinstance(value, Mapping):
            visit(value)
            for v in value.values():
                walk(v)
        elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
            for v in value:
                walk(v)

    for spec in specs:
        walk(spec)


def token_count_keys(*specs: Any) -> frozenset[str]:
    """The ``metadata`` keys under which a reward spec reads the completion's token count: always
    ``completion_tokens`` (``length``'s and ``group_length``'s default), and any other
    ``token_count_key`` a config in the spec names (the count was sent under the default only, so a
    spec naming its own key read no count: ``missing_reference`` on every item)."""
    keys = {"completion_tokens"}

    def visit(value: Mapping[str, Any]) -> None:
        key = value.get("token_count_key")
        if isinstance(key, str) and key:
            keys.add(key)

    _walk_configs(specs, visit)
    return frozenset(keys)


def token_ids_keys(*specs: Any) -> frozenset[str]:
    """The ``metadata`` keys under which a reward spec (a name, a spec object or mapping, a config; any
    part of it, at any depth) reads the completion's token ids: each config with ``unit: token_ids``
    (``repetition``), under its ``token_ids_key`` (default ``completion_ids``). Empty for a spec that
    reads none: the ids, about one and a half times the text's size as JSON, are sent only where a
    reward reads them (the token count, a number, always goes)."""
    keys: set[str] = set()

    def visit(value: Mapping[str, Any]) -> None:
        if value.get("unit") == "token_ids":
            key = value.get("token_ids_key", "completion_ids")
            if isinstance(key, str):
                keys.add(key)

    _walk_configs(specs, visit)
    return frozenset(keys)


# rewards whose ``unit`` is ``tokens`` unless their config names another (the service's defaults)
_COUNTS_TOKENS_BY_DEFAULT = frozenset({"length", "group_length"})
# the config fields that hold a part's spec (a name or {name, config}): composite's, noisy_corrected's
# ``reward``, calibration's and group_length's ``verifier``, judge's ``rule``, verpo's ``code``
_PART_FIELDS = ("reward", "verifier", "rule", "code")


def token_reads(*specs: Any) -> tuple[frozenset[str], frozenset[str]]:
    """The ``metadata`` keys a reward spec (any part of it, at any depth) reads the completion's token
    count from, and those it reads its token ids from: the service has no tokenizer, and an item without
    them is answered ``missing_reference``. A count: ``length`` and ``group_length`` (whose unit is
    ``tokens`` unless the config names ``chars`` or ``words``) and any config with ``unit: tokens``, under
    its ``token_count_key`` (default ``completion_tokens``); ids: any config with ``unit: token_ids``
    (``repetition``), under its ``token_ids_key`` (default ``completion_ids``)."""
    counts: set[str] = set()
    ids = set(token_ids_keys(*specs))

    def counted(config: Any) -> None:
        config = config if isinstance(config, Mapping) else {}
        if config.get("unit", "tokens") == "tokens":
            key = config.get("token_count_key", "completion_tokens")
            if isinstance(key, str):
                counts.add(key)

    def visit(value: Mapping[str, Any]) -> None:
        if value.get("unit") == "tokens":
            counted(value)
        if value.get("name") in _COUNTS_TOKENS_BY_DEFAULT:
            counted(value.get("config"))
        for field in _PART_FIELDS:
            if isinstance(part := value.get(field), str) and part in _COUNTS_TOKENS_BY_DEFAULT:
                counted(None)

    for spec in specs:
        if isinstance(spec, str) and spec in _COUNTS_TOKENS_BY_DEFAULT:
            counted(None)
    _walk_configs(specs, visit)
    return frozenset(counts), frozenset(ids)
