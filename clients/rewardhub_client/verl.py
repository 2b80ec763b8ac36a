"""verl custom reward functions backed by a rewardhub service.

Point verl at this file (``python -c "import rewardhub_client.verl as m; print(m.__file__)"`` prints its
path)::

    custom_reward_function.path=/path/to/rewardhub_client/verl.py
    custom_reward_function.name=compute_score          # per sample (sync), or compute_score_async
    # or the batch reward manager, verl's legacy reward path (from verl 0.7 on the reward loop is the
    # default, and it has no batch manager: "Unknown reward manager: batch"):
    reward_model.use_reward_loop=False reward_model.reward_manager=batch
    custom_reward_function.name=compute_score_batch

Configuration, by environment variable (read at first use) or :func:`configure`, checked as it is read
(``ValueError`` naming the setting: a URL that is not ``http(s)://HOST``, routes that are not a JSON
object of reward specs, an invalid score that is not a finite number):

* ``REWARDHUB_URL`` — the service (default ``http://127.0.0.1:8000``); ``REWARDHUB_API_KEY``;
* ``REWARDHUB_VERL_ROUTES`` — JSON mapping ``data_source`` → reward name or ``{"name", "config"}``;
  unmatched sources use ``REWARDHUB_VERL_DEFAULT_REWARD`` (default ``math``);
* ``REWARDHUB_VERL_INVALID_SCORE`` — the score verl receives for an item the service could not score
  (verl cannot mask a sample; default 0.0). Such items also carry ``valid: 0.0`` in the extra info
  (verl logs it in its validation metrics; in training only a rollout dump shows it), and the first one
  in a process on the default score warns, naming its reason: set the variable to choose the score and
  silence it;
* ``REWARDHUB_VERL_ON_REQUEST_FAILURE`` — what ``compute_score_batch`` does when the client sent the
  batch in chunks and some still failed after its retries for the service's state (unreachable, a
  timeout, 5xx, 408, 429) while others were answered: ``invalid`` (default) keeps the answered scores and
  gives the failed chunks' items the invalid score, flagged ``request_failed: 1.0`` (and ``valid: 0.0``),
  warning once per process; ``raise`` raises the client's error. A call of which nothing was answered
  raises either way (a per-sample call is one request: it raises), so that verl does not train a step
  on the invalid score alone;
* ``REWARDHUB_VERL_COMPONENTS`` — comma-separated component names (``correct``, ``math``...) to pass on
  as extra keys; NaN for an item that has no such component;
* ``REWARDHUB_VERL_SHADOW`` — a second reward the service runs beside each route's to audit it (shadow
  verification): a reward name, ``{"name", "config"}`` or ``{"reward": ..., "threshold": ...}``. The
  scores stay the route's; each sample's ``data_source`` goes as ``metadata.data_source`` (the service's
  per-source shadow counts), and its extra info gains ``shadow_compared`` (1.0 when both rewards scored
  it), ``shadow_agree``, ``shadow_only`` (the shadow passed, the route's reward did not: a possible false
  negative) and ``primary_only`` (the reverse), each 1.0 or 0.0: verl averages them per data source, so
  ``shadow_agree / shadow_compared`` is the agreement rate;
* ``REWARDHUB_VERL_CHECK`` — ``0`` skips the start check: the first time a process scores with a reward
  spec (a route), it asks the service whether it can run it and every part of it
  (``POST /v1/rewards/check``, one request per spec per process) and raises
  :class:`~rewardhub_client.RewardUnavailable` when it cannot, naming the part and the setting to set.
  verl cannot mask a sample, so without it such a route would train on ``REWARDHUB_VERL_INVALID_SCORE``
  for every sample. A service too old to have the route is not checked.

Each call returns ``{"score": float, "acc": the score again, "valid": 0/1, "cached": 0/1,
"request_failed": 0/1, <the configured components>..., <the shadow keys, with a shadow>}`` (``acc``: the metric verl's DAPO recipe filters groups on by default); verl
logs the keys beyond ``score`` as ``reward_extra_info``. The keys are the same for every item whatever it
scored: verl appends each key's value per sample and requires every list to be as long as the batch, so
a key only some items have (an invalid item has no components; another reward has other ones) would stop
training. A ``ground_truth`` that is a JSON object string is decoded, so code tests and other structured
references pass through unchanged. The question goes as the item's ``prompt`` when ``extra_info`` holds it
(``prompt`` or ``question``, as verl's example preprocessing scripts store it): a judge, a PRM or an ORM
reads it, and without it every such sample is scored without its question (the first such sample in a
process warns, where the start check said the reward reads the question).

A group reward (``majority_vote``, ``group_length``...: the start check says which) needs
``compute_score_batch`` and a ``uid`` (or ``group``) in each sample's ``extra_info``, the same for the
rollouts of one prompt (verl's own rollout uid is not passed to a reward function: put one into the
dataset's ``extra_info``). The service answers a group reward's item without a group ``unsupported``, and
verl cannot mask it: a per-sample call with a group reward, or a batch with such samples, raises
``ValueError`` saying so instead of training on the invalid score.

**Token counts.** verl passes a reward function the decoded text only, never the response's token ids
or count (verl at b178a3c: the reward loop's naive and dapo managers, the legacy batch manager), and the
service has no tokenizer. A route that counts tokens (``length`` and ``group_length``, whose ``unit`` is
``tokens`` unless set; ``repetition`` with ``unit: token_ids``) reads them from ``extra_info``, under the
spec's keys (``completion_tokens`` / its ``token_count_key`` for the count, ``completion_ids`` / its
``token_ids_key`` for the ids, whose length is also taken as the count); a sample without them raises
``ValueError`` instead of training on the invalid score. Workarounds: a text unit in the route's config
(``"unit": "chars"`` or ``"words"``; ``repetition``: ``"words"``), verl's own overlong penalty for DAPO's
(``reward_model.reward_manager=dapo`` with ``reward_kwargs.overlong_buffer_cfg``: it counts tokens), or
the ids in ``extra_info`` yourself (the reward loop's naive manager, verl's default, merges an agent
loop's ``extra_fields`` into ``extra_info``: a custom agent loop can set
``extra_fields["completion_ids"]``).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from rewardhub_client._adapters import (
    env_flag,
    env_number,
    env_spec,
    env_url,
    failure_mode,
    partial_or_raise,
    plain,
    token_reads,
    warn_once,
)
from rewardhub_client._core import ShadowLike, as_shadow, as_shadow_check
from rewardhub_client.client import AsyncRewardClient, RewardClient
from rewardhub_client.errors import RewardHubClientError, RewardUnavailable
from rewardhub_client.types import ItemResult, RewardSpec, ScoreItem, ShadowSpec

__all__ = ["compute_score", "compute_score_async", "compute_score_batch", "configure", "route"]

_lock = threading.Lock()
_init_lock = threading.Lock()
_state: dict[str, Any] = {}  # replaced whole by configure(), never changed in place


def configure(
    url: str | None = None,
    routes: Mapping[str, str | Mapping[str, Any]] | None = None,
    *,
    default_reward: str | Mapping[str, Any] | None = None,
    api_key: str | None = None,
    invalid_score: float | None = None,
    components: Sequence[str] | None = None,
    check: bool | None = None,
    on_request_failure: str | None = None,
    shadow: ShadowLike = None,
) -> None:
    """Set the service and routing explicitly (otherwise taken from the environment).

    ``on_request_failure``: ``"invalid"`` or ``"raise"`` (``REWARDHUB_VERL_ON_REQUEST_FAILURE``, see the
    module docstring): what ``compute_score_batch`` does with a batch whose request partly failed.
    ``shadow``: a reward auditing the routes' (``REWARDHUB_VERL_SHADOW``, see the module docstring).

    The pooled clients of another service or key than the new one are closed (their calls still in
    flight may fail): configure() is for setting up, before the samples come.
    """
    global _state
    state: dict[str, Any] = {}
    # checked here, each naming its setting: a bad URL, route or number failed at every sample instead
    state["url"] = env_url(url)
    state["routes"] = _routes(routes)
    state["default"] = env_spec(
        default_reward or os.environ.get("REWARDHUB_VERL_DEFAULT_REWARD") or "math",
        "default_reward" if default_reward else "REWARDHUB_VERL_DEFAULT_REWARD",
    )
    state["api_key"] = api_key or os.environ.get("REWARDHUB_API_KEY")
    state["invalid"] = env_number(invalid_score, "REWARDHUB_VERL_INVALID_SCORE", 0.0)
    # a fill value the user chose: its invalid samples are no surprise, and are not warned about
    state["invalid_chosen"] = invalid_score is not None or "REWARDHUB_VERL_INVALID_SCORE" in os.environ
    env_components = os.environ.get("REWARDHUB_VERL_COMPONENTS", "")
    state["components"] = (
        list(components)
        if components is not None
        else [c.strip() for c in env_components.split(",") if c.strip()]
    )
    state["check"] = env_flag(check, "REWARDHUB_VERL_CHECK")
    state["on_request_failure"] = failure_mode(on_request_failure, "REWARDHUB_VERL_ON_REQUEST_FAILURE")
    state["shadow"] = _shadow(shadow)
    state["checked"] = {}  # spec (as JSON) -> None when it can run, else the error to raise
    state["group_aware"] = {}  # spec (as JSON) -> whether the check said it scores against the group
    state["reads_prompt"] = {}  # spec (as JSON) -> whether the check said it reads the question
    # (spec as JSON, process) -> the lock of the thread asking its check (sync calls); per process, so
    # that a child forked while a thread of its parent held one does not wait for it for ever
    state["asking"] = {}
    state["pending"] = {}  # (spec as JSON, event loop) -> the check in flight there (async calls)
    # One assignment: a thread reading the configuration sees the old one or the new one, whole. (verl's
    # reward loop runs a sync compute_score on executor threads: filled in place, a thread that came in
    # while the first call was configuring read a half-filled one, KeyError 'routes'.)
    _state = state
    _retire((state["url"], state["api_key"]))


def _routes(routes: Mapping[str, str | Mapping[str, Any]] | None) -> dict[str, str | RewardSpec]:
    """The routes (``routes``, else ``REWARDHUB_VERL_ROUTES``' JSON object), each spec checked."""
    what = "routes" if routes is not None else "REWARDHUB_VERL_ROUTES"
    raw: Any = routes
    if routes is None:
        env = os.environ.get("REWARDHUB_VERL_ROUTES", "").strip()
        try:
            raw = json.loads(env) if env else {}
        except ValueError as exc:
            raise ValueError(f"REWARDHUB_VERL_ROUTES is not JSON ({exc}): {env!r}") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"{what} must map data_source to a reward (a JSON object), not {raw!r}")
    return {str(k): env_spec(v, f"{what}[{k!r}]") for k, v in raw.items()}


def _shadow(shadow: ShadowLike) -> ShadowSpec | None:
    """The shadow (``shadow``, else ``REWARDHUB_VERL_SHADOW``: a name or JSON), checked as it is read."""
    what = "shadow" if shadow is not None else "REWARDHUB_VERL_SHADOW"
    raw: Any = shadow if shadow is not None else os.environ.get("REWARDHUB_VERL_SHADOW", "").strip() or None
    if isinstance(raw, str) and raw.lstrip().startswith("{"):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"{what} is not JSON ({exc}): {raw!r}") from None
    try:
        return as_shadow(raw)
    except (TypeError, ValidationError) as exc:
        raise ValueError(
            f'{what}: a shadow is a reward name, {{"name": ..., "config": {{...}}}} or '
            f'{{"reward": ..., "threshold": ...}}, not {raw!r} ({exc})'
        ) from None


def _conf() -> dict[str, Any]:
    state = _state
    if not state:
        with _init_lock:
            if not _state:
                configure()
        state = _state
    return state


def route(data_source: str) -> str | RewardSpec:
    """The reward for a ``data_source``: an exact key, else the longest key that is a prefix of it."""
    routes: dict[str, Any] = _conf()["routes"]
    target = routes.get(data_source)
    if target is None:
        prefixes = [k for k in routes if data_source.startswith(k)]
        target = routes[max(prefixes, key=len)] if prefixes else _conf()["default"]
    return target if isinstance(target, str) else RewardSpec.model_validate(target)


def _reference(ground_truth: Any) -> Any:
    # verl reads its dataset through pandas: a structured ground truth's list fields are numpy arrays
    ground_truth = plain(ground_truth)
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        try:
            decoded = json.loads(ground_truth)
            if isinstance(decoded, dict):
                return decoded
        except ValueError:
            pass
    if isinstance(ground_truth, int | float):
        return str(ground_truth)
    return ground_truth


def _item(
    solution_str: str, ground_truth: Any, data_source: str, extra_info: Any, call: str | None, i: int = 0
) -> ScoreItem:
    """One sample as an item. Its group is extra_info's ``uid`` (or ``group``) *within this call*: a
    dataset's uid names a row, the same every epoch, while the service takes a group id to name one set
    of rollouts (a group reward's id seen again with other members is refused), so ``call``, new for
    every call, is part of the id. A per-sample call (``call`` None) holds one sample of a group, never
    the group: it claims none (a group reward answers it ``unsupported``, not a vote of one)."""
    spec = route(data_source)
    group = None
    if call is not None and isinstance(extra_info, Mapping):
        uid = extra_info.get("uid")
        if uid is None or uid == "":  # (not `or`: a uid 0, a row index, is a uid)
            uid = extra_info.get("group")
        group = f"verl-{call}-{uid}" if uid is not None else None
    metadata = _tokens(spec, data_source, extra_info)
    if _conf()["shadow"] is not None:  # the service counts a shadow's outcomes per data source
        metadata = {**(metadata or {}), "data_source": data_source}
    return ScoreItem(
        id=str(i),
        prompt=_prompt(extra_info),
        response=solution_str,
        reference=_reference(ground_truth),
        reward=spec,
        group=group,
        metadata=metadata,
    )


def _ints(value: Any) -> list[int] | None:
    """Token ids as a list of ints (a tensor or numpy array as its items); None for anything else."""
    if callable(getattr(value, "tolist", None)):
        value = value.tolist()
    if isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        return value
    return None


def _tokens(spec: str | RewardSpec, data_source: str, extra_info: Any) -> dict[str, Any] | None:
    """The token count and ids a spec reads (``length``/``group_length`` in tokens, ``repetition`` with
    ``unit: token_ids``), from ``extra_info``: verl passes a reward function the decoded text, never the
    response's token ids or count, and the service has no tokenizer. Under the spec's own keys
    (``completion_tokens`` / ``completion_ids`` by default); a count is also taken as the length of the
    ids. Raise when the spec reads one and ``extra_info`` has none: every sample would be answered
    ``missing_reference`` and, verl being unable to mask, train on the invalid score."""
    counts, ids_keys = token_reads(spec)
    if not counts and not ids_keys:
        return None
    info = extra_info if isinstance(extra_info, Mapping) else {}
    # the ids extra_info holds, each read once: the spec's keys, then the default one (a count's fallback)
    found = {k: ids for k in (*sorted(ids_keys), "completion_ids") if (ids := _ints(info.get(k))) is not None}
    metadata: dict[str, Any] = {k: found[k] for k in ids_keys if k in found}
    source = next(iter(found.values()), None)
    for key in counts:
        value: Any = info.get(key)
        if callable(getattr(value, "item", None)):  # a numpy integer
            value = value.item()
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            metadata[key] = value
        elif source is not None:
            metadata[key] = len(source)
    missing = sorted((counts | ids_keys) - metadata.keys())
    if missing:
        name = spec if isinstance(spec, str) else spec.name
        raise ValueError(
            f"reward {name!r} (data_source {data_source!r}) counts the response in tokens and reads "
            f"{', '.join(repr(k) for k in missing)} from extra_info, which does not hold it: verl passes a "
            "reward function the decoded text only, never the token ids, and the service has no tokenizer, "
            "so every sample would be unscored and train on REWARDHUB_VERL_INVALID_SCORE. Count in text "
            'instead (the route\'s config "unit": "chars" or "words"; repetition: "words"), use verl\'s own '
            "overlong penalty for DAPO's (reward_manager dapo, reward_kwargs.overlong_buffer_cfg), or put "
            "the response's ids into extra_info['completion_ids'] (the reward loop's naive manager merges an "
            "agent loop's extra_fields into extra_info)"
        )
    return metadata


def _prompt(extra_info: Any) -> str | None:
    """The question of a sample, where verl's dataset put it: ``extra_info["prompt"]`` or ``["question"]``
    (verl's gsm8k and MATH preprocessing keep the raw question there; the chat-formatted prompt itself is
    not passed to a reward function)."""
    if isinstance(extra_info, Mapping):
        for key in ("prompt", "question"):
            value = extra_info.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return None


def _key(spec: str | RewardSpec) -> str:
    return spec if isinstance(spec, str) else json.dumps(spec.model_dump(), sort_keys=True)


def _unchecked(items: Sequence[ScoreItem]) -> list[tuple[str | RewardSpec, bool]]:
    """The items' reward specs this process has not checked yet (none when checking is off), each with
    whether it is the shadow's alone, and raise for one already found unrunnable."""
    conf = _conf()
    if not conf["check"]:
        return []
    todo: dict[str, tuple[str | RewardSpec, bool]] = {}
    specs: list[tuple[str | RewardSpec | None, bool]] = [(item.reward, False) for item in items]
    if conf["shadow"] is not None:  # checked as a route's spec is: one it cannot run is never compared
        specs.append((conf["shadow"].reward, True))
    with _lock:
        checked: dict[str, RewardUnavailable | None] = conf["checked"]
        for spec, shadow in specs:
            assert spec is not None
            key = _key(spec)
            if key not in checked:
                # a spec that is also a sample's route is named as the route's: the first entry stays
                todo.setdefault(key, (spec, shadow))
            elif (error := checked[key]) is not None:
                raise error
    return list(todo.values())


def _record(spec: str | RewardSpec, answer: Any, shadow: bool = False) -> None:
    """Keep the check's answer (``None``: a service without the route) and raise when it is not ok;
    ``shadow``: the spec is the shadow's alone, and its error says so."""
    conf = _conf()  # (not under _lock: a first configure() takes it)
    if answer is not None and shadow:
        answer = as_shadow_check(answer)  # the error names it as the shadow
    error = None if answer is None or answer.ok else RewardUnavailable(conf["url"], answer)
    with _lock:
        conf["group_aware"][_key(spec)] = answer is not None and answer.group_aware
        conf["reads_prompt"][_key(spec)] = answer is not None and "prompt" in answer.reads
        conf["checked"][_key(spec)] = error
    if error is not None:
        raise error


def _check_sync(items: Sequence[ScoreItem]) -> None:
    """Check the items' unchecked specs. verl's reward loop runs a sync compute_score on executor
    threads, many at once: a spec's check is asked by one thread while the others wait for its answer
    (each asked it again before any knew the answer)."""
    conf = _conf()
    for spec, shadow in _unchecked(items):
        key = _key(spec)
        with _lock:
            asking = conf["asking"].setdefault((key, os.getpid()), threading.Lock())
        with asking:
            with _lock:
                known = key in conf["checked"]
                error = conf["checked"].get(key)
            if error is not None:
                raise error  # the answer the thread that asked got
            if not known:
                _record(spec, _client().check_if_supported(spec), shadow)


async def _check_async(client: AsyncRewardClient, items: Sequence[ScoreItem]) -> None:
    """As :func:`_check_sync`, on the background loop: verl's reward loop awaits one compute_score_async
    per rollout, thousands at once, and each first call asked the service the same check before any
    knew the answer (a step's worth of check requests). The first asks, the others await its answer."""
    conf = _conf()
    pending: dict[tuple[str, asyncio.AbstractEventLoop], asyncio.Future[None]] = conf["pending"]
    loop = asyncio.get_running_loop()
    for spec, shadow in _unchecked(items):
        key = _key(spec)
        task = pending.get((key, loop))
        if task is None:
            task = pending[(key, loop)] = asyncio.ensure_future(_ask(client, pending, key, spec, shadow))
        await asyncio.shield(task)  # a caller cancelled does not cancel the others' question


async def _ask(
    client: AsyncRewardClient,
    pending: dict[tuple[str, asyncio.AbstractEventLoop], asyncio.Future[None]],
    key: str,
    spec: str | RewardSpec,
    shadow: bool,
) -> None:
    try:
        answer = await client.check_if_supported(spec)  # None: a service without the route
    finally:
        # answered or not (a transport error is asked again by the next call), no longer in flight
        pending.pop((key, asyncio.get_running_loop()), None)
    _record(spec, answer, shadow)


def _grouped(items: Sequence[ScoreItem], per_sample: bool) -> None:
    """Raise for items without a group whose spec the check said scores against its group (a majority
    vote, a group-relative length): the service answers every such item ``unsupported``, and verl,
    which cannot mask a sample, would train on ``REWARDHUB_VERL_INVALID_SCORE`` for all of them."""
    aware: dict[str, bool] = _conf()["group_aware"]
    alone = [it for it in items if it.group is None and it.reward is not None and aware.get(_key(it.reward))]
    if not alone:
        return
    assert alone[0].reward is not None
    name = alone[0].reward if isinstance(alone[0].reward, str) else alone[0].reward.name
    if per_sample:
        raise ValueError(
            f"reward {name!r} scores each rollout against its group, and a per-sample compute_score holds "
            "one rollout: every sample would be unscored and train on REWARDHUB_VERL_INVALID_SCORE. Use "
            "compute_score_batch (reward_model.use_reward_loop=False reward_model.reward_manager=batch "
            "custom_reward_function.name=compute_score_batch)"
        )
    raise ValueError(
        f"reward {name!r} scores each rollout against its group, and {len(alone)} of {len(items)} samples "
        "have no 'uid' or 'group' in their extra_info (verl's own rollout uid is not passed to a reward "
        "function): they would be unscored and train on REWARDHUB_VERL_INVALID_SCORE. Put an id of the "
        "prompt in each dataset row's extra_info['uid'] (its data source and index, say) when preparing the data"
    )


def _to_verl(r: ItemResult | None) -> dict[str, Any]:
    """One item's answer as verl takes it; ``None``: an item whose chunk of the request failed, scored
    as an invalid item (verl needs a number) and flagged ``request_failed``. Numbers only: verl averages
    each extra key over the samples of a validation run."""
    valid = r is not None and r.valid
    score = r.score if r is not None and r.valid and r.score is not None else _conf()["invalid"]
    out: dict[str, Any] = {
        "score": score,
        # verl's DAPO recipe filters groups on reward_extra_info[algorithm.filter_groups.metric], "acc" by
        # default, and stops with a KeyError where it is missing: the score is the signal it wants
        "acc": score,
        "valid": 1.0 if valid else 0.0,
        "cached": 1.0 if r is not None and r.cached else 0.0,
        "request_failed": 1.0 if r is None else 0.0,
    }
    for name in _conf()["components"]:
        value = r.components.get(name) if r is not None else None
        out.setdefault(name, float(value) if isinstance(value, int | float) else math.nan)
    if _conf()["shadow"] is not None:
        out.update(_shadow_outcome(r))
    return out


def _shadow_outcome(r: ItemResult | None) -> dict[str, float]:
    """How the shadow compared on one sample, as numbers verl can average over any set of samples (a
    rate over the compared ones only would be NaN on the others, and verl's mean of a data source with
    one NaN is NaN): ``shadow_agree / shadow_compared`` is the agreement, and so on."""
    shadow = r.shadow if r is not None else None
    outcome = shadow.outcome if shadow is not None and shadow.agree is not None else ""
    return {
        "shadow_compared": 1.0 if outcome else 0.0,
        "shadow_agree": 1.0 if shadow is not None and shadow.agree else 0.0,
        "shadow_only": 1.0 if outcome == "shadow_only" else 0.0,
        "primary_only": 1.0 if outcome == "primary_only" else 0.0,
    }


_warned: list[bool] = []  # [True] once a partly failed batch has warned in this process
_warned_invalid: list[bool] = []  # [True] once an unscored sample has warned in this process
_warned_question: list[bool] = []  # [True] once a sample without its question has warned


def _note_questions(items: Sequence[ScoreItem]) -> None:
    """Warn, the first time in a process, that a reward reading the question (the check said so: a
    judge, a PRM, an ORM) scores samples without it: verl does not pass the prompt to a reward function,
    and a sample whose extra_info holds neither ``prompt`` nor ``question`` was scored without its
    question, validly (a score, not an invalid flag), with nothing to say so."""
    if _warned_question:
        return
    reads: dict[str, bool] = _conf()["reads_prompt"]
    blind = [it for it in items if it.prompt is None and it.reward is not None and reads.get(_key(it.reward))]
    if blind:
        assert blind[0].reward is not None
        name = blind[0].reward if isinstance(blind[0].reward, str) else blind[0].reward.name
        warn_once(
            _warned_question,
            f"rewardhub: reward {name!r} reads the question, and {len(blind)} of {len(items)} samples have "
            "no extra_info['prompt'] or extra_info['question'] (verl does not pass the prompt to a reward "
            "function): they are scored without it. Keep the raw question in each row's "
            "extra_info['prompt'] when preparing the data. Later ones do not warn",
            stacklevel=3,
        )


def _note_invalid(results: Sequence[ItemResult | None]) -> None:
    """Warn, the first time in a process, that samples the service could not score get the default
    invalid score: verl cannot mask them, and logs the ``valid`` key only in its validation metrics, so
    in training they were 0.0 rewards nothing told apart from wrong answers. Not where the user chose the
    score (``REWARDHUB_VERL_INVALID_SCORE`` or ``configure(invalid_score=...)``); a failed request (None)
    has its own warning."""
    conf = _conf()
    if conf["invalid_chosen"] or _warned_invalid:
        return
    unscored = [r for r in results if r is not None and not r.valid]
    if unscored:
        reasons = sorted({r.reason or "unknown" for r in unscored})
        warn_once(
            _warned_invalid,
            f"rewardhub: {len(unscored)} of {len(results)} samples could not be scored (reason: "
            f"{', '.join(reasons)}); verl cannot mask a sample, so they train on the invalid score "
            f"{conf['invalid']}, as a wrong answer would. Their extra info has valid: 0.0 (verl logs it in "
            "validation metrics only). Later ones do not warn; set REWARDHUB_VERL_INVALID_SCORE (or "
            "configure(invalid_score=...)) to choose the score and silence this",
            stacklevel=3,
        )


def _answered(exc: RewardHubClientError, n: int) -> list[ItemResult | None]:
    """What a batch whose request partly failed keeps (``None`` at the failed chunks' items), or raise
    ``exc``: with ``on_request_failure="raise"``, or when nothing was answered (verl cannot mask, and a
    step scored on the invalid score alone would train on nothing but it)."""
    partial = partial_or_raise(exc, _conf()["on_request_failure"])
    warn_once(
        _warned,
        f"rewardhub: {len(exc.failed_indices)} of {n} samples were not scored, their part of the "
        f"request failed after the client's retries ({exc}); they get the invalid score "
        f"({_conf()['invalid']}) with request_failed: 1.0, the answered ones are kept. Later such "
        "batches do not warn (REWARDHUB_VERL_ON_REQUEST_FAILURE=raise raises instead)",
        stacklevel=3,
    )
    return partial


# one client per (url, api key): a configure() with another key must not keep sending the old one
_sync: dict[tuple[str, str | None], RewardClient] = {}


def _retire(keep: tuple[str, str | None]) -> None:
    """Close the pooled clients of another (url, api key) than ``keep``: a configure() pointing elsewhere
    left them in the pools, and their kept-alive connections open, for the life of the process. The async
    ones are closed on the background loop they ran on (dropped in a forked child, whose loop thread is
    the parent's)."""
    with _lock:
        old_sync = [_sync.pop(k) for k in list(_sync) if k != keep]
        old_async = [_async.pop(k) for k in list(_async) if k != keep]
        ours = _background.get("pid") == os.getpid()
    for sync in old_sync:
        sync.close()
    for client in old_async if ours else ():
        client._close_soon()


def _client() -> RewardClient:
    conf = _conf()
    key = (conf["url"], conf["api_key"])
    with _lock:
        if key not in _sync:
            _sync[key] = RewardClient(key[0], api_key=key[1])
        return _sync[key]


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """verl's per-sample signature (sync)."""
    items = [_item(solution_str, ground_truth, data_source, extra_info, None)]
    _check_sync(items)
    _grouped(items, per_sample=True)
    _note_questions(items)
    resp = _client().score(items, shadow=_conf()["shadow"])
    _note_invalid(resp.results)
    return _to_verl(resp.results[0])


# compute_score_async's requests run on one event loop of this module's, in a daemon thread, through one
# pooled AsyncRewardClient per (url, api key). A client per call (the caller's loop may be short-lived,
# and an httpx pool belongs to the loop it first ran on) cost a TCP connection per sample and a new TLS
# context each time: tens of milliseconds of CPU on verl's reward loop per sample.
_background: dict[str, Any] = {}
_async: dict[tuple[str, str | None], AsyncRewardClient] = {}


def _background_loop() -> asyncio.AbstractEventLoop:
    with _lock:
        loop: asyncio.AbstractEventLoop | None = _background.get("loop")
        if loop is None or _background.get("pid") != os.getpid():  # none yet, or its thread left in a fork
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="rewardhub-verl", daemon=True).start()
            _background.update(loop=loop, pid=os.getpid())
            _async.clear()
        return loop


async def _score_async(items: list[ScoreItem]) -> dict[str, Any]:
    """On the background loop: check the spec once, score with the pooled client."""
    conf = _conf()
    key = (conf["url"], conf["api_key"])
    client = _async.get(key)
    if client is None:
        # one call per rollout, thousands at once: room for as many in flight as the per-call clients had
        # in practice, the rest wait for a connection
        client = _async[key] = AsyncRewardClient(key[0], api_key=key[1], max_concurrency=256)
    await _check_async(client, items)
    _grouped(items, per_sample=True)
    _note_questions(items)
    resp = await client.score(items, shadow=conf["shadow"])
    _note_invalid(resp.results)
    return _to_verl(resp.results[0])


async def compute_score_async(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """verl's per-sample signature (async: verl's reward loop awaits it)."""
    items = [_item(solution_str, ground_truth, data_source, extra_info, None)]
    future = asyncio.run_coroutine_threadsafe(_score_async(items), _background_loop())
    return await asyncio.wrap_future(future)


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's batch reward manager signature: one request for the whole batch."""
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    call = uuid.uuid4().hex[:12]
    items = [
        _item(s, g, d, e, call, i)
        for i, (d, s, g, e) in enumerate(zip(data_sources, solution_strs, ground_truths, infos, strict=True))
    ]
    _check_sync(items)
    _grouped(items, per_sample=False)
    _note_questions(items)
    results: list[ItemResult | None]
    try:
        results = list(_client().score(items, shadow=_conf()["shadow"]).results)
    except RewardHubClientError as exc:
        results = _answered(exc, len(items))
    _note_invalid(results)
    return [_to_verl(r) for r in results]
