"""Pure-ASGI middleware (cheaper than ``BaseHTTPMiddleware`` on the hot path).

* :class:`BodyLimitMiddleware` answers 413 for a body over ``REWARDHUB_MAX_REQUEST_BYTES``, from the
  ``Content-Length`` header when there is one and by counting streamed chunks otherwise;
* :class:`RequestContextMiddleware` gives every request an id (``X-Request-ID``, taken from the caller
  when it sends one), binds it to the log context, and records request count and latency per route;
* :class:`HeadAsGetMiddleware` answers ``HEAD`` on every ``GET`` route as ``GET`` would, without the
  body (load balancers' and uptime checkers' probes, ``curl -I``);
* :class:`CancelOnDisconnectMiddleware` stops the work of a request whose client hung up (status 499 in
  the metrics);
* :class:`CrossSiteMiddleware` refuses a state-changing request a browser sent from another site's page
  (its ``Origin`` header is not this service's and not allowed);
* :class:`StartupFailureMiddleware` reports a start-up that failed on a configuration error by its
  message alone, without the ~55 lines of traceback the lifespan protocol prints before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import time
import uuid
from typing import Any

import orjson
import structlog
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewardhub.config import ConfigError
from rewardhub.errors import RewardHubError, error_payload
from rewardhub.metrics import Metrics
from rewardhub.models.errors import BackendUnavailable

__all__ = [
    "STARTUP_FAILURE_FILE",
    "BodyLimitMiddleware",
    "CancelOnDisconnectMiddleware",
    "CrossSiteMiddleware",
    "HeadAsGetMiddleware",
    "RequestContextMiddleware",
    "StartupFailureMiddleware",
    "configuration_error",
]

# The environment variable naming a file where a worker whose start-up failed writes why (set by
# `rewardhub serve`, which repeats it last and exits non-zero: with --workers uvicorn's parent exited 0).
STARTUP_FAILURE_FILE = "_REWARDHUB_STARTUP_FAILURE_FILE"

CLIENT_GONE = 499  # nginx's "client closed request": the status counted for a request nobody waited for

log = structlog.get_logger("rewardhub.access")


async def _send_error(send: Send, status: int, etype: str, message: str) -> None:
    body = orjson.dumps(error_payload(status, etype, message))
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def route_label(scope: Scope) -> str:
    """The route a request is counted under: the API route's template (``/v1/jobs/{job_id}``, never
    the id), the path of a plain Starlette route without parameters (FastAPI's ``/openapi.json`` and
    ``/docs``, which set no ``route`` in the scope and were counted as ``unmatched``), else
    ``unmatched``: a path a client made up must not become a metric label of its own."""
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    if path:
        return str(path)
    if scope.get("endpoint") is not None and not scope.get("path_params"):
        return str(scope.get("path") or "unmatched")
    return "unmatched"


class _TooLarge(Exception):
    pass


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    def _message(self) -> str:
        return (
            f"request body exceeds the limit of {self.max_bytes} bytes "
            f"(setting REWARDHUB_MAX_REQUEST_BYTES); split the batch"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    if int(value) > self.max_bytes:
                        await _send_error(send, 413, "payload_too_large", self._message())
                        return
                except ValueError:
                    pass
                break
        seen = 0
        started = False
        over = False

        async def limited_receive() -> Message:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    over = True
                    raise _TooLarge()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if over:
                # The app caught the refusal and answered on its own (FastAPI turns any error while it
                # reads a body it parses into a 400 "There was an error parsing the body"): answer the
                # 413 instead, and drop the app's answer.
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await _send_error(send, 413, "payload_too_large", self._message())
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _send_error(send, 413, "payload_too_large", self._message())


_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class CrossSiteMiddleware:
    """Refuse (403) a POST, PUT, PATCH or DELETE whose ``Origin`` is neither this service's own nor in
    ``REWARDHUB_ALLOWED_ORIGINS``.

    A page on any site can make its visitor's browser send a "simple" cross-site request, one with a
    ``text/plain`` or form body, with no CORS preflight; the page cannot read the answer, but the request
    runs. Every route reads a JSON body whatever its content type (curl ``-d`` sends a form type, and the
    peers' clients are not all careful), so without this a page could have a service on the visitor's
    localhost, open by default, run programs in its sandbox or spend a paid judge's tokens. Browsers send
    ``Origin`` on every cross-origin POST (``null`` from sandboxed frames and ``file:`` pages, refused
    too); trainers, curl and the client send none and pass. A request from the service's own page (its
    ``/docs``) passes when the page was loaded by address (``localhost``, an IP): a page on the attacker's
    own domain that it rebinds to 127.0.0.1 (DNS rebinding) has its ``Origin`` match its ``Host`` too, so
    a page served under a name must have its origin listed."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]):
        self.app = app
        self.allowed = allowed
        self.any = "*" in allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in _SAFE_METHODS and not self.any:
            origin = host = None
            for name, value in scope["headers"]:
                if name == b"origin":
                    origin = value.decode("latin-1")
                elif name == b"host":
                    host = value.decode("latin-1")
            if origin is not None and origin not in self.allowed and not _same_host(origin, host):
                await _send_error(
                    send,
                    403,
                    "forbidden",
                    f"cross-site request refused: a page at {origin} sent it; a browser origin allowed "
                    "to call this service goes in REWARDHUB_ALLOWED_ORIGINS",
                )
                return
        await self.app(scope, receive, send)


def _same_host(origin: str, host: str | None) -> bool:
    """The origin's ``host[:port]`` is the one the request was sent to (``Host``), and that is an address
    no one can rebind: ``localhost`` or an IP literal."""
    _, sep, netloc = origin.partition("://")
    if not sep or host is None or netloc.lower() != host.lower():
        return False
    name = netloc.lower()
    if name.startswith("["):  # [v6]:port
        name = name[1 : name.find("]")] if "]" in name else name
    else:
        name = name.rsplit(":", 1)[0]
    if name == "localhost":
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HeadAsGetMiddleware:
    """``HEAD`` is answered as ``GET``, headers and status alike, with an empty body.

    FastAPI routes a ``GET`` route's ``GET`` only (Starlette's own routes add ``HEAD``), so ``HEAD
    /health`` was a 405: an AWS ALB or uptime checker probing with ``HEAD``, or ``curl -I``, saw a
    service that never came up. In one place rather than per route, so every read answers it (the
    probes, ``/metrics``, the catalog, the OpenAPI document, the dashboard) with the same
    authentication as ``GET``; a route without ``GET`` still answers 405. The body is dropped here, not
    left to the server (uvicorn does; not every ASGI server or test transport does), and
    ``Content-Length`` stays the ``GET`` answer's, as RFC 9110 allows. The method is ``GET`` only for
    the app inside: the server, the request log and the metrics see ``HEAD``."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_headers_only(message: Message) -> None:
            if message["type"] == "http.response.body" and message.get("body"):
                message = {**message, "body": b""}
            await send(message)

        # A copy, not the server's scope changed in place: uvicorn reads the method from that one as it
        # sends the answer, and for a GET expected Content-Length bytes of body (it reset the
        # connection). What the router matched is copied back for RequestContextMiddleware's route
        # label (route_label: an API route's ``route``, a plain Starlette route's endpoint and parameters).
        inner = {**scope, "method": "GET"}
        try:
            await self.app(inner, receive, send_headers_only)
        finally:
            for key in ("route", "endpoint", "path_params"):
                if key in inner:
                    scope[key] = inner[key]


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = None
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                rid = value.decode("latin-1")[:128]
                break
        if not rid:
            rid = f"req_{uuid.uuid4().hex}"
        scope.setdefault("state", {})["request_id"] = rid
        structlog.contextvars.bind_contextvars(request_id=rid)
        status = 500
        t0 = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", rid.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if scope["state"].get("client_gone"):
                status = CLIENT_GONE
            elapsed = time.perf_counter() - t0
            label = route_label(scope)
            self.metrics.requests.labels(label, str(status)).inc()
            self.metrics.request_latency.labels(label).observe(elapsed)
            if status >= 500 or label not in ("/metrics", "/health", "/ready"):
                log.debug(
                    "request",
                    method=scope.get("method"),
                    path=scope.get("path"),
                    status=status,
                    ms=round(elapsed * 1000, 2),
                )
            structlog.contextvars.unbind_contextvars("request_id")


class CancelOnDisconnectMiddleware:
    """Cancel the handling of a request whose client disconnected before its response.

    A trainer that times out and retries (or is stopped) leaves its request running: its items keep
    their places in a model's batch queue and the model computes scores nobody reads, until each item's
    deadline (60 s by default), while the retry waits behind them. Starlette does not watch for this on
    ordinary routes. Here, once the whole body has been read and the handler has run ``watch_after_s``
    (cheap requests finish before and cost nothing), a task waits on the server's ``receive()``: after
    the body, the server answers it only when the client disconnects or the response is complete. A
    disconnect before the response cancels the handler; the cancellation reaches the batcher, which drops
    the items not yet in a forward pass, and the CPU pool, which stops waiting. Nothing is sent (nobody is
    there to read it), and the request counts as 499 in ``rewardhub_requests_total``.

    A client that hangs up while its body is still arriving is the same case: the handler reading the
    body hears the disconnect (Starlette raises ``ClientDisconnect``, or FastAPI turns that into a 400
    "error parsing the body"); it was answered as a 500 with a logged traceback, or as that 400. It is now
    a 499, and whatever the handler answers is dropped.
    """

    def __init__(self, app: ASGIApp, watch_after_s: float = 0.05):
        self.app = app
        self.watch_after_s = watch_after_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        complete = False  # the response's last body part went out, or the handler is done
        gone = False  # the client left first, and this middleware cancelled the handler
        hung_up = False  # the handler itself heard the client leave before its response
        started = False  # the response began (a streamed one listens for a disconnect of its own)
        timer: asyncio.TimerHandle | None = None
        watcher: asyncio.Future[Message] | None = None

        def heard(fut: asyncio.Future[Message]) -> None:
            nonlocal gone
            if fut.cancelled() or fut.exception() is not None or complete:
                return
            if fut.result()["type"] == "http.disconnect":
                gone = True
                task.cancel()

        def watch() -> None:
            nonlocal watcher
            if not complete and watcher is None:
                watcher = asyncio.ensure_future(receive())
                watcher.add_done_callback(heard)

        async def watched_receive() -> Message:
            nonlocal timer, hung_up
            if watcher is not None:  # the handler listens too (a streamed response): one reader only
                message = await asyncio.shield(watcher)
            else:
                message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False) and timer is None:
                timer = loop.call_later(self.watch_after_s, watch)
            elif message["type"] == "http.disconnect" and not complete and not started:
                hung_up = True
            return message

        async def watched_send(message: Message) -> None:
            nonlocal complete, started
            if hung_up:
                return  # nobody is there to read it
            if message["type"] == "http.response.start":
                started = True
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        def count_gone() -> None:
            scope.setdefault("state", {})["client_gone"] = True
            log.info("client_gone", method=scope.get("method"), path=scope.get("path"))

        try:
            await self.app(scope, watched_receive, watched_send)
        except asyncio.CancelledError:
            if not gone:
                raise
            task.uncancel()
            count_gone()
        except ClientDisconnect:
            if not hung_up:
                raise
            count_gone()
        else:
            if hung_up:
                count_gone()
        finally:
            complete = True  # a disconnect heard from now on has nothing left to cancel
            if timer is not None:
                timer.cancel()
            if watcher is not None and not watcher.done():
                watcher.cancel()


def configuration_error(exc: BaseException) -> str | None:
    """The message of a start-up error that is the user's configuration, not a bug: a setting
    (:class:`~rewardhub.config.ConfigError`), a model that cannot load or an extra that is not installed
    (:class:`~rewardhub.models.errors.BackendUnavailable`, naming the setting), one of the service's
    own errors (not the root :class:`~rewardhub.errors.RewardHubError`, the unexpected one). None for
    anything else, whose traceback is what its reader needs."""
    if isinstance(exc, ConfigError | BackendUnavailable) or (
        isinstance(exc, RewardHubError) and type(exc) is not RewardHubError
    ):
        return str(exc)
    return None


class StartupFailureMiddleware:
    """A start-up that fails on a configuration error is reported by its message alone.

    Starlette answers a failed lifespan with the whole formatted traceback (uvicorn's lifespan, the
    app's, FastAPI's merged lifespans: about 55 lines) which uvicorn logs before "Application startup
    failed", so a typo in the backends file ended in a wall of frames with the one useful line at the
    bottom. The ``lifespan.startup.failed`` message is held until the exception is known, and for a
    :func:`configuration_error` replaced by its message; any other exception keeps its traceback. With
    :data:`STARTUP_FAILURE_FILE` set, the reason is written there too (for ``rewardhub serve``)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        held: list[Message] = []

        async def hold_failure(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed":
                held.append(message)
            else:
                await send(message)

        try:
            await self.app(scope, receive, hold_failure)
        except BaseException as exc:
            if held:
                brief = configuration_error(exc)
                _record(brief or f"{type(exc).__name__}: {exc} (the traceback is above)")
                await send({**held.pop(), "message": brief} if brief else held.pop())
            raise
        if held:  # failed without raising (not Starlette's way): pass it on as it came
            await send(held.pop())


def _record(reason: str) -> None:
    path = os.environ.get(STARTUP_FAILURE_FILE)
    if path:
        with contextlib.suppress(OSError), open(path, "w") as f:
            f.write(reason)
