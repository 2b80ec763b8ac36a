"""Rewards from the rewardhub service, scored while the next groups generate.

Why a background thread: generation is the long, CPU/GPU-bound part of a step and runs in the main
thread; a reward request is I/O (plus the service's own CPU, in another process). The
:class:`RewardDispatcher` owns an asyncio event loop in a daemon thread with one
:class:`~rewardhub_client.AsyncRewardClient` (one connection pool for the whole run). ``submit`` hands a
batch of *whole groups* to that loop and returns at once with a :class:`concurrent.futures.Future`;
the training loop goes on generating and only blocks in :meth:`RewardDispatcher.wait` when it needs the
scores. The time spent blocked there is the *reward wait*; ``wait_s / wall_s`` is the fraction of the run
the trainer spent waiting on rewards. With ``overlap: false`` every submission is waited for
immediately, through the same code path, so the two settings differ only in scheduling.

Groups: the G completions of one prompt carry one ``group`` id (unique per run, so the service's
whole-group check never sees two different groups under one id) and go in one request, with
``options.group_size`` set, so group rewards and group statistics see them whole.

Failed requests: a request that fails for a reason that may pass (the service unreachable, a timeout,
a 5xx, 408, or 429/503 still refused after the client's own retries) does not end the run. Its items
come back ``valid: false`` with reason ``request_failed``, which the trainer masks out of every statistic
and of the loss like any other unscored item; the dispatcher counts the failures and keeps the last
error, so the trainer can report them per step and stop when the service stays down
(``reward.max_failed_steps``). A request the client sent in chunks can fail in part: the answered
chunks keep their results and only the failed chunks' items are ``request_failed``; such a request
counts as failed (``failed_requests``) but not as unanswered (``unanswered_requests``), which is what
the stop looks at, since its step still trains on the answered items. Any other error says the
request itself is wrong (an unknown reward, a bad config, a missing key: 4xx) or the answer does not
fit it (:class:`ProtocolError`); sending it again would fail the same way, so it ends the run at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from rewardhub_client import (
    APIError,
    AsyncRewardClient,
    InvalidRequest,
    ItemResult,
    RetryPolicy,
    RewardCheck,
    RewardClient,
    RewardHubClientError,
    ScoreItem,
    TransportError,
    UnknownReward,
)
from rewardhub_client._adapters import token_count_keys, token_ids_keys
from rewardhub_client._core import as_shadow
from rewardhub_client.errors import cannot_run
from rewardhub_trainer.config import RewardConfig
from rewardhub_trainer.data import Problem
from rewardhub_trainer.generation import Completion

__all__ = ["REQUEST_FAILED", "Group", "RewardDispatcher", "check_service", "is_transient", "request_failed"]

logger = logging.getLogger(__name__)

# The reason of an item whose request failed (the trainer's own: the service never saw or answered it).
REQUEST_FAILED = "request_failed"


def request_failed(result: ItemResult) -> bool:
    """Whether the item's request failed: the service never answered it (not one it could not score)."""
    return not result.valid and result.reason == REQUEST_FAILED


@dataclass
class Group:
    """One prompt's G completions and, once scored, their results."""

    group_id: str
    problem: Problem
    completions: list[Completion]
    results: list[ItemResult] = field(default_factory=list)
    response_prefix: str = ""  # the part of the reply the prompt already wrote (data.response_prefix)

    def items(
        self,
        token_ids_keys: Collection[str] = (),
        token_count_keys: Collection[str] = ("completion_tokens",),
    ) -> list[ScoreItem]:
        """The completions as items. Their ``prompt`` is the bare question, not the model's prompt (no
        prompt_template, system prompt or chat template): a judge, PRM or ORM puts the question into
        its own model's template. ``token_ids_keys``: the metadata keys under which the reward reads
        their token ids (:func:`rewardhub_client._adapters.token_ids_keys`), none by default;
        ``token_count_keys``: those of their token count (:func:`~rewardhub_client._adapters.token_count_keys`)."""
        return [
            ScoreItem(
                id=f"{self.group_id}/{j}",
                group=self.group_id,
                prompt=self.problem.question,
                response=self.response_prefix + c.text,
                reference=self.problem.reference,
                metadata={
                    **dict.fromkeys(token_count_keys, len(c.completion_ids)),
                    "truncated": c.truncated,
                    **dict.fromkeys(token_ids_keys, c.completion_ids),
                },
            )
            for j, c in enumerate(self.completions)
        ]

    def scores(self) -> list[float]:
        """One float per completion; NaN where the service said ``valid: false`` (masked, never 0)."""
        return [r.score if r.valid and r.score is not None else math.nan for r in self.results]


def check_service(config: RewardConfig) -> None:
    """Fail early and clearly: the service is reachable, ready, accepts the configured reward spec, and
    can run it and every reward it is built on (a model reward whose model the service was not given
    answers every item ``unsupported``: a run of steps with no reward signal, visible only as
    ``invalid_frac`` 1.0; ``code`` as a composite's component on a host without a sandbox, just the same).

    The service answers that itself (``POST /v1/rewards/check``): it resolves the spec as scoring would,
    so an unknown name or a bad config fails here, before the first step, and it walks the parts
    (composite components, verifiers, a judge's rule) at any depth, so this check needs no knowledge of
    which rewards have parts. A service too old to have the route gets the catalog check of the
    top-level name only."""
    where = f"the service at {config.url}"
    with RewardClient(config.url, api_key=config.api_key, timeout=config.timeout_s) as client:
        client.wait_until_ready(timeout_s=config.wait_ready_s)
        try:
            check = client.check_if_supported(config.name, config.config)
        except UnknownReward as exc:
            raise ValueError(
                f"{where} has no reward {config.name!r} (or a part of it): {exc.message}"
            ) from None
        except InvalidRequest as exc:
            raise ValueError(f"{where} rejects the reward config: {exc.message}") from None
        if check is None:  # no /v1/rewards/check: an older service
            _check_catalog(client, config, where)
            return
        shadow = _check_shadow(client, config, where)
    if not check.ok:  # every part that cannot run, so one fix-and-retry is enough
        raise ValueError(cannot_run(config.url, check))
    if shadow is not None and not shadow.ok:
        raise ValueError(f"reward.shadow: {cannot_run(config.url, shadow)}")
    _check_deadline(config, max((c.timeout_s for c in (check, shadow) if c and c.timeout_s), default=None))


def _check_shadow(client: RewardClient, config: RewardConfig, where: str) -> RewardCheck | None:
    """``reward.shadow``'s spec, checked as the reward's is (None without one)."""
    if config.shadow is None:
        return None
    try:
        spec = as_shadow(config.shadow)
    except ValueError as exc:  # pydantic's ValidationError: not a shadow spec at all
        raise ValueError(f"reward.shadow: {exc}") from None
    assert spec is not None
    try:
        return client.check(spec.reward)
    except UnknownReward as exc:
        raise ValueError(f"reward.shadow: {where} has no such reward: {exc.message}") from None
    except InvalidRequest as exc:
        raise ValueError(f"reward.shadow: {where} rejects it: {exc.message}") from None


def _check_deadline(config: RewardConfig, deadline: float | None) -> None:
    """With ``reward.item_timeout_s`` unset the service applies its own per-item deadline (``deadline``,
    from the check), which the client does not know: it reads each answer for ``reward.timeout_s`` only.
    Under the deadline plus the margin the client allows a deadline it is told of (a quarter, at least
    10 s), a request with an item that runs to its deadline timed out whole, every item of it
    ``request_failed``, instead of that item timing out."""
    if config.item_timeout_s is not None or deadline is None:
        return  # told of the deadline, the client reads past it on its own
    need = deadline + max(10.0, deadline / 4)
    if config.timeout_s < need:
        raise ValueError(
            f"reward.timeout_s ({config.timeout_s:g}s) is too short for the service's per-item deadline for "
            f"{config.name!r} ({deadline:g}s; reward.item_timeout_s is unset): a request with an item that "
            "runs to its deadline would time out whole, every item of it request_failed; set "
            f"reward.timeout_s to {need:g} or more, or set reward.item_timeout_s (the client then waits "
            "past it on its own)"
        )


def _check_catalog(client: RewardClient, config: RewardConfig, where: str) -> None:
    catalog = {r.name: r for r in client.rewards()}
    info = catalog.get(config.name)
    if info is None:
        raise ValueError(f"{where} has no reward {config.name!r}; it has {sorted(catalog)}")
    if info.unavailable and not config.config.get("backend"):
        raise ValueError(f"{where} cannot run reward {config.name!r}: {info.unavailable}")


def retry_after_note(exc: BaseException | None) -> str:
    """What the service asked for in ``Retry-After``, for a message: the error's text leaves it out, and
    one longer than ``reward.max_retry_after_s`` is why the request failed at once."""
    after = getattr(exc, "retry_after_s", None)
    if after is None:
        return ""
    return f" (the service asked to retry after {after:g}s; reward.max_retry_after_s is the longest waited)"


def is_transient(exc: BaseException) -> bool:
    """Whether a failed reward request may succeed if sent again later: no answer at all (unreachable,
    a timeout), a 5xx, 408 (the request timed out on a proxy), 429 (overloaded). Not a 4xx otherwise: an
    unknown reward, an invalid config, a missing or refused key fail the same way every time, nor an
    answer that does not fit the request (:class:`~rewardhub_client.ProtocolError`)."""
    if isinstance(exc, TransportError):
        return True
    if isinstance(exc, APIError):
        return exc.status_code >= 500 or exc.status_code in (408, 429)
    return False


class RewardDispatcher:
    """Scores groups on a background event loop; measures how long the caller blocks on the answers.

    ``transport``: the httpx transport of the client's connection pool (tests inject failures with it).
    ``include_details``: ask the service for each item's ``details`` (process credit's step scores).
    """

    def __init__(
        self,
        config: RewardConfig,
        group_size: int,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        include_details: bool = False,
    ):
        self.config = config
        self.group_size = group_size
        # ask for each item's details: process credit reads a PRM's step scores there (otherwise they
        # are left out: a judge's or a sandbox's can be long, and nothing reads them)
        self.include_details = include_details
        # where the reward reads the completions' token ids (repetition with unit: token_ids), if anywhere:
        # sent only then, being about one and a half times the text
        self.token_ids_keys = token_ids_keys(config.config)
        self.token_count_keys = token_count_keys(config.config)
        self.run_id = uuid.uuid4().hex[:8]
        self.wait_s = 0.0
        self.requests = 0
        # requests with items that came back request_failed, those of them of which nothing was answered
        # (a request sent in chunks can fail in part), and the last such error (read by the trainer
        # between steps, when every request it sent has been answered)
        self.failed_requests = 0
        self.unanswered_requests = 0
        self.last_error: RewardHubClientError | None = None
        self._transport = transport
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rewardhub-rewards", daemon=True)
        self._thread.start()
        self._client: AsyncRewardClient = self._call(self._make_client())

    async def _make_client(self) -> AsyncRewardClient:
        # Created on the loop's thread: httpx binds its connection pool to the running loop.
        return AsyncRewardClient(
            self.config.url,
            api_key=self.config.api_key,
            timeout=self.config.timeout_s,
            retry=RetryPolicy(max_retry_after_s=self.config.max_retry_after_s),
            transport=self._transport,
        )

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def group_id(self, step: int, index: int) -> str:
        return f"{self.run_id}-s{step}-p{index}"

    def submit(self, groups: Sequence[Group]) -> concurrent.futures.Future[list[ItemResult]]:
        """Send these whole groups in one request; returns immediately (the request is in flight)."""
        items = [it for g in groups for it in g.items(self.token_ids_keys, self.token_count_keys)]
        options: dict[str, Any] = {
            "use_cache": self.config.use_cache,
            "include_details": self.include_details,
        }
        if self.config.item_timeout_s is not None:
            options["timeout_s"] = self.config.item_timeout_s
        self.requests += 1
        coro = self._score(items, options)
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        if not self.config.overlap:
            self.wait(fut)  # overlap off: block now, counted as reward wait
        return fut

    async def _score(self, items: list[ScoreItem], options: dict[str, Any]) -> list[ItemResult]:
        try:
            resp = await self._client.score(
                items,
                reward=self.config.name,
                config=self.config.config,
                options=options,
                group_size=self.group_size,
                shadow=self.config.shadow,
            )
        except RewardHubClientError as exc:
            if not is_transient(exc):
                raise
            self.failed_requests += 1
            if exc.partial_results is None:  # set only when some chunk was answered
                self.unanswered_requests += 1
            self.last_error = exc
            logger.warning(
                "reward request of %d items to %s failed after the client's retries; %d of its items are "
                "masked (%s): %s%s",
                len(items),
                self.config.url,
                len(exc.failed_indices) if exc.partial_results is not None else len(items),
                REQUEST_FAILED,
                exc,
                retry_after_note(exc),
            )
            # the chunks the service answered keep their results (``partial_results``); only the failed
            # chunks' items are request_failed
            partial = exc.partial_results or [None] * len(items)
            return [
                r if r is not None else self._failed(it, exc) for it, r in zip(items, partial, strict=True)
            ]
        return resp.results

    def _failed(self, item: ScoreItem, exc: RewardHubClientError) -> ItemResult:
        # unscored, as a valid: false answer from the service: masked, never 0
        return ItemResult(
            id=item.id or "",
            reward=self.config.name,
            score=None,
            valid=False,
            reason=REQUEST_FAILED,
            details={"error": str(exc)},
        )

    def wait(self, fut: concurrent.futures.Future[list[ItemResult]]) -> list[ItemResult]:
        """Block until the request is answered; the blocked time is added to ``wait_s``."""
        t0 = time.perf_counter()
        try:
            return fut.result()
        finally:
            self.wait_s += time.perf_counter() - t0

    async def _shutdown(self) -> None:
        # Requests still in flight (the loop was left by an exception) are cancelled, not abandoned.
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._client.aclose()

    def close(self) -> None:
        if self._loop.is_running():
            self._call(self._shutdown())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()
