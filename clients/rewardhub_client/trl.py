"""A reward function for TRL's ``GRPOTrainer`` that gets its rewards from a rewardhub service.

::

    from trl import GRPOTrainer
    from rewardhub_client.trl import make_reward_func

    trainer = GRPOTrainer(
        model=...,
        reward_funcs=[make_reward_func("http://localhost:8000", "math", reference_column="solution")],
        ...
    )

The function is ``async`` (TRL awaits async reward functions concurrently on its own event loop), sends
the whole batch in one request with the completions of one prompt tagged as one ``group`` (each with its
token count, from TRL's ``completion_ids``, as ``metadata["completion_tokens"]``; the ids themselves
too, under ``metadata["completion_ids"]``, when the spec has a reward that counts them: ``repetition``
with ``unit: token_ids``, under its ``token_ids_key``), and maps
items the service could not score to ``None`` — TRL turns those into NaN and leaves them out of the group
statistics, instead of training on a fake zero. The function's ``aclose()`` closes its connections
(``asyncio.run_coroutine_threadsafe(fn.aclose(), trainer.async_loop)`` after training); those of a loop
that ends as ``asyncio.run`` ends one close with it. Per call it logs ``rewardhub/cache_hit_rate``,
``rewardhub/invalid_fraction``, ``rewardhub/request_failed_fraction`` and ``rewardhub/latency_ms`` through
TRL's ``log_metric``, and the reason of each invalid item through ``log_extra``.

**A request that partly fails.** The client sends a large batch in chunks; when one chunk still fails
after its retries for the service's state (unreachable, a timeout, 5xx, 408, 429) while the others were
answered, the answered rewards are kept and the failed chunk's items get ``invalid_value`` (masked by
default), their reason ``request_failed``; ``rewardhub/request_failed_fraction`` is their share of the
call, and the first such call warns. A call of which nothing was answered still raises: TRL would train
a step on no signal at all. ``on_request_failure="raise"`` raises for a partial failure too.

A conversational completion is sent as its assistant turns' content. Given tools, TRL parses a turn's
calls out of its text into ``tool_calls``; for a spec that is or holds ``tool_call``, they are sent back
after the turn's content as ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` blocks.

Before its first batch the function asks the service whether it can run the spec at all
(``POST /v1/rewards/check``, once per function, so once per process): a reward whose model the service
was not given, or a composite with such a part, raises :class:`~rewardhub_client.RewardUnavailable`
naming the part and the setting, instead of training on every reward coming back ``None`` (no signal).
``check=False`` skips it; a service too old to have the route is not checked.

**Group rewards across processes.** TRL hands each process its own slice of the generation batch, so a
prompt's ``num_generations`` completions stay on one process only when the per-process batch is a
multiple of ``num_generations``; otherwise each process sees part of a group, and a group reward
(``majority_vote``, ``group_length``, ``verpo``) would score a vote among half the group. Pass
``num_generations=`` (the GRPOConfig value) and a call holding part of a group raises ``ValueError``
saying so; without it, a group reward in a multi-process run (``WORLD_SIZE`` > 1) warns once.
"""

from __future__ import annotations

import json
import os
import uuid
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from rewardhub_client._adapters import (
    env_spec,
    partial_or_raise,
    service_url,
    token_count_keys,
    token_ids_keys,
    warn_once,
)
from rewardhub_client._core import ShadowLike, as_shadow, as_shadow_check, shadow_rates
from rewardhub_client.client import AsyncRewardClient
from rewardhub_client.errors import RewardHubClientError, RewardUnavailable
from rewardhub_client.types import ItemResult, RewardSpec, ScoreItem

__all__ = ["completion_text", "make_reward_func", "prompt_text"]

RewardFunc = Callable[..., Awaitable[list[float | None]]]

# What TRL passes a reward function besides the dataset's columns.
_TRL_KWARGS = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})

# the reason logged for an item whose chunk of the request failed (the trainer's dispatcher uses the same)
_REQUEST_FAILED = "request_failed"


def _world_size() -> int:
    """Processes in the run, as torchrun / accelerate launch set it (1 outside a launcher)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def _content_text(content: Any) -> str:
    """Text of a message's ``content``: a string, nothing (``None``: an assistant turn that only calls a
    tool), or a list of parts (``[{"type": "image"}, {"type": "text", "text": ...}]``, TRL's multimodal
    format) of which the text parts count."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, Mapping) and p.get("type", "text") == "text" and p.get("text") is not None
        )
    return str(content)


def completion_text(completion: Any, tool_calls: bool = False) -> str:
    """Text of a completion: a string (standard format) or a list of messages (conversational), the
    assistant turns' content; ``tool_calls``, with the calls of each turn after it as ``<tool_call>``
    blocks (TRL parses them out of the text when it is given tools)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        return "\n".join(
            _message_text(m, tool_calls)
            for m in completion
            if isinstance(m, Mapping) and m.get("role", "assistant") == "assistant"
        )
    return str(completion)


def _message_text(message: Mapping[str, Any], tool_calls: bool) -> str:
    text = _content_text(message.get("content"))
    calls = message.get("tool_calls") if tool_calls else None
    if not isinstance(calls, Sequence) or isinstance(calls, str):
        return text
    blocks = [b for b in (_call_block(c) for c in calls) if b is not None]
    return "\n".join([text, *blocks] if text else blocks)


def _call_block(call: Any) -> str | None:
    """An OpenAI / TRL tool call entry (``{"type": "function", "function": {"name", "arguments"}}``) as
    the Hermes ``<tool_call>`` block the tool_call reward reads; None for an entry without a name."""
    fn = call.get("function", call) if isinstance(call, Mapping) else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        return None
    body = {"name": fn["name"], "arguments": fn.get("arguments", {})}
    return f"<tool_call>\n{json.dumps(body, ensure_ascii=False, default=str)}\n</tool_call>"


def _reads_tool_calls(spec: Any) -> bool:
    """Whether a reward spec is, or has a part that is, ``tool_call`` (whose reward reads the calls)."""
    if isinstance(spec, str):
        return spec == "tool_call"
    if isinstance(spec, RewardSpec):
        spec = spec.model_dump()
    if isinstance(spec, Mapping):
        return any(
            (k in ("name", "reward") and v == "tool_call") or _reads_tool_calls(v)
            for k, v in spec.items()
            if not isinstance(v, str) or k in ("name", "reward")
        )
    if isinstance(spec, Sequence):
        return any(_reads_tool_calls(v) for v in spec if not isinstance(v, str))
    return False


def prompt_text(prompt: Any) -> str:
    """Text of a prompt: the string itself, or the last user message of a conversation."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        users = [m.get("content") for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        if users:
            return _content_text(users[-1])
        return "\n".join(_content_text(m.get("content")) for m in prompt if isinstance(m, Mapping))
    return str(prompt)


def _reference(value: Any) -> Any:
    """A dataset cell as a reference: strings and JSON objects/lists as they are, anything else as text.

    Datasets often hold numeric answers (``{"solution": 42}``); the wire format takes a string, a JSON
    object or a list, so a number sent as is failed the whole batch with a ValidationError (the trainer's
    JSONL source and the verl adapter convert the same way).
    """
    return value if value is None or isinstance(value, str | dict | list) else str(value)


def _prompt_key(prompt: Any) -> Any:
    """What tells prompts apart for grouping: the text, message by message (role and text parts).

    Not ``repr(prompt)``: TRL puts a VLM prompt's image into it as a PIL object, one decoded copy per
    completion, and an object's repr carries its address, so no two completions of a prompt had the
    same repr. Rows that differ only in their image are told apart by their reference or, with
    ``num_generations``, by their position (see :func:`_groups`).
    """
    if isinstance(prompt, str) or not isinstance(prompt, Sequence):
        return prompt if isinstance(prompt, str) else repr(prompt)
    return [
        (m.get("role"), _content_text(m.get("content"))) if isinstance(m, Mapping) else repr(m)
        for m in prompt
    ]


def _groups(
    prompts: Sequence[Any], refs: Sequence[Any] | None, num_generations: int | None
) -> tuple[list[int], int | None]:
    """The group index of each completion, and the size of a split group (None: all whole).

    A row is told apart by its prompt *and* its reference: two dataset rows can share the prompt text
    (a VLM set asking "What number is in the image?" of different images, a duplicated question).
    TRL lays out each row's ``num_generations`` completions consecutively, so with ``num_generations``
    a group is a run of that many equal rows: two rows with the same prompt stay two groups even when
    nothing else tells them apart. Without it (or a batch not laid out in runs, as a caller other than
    TRL may send) a group is every completion of one (prompt, reference).
    """
    keys = [repr((_prompt_key(p), refs[i] if refs is not None else None)) for i, p in enumerate(prompts)]
    by_key: dict[str, int] = {}
    keyed = [by_key.setdefault(k, len(by_key)) for k in keys]
    if num_generations is None:
        return keyed, None
    runs: list[int] = []  # lengths of the runs of equal keys
    for i, k in enumerate(keys):
        if i and k == keys[i - 1]:
            runs[-1] += 1
        else:
            runs.append(1)
    if all(n % num_generations == 0 for n in runs):
        return [i // num_generations for i in range(len(keys))], None
    counts = Counter(keys)
    split = next((n for n in counts.values() if n != num_generations), None)
    if split is None:  # not in runs, but every row has exactly num_generations completions
        return keyed, None
    return keyed, next(n % num_generations for n in runs if n % num_generations)


def _token_counts(completion_ids: Any, n: int) -> list[int] | None:
    """Each completion's token count from TRL's ``completion_ids`` (a list of token-id lists, one per
    completion), sent as ``metadata["completion_tokens"]``: the service has no tokenizer, and the rewards
    that count tokens (``length``'s DAPO overlong punishment and cosine reward, ``group_length``) answered
    every item ``missing_reference`` without it (a run on no signal). None where TRL passed none."""
    if (
        not isinstance(completion_ids, Sequence)
        or isinstance(completion_ids, str)
        or len(completion_ids) != n
    ):
        return None
    counts = [
        len(ids) if isinstance(ids, Sequence) and not isinstance(ids, str) else None for ids in completion_ids
    ]
    return None if any(c is None for c in counts) else [c for c in counts if c is not None]


def _token_ids(completion_ids: Any, n: int) -> list[list[int]] | None:
    """TRL's ``completion_ids`` as lists of ints (a tensor row or numpy array as its items), one per
    completion; None where TRL passed none (or not one list per completion)."""
    if _token_counts(completion_ids, n) is None:
        return None
    return [[int(t) for t in ids] for ids in completion_ids]


def make_reward_func(
    service: str | AsyncRewardClient = "http://127.0.0.1:8000",
    reward: str | RewardSpec | Mapping[str, Any] = "math",
    *,
    config: Mapping[str, Any] | None = None,
    reference_column: str | None = "solution",
    name: str | None = None,
    api_key: str | None = None,
    timeout_s: float | None = None,
    invalid_value: float | None = None,
    check: bool = True,
    num_generations: int | None = None,
    num_generations_eval: int | None = None,
    on_request_failure: Literal["invalid", "raise"] = "invalid",
    shadow: ShadowLike = None,
) -> RewardFunc:
    """Build a TRL reward function backed by the service.

    Args:
        service: the service URL, or an :class:`AsyncRewardClient`.
        reward: reward name or spec (``{"name": ..., "config": ...}``).
        config: reward config (merged into ``reward``'s).
        reference_column: dataset column holding the reference (gold answer, tests...); None for rewards
            that need none. A batch without that column whose every item then comes back
            ``missing_reference`` raises ``ValueError`` naming the batch's columns.
        name: the function's ``__name__`` (TRL logs ``rewards/<name>/mean``); default ``rewardhub_<reward>``.
        api_key: for services that require one.
        timeout_s: per-item deadline sent to the service.
        invalid_value: what to return for an item that could not be scored (default None = masked).
        check: before the first batch, ask the service whether it can run this spec and every part of it
            (one request per function); raises :class:`RewardUnavailable` when it cannot.
        num_generations: GRPOConfig's ``num_generations``. With a group reward (or with ``check=False``),
            a call in which a prompt has another number of completions raises ``ValueError``: the group
            was split across processes (see the module docstring).
        num_generations_eval: GRPOConfig's ``num_generations_eval`` when it differs: TRL's evaluation
            generates that many per prompt, and the reward function is not told whether a call is
            training or evaluation, so a batch laid out in whole groups of this size is taken as an
            evaluation batch instead of a split one.
        on_request_failure: what a call does when some chunks of its request failed after the client's
            retries and others were answered (see the module docstring). ``"invalid"``: keep the answered
            rewards and give the failed items ``invalid_value``, as an item the service could not score,
            logging ``rewardhub/request_failed_fraction`` and warning once. ``"raise"``: raise the
            client's error (its ``partial_results`` hold the answered ones). A call of which nothing was
            answered raises either way.
        shadow: a second reward the service runs beside this one to audit it (shadow verification: a
            name, a spec or ``{"reward": ..., "threshold": ...}``); the rewards stay this one's, and each call
            logs ``rewardhub/shadow_agreement``, ``rewardhub/shadow_only_fraction`` (the shadow passed, this
            reward did not: possible false negatives) and ``rewardhub/primary_only_fraction``.
    """
    if on_request_failure not in ("invalid", "raise"):
        raise ValueError(f"on_request_failure must be 'invalid' or 'raise', not {on_request_failure!r}")
    # a spec mapping without a name was a KeyError 'name'; a URL without http:// failed at the first batch
    checked_spec = env_spec(reward, "reward")
    spec_name = checked_spec if isinstance(checked_spec, str) else checked_spec.name
    if isinstance(service, str):
        service = service_url(service, "service")
    # TRL given tools parses the calls out of a turn's text: what reads them gets them back as blocks
    with_calls = _reads_tool_calls(reward) or _reads_tool_calls(config)
    # a reward counting n-grams of token ids (repetition with unit: token_ids) reads them from metadata
    ids_keys = token_ids_keys(reward, config)
    # the token count goes under completion_tokens and any other token_count_key the spec names
    count_keys = token_count_keys(reward, config)
    owned: list[AsyncRewardClient] = []  # the client this function made (none when given one)
    shadow_spec = as_shadow(shadow)  # (a bad one fails here, not at the first batch)
    checked: list[RewardUnavailable | None] = [] if check else [None]  # [] = not asked yet
    # Whether the spec is a group reward: None = not known (not checked, or an older service).
    group_aware: list[bool | None] = [None]
    warned_partial: list[bool] = []  # [True] once a partly failed request has warned
    for n, what in ((num_generations, "num_generations"), (num_generations_eval, "num_generations_eval")):
        if n is not None and n < 1:
            raise ValueError(f"{what} must be at least 1")
    # TRL awaits the function on its own event loop: a sync client (or another object) failed at the
    # first batch with "AttributeError: rstrip", and a key next to a client object was dropped silently
    if not isinstance(service, str | AsyncRewardClient):
        raise TypeError(
            f"service must be the service's URL or an AsyncRewardClient, not {type(service).__name__} "
            "(TRL calls the reward function on its event loop: pass AsyncRewardClient(url, api_key=...))"
        )
    if isinstance(service, AsyncRewardClient) and api_key is not None:
        raise ValueError("api_key goes to the AsyncRewardClient passed as service, not to make_reward_func")

    async def ensure_runnable(client: AsyncRewardClient) -> None:
        if not checked:
            answer = await client.check_if_supported(reward, config)  # None: an older service
            error = None if answer is None or answer.ok else RewardUnavailable(client.base_url, answer)
            if shadow_spec is not None and error is None:
                # a shadow the service cannot run answered every item shadow_invalid: no agreement logged,
                # ever, and nothing said why (kept only once both answered: a check that failed is asked
                # again at the next call)
                seen = await client.check_if_supported(shadow_spec.reward)
                if seen is not None and not seen.ok:
                    error = RewardUnavailable(client.base_url, as_shadow_check(seen))
            if not checked:
                checked.append(error)
            group_aware[0] = None if answer is None else answer.group_aware
            if group_aware[0] and num_generations is None and _world_size() > 1:
                warnings.warn(
                    f"reward {spec_name!r} scores each completion against its group, and in a "
                    f"{_world_size()}-process run TRL may split a prompt's completions across processes; "
                    "pass make_reward_func(..., num_generations=<GRPOConfig.num_generations>) to have "
                    "split groups raise instead of being scored as smaller groups",
                    stacklevel=2,
                )
        if checked[0] is not None:
            raise checked[0]

    def check_whole_groups(split: int | None) -> None:
        if split is None or num_generations is None or group_aware[0] is False:
            return
        raise ValueError(
            f"reward {spec_name!r} needs each prompt's {num_generations} completions in one call, and "
            f"this process got {split} of one prompt: TRL split the group across processes. Make the "
            "per-process generation batch (per_device_train_batch_size x steps_per_generation) a "
            "multiple of num_generations"
        )

    async def client_for_call() -> AsyncRewardClient:
        # One client per function, made at its first call: AsyncRewardClient keeps a connection pool per
        # event loop and closes each as its loop ends (TRL keeps one daemon loop; a caller running each
        # call under asyncio.run gets a pool per call, closed with that call's loop).
        if isinstance(service, AsyncRewardClient):
            return service
        if not owned:
            owned.append(AsyncRewardClient(service, api_key=api_key))
        return owned[0]

    async def reward_func(
        prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        client = await client_for_call()
        await ensure_runnable(client)
        refs = kwargs.get(reference_column) if reference_column else None
        group_of, split = _groups(prompts, refs, num_generations)
        if split is not None and num_generations_eval is not None:
            as_eval, eval_split = _groups(prompts, refs, num_generations_eval)
            if eval_split is None:  # whole groups of the evaluation's size: an evaluation batch
                group_of, split = as_eval, None
        check_whole_groups(split)
        call = uuid.uuid4().hex[:12]
        tokens = _token_counts(completion_ids, len(completions))
        ids = _token_ids(completion_ids, len(completions)) if ids_keys else None
        items = []
        for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
            ptext = prompt_text(prompt)
            group = f"trl-{call}-{group_of[i]}"
            metadata: dict[str, Any] = dict.fromkeys(count_keys, tokens[i]) if tokens is not None else {}
            if ids is not None:
                metadata.update(dict.fromkeys(ids_keys, ids[i]))
            items.append(
                ScoreItem(
                    id=str(i),
                    prompt=ptext,
                    response=completion_text(completion, tool_calls=with_calls),
                    reference=_reference(refs[i]) if refs is not None else None,
                    group=group,
                    metadata=metadata or None,
                )
            )
        answered, latency_ms = await score_or_partial(client, items)
        results = [r for r in answered if r is not None]
        if (
            reference_column
            and refs is None
            and results
            and all(r.reason == "missing_reference" for r in results)
        ):
            # The column is not in the dataset (a default "solution" against a set that calls it "answer"):
            # every reward would be None, every step, and TRL would train on no signal.
            columns = sorted(k for k in kwargs if k not in _TRL_KWARGS)
            raise ValueError(
                f"reward {spec_name!r} needs a reference and the batch has no column {reference_column!r} "
                f"(its columns: {', '.join(columns) or 'none'}); pass "
                "make_reward_func(..., reference_column=<the column with the gold answer>)"
            )
        out = [r.score if r is not None and r.valid else invalid_value for r in answered]
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            # the reward's own rates are over what the service answered: an outage is no reward that
            # cannot score, and has its own rate
            n = max(1, len(results))
            log_metric("rewardhub/cache_hit_rate", sum(r.cached for r in results) / n)
            log_metric("rewardhub/invalid_fraction", sum(not r.valid for r in results) / n)
            log_metric(
                "rewardhub/request_failed_fraction", (len(answered) - len(results)) / max(1, len(answered))
            )
            if latency_ms is not None:
                log_metric("rewardhub/latency_ms", latency_ms)
            rates = shadow_rates(results)
            if rates is not None:
                log_metric("rewardhub/shadow_agreement", rates["agreement"])
                log_metric("rewardhub/shadow_only_fraction", rates["shadow_only"])
                log_metric("rewardhub/primary_only_fraction", rates["primary_only"])
        log_extra = kwargs.get("log_extra")
        if callable(log_extra):
            reasons = [(r.reason or "") if r is not None else _REQUEST_FAILED for r in answered]
            log_extra(f"{reward_func.__name__}_reason", reasons)
        return out

    async def score_or_partial(
        client: AsyncRewardClient, items: list[ScoreItem]
    ) -> tuple[list[ItemResult | None], float | None]:
        """The results in item order, ``None`` for an item whose chunk of the request failed (with
        ``on_request_failure="invalid"``, when some other chunk was answered), and the service's
        latency (None for a partly failed request: no one answer has it)."""
        try:
            resp = await client.score(items, reward, config=config, timeout_s=timeout_s, shadow=shadow_spec)
        except RewardHubClientError as exc:
            partial = partial_or_raise(exc, on_request_failure)
            warn_once(
                warned_partial,
                f"reward {spec_name!r}: {len(exc.failed_indices)} of {len(items)} items were not "
                f"scored, their part of the request failed after the client's retries ({exc}); they "
                f"get invalid_value ({invalid_value}) and the answered ones are kept. Later such "
                "calls do not warn: rewardhub/request_failed_fraction counts them "
                "(make_reward_func(..., on_request_failure='raise') raises instead)",
                stacklevel=2,
            )
            return partial, None
        return list(resp.results), float(resp.metrics.get("latency_ms", 0.0) or 0.0)

    async def aclose() -> None:
        """Close the connections this function opened (call it on the loop that ran it; those of another
        loop close as that loop ends). A later call opens new ones."""
        while owned:
            await owned.pop().aclose()

    reward_func.__name__ = name or f"rewardhub_{spec_name}"
    reward_func.__qualname__ = reward_func.__name__
    reward_func.aclose = aclose  # type: ignore[attr-defined]
    return reward_func
