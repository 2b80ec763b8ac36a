"""JSON over HTTP to a model server, with every guard a training loop needs from a remote dependency.

One :class:`RemoteClient` per named backend (OpenAI-compatible chat, vLLM pooling). Each call:

1. waits for a free slot (``concurrency``, an :class:`asyncio.Semaphore`) no longer than the item's
   deadline, so a slow server is never sent more than it can take and queued items don't pile up;
2. asks the :class:`~rewardhub.models.breaker.CircuitBreaker`; an open breaker fails the call at once;
3. POSTs with a per-attempt timeout of ``min(timeout_s, time left)``, and retries (tenacity,
   exponential backoff with jitter) connection errors, timeouts, 408, 429 and 5xx answers, up to
   ``max_retries`` times and never past the deadline; a call whose last attempt timed out raises
   :class:`~rewardhub.models.errors.BackendTimeout` (the item is ``timeout``) whichever limit ran out,
   the item's deadline or the backend's ``timeout_s``, and its message says which;
4. reports the verdict to the breaker: a call that failed after its retries is one failure. Waiting for
   a slot is not the server's fault and is never counted; neither is a caller that gave up, nor an
   attempt cut short by the item's deadline well before the backend's own ``timeout_s`` was up (under
   90% of it left, ``_CALLERS_SHARE``): a slow but healthy judge must not be tripped by its
   short-deadline callers, the breaker is every caller's. But an attempt that made no connection in
   ``_CONNECT_S`` or more counts whatever cut it (a server that is up accepts one at once: the host is
   down or dropping packets), and its message names the URL. A call whose earlier attempt had failed
   counts as that failure. An answer that refuses the *input* (400, 413, 422) is the item's problem
   and shows the server healthy: it is :class:`~rewardhub.models.errors.InputTooLong` when the server says the context is exceeded (the
   phrasings of vLLM, SGLang, TGI, llama.cpp and OpenAI; also on a 500, which is then not retried) or
   that the request is too large (413, from the server or a proxy in front of it), else
   :class:`~rewardhub.models.errors.BackendRejected`, and the breaker counts it as a success; so it
   does a 404 or 405 (no such endpoint: an error for the call, but not a sign of an unhealthy server),
   and a redirect (3xx, not followed: the error names where it points, the URL to configure). A 404
   that says the *model* is not served (vLLM's "The model `x` does not exist.", OpenAI's code
   ``model_not_found``) is the same error for the call, and tells the backend to ask the server's model
   list at once (:meth:`RemoteBackend.model_missing`): the server was redeployed.

The API key goes into the ``Authorization`` header only; it is never logged, never put in an error
message, and never part of :meth:`describe`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import email.utils
import math
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import httpx
import orjson
import structlog
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, stop_any
from tenacity.stop import stop_base
from tenacity.wait import wait_base, wait_exponential, wait_random

from rewardhub.config import ConfigError
from rewardhub.models.base import UNNAMED_MODEL, ModelBackend
from rewardhub.models.breaker import CircuitBreaker
from rewardhub.models.errors import BackendError, BackendRejected, BackendTimeout, InputTooLong

__all__ = [
    "RemoteBackend",
    "RemoteClient",
    "RemoteOptions",
    "in_parts",
    "names_model",
    "rows_by_index",
    "served_weights",
    "split_on_refusal",
]

In = TypeVar("In")
Out = TypeVar("Out")

log = structlog.get_logger("rewardhub.models.remote")

# An attempt is not started with less time than this left: it could not finish anyway.
_MIN_ATTEMPT_S = 0.05
# An attempt is the caller's (its deadline, not the backend, limited it) when the time left was under this
# share of the backend's timeout_s. Not under timeout_s itself: by default an item's deadline and
# REWARDHUB_BACKEND_TIMEOUT_S are both 60 s, so the first attempt always has a little less than timeout_s
# left, and a server that hung would never have opened the breaker.
_CALLERS_SHARE = 0.9
# An attempt that got at least this long and made no connection is the server's failure, whatever limited
# it: a server that is up completes the TCP (and TLS) handshake in milliseconds however busy its model is,
# and one lost SYN costs a second (Linux's first retransmission), so a host that is down or firewalled is
# told from a slow judge even under callers' short deadlines.
_CONNECT_S = 2.0
# Statuses that refuse the input itself, and how servers say the input exceeds the context: vLLM and
# OpenAI ("maximum context length is", "maximum model length"), SGLang ("the model's context length"),
# OpenAI's error code, TGI ("`inputs` tokens + `max_new_tokens` must be <= 4096", "`inputs` must have
# less than 1024 tokens"), llama.cpp's server ("exceeds the available context size", its error type
# exceed_context_size_error; some versions answer it with a 500), llama-cpp-python ("exceed context
# window"), Anthropic's compatibility layer ("prompt is too long"), SGLang's input check ("Input length (N
# tokens) exceeds the maximum allowed length (M tokens)", a 400 that was read as any other refusal), and
# the servers built on vLLM's engine or a cloud API that word it "Input prompt (N tokens) is too long and
# exceeds limit of M", "Multimodal prompt is too long", "Input is too long for requested model". A 413 (a
# body over a size limit) is InputTooLong before these are read.
_INPUT_STATUSES = frozenset({400, 422})
# Answers worth another attempt besides 5xx: 429 (come back later), and 408 (a server or proxy that gave
# up waiting for the request; RFC 9110 lets the client repeat it, and the OpenAI SDK does).
_RETRYABLE_STATUSES = frozenset({408, 429})
# Query parameters of a backend URL that hold a credential (a gateway's ?api_key=, ?token=, ?sig=)
_SECRET_PARAM = re.compile(r"key|token|secret|sig|auth|pass|code", re.IGNORECASE)
# How servers say a request named a model they do not serve, on a 404: vLLM ("The model `x` does not
# exist."), OpenAI ("The model `x` does not exist or you do not have access to it.", code model_not_found),
# and gateways' "model not found". A 404 for a path ({"detail": "Not Found"}) names no model.
_MODEL_MISSING = re.compile(
    r"model_not_found|\bmodel\b[^.]{0,200}?\b(?:does not exist|doesn't exist|not found)", re.IGNORECASE
)
_CONTEXT_EXCEEDED = re.compile(
    r"context length|maximum model length|context_length_exceeded|must be <= \d+|must have less than \d+ tokens"
    r"|context size|context window|\b(?:prompt|input)\b[^.]{0,40}\bis too long\b"
    r"|\binput length\b[^.]{0,40}\bexceeds the maximum",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class RemoteOptions:
    timeout_s: float = 60.0
    max_retries: int = 2
    concurrency: int = 64
    breaker_failures: int = 5
    breaker_cooldown_s: float = 10.0
    backoff_initial_s: float = 0.2
    backoff_max_s: float = 2.0


class _Retryable(BackendError):
    """A failure worth another attempt (connection, timeout, 408, 429, 5xx); ``retry_after``: the wait the
    server asked for (its ``Retry-After`` header), in seconds."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(resp: httpx.Response) -> float | None:
    """A ``Retry-After`` header in seconds (delta-seconds or an HTTP date), None when absent or unreadable.
    OpenAI and Azure also send ``retry-after-ms``, to the millisecond where ``Retry-After`` rounds up to
    whole seconds (a 200 ms wait read as 1 s): it wins when present."""
    with contextlib.suppress(TypeError, ValueError):
        ms = float(resp.headers.get("retry-after-ms", ""))
        if math.isfinite(ms):
            return max(0.0, ms / 1000)
    value = resp.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())


class _TimedOut(_Retryable, BackendTimeout):
    """An attempt ran out of the backend's own per-attempt ``timeout_s`` (REWARDHUB_BACKEND_TIMEOUT_S)
    with time left before the item's deadline: retried, and when it was the last attempt the item is
    ``timeout`` like one whose deadline passed (a slow judge is a timeout to the user, not a broken one);
    the message names the limit that ran out. It counts against the breaker."""


_MAX_PAUSE_S = 600.0  # the longest Retry-After that holds every caller back
_PEEK_TIMEOUT_S = 2.0  # asking a server which weights it serves (RemoteBackend.learn_served)
_ASK_AGAIN_S = 5.0  # how often a server that has not answered that is asked again
_RECHECK_S = 60.0  # how often a server that has answered is asked again (redeployed under the same name)


class _ServerAsked(wait_base):
    """The backoff, or what the server asked for in ``Retry-After`` when that is longer (a 429 or 503
    says when to come back; retrying sooner only adds to its load). When that wait would end past the
    deadline, :class:`_OutOfTime` stops instead."""

    def __init__(self, backoff: wait_base):
        self.backoff = backoff

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome is not None else None
        asked = getattr(exc, "retry_after", None)
        backoff = float(self.backoff(retry_state))
        return max(backoff, float(asked)) if asked is not None else backoff


class _CallerOutOfTime(BackendTimeout):
    """The item's deadline, not the server, ended the call: an attempt whose time limit was the time
    left to the caller (shorter than the backend's own ``timeout_s``) ran out, or none could start. The
    server did not fail, so no verdict for the breaker, unless an earlier attempt of the same call had
    failed (``after_failure``, set by :meth:`RemoteClient._with_retries`): that failure is the verdict."""

    after_failure = False


class _NoTimeLeft(_CallerOutOfTime):
    """The deadline left no time to start an attempt: the server was not asked."""


class _NotFound(BackendError):
    """The server has no such endpoint (HTTP 404 or 405): a wrong URL, or an optional endpoint it was
    not started with. The server answered, so the breaker does not count it."""


class _ModelMissing(_NotFound):
    """The server answered 404 because it does not serve the model the request named: renamed or
    unloaded by a redeploy (or a LoRA adapter being reloaded). An error for the call, as any 404."""


class _Redirected(BackendError):
    """The server answered with a redirect (3xx): the configured URL is not the API's (http:// where
    an ingress serves https://, an old address). Not followed: a POST redirected by 301 or 302 turns
    into a GET, and the key would go wherever the answer points. The server answered, so the breaker
    does not count it."""


class _Phase:
    """httpcore's ``trace`` hook for one attempt: whether it is still making its connection (TCP
    connect or TLS handshake), as opposed to waiting for the server's answer on an open one. A step cut
    by the timeout ends as ``.failed``, so only ``.complete`` ends the connecting."""

    def __init__(self) -> None:
        self.connecting = False

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event.startswith(("connection.connect_tcp.", "connection.start_tls.")):
            self.connecting = not event.endswith(".complete")
        elif event.endswith(".send_request_headers.started"):
            self.connecting = False


class _OutOfTime(stop_base):
    """Stop retrying when the backoff sleep plus a minimal attempt would end past the deadline."""

    def __init__(self, deadline: float):
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        return time.monotonic() + (retry_state.upcoming_sleep or 0.0) + _MIN_ATTEMPT_S >= self.deadline


class RemoteClient:
    def __init__(self, name: str, base_url: str, api_key: str | None, options: RemoteOptions):
        self.name = name
        # A query string in the URL (Azure OpenAI's ?api-version=, a gateway's ?api_key=) goes with every
        # request as parameters: httpx joins a request's path after the base URL's raw path, query
        # included, so it sent every call to /v1 with the query "api-version=.../chat/completions".
        url = httpx.URL(base_url)
        self._params = url.params
        self.base_url = str(url.copy_with(query=None) if url.query else url).rstrip("/")
        # A key read from a file or a Kubernetes secret often ends in a newline: as a header value it
        # would be refused locally (and quoted in the error) on every call.
        api_key = api_key.strip() if api_key else None
        if api_key and not api_key.isprintable():
            raise ConfigError(f"backend {name!r}: the API key contains control characters")
        # a header is ASCII: a key pasted with a typographic dash or quote crashed the
        # start inside httpx ("'ascii' codec can't encode character"), naming no backend
        if api_key and not api_key.isascii():
            raise ConfigError(
                f"backend {name!r}: the API key contains characters that are not ASCII (one pasted in "
                "with it, such as a typographic dash?)"
            )
        self._api_key = api_key
        # What a server's error answer might quote back (a gateway's "invalid key sk-..."): the key, a
        # password in the URL, and the values of its credential-like query parameters (?api_key=...)
        secrets = {api_key, url.password}
        secrets.update(v for k, v in url.params.multi_items() if _SECRET_PARAM.search(k))
        self._secrets = sorted((x for x in secrets if x and len(x) >= 3), key=len, reverse=True)
        self.options = options
        # The setting that configured this backend ("REWARDHUB_JUDGE_URL", "backends.x in
        # REWARDHUB_BACKENDS_FILE=..."), set by the ModelHub: named with the URL in the errors that point
        # at the address (nothing listening, no such host, a TLS failure, a 404), where it is most often
        # the setting that is wrong.
        self.origin: str | None = None
        self.breaker = CircuitBreaker(name, options.breaker_failures, options.breaker_cooldown_s)
        self._slots = asyncio.Semaphore(options.concurrency)
        self._client: httpx.AsyncClient | None = None
        self.calls = 0  # attempts made (tests assert that guarded items never reach the server)
        # monotonic time before which no attempt starts: a 429/503's Retry-After asks every caller to
        # wait, not only the call it answered (the others would hit it again at once, to no avail)
        self._not_before = 0.0
        # monotonic time of the last answer that the model is not served (a 404 naming it), and what a
        # call so answered awaits before it raises (RemoteBackend.model_missing: ask the model list)
        self.model_missing_at = -math.inf
        self.on_model_missing: Callable[[float], Awaitable[None]] | None = None

    async def start(self) -> None:
        headers = {"Content-Type": "application/json", "User-Agent": "rewardhub"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        limits = httpx.Limits(
            max_connections=self.options.concurrency, max_keepalive_connections=self.options.concurrency
        )
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            params=self._params,
            headers=headers,
            limits=limits,
            timeout=self.options.timeout_s,
        )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _scrub(self, text: str) -> str:
        """``text`` without the API key or the URL's credentials (a transport error may quote the
        request's headers, a server's error answer the key it was sent)."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def describe(self) -> dict[str, Any]:
        return {"url": public_url(self.base_url), "breaker": self.breaker.describe()}

    def _called(self, path: str) -> str:
        """`` (called <url>, configured by <setting>)``: the address a failed call went to, without
        credentials or query string (as ``/ready`` shows the base), and the setting that holds it."""
        where = f"called {public_url(self.base_url + path)}"
        return f" ({where}, configured by {self.origin})" if self.origin else f" ({where})"

    async def peek(self, path: str, timeout: float) -> tuple[bool, Any]:
        """One GET outside the slots, the breaker and the retries, for a fact the server may or may not
        tell (its model list): ``(answered, decoded JSON or None)``. Not answered (no connection, a
        timeout, a 5xx): ask again later. An answer that is an error (404: no such endpoint, 403: a
        gateway that hides it) or not JSON is an answer with nothing in it. Outside the breaker: a
        question about the server is not a call that failed for an item."""
        client = self._client
        if client is None:
            return False, None
        try:
            async with asyncio.timeout(timeout):
                resp = await client.get(path, timeout=timeout)
        except (httpx.HTTPError, TimeoutError):
            return False, None
        if (resp.status_code >= 500 and resp.status_code != 501) or resp.status_code in _RETRYABLE_STATUSES:
            return False, None  # 501: the server does not implement it, and never will; an answer
        if resp.status_code >= 300:
            return True, None
        try:
            return True, orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            return True, None

    async def post(self, path: str, payload: dict[str, Any], deadline: float) -> Any:
        """POST ``payload`` as JSON and return the decoded JSON answer (see the module docstring).

        Raises:
            BackendTimeout: the deadline passed (waiting for a slot, or the server was too slow), or the
                last attempt ran out of the backend's own ``timeout_s``.
            CircuitOpen: the breaker is open.
            InputTooLong, BackendRejected: the server refused this input (400, 413, 422).
            BackendError: the server failed (after retries), has no such path (404, 405), or answered
                something that is not JSON.
        """
        return await self._call("POST", path, payload, deadline)

    async def get_optional(self, path: str, deadline: float) -> Any | None:
        """GET an endpoint the server may not have: its decoded JSON, or None when the server answers
        404 or 405 (vLLM's ``/tokenizer_info`` exists only with ``--enable-tokenizer-info-endpoint``).

        Raises what :meth:`post` raises otherwise: the server could not be asked, so ask again later.
        """
        try:
            return await self._call("GET", path, None, deadline)
        except _NotFound:
            return None

    async def _call(self, method: str, path: str, payload: dict[str, Any] | None, deadline: float) -> Any:
        """One call through the slot, the breaker and the retries (steps 1-4 of the module docstring).
        A call answered that the model is not served has the model list asked (``on_model_missing``)
        before it raises, out of its slot: the next calls then go with what the server serves now."""
        try:
            return await self._slotted(method, path, payload, deadline)
        except _ModelMissing:
            self.model_missing_at = time.monotonic()
            if self.on_model_missing is not None:
                await self.on_model_missing(deadline)
            raise

    async def _slotted(self, method: str, path: str, payload: dict[str, Any] | None, deadline: float) -> Any:
        if deadline <= time.monotonic():
            # not the slots' fault: waiting for one with no time left never takes even a free slot
            raise BackendTimeout(
                f"backend {self.name!r}: the item's deadline passed before {path} was called"
            )
        try:
            await asyncio.wait_for(self._slots.acquire(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise BackendTimeout(
                f"backend {self.name!r}: no free connection slot before the deadline "
                f"(concurrency {self.options.concurrency})"
            ) from None
        try:
            probe = self.breaker.before_call()
            try:
                result = await self._with_retries(method, path, payload, deadline)
            except (BackendRejected, InputTooLong, _NotFound, _Redirected):
                self.breaker.on_success()  # the server answered, about this input or this path
                raise
            except _CallerOutOfTime as exc:  # the item's deadline, not the server, ended the call
                if exc.after_failure:
                    self.breaker.on_failure(str(exc), probe)
                else:
                    self.breaker.on_abandoned(probe)
                raise
            except BackendError as exc:
                self.breaker.on_failure(str(exc), probe)
                raise
            except BaseException:  # cancelled, or a bug: no verdict, and the probe slot must not leak
                self.breaker.on_abandoned(probe)
                raise
            self.breaker.on_success()
            return result
        finally:
            self._slots.release()

    async def _with_retries(
        self, method: str, path: str, payload: dict[str, Any] | None, deadline: float
    ) -> Any:
        retrying = AsyncRetrying(
            stop=stop_any(stop_after_attempt(self.options.max_retries + 1), _OutOfTime(deadline)),
            wait=_ServerAsked(
                wait_exponential(multiplier=self.options.backoff_initial_s, max=self.options.backoff_max_s)
                + wait_random(0, self.options.backoff_initial_s / 2)
            ),
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                try:
                    return await self._attempt(method, path, payload, deadline)
                except _CallerOutOfTime as exc:
                    # only a failed attempt (_Retryable) is followed by another one
                    exc.after_failure = attempt.retry_state.attempt_number > 1
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(self, method: str, path: str, payload: dict[str, Any] | None, deadline: float) -> Any:
        client = self._client
        if client is None:
            raise BackendError(f"backend {self.name!r} is not started")
        pause = self._not_before - time.monotonic()
        if pause > 0:
            if self._not_before > deadline - _MIN_ATTEMPT_S:
                raise BackendError(
                    f"backend {self.name!r} asked callers to wait {pause:.1f}s more (Retry-After), past "
                    "this item's deadline"
                )
            await asyncio.sleep(pause)
        left = deadline - time.monotonic()
        if left <= _MIN_ATTEMPT_S:
            raise _NoTimeLeft(f"backend {self.name!r}: the item's deadline passed")
        timeout = min(self.options.timeout_s, left)
        cut_by_caller = left < self.options.timeout_s * _CALLERS_SHARE  # the item's deadline limits it
        self.calls += 1
        phase = _Phase()
        try:
            content = None if payload is None else orjson.dumps(payload)
            # httpx's timeout bounds each phase (connect, each read), not the call: a server that
            # trickles its answer would run past the deadline, so the whole attempt is bounded too
            async with asyncio.timeout(timeout):
                resp = await client.request(
                    method, path, content=content, timeout=timeout, extensions={"trace": phase}
                )
        except (httpx.TimeoutException, TimeoutError) as exc:
            # no connection at all within the time: the address may be wrong, or the host down (its
            # packets dropped). Told by the phase the attempt was in: the guard above fires before
            # httpx's own ConnectTimeout, which therefore never said it.
            unconnected = phase.connecting or isinstance(exc, httpx.ConnectTimeout)
            called = self._called(path) if unconnected else ""
            if unconnected and timeout >= _CONNECT_S:
                failed = f"backend {self.name!r}: no connection to the server in {timeout:.1f}s{called}"
                if time.monotonic() >= deadline - _MIN_ATTEMPT_S:
                    raise BackendTimeout(failed) from None
                raise _TimedOut(failed) from None
            if cut_by_caller:
                raise _CallerOutOfTime(
                    f"backend {self.name!r} did not answer {path} before the item's deadline "
                    f"({timeout:.1f}s were left, under its own timeout of {self.options.timeout_s:g}s){called}"
                ) from None
            own = f"its own timeout_s of {self.options.timeout_s:g}s (REWARDHUB_BACKEND_TIMEOUT_S)"
            if time.monotonic() >= deadline - _MIN_ATTEMPT_S:
                raise BackendTimeout(
                    f"backend {self.name!r} did not answer {path} in {timeout:.1f}s: the item's deadline "
                    f"ran out, about when {own} did{called}"
                ) from None
            raise _TimedOut(f"backend {self.name!r} did not answer {path}: {own} ran out{called}") from None
        except httpx.HTTPError as exc:
            # connection refused, no such host, a TLS failure...: most often the URL or the setting
            # holding it is wrong, so the message shows both (the path alone said neither)
            failed = self._scrub(f"backend {self.name!r}: {path}: {type(exc).__name__}: {exc}")[:300]
            failed += self._called(path)
            if isinstance(exc, httpx.LocalProtocolError):  # our own request is malformed: no retry helps
                raise BackendError(failed) from None
            raise _Retryable(failed) from None
        status = resp.status_code
        if status >= 400:
            answered = f"backend {self.name!r}: {path} answered HTTP {status}: {_snippet(resp, self._scrub)}"
            if status == 413:
                # the request's body is over a size limit (the server's, or a proxy's in front of it:
                # nginx's default is 1 MB): a batch of long rollouts, which its inputs alone may fit
                raise InputTooLong(f"{answered} (the request is larger than the server accepts)")
            if status in _INPUT_STATUSES or status == 500:
                # a context overflow is the input's problem whatever the status: never retried
                if _CONTEXT_EXCEEDED.search(resp.text[:2000]):
                    raise InputTooLong(answered)
                if status in _INPUT_STATUSES:
                    raise BackendRejected(answered)
            if status in _RETRYABLE_STATUSES or status >= 500:
                asked = _retry_after(resp)
                if asked is not None and asked > 0:
                    until = time.monotonic() + min(asked, _MAX_PAUSE_S)
                    self._not_before = max(self._not_before, until)
                raise _Retryable(answered, asked)
            if status == 404 and _MODEL_MISSING.search(resp.text[:2000]):
                raise _ModelMissing(answered)
            if status in (404, 405):
                # most often the URL itself (an OpenAI API base without its /v1): show the one called,
                # credentials removed as /ready shows it
                raise _NotFound(answered + self._called(path))
            raise BackendError(answered)
        if 300 <= status < 400:
            # read as a non-JSON answer before ("answered something that is not JSON: (empty body)"),
            # which hid where the server points and opened the breaker on a healthy server
            to = ""
            with contextlib.suppress(httpx.InvalidURL, ValueError, TypeError):
                if where := resp.headers.get("location"):
                    to = f" to {public_url(str(resp.url.join(where)))}"
            raise _Redirected(
                f"backend {self.name!r}: {path} answered HTTP {status}, a redirect{to}: set the URL to the "
                f"address the server redirects to{self._called(path)}"
            )
        try:
            return orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            raise BackendError(
                f"backend {self.name!r}: {path} answered something that is not JSON: {_snippet(resp, self._scrub)}"
            ) from None


def public_url(url: str) -> str:
    """``url`` without credentials (``https://user:token@gateway/v1``, ``?api_key=``): what logs and the
    unauthenticated ``/ready`` may show."""
    u = httpx.URL(url)
    if u.userinfo:
        u = u.copy_with(username=None, password=None)
    if u.query:
        u = u.copy_with(query=None)
    return str(u)


def _snippet(resp: httpx.Response, scrub: Callable[[str], str]) -> str:
    """The start of an answer's text, without the credentials ``scrub`` removes (removed before it is
    cut, so a key across the cut does not leave its first half)."""
    text = scrub(resp.text[:1000])[:200].replace("\n", " ")
    return text or "(empty body)"


class RemoteBackend(ModelBackend):
    """A backend whose model is a server behind a :class:`RemoteClient`: its life cycle is the client's.

    Its identity (part of the cache key of every reward using it) is the model's name, plus what says
    which weights answer to that name: the backend's ``revision`` (the operator's label, from the
    backends file) and the weights the server says it serves the name from (vLLM's ``/v1/models`` lists
    a served name's ``root``, the checkpoint path, and ``parent``, a LoRA adapter's base). A name kept
    over another checkpoint (``--served-model-name judge`` moved from step-400 to step-800) served the
    old checkpoint's cached scores. The server is asked at start and, until it has answered, at most
    every few seconds on a call; results are not cached while it has not (:attr:`identity_settled`).
    Once it has, it is asked again every minute on a call: a judge is redeployed while this service
    runs, and its new weights must not go on under the old ones' key (for at most that minute).

    A call the server answers that it does not serve the model (a 404 naming it: renamed, unloaded, a
    LoRA adapter between an unload and its reload) has it asked at once instead (:meth:`model_missing`),
    at most once every :data:`_ASK_AGAIN_S` and by one call at a time: the redeploy was learned only by
    the minute's recheck, so for up to a minute the next items kept the old weights' key (their cached
    scores) and a pooling server's old tokenizer facts. The failed call's items stay errors. When the
    list then does not name the model (the server is between two deployments), results are not cached
    and it is asked again every :data:`_ASK_AGAIN_S` on a call, while calls are still refused so: the
    weights that come back under the name are learned in seconds, not a minute later, with the scores
    of the interval under no key.
    """

    client: RemoteClient
    revision: str | None = None
    # the model list's path below the client's base URL
    models_path: ClassVar[str] = "/models"
    # what the server said serves `model` (root, parent; () when it says nothing); None: not asked yet
    _served: tuple[str, ...] | None = None
    _next_ask = 0.0
    _asked_at = -math.inf  # when the last ask began (monotonic)
    _peeking = False  # an ask of the model list is in flight
    _missing_ask = -math.inf  # when a call told "no such model" last had the list asked (model_missing)
    # the last ask's list did not name the model, after a call was told it is not served: unsettled
    _unlisted = False

    @property
    def origin(self) -> str | None:
        return self.client.origin

    @origin.setter
    def origin(self, value: str | None) -> None:
        self.client.origin = value

    async def start(self) -> None:
        self.client.on_model_missing = self.model_missing
        await self.client.start()
        await self.learn_served()

    async def close(self) -> None:
        await self.client.close()

    async def learn_served(self, deadline: float | None = None) -> None:
        """Ask the server which weights serve the model (see the class docstring), when an ask is due
        and none is in flight: a down server is not asked on every call, one that answered again after
        :data:`_RECHECK_S` (after :data:`_ASK_AGAIN_S` while it does not list a model it refused)."""
        now = time.monotonic()
        if now < self._next_ask or self._peeking:
            return
        self._next_ask = now + _ASK_AGAIN_S
        timeout = (
            _PEEK_TIMEOUT_S if deadline is None else min(_PEEK_TIMEOUT_S, deadline - now - _MIN_ATTEMPT_S)
        )
        if timeout <= 0:
            self._next_ask = now  # no time to ask on this call: the next one does
            return
        asked_before, self._asked_at = self._asked_at, now
        self._peeking = True
        try:
            answered, listing = await self.client.peek(self.models_path, timeout)
        finally:
            self._peeking = False
        if not answered:
            return
        served = served_weights(listing, self.model)
        # told "no such model" since the ask before (or already unlisted then), and the list does not
        # name it: between deployments. It stays so until a list names it: an ask with no refused call
        # since the one before (an idle service, /ready's ask) said "listed" while the model was still gone
        self._unlisted = not names_model(listing, self.model) and (
            self._unlisted or self.client.model_missing_at > asked_before
        )
        self._next_ask = time.monotonic() + (_ASK_AGAIN_S if self._unlisted else _RECHECK_S)
        if served != self._served:
            event = "backend_served_weights" if self._served is None else "backend_served_weights_changed"
            if served or self._served:
                log.info(event, backend=self.name, served=list(served))
            redeployed = self._served is not None
            self._served = served
            if redeployed:
                self.forget_server()

    async def model_missing(self, deadline: float) -> None:
        """A call was answered that the server does not serve the model: ask its list now (see the class
        docstring), unless an ask is in flight or this was done less than :data:`_ASK_AGAIN_S` ago
        (concurrent calls refused together ask once)."""
        now = time.monotonic()
        if self._peeking or now - self._missing_ask < _ASK_AGAIN_S:
            return
        self._missing_ask = now
        self._next_ask = now
        log.info("backend_model_missing", backend=self.name, model=self.model)
        await self.learn_served(deadline)

    def ready(self) -> dict[str, Any]:
        """Not ready while the server does not list the model it refused (a 404 "no such model"): every
        call to it fails until the model is back (:meth:`recheck` asks, so /ready sees it come back)."""
        if not self._unlisted:
            return {"ok": True, **self.describe()}
        reason = (
            f"the server answered that it does not serve model {self.model!r} (HTTP 404) and its model "
            f"list does not name it; asked again every {_ASK_AGAIN_S:g} s"
        )
        return {"ok": False, "reason": reason, **self.describe()}

    async def recheck(self) -> None:
        """``/ready``: ask the model list again (when an ask is due) while the model is not listed: an
        idle service makes no call that would, and a service its load balancer took out of rotation for
        it would never get one, so it stayed unready after the model was back."""
        if self._unlisted:
            await self.learn_served()

    def forget_server(self) -> None:
        """The server now serves other weights (a redeploy, :meth:`learn_served`): forget what was learned
        from the old ones (a subclass's tokenizer facts), to be asked again."""

    def identity(self) -> str:
        """The model's name; with none configured (the shortcut settings' ``"default"``), the server's
        address too: otherwise pointing ``REWARDHUB_JUDGE_URL`` at another server served the old one's
        cached scores. A named model keeps its cache when it moves to another address. Then the
        revision and the served weights (see the class docstring)."""
        base = super().identity()
        if self.model == UNNAMED_MODEL:
            base = f"{base}@{public_url(self.client.base_url)}"
        if self.revision:
            base = f"{base}#{self.revision}"
        return f"{base}<{'|'.join(self._served)}" if self._served else base

    @property
    def identity_settled(self) -> bool:
        return self._served is not None and not self._unlisted

    @property
    def model_field(self) -> dict[str, str]:
        """The ``model`` member of a request's body: none for a server set by URL alone (the shortcut
        settings' ``"default"``). vLLM answers 404 to a model name it does not serve, "default"
        included, and serves a request that names none with its own model (SGLang, TGI and llama.cpp
        do the same)."""
        return {} if self.model == UNNAMED_MODEL else {"model": self.model}

    def describe(self) -> dict[str, Any]:
        served: Any = "not yet asked" if self._served is None else list(self._served)
        if self._unlisted:
            served = "the server does not list the model (asked again)"
        extra = {"revision": self.revision} if self.revision else {}
        return {**super().describe(), **self.client.describe(), **extra, "served_from": served}


def served_weights(listing: Any, model: str) -> tuple[str, ...]:
    """What a ``/models`` answer says serves ``model``: its entry's ``root`` (vLLM: the checkpoint path
    or hub id behind a ``--served-model-name``) and ``parent`` (a LoRA adapter's base model), where
    they say more than the name; () for a server that says nothing (OpenAI, a name not listed). With
    no model named, the one model a server lists is the one it serves."""
    rows = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(rows, list):
        return ()
    entries = [r for r in rows if isinstance(r, dict)]
    entry = next((r for r in entries if r.get("id") == model), None)
    if entry is None and model == UNNAMED_MODEL and len(entries) == 1:
        entry = entries[0]
    if entry is None:
        return ()
    said = (entry.get(k) for k in ("root", "parent"))
    return tuple(v[:500] for v in said if isinstance(v, str) and v and v != entry.get("id"))


def names_model(listing: Any, model: str) -> bool:
    """Whether a ``/models`` answer names ``model`` (or, with no model named, lists exactly one); True
    when it is no list at all (a 404, a gateway's 403, not JSON): it says nothing against it."""
    rows = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(rows, list):
        return True
    entries = [r for r in rows if isinstance(r, dict)]
    if model == UNNAMED_MODEL:
        return len(entries) == 1
    return any(r.get("id") == model for r in entries)


def rows_by_index(name: str, path: str, answer: Any, n: int, field: str) -> list[Any]:
    """``answer["data"][*][field]`` in input order, for the OpenAI-style list answers (``/embeddings``,
    vLLM's ``/classify`` and ``/pooling``): each row names its input by ``index``. The indices must be
    exactly 0..n-1: one index twice and another missing keeps the count, and an input would get another
    input's row, a plausible score for the wrong rollout."""
    try:
        rows = sorted(answer["data"], key=lambda d: d["index"])
        indices = [row["index"] for row in rows]
        values = [row[field] for row in rows]
    except (KeyError, TypeError, ValueError) as exc:
        raise BackendError(f"backend {name!r}: malformed {path} answer ({exc!r})") from None
    if len(values) != n:
        raise BackendError(f"backend {name!r}: {len(values)} {path} rows for {n} inputs")
    if indices != list(range(n)):
        raise BackendError(f"backend {name!r}: {path} answered indices {indices[:10]}, not 0..n-1")
    return values


async def split_on_refusal(
    call: Callable[[Sequence[In]], Awaitable[list[Out]]], inputs: Sequence[In]
) -> list[Out | BackendError]:
    """``call(inputs)`` as one request, or, when the server refuses the whole batch for its inputs
    (vLLM and OpenAI answer 400 when one input exceeds the model's context; a proxy answers 413 to a
    body over its size limit), each input alone: only the refused ones fail, where one long rollout, or
    a large batch, failed every item of it. The common case stays one request."""
    try:
        return list(await call(inputs))
    except InputTooLong:  # not any 400: one about the request itself (a model name) would fail N times more
        if len(inputs) <= 1:
            raise

    async def one(x: In) -> Out | BackendError:
        try:
            return (await call([x]))[0]
        except BackendError as exc:
            return exc

    return list(await asyncio.gather(*(one(x) for x in inputs)))


async def in_parts(
    call: Callable[[Sequence[In]], Awaitable[list[Out]]],
    inputs: Sequence[In],
    max_items: int,
    max_size: int,
    size: Callable[[In], int],
) -> list[Out | BackendError]:
    """``call`` over ``inputs`` in parts of at most ``max_items`` inputs whose ``size`` sums to at most
    ``max_size`` (a larger input goes alone), each part through :func:`split_on_refusal`, all parts at
    once: the client's ``concurrency`` slots bound how many are in flight, and each call has its own
    attempts under its own per-attempt timeout. Results come back in input order. A part that fails
    fails its own items only (each gets the part's :class:`BackendError`): one request for a whole
    batch ran past ``timeout_s`` on a healthy server when the batch was large, failed every item, and
    a retry sent all of it again."""
    parts: list[list[In]] = []
    total = 0
    for x in inputs:
        n = size(x)
        if not parts or len(parts[-1]) >= max_items or total + n > max_size:
            parts.append([])
            total = 0
        parts[-1].append(x)
        total += n
    done = await asyncio.gather(*(split_on_refusal(call, part) for part in parts), return_exceptions=True)
    out: list[Out | BackendError] = []
    for part, got in zip(parts, done, strict=True):
        if isinstance(got, BaseException) and not isinstance(got, BackendError):
            raise got  # a bug or a cancellation, not a server's answer
        out.extend([got] * len(part) if isinstance(got, BackendError) else got)
    return out
