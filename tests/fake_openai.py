"""A scripted OpenAI-compatible chat server for judge tests: a real FastAPI app under uvicorn, in a
thread, on a free port.

The test sets ``server.reply`` to a function of the request body returning a :class:`Reply`: the
message content (cut before the request's first ``stop`` string, as a server does), optionally a
thinking returned apart from it (as by a reasoning parser), the probabilities of the alternatives at
the decision token (served as ``top_logprobs``), an HTTP status, a delay, a gate held until the test opens
it, or raw bytes (garbage). Every request is recorded, so tests can assert that hardened items never
reached the judge.
"""

from __future__ import annotations

import asyncio
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

_TOKEN = re.compile(r"\s*[A-Za-z]+|\s*\d|\s*[^\sA-Za-z\d]|\s+")


@dataclass
class Reply:
    content: str = ""
    # probabilities of the alternatives at the decision token (the last token equal to `at`)
    top: dict[str, float] | None = None
    at: str | None = None
    status: int = 200
    delay_s: float = 0.0
    # answered only once the test sets it (and after delay_s): a call held for as long as a test needs,
    # without a guess at how long that is
    hold: threading.Event | None = None
    raw: bytes | None = None
    finish_reason: str = "stop"
    headers: dict[str, str] | None = None  # response headers of a failure (e.g. Retry-After)
    # the thinking, returned apart from the content as a server with a reasoning parser does, in this
    # field of the message (vLLM: reasoning_content, newer vLLM and OpenRouter: reasoning); the content
    # is then null when empty, and the logprobs cover the thinking's tokens, "</think>", then the content's
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"


def always(content: str, **kw: Any) -> Callable[[dict[str, Any]], Reply]:
    return lambda body: Reply(content, **kw)


def user_text(body: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")


@dataclass
class FakeJudge:
    url: str
    reply: Callable[[dict[str, Any]], Reply] = field(default=always("Final Decision: Yes"))
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)  # each request's query string
    stopping: threading.Event = field(default_factory=threading.Event)
    abandoned: int = 0  # slow answers whose caller hung up before they were sent
    # GET /v1/models' entries (vLLM's: id, root, parent); None: the server has no such endpoint (404)
    models: list[dict[str, Any]] | None = None
    models_status: int = 200  # another status: /v1/models fails so
    models_asked: int = 0  # GET /v1/models requests received

    @property
    def calls(self) -> int:
        return len(self.requests)


def _logprobs(
    content: str, top: dict[str, float] | None, at: str | None, reasoning: str | None = None
) -> dict[str, Any]:
    tokens = [t for t in _TOKEN.findall(content) if t]
    if reasoning:
        tokens = [t for t in _TOKEN.findall(reasoning) if t] + (["</think>"] if content else []) + tokens
    entries = [
        {
            "token": t,
            "logprob": -0.01,
            "bytes": list(t.encode()),
            "top_logprobs": [{"token": t, "logprob": -0.01}],
        }
        for t in tokens
    ]
    if top is not None and at is not None:
        idx = max((i for i, t in enumerate(tokens) if t.strip() == at), default=None)
        if idx is not None:
            # Alternatives carry the chosen token's leading whitespace, as a real tokenizer's would.
            ws = tokens[idx][: len(tokens[idx]) - len(tokens[idx].lstrip())]
            alts = [{"token": ws + k, "logprob": math.log(p)} for k, p in top.items() if p > 0]
            alts.sort(key=lambda a: -a["logprob"])
            entries[idx]["top_logprobs"] = alts
            entries[idx]["logprob"] = next((a["logprob"] for a in alts if a["token"].strip() == at), -5.0)
    return {"content": entries}


def _app(state: FakeJudge) -> FastAPI:
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> Response:
        state.models_asked += 1
        if state.models is None:
            return JSONResponse({"error": {"message": "Not Found"}}, status_code=404)
        if state.models_status != 200:
            return JSONResponse({"error": {"message": "scripted failure"}}, status_code=state.models_status)
        return JSONResponse({"object": "list", "data": state.models})

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        state.requests.append(body)
        state.headers.append(dict(request.headers))
        state.queries.append(request.url.query)
        r = state.reply(body)
        until = time.monotonic() + r.delay_s
        held = r.hold
        while (
            time.monotonic() < until or held is not None and not held.is_set()
        ) and not state.stopping.is_set():
            # slow (or held), but stops with the server
            await asyncio.sleep(0.02)
            if await request.is_disconnected():
                state.abandoned += 1
                return Response(status_code=499)
        if r.raw is not None:
            return Response(r.raw, status_code=r.status, media_type="application/json")
        if r.status != 200:
            # a failure's message is the reply's content (a server's own wording, e.g. a context overflow)
            message = r.content or "scripted failure"
            return JSONResponse({"error": {"message": message}}, status_code=r.status, headers=r.headers)
        content, reasoning = r.content, r.reasoning
        for stop in body.get("stop") or ():  # the output ends before the first stop string, as vLLM's
            if reasoning is not None and stop in reasoning:
                reasoning, content = reasoning[: reasoning.index(stop)], ""
            elif stop in content:
                content = content[: content.index(stop)]
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning is not None:
            message[r.reasoning_field] = reasoning
            message["content"] = content or None
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": r.finish_reason}
        if body.get("logprobs"):
            choice["logprobs"] = _logprobs(content, r.top, r.at, reasoning)
        return JSONResponse(
            {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [choice],
            }
        )

    return app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serve_app(app: FastAPI, on_stop: Callable[[], None] | None = None) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread on a free port; yields ``http://127.0.0.1:<port>``."""
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the fake server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        if on_stop is not None:
            on_stop()
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def fake_judge() -> Iterator[FakeJudge]:
    """Start the server; yields its state (``url`` is the API base including /v1)."""
    state = FakeJudge(url="")
    # scripted slow answers still in flight return when the server stops
    with serve_app(_app(state), on_stop=state.stopping.set) as base:
        state.url = f"{base}/v1"
        yield state
