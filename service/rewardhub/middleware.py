"""Pure-ASGI middleware (cheaper than ``BaseHTTPMiddleware`` on the hot path).

* :class:`BodyLimitMiddleware` answers 413 for a body over ``REWARDHUB_MAX_REQUEST_BYTES``, from the
  ``Content-Length`` header when there is one and by counting streamed chunks otherwise;
* :class:`RequestContextMiddleware` gives every request an id (``X-Request-ID``, taken from the caller
  when it sends one), binds it to the log context, and records request count and latency per route.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson
import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewardhub.errors import error_payload
from rewardhub.metrics import Metrics

__all__ = ["BodyLimitMiddleware", "RequestContextMiddleware"]

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

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _send_error(send, 413, "payload_too_large", self._message())


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
            elapsed = time.perf_counter() - t0
            route: Any = scope.get("route")
            label = getattr(route, "path", None) or "unmatched"
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
