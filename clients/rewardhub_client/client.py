"""``RewardClient`` and ``AsyncRewardClient``: typed, pooled, retrying HTTP clients for rewardhub.

Both share one connection pool per client object (keep them for the life of a training run; a forked
child, and for the async client each event loop, opens its own, with a transport of its own when
``transport=`` is a factory: see :class:`RewardClient`), a default timeout (no call waits forever), retries with backoff that honour ``Retry-After`` (see
:class:`~rewardhub_client._core.RetryPolicy`), typed exceptions mapped from the service's error body,
and transparent chunking of large batches that never splits a GRPO group.

Example::

    from rewardhub_client import RewardClient

    with RewardClient("http://localhost:8000") as client:
        client.wait_until_ready()
        resp = client.score(
            [{"response": "The answer is \\\\boxed{4}", "reference": "4"}], reward="math"
        )
        print(resp.scores)  # [1.0]
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from rewardhub_client._core import (
    ItemLike,
    RetryPolicy,
    RewardLike,
    ShadowLike,
    as_items,
    as_shadow,
    as_spec,
    build_request,
    chunk_indices,
    chunk_items,
    in_batch,
    item_ids,
    job_path,
    merge_responses,
    split_chunk,
    transient,
    with_partial,
)
from rewardhub_client.errors import (
    APIError,
    LimitExceeded,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    RequestTimeout,
    RewardHubClientError,
    TransportError,
    UnknownReward,
    error_from_response,
)
from rewardhub_client.types import (
    CanaryReport,
    ItemResult,
    JobList,
    JobState,
    JobStatus,
    RewardCheck,
    RewardInfo,
    ScoreItem,
    ScoreOptions,
    ScoreResponse,
)

__all__ = ["AsyncRewardClient", "RewardClient"]

T = TypeVar("T")

DEFAULT_TIMEOUT = httpx.Timeout(120.0, connect=5.0)
_JSON = {"content-type": "application/json"}


def _options(
    options: ScoreOptions | Mapping[str, Any] | None,
    use_cache: bool | None,
    timeout_s: float | None,
    group_size: int | None = None,
) -> ScoreOptions:
    opts = options if isinstance(options, ScoreOptions) else ScoreOptions.model_validate(options or {})
    updates: dict[str, Any] = {}
    if use_cache is not None:
        updates["use_cache"] = use_cache
    if timeout_s is not None:
        updates["timeout_s"] = timeout_s
    if group_size is not None:
        updates["group_size"] = group_size
    return opts.model_copy(update=updates) if updates else opts


def _check_body(reward: RewardLike, config: Mapping[str, Any] | None) -> dict[str, Any]:
    spec = as_spec(reward, config)
    if spec is None:
        raise ValueError("check needs a reward")
    return {"reward": spec if isinstance(spec, str) else spec.model_dump()}


def _canary_body(
    reward: RewardLike,
    config: Mapping[str, Any] | None,
    items: Iterable[Mapping[str, Any]] | None,
    threshold: float,
    max_false_positive_rate: float,
) -> dict[str, Any]:
    return {
        **_check_body(reward, config),
        "items": [dict(item) for item in items or ()],
        "threshold": threshold,
        "max_false_positive_rate": max_false_positive_rate,
    }


def _chunk_too_big(exc: APIError) -> bool:
    """Whether the service refused a chunk for its size, so that its halves may pass: over the byte limit
    (413), or over the item limit (``limit_exceeded`` on ``items``, ``REWARDHUB_MAX_ITEMS``; one on an
    item's own field is that item's, and no split helps)."""
    return isinstance(exc, PayloadTooLarge) or (isinstance(exc, LimitExceeded) and exc.param == "items")


def _answer(resp: httpx.Response, parse: Callable[[bytes], T]) -> T:
    """A successful answer's body parsed, or a :class:`ProtocolError`: a 200 that is not the answer (a
    proxy's own page) raised pydantic's ValidationError or a KeyError, outside the client's tree."""
    try:
        return parse(resp.content)
    except (ValueError, KeyError, TypeError) as exc:
        raise ProtocolError(
            f"{resp.request.method} {resp.request.url.path} answered {resp.status_code} with a body that is "
            f"not the service's answer ({type(exc).__name__}); it starts {resp.content[:200]!r}"
        ) from None


def _job_query(status: str | None, limit: int) -> dict[str, str | int]:
    return {"limit": limit} if status is None else {"status": status, "limit": limit}


def _reward_list(raw: bytes) -> list[RewardInfo]:
    return [RewardInfo.model_validate(r) for r in json.loads(raw)["rewards"]]


def _json_object(raw: bytes) -> dict[str, Any]:
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise TypeError("not a JSON object")
    return data


_SyncTransportArg = httpx.BaseTransport | Callable[[], httpx.BaseTransport] | None
_AsyncTransportArg = httpx.AsyncBaseTransport | Callable[[], httpx.AsyncBaseTransport] | None


def _transport_maker(transport: Any, base: type) -> Callable[[], Any]:
    """What makes each pool's transport: a factory is called once per pool (a forked child's, an
    event loop's), so each gets connections of its own; an instance is used as is, by every pool.

    A client opens a pool per process and (async) per event loop, because connections cannot be
    shared across them. A transport instance holds its own connections (``httpx.HTTPTransport(retries=3)``,
    ``uds=...``): passed as is, every pool, in every forked child and on every loop, went through it and
    its parent's kept-alive sockets. Pass ``lambda: httpx.HTTPTransport(retries=3)`` instead. An instance
    stays right for transports without connections of their own (``httpx.MockTransport``,
    ``httpx.ASGITransport``), which is how tests pass them."""
    if transport is None or isinstance(transport, base):
        return lambda: transport
    if callable(transport):
        return transport  # type: ignore[no-any-return]
    raise TypeError(
        f"transport must be an httpx {base.__name__}, a callable returning one, or None; got {transport!r}"
    )


def _headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"user-agent": "rewardhub-client/0.1"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    headers.update(extra or {})
    return headers


class _Base:
    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        timeout: float | httpx.Timeout | None,
        retry: RetryPolicy | None,
        chunk_size: int,
    ):
        self.base_url = base_url.rstrip("/")
        if httpx.URL(self.base_url).scheme not in ("http", "https"):
            # httpx reads "localhost:8000" as a URL of scheme "localhost": every call would fail, and be
            # retried as if the service were unreachable
            raise ValueError(f"base_url {base_url!r} must start with http:// or https://")
        self.api_key = api_key
        self.timeout = (
            DEFAULT_TIMEOUT
            if timeout is None
            else httpx.Timeout(timeout)
            if isinstance(timeout, int | float)
            else timeout
        )
        self.retry = retry or RetryPolicy()
        self.chunk_size = chunk_size
        # the largest chunk the service accepted after refusing a bigger one for its item count
        # (REWARDHUB_MAX_ITEMS, fixed for a service): later batches start there instead of halving down
        # from chunk_size again, call after call. Not after a 413: the byte limit depends on the items.
        self._accepted_chunk: int | None = None

    def _chunks(self, items: list[ScoreItem]) -> list[list[int]]:
        size = self.chunk_size if self._accepted_chunk is None else min(self.chunk_size, self._accepted_chunk)
        return chunk_indices(items, size)

    def _accepted_after_split(self, n: int) -> None:
        if self._accepted_chunk is None or n > self._accepted_chunk:
            self._accepted_chunk = n

    def _should_retry(self, exc: Exception, attempt: int, deadline: float | None = None) -> float | None:
        """Seconds to wait before the next attempt, or None to give up: also when the next attempt would
        start past ``deadline`` (``time.monotonic()``), the caller's own (``wait_job``'s ``timeout_s``)."""
        if attempt >= self.retry.max_retries:
            return None
        if isinstance(exc, APIError):
            if exc.status_code not in self.retry.retry_statuses:
                return None
            if exc.retry_after_s is not None and exc.retry_after_s > self.retry.max_retry_after_s:
                return None  # not worth blocking the caller for: it decides (see RetryPolicy)
            wait = self.retry.delay(attempt, exc.retry_after_s)
        elif isinstance(exc, TransportError):
            wait = self.retry.delay(attempt)
        else:
            return None
        if deadline is not None and time.monotonic() + wait >= deadline:
            return None
        return wait

    @staticmethod
    def _unsendable(exc: httpx.LocalProtocolError) -> RewardHubClientError:
        """A request the HTTP library refuses to send (an illegal header value: an API key read from a file
        with its newline): no try of it can succeed, so it is neither retried nor a :class:`TransportError`
        (which callers take for an outage of the service)."""
        return RewardHubClientError(
            f"the request cannot be sent as it is: {exc} (is there a line break or another control "
            "character in the API key or a header?)"
        )

    @staticmethod
    def _transport_error(exc: httpx.HTTPError) -> TransportError:
        if isinstance(exc, httpx.TimeoutException):
            return RequestTimeout(f"request timed out: {exc!r}")
        return TransportError(f"could not reach the service: {exc!r}")

    def _score_timeout(self, opts: ScoreOptions) -> httpx.Timeout:
        """The HTTP timeout of a scoring request: its read timeout outlasts the deadline it asks for.

        The service answers a request once its items are scored or past ``options.timeout_s``; a client
        that stops reading sooner abandons an answer on its way, and the work done for it (a service
        that does not notice the caller left goes on scoring it). A quarter more than the deadline, at
        least 10 s, leaves room for queueing and the answer itself.
        """
        read = self.timeout.read
        if opts.timeout_s is None or read is None:
            return self.timeout
        floor = opts.timeout_s + max(10.0, opts.timeout_s / 4)
        if read >= floor:
            return self.timeout
        t = self.timeout
        return httpx.Timeout(connect=t.connect, read=floor, write=t.write, pool=t.pool)

    def _probe_timeout(self, timeout_s: float | None) -> httpx.Timeout:
        """The client's timeout, each part at most ``timeout_s`` (a readiness probe within a deadline: a
        proxy or load balancer that holds the connection open kept it for the client's full timeout)."""
        t = self.timeout
        if timeout_s is None:
            return t
        cap = max(0.01, timeout_s)

        def at_most(v: float | None) -> float:
            return cap if v is None else min(v, cap)

        return httpx.Timeout(
            connect=at_most(t.connect), read=at_most(t.read), write=at_most(t.write), pool=at_most(t.pool)
        )

    def _left(self, deadline: float) -> httpx.Timeout:
        """The client's timeout, each part at most the time left before ``deadline`` (a poll of
        ``wait_job``: one the service did not answer waited out the client's full read timeout)."""
        return self._probe_timeout(deadline - time.monotonic())

    @staticmethod
    def _not_ready(resp: httpx.Response) -> str | None:
        """None for a ``/ready`` answer of 200, else what it says is missing: its failing checks
        (``model:prm``, with the check's own words), else its status and the start of its body."""
        if resp.status_code == 200:
            return None
        try:
            checks = resp.json().get("checks")
        except (ValueError, AttributeError):
            checks = None
        failing = [
            f"{name} {json.dumps(info, default=str)[:300]}"
            for name, info in (checks.items() if isinstance(checks, dict) else ())
            if not (isinstance(info, dict) and info.get("ok"))
        ]
        if failing:
            return f"/ready answered {resp.status_code}, failing: " + "; ".join(failing)
        return f"/ready answered {resp.status_code} {resp.text.strip()[:200]!r}"

    def _never_ready(self, timeout_s: float, why: str) -> TransportError:
        return TransportError(f"{self.base_url} was not ready within {timeout_s}s ({why})")

    @staticmethod
    def _late_answer(exc: httpx.ReadTimeout) -> RequestTimeout:
        return RequestTimeout(
            f"no answer within the read timeout ({exc!r}); not sent again: a copy asks for the same work "
            "under the same timeout (and queues behind the first where the service goes on scoring it). "
            "Raise the client's timeout above the items' deadline (options.timeout_s, or the service's "
            "default)"
        )


class RewardClient(_Base):
    """Synchronous client.

    Args:
        base_url: the service, e.g. ``http://localhost:8000``.
        api_key: sent as ``Authorization: Bearer`` when the service requires keys.
        timeout: seconds per HTTP call (default 120 s, 5 s to connect).
        retry: retry policy (default: 5 retries, exponential backoff from 0.5 s, on top of any Retry-After;
            a Retry-After over 120 s is raised, not waited for).
        chunk_size: items per request for large batches (groups are never split).
        transport: an httpx transport, or a callable returning one. A callable is called for each
            connection pool the client opens (one per process: a forked child opens its own), so
            ``transport=lambda: httpx.HTTPTransport(retries=3)`` gives every process its own
            connections. An instance is used as is by every pool, in every process: right for a
            transport without connections (tests pass ``httpx.MockTransport``), wrong for one that
            keeps sockets open (``httpx.HTTPTransport``) in a client used across a fork.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout | None = None,
        retry: RetryPolicy | None = None,
        chunk_size: int = 1024,
        headers: Mapping[str, str] | None = None,
        transport: _SyncTransportArg = None,
    ):
        super().__init__(base_url, api_key=api_key, timeout=timeout, retry=retry, chunk_size=chunk_size)
        make_transport: Callable[[], httpx.BaseTransport | None] = _transport_maker(
            transport, httpx.BaseTransport
        )

        def new_pool() -> httpx.Client:
            return httpx.Client(
                base_url=self.base_url,
                timeout=self.timeout,
                headers=_headers(api_key, headers),
                transport=make_transport(),
                limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
            )

        self._new_pool = new_pool
        self._http = new_pool()
        self._pid = os.getpid()

    def _pool(self) -> httpx.Client:
        """This process's connection pool. A forked child (a multiprocessing pool of reward workers) that
        kept its parent's wrote down the parent's kept-alive sockets, as its siblings did: requests
        interleaved on one connection (400s, answers read by the wrong process) or hung. It opens its
        own; the inherited one is left alone (closing it here would not touch the parent's sockets, but
        is not needed either)."""
        if self._pid != os.getpid():
            self._http, self._pid = self._new_pool(), os.getpid()
        return self._http

    # --- plumbing ---
    def _request(
        self,
        method: str,
        path: str,
        *,
        resend_late: bool = True,
        deadline: float | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send with retries; ``resend_late=False``: a read timeout is raised, not retried (see
        :meth:`_late_answer`); ``deadline`` (``time.monotonic()``): no retry starts past it, and each
        attempt waits at most the time left (:meth:`_left`)."""
        attempt = 0
        while True:
            try:
                if deadline is not None:
                    kwargs["timeout"] = self._left(deadline)
                resp = self._pool().request(method, path, **kwargs)
                if resp.status_code >= 400:
                    raise error_from_response(resp)
                return resp
            except httpx.ReadTimeout as exc:
                if not resend_late:
                    raise self._late_answer(exc) from exc
                err: Exception = self._transport_error(exc)
            except httpx.LocalProtocolError as exc:
                raise self._unsendable(exc) from exc
            except httpx.HTTPError as exc:
                err = self._transport_error(exc)
            except APIError as exc:
                err = exc
            wait = self._should_retry(err, attempt, deadline)
            if wait is None:
                raise err
            time.sleep(wait)
            attempt += 1

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- API ---
    def score(
        self,
        items: Iterable[ItemLike],
        reward: RewardLike = None,
        *,
        config: Mapping[str, Any] | None = None,
        options: ScoreOptions | Mapping[str, Any] | None = None,
        use_cache: bool | None = None,
        timeout_s: float | None = None,
        group_size: int | None = None,
        shadow: ShadowLike = None,
    ) -> ScoreResponse:
        """Score a batch (any size: it is sent in group-preserving chunks, a chunk over the service's
        byte or item limit split further); results in item order. ``shadow``: a second reward that audits
        this one (:class:`~rewardhub_client.ShadowSpec`): each result's ``shadow``, ``metrics["shadow"]``."""
        its = as_items(items)
        spec = as_spec(reward, config)
        shade = as_shadow(shadow)
        opts = _options(options, use_cache, timeout_s, group_size)
        timeout = self._score_timeout(opts)
        parts: list[tuple[list[int], ScoreResponse]] = []
        t0 = time.perf_counter()

        def send(idx: list[int], split: bool = False) -> None:
            body = build_request(chunk_items(its, idx), spec, opts, shade)
            try:
                resp = self._request(
                    "POST", "/v1/score", content=body, headers=_JSON, timeout=timeout, resend_late=False
                )
            except APIError as exc:
                smaller = split_chunk(its, idx) if _chunk_too_big(exc) else None
                if smaller is None:
                    in_batch(exc, idx)
                    raise
                by_count = isinstance(exc, LimitExceeded)
            else:
                parts.append((idx, _answer(resp, ScoreResponse.model_validate_json)))
                if split:
                    self._accepted_after_split(len(idx))
                return
            # over the service's byte or item limit: the parts one after the other; one failing
            # transiently does not stop the ones after it (their answers are kept)
            first: RewardHubClientError | None = None
            for part in smaller:
                try:
                    send(part, split=by_count)
                except RewardHubClientError as failed:
                    if not transient(failed):
                        raise
                    first = first or failed
            if first is not None:
                raise first

        # a chunk that fails does not stop the others: the error raised at the end carries their results
        first: RewardHubClientError | None = None
        for idx in self._chunks(its):
            try:
                send(idx)
            except RewardHubClientError as exc:
                if not transient(exc):
                    raise
                first = first or exc
        if first is not None:
            raise with_partial(first, item_ids(its), parts)
        return merge_responses(item_ids(its), parts, (time.perf_counter() - t0) * 1000)

    def score_one(
        self, response: str, reference: Any = None, reward: RewardLike = None, **item: Any
    ) -> ItemResult:
        """Score one rollout; returns its :class:`ItemResult`."""
        return self.score([ScoreItem(response=response, reference=reference, **item)], reward).results[0]

    def rewards(self) -> list[RewardInfo]:
        return _answer(self._request("GET", "/v1/rewards"), _reward_list)

    def check(self, reward: RewardLike, config: Mapping[str, Any] | None = None) -> RewardCheck:
        """Resolve a reward spec as scoring would, without scoring: raises :class:`UnknownReward` (404)
        or :class:`InvalidRequest` (422) as ``score`` would, and says whether it and every reward it is
        built on can score on this service (``ok``; ``unavailable`` lists what cannot, and why)."""
        resp = self._request("POST", "/v1/rewards/check", json=_check_body(reward, config))
        return _answer(resp, RewardCheck.model_validate_json)

    def canaries(
        self,
        reward: RewardLike,
        config: Mapping[str, Any] | None = None,
        *,
        items: Iterable[Mapping[str, Any]] | None = None,
        threshold: float = 0.5,
        max_false_positive_rate: float = 0.01,
    ) -> CanaryReport:
        """Probe a reward spec with reward-hacking canaries (``POST /v1/canaries``): content-free responses
        ("Thought process:", a lone ":", the question given back...) scored against ``items`` (``{prompt,
        reference, response?}``; none: the service's built-in questions). ``ok`` is false when more than
        ``max_false_positive_rate`` of them pass: a reward an RL policy can hack."""
        body = _canary_body(reward, config, items, threshold, max_false_positive_rate)
        return _answer(self._request("POST", "/v1/canaries", json=body), CanaryReport.model_validate_json)

    def check_if_supported(
        self, reward: RewardLike, config: Mapping[str, Any] | None = None
    ) -> RewardCheck | None:
        """As :meth:`check`, or None from a service too old to have ``/v1/rewards/check``: for callers
        that check when they can and score either way (the adapters, the trainer)."""
        try:
            return self.check(reward, config)
        except NotFound as exc:
            if isinstance(exc, UnknownReward):  # any other 404: no such route here
                raise
            return None

    def health(self) -> dict[str, Any]:
        return _answer(self._request("GET", "/health"), _json_object)

    def ready(self, timeout_s: float | None = None) -> bool:
        """Whether ``/ready`` answers 200 (within ``timeout_s``, default the client's timeout)."""
        return self._probe(timeout_s) is None

    def _probe(self, timeout_s: float | None) -> str | None:
        """None when ``/ready`` answers 200, else why not (see :meth:`_not_ready`)."""
        try:
            return self._not_ready(self._pool().get("/ready", timeout=self._probe_timeout(timeout_s)))
        except httpx.LocalProtocolError as exc:
            raise self._unsendable(exc) from exc  # no probe of it can succeed: not a service not ready
        except httpx.HTTPError as exc:
            return f"no answer: {exc!r}"

    def wait_until_ready(self, timeout_s: float = 60.0, interval_s: float = 0.25) -> None:
        """Block until ``/ready`` answers 200; raise :class:`TransportError` after ``timeout_s`` (a probe
        never waits past it), saying what the last probe found missing (the failing checks), or that
        nothing answered. A probe the HTTP library refuses to send (a header with a line break) raises
        at once."""
        deadline = time.monotonic() + timeout_s
        while (why := self._probe(deadline - time.monotonic())) is not None:
            if time.monotonic() > deadline:
                raise self._never_ready(timeout_s, why)
            time.sleep(interval_s)

    def submit_job(
        self,
        items: Iterable[ItemLike],
        reward: RewardLike = None,
        *,
        config: Mapping[str, Any] | None = None,
        options: ScoreOptions | Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        shadow: ShadowLike = None,
    ) -> JobStatus:
        """Submit an asynchronous job; retries are safe (the Idempotency-Key is generated if not given)."""
        body = build_request(
            as_items(items), as_spec(reward, config), _options(options, None, None), as_shadow(shadow)
        )
        key = idempotency_key or uuid.uuid4().hex
        resp = self._request("POST", "/v1/jobs", content=body, headers={**_JSON, "idempotency-key": key})
        return _answer(resp, JobStatus.model_validate_json)

    def job(self, job_id: str) -> JobStatus:
        return _answer(self._request("GET", job_path(job_id)), JobStatus.model_validate_json)

    def cancel_job(self, job_id: str) -> JobStatus:
        """Cancel a queued or running job: the job, ``cancelled`` (again for one already cancelled, so a
        retry is safe). :class:`Conflict` when it has already succeeded or failed (``job()`` has its
        outcome), :class:`NotFound` for an unknown job or another API key's."""
        return _answer(self._request("DELETE", job_path(job_id)), JobStatus.model_validate_json)

    def list_jobs(self, status: JobState | None = None, limit: int = 20) -> JobList:
        """This API key's jobs, newest first, without their results (at most ``limit``, 1-100; of one
        ``status`` if given); ``has_more`` says whether more matched."""
        resp = self._request("GET", "/v1/jobs", params=_job_query(status, limit))
        return _answer(resp, JobList.model_validate_json)

    def wait_job(self, job_id: str, timeout_s: float = 600.0, poll_s: float = 0.2) -> JobStatus:
        """Poll a job until it is done (succeeded, failed or cancelled); :class:`RequestTimeout` when it is
        not after ``timeout_s``. Within it: a poll reads for at most the time left, and a poll's retry that
        would start past it is not made (that poll's error is raised)."""
        deadline = time.monotonic() + timeout_s
        while True:
            resp = self._request("GET", job_path(job_id), deadline=deadline)
            status = _answer(resp, JobStatus.model_validate_json)
            if status.done:
                return status
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimeout(f"job {job_id} still {status.status} after {timeout_s}s")
            time.sleep(min(poll_s, left))


class AsyncRewardClient(_Base):
    """Asynchronous client; chunks of a large batch are sent concurrently (``max_concurrency``).

    Same arguments as :class:`RewardClient`, plus ``max_concurrency`` (requests in flight per call).
    ``transport`` is an ``httpx.AsyncBaseTransport`` or a callable returning one, called for each pool:
    one per event loop the client is used on (a connection belongs to its loop), so
    ``transport=lambda: httpx.AsyncHTTPTransport(retries=3)`` gives each loop its own connections; an
    instance is used as is on every loop (``httpx.ASGITransport``, ``httpx.MockTransport`` in tests).
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout | None = None,
        retry: RetryPolicy | None = None,
        chunk_size: int = 1024,
        max_concurrency: int = 4,
        headers: Mapping[str, str] | None = None,
        transport: _AsyncTransportArg = None,
    ):
        super().__init__(base_url, api_key=api_key, timeout=timeout, retry=retry, chunk_size=chunk_size)
        if max_concurrency < 1:  # a semaphore of 0 would hold every chunk for ever
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        self.max_concurrency = max_concurrency
        make_transport: Callable[[], httpx.AsyncBaseTransport | None] = _transport_maker(
            transport, httpx.AsyncBaseTransport
        )

        def new_pool() -> httpx.AsyncClient:
            return httpx.AsyncClient(
                base_url=self.base_url,
                timeout=self.timeout,
                headers=_headers(api_key, headers),
                transport=make_transport(),
                limits=httpx.Limits(max_connections=max(32, max_concurrency), max_keepalive_connections=16),
            )

        self._new_pool = new_pool
        # An httpx pool belongs to the event loop its connections were opened on: a client readied under
        # asyncio.run and then used on another loop (the next asyncio.run, TRL's daemon loop) reused a
        # connection of the closed loop, RuntimeError("Event loop is closed") on every call. So a pool per
        # loop, closed as its loop ends (see _closed_with_loop).
        self._unclaimed: httpx.AsyncClient | None = new_pool()
        self._pools: dict[asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, AsyncIterator[None]]] = {}
        # The loops may run in other threads (TRL's daemon loop, an evaluation thread): the pools' book is
        # read and changed under this lock, never held across an await.
        self._pools_lock = threading.Lock()
        self._closed = False

    async def _closed_with_loop(
        self, loop: asyncio.AbstractEventLoop, pool: httpx.AsyncClient
    ) -> AsyncIterator[None]:
        # Suspended at its yield for the loop's life: a loop that ends with shutdown_asyncgens() (as
        # asyncio.run's does) closes it, and with it the loop's pool, while the loop can still run that.
        try:
            yield
        finally:
            with self._pools_lock:
                if self._pools.get(loop, (None,))[0] is pool:
                    del self._pools[loop]
            await pool.aclose()

    async def _pool(self) -> httpx.AsyncClient:
        """The running loop's connection pool."""
        if self._closed:
            raise RuntimeError("the AsyncRewardClient is closed")
        loop = asyncio.get_running_loop()
        with self._pools_lock:  # another thread's loop may be opening or closing its pool meanwhile
            held = self._pools.get(loop)
            if held is not None:
                return held[0]
            # a loop closed without shutdown_asyncgens: nothing can close its pool now (dropped once the
            # lock is released: finalizing its closer must not find the lock held)
            dropped = [self._pools.pop(other) for other in list(self._pools) if other.is_closed()]
            # (the unclaimed pool goes to one loop only, however many threads ask at once)
            pool, self._unclaimed = self._unclaimed or self._new_pool(), None
            closer = self._closed_with_loop(loop, pool)
            self._pools[loop] = (pool, closer)  # before the await: another task of the loop takes this one
        del dropped
        await anext(closer)  # first iterated here: the loop now tracks it
        return pool

    async def _request(
        self,
        method: str,
        path: str,
        *,
        resend_late: bool = True,
        deadline: float | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        attempt = 0
        while True:
            try:
                if deadline is not None:
                    kwargs["timeout"] = self._left(deadline)
                resp = await (await self._pool()).request(method, path, **kwargs)
                if resp.status_code >= 400:
                    raise error_from_response(resp)
                return resp
            except httpx.ReadTimeout as exc:
                if not resend_late:
                    raise self._late_answer(exc) from exc
                err: Exception = self._transport_error(exc)
            except httpx.LocalProtocolError as exc:
                raise self._unsendable(exc) from exc
            except httpx.HTTPError as exc:
                err = self._transport_error(exc)
            except APIError as exc:
                err = exc
            wait = self._should_retry(err, attempt, deadline)
            if wait is None:
                raise err
            await asyncio.sleep(wait)
            attempt += 1

    async def aclose(self) -> None:
        """Close the connections of the running loop, and have each other loop still running close its
        own (scheduled there, not awaited: a client used on a daemon loop, TRL's or an adapter's, and
        closed from ``asyncio.run`` kept that loop's connections open for the life of the process; a loop
        no longer running closed or closes its pool as it ends). Calls still in flight with this client
        on another loop may fail."""
        self._closed = True
        with self._pools_lock:
            unclaimed, self._unclaimed = self._unclaimed, None
            held = self._pools.pop(asyncio.get_running_loop(), None)
            others = [(loop, pool) for loop, (pool, _) in self._pools.items()]
        self._close_on_their_loops(others)
        if unclaimed is not None:
            await unclaimed.aclose()
        if held is not None:
            await held[0].aclose()

    def _close_soon(self) -> None:
        """Close this client from any thread, without awaiting: what an adapter's ``configure()`` does
        with a pooled client it no longer uses (another URL or key). Each open pool is closed on its own
        loop (scheduled there; a loop no longer running closed or closes its pool as it ends); the pool
        no loop claimed has no connections. Calls still in flight with this client may fail."""
        self._closed = True
        with self._pools_lock:
            self._unclaimed = None
            held = [(loop, pool) for loop, (pool, _) in self._pools.items()]
        self._close_on_their_loops(held)

    @staticmethod
    def _close_on_their_loops(pools: list[tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]]) -> None:
        for loop, pool in pools:
            if loop.is_running() and not loop.is_closed():
                asyncio.run_coroutine_threadsafe(pool.aclose(), loop)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def score(
        self,
        items: Iterable[ItemLike],
        reward: RewardLike = None,
        *,
        config: Mapping[str, Any] | None = None,
        options: ScoreOptions | Mapping[str, Any] | None = None,
        use_cache: bool | None = None,
        timeout_s: float | None = None,
        group_size: int | None = None,
        shadow: ShadowLike = None,
    ) -> ScoreResponse:
        """Score a batch (chunked, chunks in flight concurrently, a chunk over the service's byte or item
        limit split further); results in item order. ``shadow``: as :meth:`RewardClient.score`'s."""
        its = as_items(items)
        spec = as_spec(reward, config)
        shade = as_shadow(shadow)
        opts = _options(options, use_cache, timeout_s, group_size)
        timeout = self._score_timeout(opts)
        sem = asyncio.Semaphore(self.max_concurrency)
        t0 = time.perf_counter()

        # every answered chunk (or half of one), as it is answered: kept on the error if another fails
        parts: list[tuple[list[int], ScoreResponse]] = []

        async def one(idx: list[int], split: bool = False) -> None:
            async with sem:
                body = build_request(chunk_items(its, idx), spec, opts, shade)
                try:
                    resp = await self._request(
                        "POST", "/v1/score", content=body, headers=_JSON, timeout=timeout, resend_late=False
                    )
                except APIError as exc:
                    smaller = split_chunk(its, idx) if _chunk_too_big(exc) else None
                    if smaller is None:
                        in_batch(exc, idx)
                        raise
                    by_count = isinstance(exc, LimitExceeded)
                else:
                    answer = _answer(resp, ScoreResponse.model_validate_json)
                    if split:
                        self._accepted_after_split(len(idx))
                    parts.append((idx, answer))
                    return
            # over the service's byte or item limit: the halves one after the other, each holding the
            # semaphore; one failing transiently does not stop the one after it (its answer is kept)
            first: RewardHubClientError | None = None
            for half in smaller:
                try:
                    await one(half, split=by_count)
                except RewardHubClientError as failed:
                    if not transient(failed):
                        raise
                    first = first or failed
            if first is not None:
                raise first

        async def chunk(idx: list[int]) -> BaseException | None:
            try:
                await one(idx)
                return None
            except RewardHubClientError as exc:
                if not transient(exc):
                    raise
                return exc

        tasks = [asyncio.ensure_future(chunk(idx)) for idx in self._chunks(its)]
        try:
            # a chunk that fails transiently does not cancel the others: their answers travel on the error
            # raised (``partial_results``), so a caller keeps the rewards already computed
            done = await asyncio.gather(*tasks)
        except BaseException:
            # any other failure (or cancelled from outside): the other chunks would keep sending (and
            # retrying) requests whose answers nobody reads
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        first = next((outcome for outcome in done if outcome is not None), None)
        if first is not None:
            raise with_partial(first, item_ids(its), parts)
        return merge_responses(item_ids(its), parts, (time.perf_counter() - t0) * 1000)

    async def score_one(
        self, response: str, reference: Any = None, reward: RewardLike = None, **item: Any
    ) -> ItemResult:
        return (
            await self.score([ScoreItem(response=response, reference=reference, **item)], reward)
        ).results[0]

    async def rewards(self) -> list[RewardInfo]:
        return _answer(await self._request("GET", "/v1/rewards"), _reward_list)

    async def check(self, reward: RewardLike, config: Mapping[str, Any] | None = None) -> RewardCheck:
        """As :meth:`RewardClient.check`."""
        resp = await self._request("POST", "/v1/rewards/check", json=_check_body(reward, config))
        return _answer(resp, RewardCheck.model_validate_json)

    async def canaries(
        self,
        reward: RewardLike,
        config: Mapping[str, Any] | None = None,
        *,
        items: Iterable[Mapping[str, Any]] | None = None,
        threshold: float = 0.5,
        max_false_positive_rate: float = 0.01,
    ) -> CanaryReport:
        """As :meth:`RewardClient.canaries`."""
        body = _canary_body(reward, config, items, threshold, max_false_positive_rate)
        resp = await self._request("POST", "/v1/canaries", json=body)
        return _answer(resp, CanaryReport.model_validate_json)

    async def check_if_supported(
        self, reward: RewardLike, config: Mapping[str, Any] | None = None
    ) -> RewardCheck | None:
        """As :meth:`RewardClient.check_if_supported`."""
        try:
            return await self.check(reward, config)
        except NotFound as exc:
            if isinstance(exc, UnknownReward):  # any other 404: no such route here
                raise
            return None

    async def health(self) -> dict[str, Any]:
        return _answer(await self._request("GET", "/health"), _json_object)

    async def ready(self, timeout_s: float | None = None) -> bool:
        """As :meth:`RewardClient.ready`."""
        return await self._probe(timeout_s) is None

    async def _probe(self, timeout_s: float | None) -> str | None:
        try:
            pool = await self._pool()
            return self._not_ready(await pool.get("/ready", timeout=self._probe_timeout(timeout_s)))
        except httpx.LocalProtocolError as exc:
            raise self._unsendable(exc) from exc
        except httpx.HTTPError as exc:
            return f"no answer: {exc!r}"

    async def wait_until_ready(self, timeout_s: float = 60.0, interval_s: float = 0.25) -> None:
        """As :meth:`RewardClient.wait_until_ready`."""
        deadline = time.monotonic() + timeout_s
        while (why := await self._probe(deadline - time.monotonic())) is not None:
            if time.monotonic() > deadline:
                raise self._never_ready(timeout_s, why)
            await asyncio.sleep(interval_s)

    async def submit_job(
        self,
        items: Iterable[ItemLike],
        reward: RewardLike = None,
        *,
        config: Mapping[str, Any] | None = None,
        options: ScoreOptions | Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        shadow: ShadowLike = None,
    ) -> JobStatus:
        body = build_request(
            as_items(items), as_spec(reward, config), _options(options, None, None), as_shadow(shadow)
        )
        key = idempotency_key or uuid.uuid4().hex
        resp = await self._request(
            "POST", "/v1/jobs", content=body, headers={**_JSON, "idempotency-key": key}
        )
        return _answer(resp, JobStatus.model_validate_json)

    async def job(self, job_id: str) -> JobStatus:
        return _answer(await self._request("GET", job_path(job_id)), JobStatus.model_validate_json)

    async def cancel_job(self, job_id: str) -> JobStatus:
        """As :meth:`RewardClient.cancel_job`."""
        resp = await self._request("DELETE", job_path(job_id))
        return _answer(resp, JobStatus.model_validate_json)

    async def list_jobs(self, status: JobState | None = None, limit: int = 20) -> JobList:
        """As :meth:`RewardClient.list_jobs`."""
        resp = await self._request("GET", "/v1/jobs", params=_job_query(status, limit))
        return _answer(resp, JobList.model_validate_json)

    async def wait_job(self, job_id: str, timeout_s: float = 600.0, poll_s: float = 0.2) -> JobStatus:
        """As :meth:`RewardClient.wait_job`."""
        deadline = time.monotonic() + timeout_s
        while True:
            resp = await self._request("GET", job_path(job_id), deadline=deadline)
            status = _answer(resp, JobStatus.model_validate_json)
            if status.done:
                return status
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimeout(f"job {job_id} still {status.status} after {timeout_s}s")
            await asyncio.sleep(min(poll_s, left))
