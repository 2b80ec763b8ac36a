"""A custom reward function for slime (THUDM/slime) that gets its rewards from a rewardhub service.

::

    export REWARDHUB_URL=http://localhost:8000
    python -m slime ... --custom-rm-path rewardhub_client.slime.reward_func [--group-rm]

slime loads the function with ``load_function``, a dotted path (``module.function``, no colon), and
awaits it as ``reward_func(args, sample)`` for each sample, or ``reward_func(args, samples)`` with a
list: a whole group with ``--group-rm``, or the samples a custom generate function made of one rollout.
A list goes to the service as one request (chunked only past the client's ``chunk_size``, a group never
split), its samples with the same ``group_index`` as one ``group``; a single sample is sent alone and
claims no group. A group reward (``majority_vote``, ``group_length``, ``verpo``: the start check says
which) therefore needs ``--group-rm``: a call without the prompt's group (a single sample, as slime
calls without ``--group-rm`` and in its evaluation, which refuses ``--group-rm``; a list without
``--group-rm``, one rollout's samples from a custom generate function) raises ``ValueError`` saying so,
where the service would answer every sample ``unsupported`` and each would be removed from the loss.
Evaluate with a reward that needs no group (an eval label naming one). With ``REWARDHUB_SLIME_CHECK=0``
the adapter does not know which rewards are group rewards: such samples are removed
(``metadata["rewardhub"]["reason"]`` ``unsupported``).

Unlike slime's ``remote_rm``, which can only return a number, a sample the service could not score
(``valid: false``) gets ``sample.remove_sample = True``, which slime turns into a zero loss mask: it is
left out of the loss instead of training as reward 0.0. That holds per sample too: slime hands the
function the ``Sample`` it trains on, and ``RolloutManager._convert_samples_to_train_data`` zeroes the
loss mask of any sample with ``remove_sample``, however its reward was computed (THUDM/slime at
624b824a). Every scored sample gets
``sample.metadata["rewardhub"] = {"valid", "reason", "cached", "components"}``. The reward returned is a
number: leave slime's ``--reward-key`` and ``--log-reward-category`` unset (both read a dict reward).

slime still puts a removed sample's reward into its group's mean and std (its ``remove_sample`` masks the
loss only), so the number returned for an invalid sample is chosen not to move the others' advantages:
in a list call, the mean of the valid rewards of its group in that call (a group of ``[1, 1, 1,
invalid]`` is then ``[1, 1, 1, 1]``, no signal, as its valid members say; with 0.0 the three valid ones
would get a positive advantage). A single-sample call cannot see its group (it returns 0.0), so prefer
``--group-rm`` where invalid samples are expected.

slime's evaluation (``eval_rollout``, always per sample: it refuses ``--group-rm``) ignores
``remove_sample``: its ``rewards`` are the numbers returned, so an unscored eval sample counts as the
invalid reward (0.0 by default), as a wrong answer would; its ``metadata["rewardhub"]["valid"]`` (the
eval output keeps the samples) tells the two apart.

Configuration, by environment variable (read at first use) or :func:`configure`, checked as it is read
(``ValueError`` naming the setting: a URL that is not ``http(s)://HOST``, a default reward that is not a
reward spec, an invalid reward that is neither ``group_mean`` nor a finite number):

* ``REWARDHUB_URL`` (default ``http://127.0.0.1:8000``), ``REWARDHUB_API_KEY``;
* ``REWARDHUB_SLIME_DEFAULT_REWARD`` — the reward when a sample's ``label`` names none (default
  ``math``). A label is the reference, or a JSON task spec picking the reward, as for the
  ``/compat/slime/reward`` endpoint: ``{"verifier": "math", "answer": "32"}`` (``reward``/``verifier``/
  ``rm_type``, optional ``config``, the reference under ``reference``/``answer``/``ground_truth``/
  ``label``/``solution``; an object without a spec made only of ``ground_truth``/``reference``/
  ``solution``/``style`` keys gives that reference, so verl's ``reward_model`` column
  ``{"ground_truth": "32", "style": "rule"}`` is a label);
* ``REWARDHUB_SLIME_INVALID_REWARD`` — the reward returned for a sample that was not scored (it is
  removed from the loss either way): ``group_mean`` (default; 0.0 where its call has no valid sample of
  its group, and for a single-sample call) or a number;
* ``REWARDHUB_SLIME_ON_REQUEST_FAILURE`` — a list call whose request partly failed after the client's
  retries (unreachable, a timeout, 5xx, 408, 429): ``invalid`` (default) keeps the answered rewards and
  removes the failed samples (reason ``request_failed``), warning once per process; ``raise`` raises the
  client's error. A call of which nothing was answered raises either way (a single-sample call is one
  request);
* ``REWARDHUB_SLIME_CHECK`` — ``0`` skips the start check: the first call with a reward spec asks the
  service whether it can run it (``POST /v1/rewards/check``, once per spec per process) and raises
  :class:`~rewardhub_client.RewardUnavailable` when it cannot, instead of removing every sample; its
  answer also says which rewards are group rewards (see above).

The question goes as the item's ``prompt``: ``Sample.prompt`` is the chat-templated string (sent as its
last user turn) or the chat messages (the last user message). ``Sample.response_length`` (the response's
token count) goes as ``metadata["completion_tokens"]``, what ``length`` and ``group_length`` count; the
response's token ids, the last ``response_length`` of ``Sample.tokens``, go as
``metadata["completion_ids"]`` (a spec's own ``token_ids_key``) where the spec reads them
(``repetition`` with ``unit: token_ids``).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from rewardhub_client._adapters import (
    env_flag,
    env_number,
    env_spec,
    env_url,
    failure_mode,
    partial_or_raise,
    plain,
    token_count_keys,
    token_ids_keys,
    warn_once,
)
from rewardhub_client.client import AsyncRewardClient
from rewardhub_client.errors import RewardHubClientError, RewardUnavailable
from rewardhub_client.prompts import prompt_text
from rewardhub_client.types import ItemResult, RewardSpec, ScoreItem

__all__ = ["configure", "reward_func"]

_REQUEST_FAILED = "request_failed"
_SPEC_KEYS = ("reward", "verifier", "rm_type")
_REF_KEYS = ("reference", "answer", "ground_truth", "label", "solution")
# as /compat: an object of these keys alone wraps its reference (verl's reward_model column)
_WRAPPER_REF_KEYS = ("ground_truth", "reference", "solution")
_WRAPPER_KEYS = frozenset({*_WRAPPER_REF_KEYS, "style"})
_lock = threading.Lock()
_state: dict[str, Any] = {}  # replaced whole by configure(), never changed in place
_clients: dict[tuple[str, str | None], AsyncRewardClient] = {}
_clients_lock = threading.Lock()  # (not _lock: a first configure() runs under it)
_warned: list[bool] = []  # [True] once a partly failed call has warned in this process


def configure(
    url: str | None = None,
    *,
    default_reward: str | Mapping[str, Any] | None = None,
    api_key: str | None = None,
    invalid_reward: float | str | None = None,
    check: bool | None = None,
    on_request_failure: str | None = None,
    client: AsyncRewardClient | None = None,
) -> None:
    """Set the service and options explicitly (otherwise taken from the environment, see the module
    docstring). ``invalid_reward``: a number or ``"group_mean"``; ``client``: an
    :class:`AsyncRewardClient` to send through (its URL and key are then used, ``url`` and ``api_key``
    must not be given). The clients this module pooled for another service or key are closed, each on
    its event loop (their calls still in flight may fail): configure() is for setting up."""
    global _state
    if client is not None and (url is not None or api_key is not None):
        raise ValueError("url and api_key go to the AsyncRewardClient passed as client")
    state: dict[str, Any] = {"client": client}
    # checked here, each naming its setting: a bad URL or spec failed at every sample instead
    state["url"] = client.base_url if client is not None else env_url(url)
    state["api_key"] = (
        client.api_key if client is not None else api_key or os.environ.get("REWARDHUB_API_KEY")
    )
    state["default"] = env_spec(
        default_reward or os.environ.get("REWARDHUB_SLIME_DEFAULT_REWARD") or "math",
        "default_reward" if default_reward else "REWARDHUB_SLIME_DEFAULT_REWARD",
    )
    invalid: float | str = (
        invalid_reward
        if invalid_reward is not None
        else os.environ.get("REWARDHUB_SLIME_INVALID_REWARD", "group_mean")
    )
    if isinstance(invalid, str) and invalid.strip().lower() == "group_mean":
        invalid = "group_mean"
    else:
        try:
            invalid = env_number(invalid, "REWARDHUB_SLIME_INVALID_REWARD", 0.0)
        except ValueError:
            raise ValueError(
                "invalid_reward (REWARDHUB_SLIME_INVALID_REWARD) must be a finite number or 'group_mean', "
                f"not {invalid!r}"
            ) from None
    state["invalid"] = invalid
    state["check"] = env_flag(check, "REWARDHUB_SLIME_CHECK")
    state["on_request_failure"] = failure_mode(on_request_failure, "REWARDHUB_SLIME_ON_REQUEST_FAILURE")
    state["checked"] = {}  # spec (as JSON) -> None when it can run, else the error to raise
    state["group_aware"] = {}  # spec (as JSON) -> whether the check said it scores against the group
    state["pending"] = {}  # (spec as JSON, event loop) -> the check in flight on that loop
    _state = state  # one assignment: a concurrent reader sees the old configuration or the new, whole
    # the pooled clients of another service or key: left open, their kept-alive connections stayed open
    # for the life of the process (a client passed in is the caller's, never pooled here)
    keep = None if client is not None else (state["url"], state["api_key"])
    with _clients_lock:
        old = [_clients.pop(k) for k in list(_clients) if k != keep]
    for stale in old:
        stale._close_soon()


def _conf() -> dict[str, Any]:
    state = _state
    if not state:
        with _lock:
            if not _state:
                configure()
        state = _state
    return state


def _client() -> AsyncRewardClient:
    """One pooled client per (url, api key); it keeps a connection pool per event loop it is used on."""
    conf = _conf()
    if conf["client"] is not None:
        return conf["client"]  # type: ignore[no-any-return]
    key = (conf["url"], conf["api_key"])
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            # one call per sample, a whole rollout batch at once: room for many in flight
            client = _clients[key] = AsyncRewardClient(key[0], api_key=key[1], max_concurrency=256)
        return client


def _prompt(prompt: Any) -> str | None:
    """``Sample.prompt`` as the question: a chat-templated string as its last user turn (None when that
    is empty), chat messages as the last user message (its text parts)."""
    text = prompt_text(prompt)
    return (text or None) if isinstance(prompt, str) else text


def _as_reference(value: Any) -> Any:
    if value is None or isinstance(value, str | dict | list):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _label(label: Any) -> tuple[str | RewardSpec, Any]:
    """A label as (reward spec, reference): a JSON task spec picks the reward, anything else is the
    reference for the default reward (as the service's ``/compat/slime/reward`` reads it)."""
    label = plain(label)  # read from a parquet file through pandas: numpy arrays and scalars inside
    obj = label
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            obj = json.loads(label)
        except ValueError:
            obj = label
    if isinstance(obj, Mapping) and any(k in obj for k in _SPEC_KEYS):
        raw = next(obj[k] for k in _SPEC_KEYS if k in obj)
        config = obj.get("config") or {}
        spec: str | RewardSpec
        if isinstance(raw, Mapping):
            spec = RewardSpec.model_validate({"config": config, **raw})
        else:
            spec = RewardSpec(name=str(raw), config=config) if config else str(raw)
        return spec, _as_reference(next((obj[k] for k in _REF_KEYS if k in obj), None))
    default: str | RewardSpec = _conf()["default"]
    if isinstance(obj, Mapping) and obj.keys() <= _WRAPPER_KEYS:
        # a reference column without a spec (verl's reward_model {"ground_truth", "style"}): its value;
        # an object with other keys ({"label": k} for prm, code's tests) is the reward's own
        held = next((k for k in _WRAPPER_REF_KEYS if k in obj), None)
        if held is not None:
            return default, _as_reference(obj[held])
    return default, _as_reference(obj)


def _item(sample: Any, i: int, group: str | None) -> ScoreItem:
    spec, reference = _label(getattr(sample, "label", None))
    # the response's token count (the service has no tokenizer): what length and group_length count
    tokens = getattr(sample, "response_length", None)
    counted = isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0
    metadata: dict[str, Any] = dict.fromkeys(token_count_keys(spec), tokens) if counted else {}
    ids_keys = token_ids_keys(spec)
    if ids_keys and counted and isinstance(tokens, int):
        # the response's token ids, the last response_length of Sample.tokens (the prompt's, then the
        # response's), only where a reward reads them (repetition with unit: token_ids)
        ids = getattr(sample, "tokens", None)
        if isinstance(ids, Sequence) and not isinstance(ids, str) and len(ids) >= tokens:
            metadata.update(dict.fromkeys(ids_keys, [int(t) for t in ids[len(ids) - tokens :]]))
    return ScoreItem(
        id=str(i),
        prompt=_prompt(getattr(sample, "prompt", None)),
        response=getattr(sample, "response", "") or "",
        reference=reference,
        reward=spec,
        group=group,
        metadata=metadata or None,
    )


def _key(spec: str | RewardSpec) -> str:
    return spec if isinstance(spec, str) else json.dumps(spec.model_dump(), sort_keys=True)


async def _check(client: AsyncRewardClient, items: Sequence[ScoreItem]) -> None:
    """Ask the service once per spec per process whether it can run it; raise when it cannot. slime
    awaits a whole rollout batch of per-sample calls at once: the first call's question is awaited by the
    others instead of each asking it again."""
    conf = _conf()
    if not conf["check"]:
        return
    checked: dict[str, RewardUnavailable | None] = conf["checked"]
    pending: dict[tuple[str, asyncio.AbstractEventLoop], asyncio.Future[None]] = conf["pending"]
    loop = asyncio.get_running_loop()
    for item in items:
        assert item.reward is not None
        key = _key(item.reward)
        if key in checked:
            if (error := checked[key]) is not None:
                raise error
            continue
        task = pending.get((key, loop))
        if task is None:
            task = pending[(key, loop)] = asyncio.ensure_future(_ask(client, conf, key, item.reward))
        await asyncio.shield(task)  # a caller cancelled does not cancel the others' question


async def _ask(client: AsyncRewardClient, conf: dict[str, Any], key: str, spec: str | RewardSpec) -> None:
    try:
        answer = await client.check_if_supported(spec)  # None: a service without the route
    finally:
        # answered or not (a transport error is asked again by the next call), no longer in flight
        conf["pending"].pop((key, asyncio.get_running_loop()), None)
    error = None if answer is None or answer.ok else RewardUnavailable(conf["url"], answer)
    conf["group_aware"][key] = answer is not None and answer.group_aware
    conf["checked"][key] = error
    if error is not None:
        raise error


def _grouped(args: Any, items: Sequence[ScoreItem], per_sample: bool) -> None:
    """Raise for a call that does not hold a prompt's group while a spec the check said scores against
    its group (a majority vote, a group-relative length) is among its items: the service answers each
    such sample ``unsupported`` (a single sample claims no group) or scores it among the wrong samples,
    and every one would be removed from the loss, a run on no signal that says nothing.

    slime calls with a group only under ``--group-rm`` (``generate_and_rm_group``). Without it, it calls
    per sample, and with a list only for the samples a custom generate function made of one rollout; its
    evaluation (``eval_rollout``) refuses ``--group-rm`` and calls per sample."""
    aware: dict[str, bool] = _conf()["group_aware"]
    spec = next((it.reward for it in items if it.reward is not None and aware.get(_key(it.reward))), None)
    if spec is None:
        return
    name = spec if isinstance(spec, str) else spec.name
    group_rm = bool(getattr(args, "group_rm", False))
    per_sample_reward = (
        'a reward that needs no group for them: a label naming one ({"verifier": "math", "answer": ...})'
    )
    if per_sample and group_rm:
        raise ValueError(
            f"reward {name!r} scores each sample against its group, and the reward function was called "
            "with one sample although --group-rm is set (by a custom rollout or evaluation function): it "
            f"would be unscored and removed from the loss. Score such samples with {per_sample_reward}"
        )
    if per_sample:
        raise ValueError(
            f"reward {name!r} scores each sample against its group, and slime called the reward function "
            "with one sample: every sample would be unscored and removed from the loss. Run slime with "
            "--group-rm, which calls it with each prompt's whole group (slime's evaluation refuses "
            f"--group-rm and scores per sample: evaluate with {per_sample_reward})"
        )
    if not group_rm and args is not None:
        raise ValueError(
            f"reward {name!r} scores each sample against its group, and without --group-rm slime calls "
            "the reward function with a list only for the samples a custom generate function made of one "
            "rollout, not the prompt's group: the group reward would score within that rollout. Run "
            "slime with --group-rm, which calls it with each prompt's whole group"
        )


def _answered(exc: RewardHubClientError, n: int) -> list[ItemResult | None]:
    """What a list call whose request partly failed keeps (``None`` for the failed chunks' samples), or
    raise ``exc``: with ``on_request_failure="raise"``, or when nothing was answered."""
    partial = partial_or_raise(exc, _conf()["on_request_failure"])
    warn_once(
        _warned,
        f"rewardhub: {len(exc.failed_indices)} of {n} samples were not scored, their part of the "
        f"request failed after the client's retries ({exc}); they are removed from the loss "
        "(remove_sample, reason request_failed), the answered ones are kept. Later such calls do not "
        "warn (REWARDHUB_SLIME_ON_REQUEST_FAILURE=raise raises instead)",
        stacklevel=3,
    )
    return partial


def _apply(
    samples: Sequence[Any], results: Sequence[ItemResult | None], groups: Sequence[str | None]
) -> list[float]:
    """The rewards to return, and each sample marked: ``metadata["rewardhub"]`` on every one,
    ``remove_sample`` on those not scored."""
    invalid = _conf()["invalid"]
    valid_by_group: dict[str | None, list[float]] = {}
    for r, g in zip(results, groups, strict=True):
        if r is not None and r.valid and r.score is not None:
            valid_by_group.setdefault(g, []).append(float(r.score))
    out: list[float] = []
    for sample, r, g in zip(samples, results, groups, strict=True):
        valid = r is not None and r.valid and r.score is not None
        if valid:
            assert r is not None and r.score is not None
            out.append(float(r.score))
        else:
            sample.remove_sample = True
            if invalid == "group_mean":
                scores = valid_by_group.get(g) if g is not None else None
                out.append(sum(scores) / len(scores) if scores else 0.0)
            else:
                out.append(float(invalid))
        metadata = getattr(sample, "metadata", None)
        if isinstance(metadata, dict):
            metadata["rewardhub"] = {
                "valid": valid,
                "reason": (r.reason if r is not None else _REQUEST_FAILED) if not valid else None,
                "cached": bool(r is not None and r.cached),
                "components": dict(r.components) if r is not None else {},
            }
    return out


async def reward_func(args: Any, sample: Any, **kwargs: Any) -> float | list[float]:
    """slime's custom reward function (``--custom-rm-path rewardhub_client.slime.reward_func``): a
    ``Sample`` gets its reward, a list of them (``--group-rm``) one reward each, from one request."""
    client = _client()
    if isinstance(sample, Sequence):
        samples = list(sample)
        if not samples:
            return []
        call = uuid.uuid4().hex[:12]
        # a slime group_index names a prompt of the run, seen again at the next epoch: the call id makes
        # each call's groups new to the service (a group id reused with other members is refused)
        groups = [f"slime-{call}-{getattr(s, 'group_index', None)}" for s in samples]
        items = [_item(s, i, g) for i, (s, g) in enumerate(zip(samples, groups, strict=True))]
        await _check(client, items)
        _grouped(args, items, per_sample=False)
        results: list[ItemResult | None]
        try:
            results = list((await client.score(items)).results)
        except RewardHubClientError as exc:
            results = _answered(exc, len(items))
        return _apply(samples, results, groups)
    items = [_item(sample, 0, None)]
    await _check(client, items)
    _grouped(args, items, per_sample=True)
    resp = await client.score(items)
    return _apply([sample], resp.results, [None])[0]
