"""RemoteClient against a real HTTP server: retries, timeouts within the deadline, breaker, no key leaks."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from fake_openai import FakeJudge, Reply, always, serve_app
from rewardhub.config import ConfigError
from rewardhub.models.base import UNNAMED_MODEL, ChatRequest, Message
from rewardhub.models.errors import BackendError, BackendRejected, BackendTimeout, CircuitOpen, InputTooLong
from rewardhub.models.openai_backend import OpenAIBackend
from rewardhub.models.remote import RemoteOptions, _retry_after
from waiting import until

REQ = ChatRequest((Message("user", "hi"),), max_tokens=8, top_logprobs=5)


async def backend(server: FakeJudge, **opts: float) -> OpenAIBackend:
    options = RemoteOptions(**{"backoff_initial_s": 0.01, "backoff_max_s": 0.02, **opts})  # type: ignore[arg-type]
    b = OpenAIBackend("judge", server.url, "m", "sk-key", options)
    await b.start()
    return b


async def test_retries_transient_failures(judge_server: FakeJudge) -> None:
    answers = iter(
        [Reply(status=502), Reply(status=429), Reply("Score: 4", top={"4": 0.6, "3": 0.4}, at="4")]
    )
    judge_server.reply = lambda body: next(answers)
    b = await backend(judge_server, max_retries=2)
    out = await b.chat(REQ, time.monotonic() + 5)
    assert out.text == "Score: 4" and judge_server.calls == 3
    assert out.tokens is not None and dict(out.tokens[-1].top)[" 4"] == pytest.approx(-0.5108, abs=1e-3)
    assert judge_server.requests[-1]["top_logprobs"] == 5 and judge_server.requests[-1]["model"] == "m"
    await b.close()


async def test_a_408_is_retried(judge_server: FakeJudge) -> None:
    """408 Request Timeout (a proxy or server that gave up waiting for the request, RFC 9110: "the
    client MAY repeat that request") failed the item at once and counted against the breaker, where a
    retry succeeds; the OpenAI SDK retries it too. Found in review."""
    answers = iter([Reply(status=408), Reply("Score: 4")])
    judge_server.reply = lambda body: next(answers)
    b = await backend(judge_server, max_retries=2, breaker_failures=1)
    try:
        assert (await b.chat(REQ, time.monotonic() + 5)).text == "Score: 4"
    finally:
        await b.close()
    assert judge_server.calls == 2 and b.client.breaker.describe()["state"] == "closed"


async def test_client_errors_are_not_retried_and_garbage_is_an_error(judge_server: FakeJudge) -> None:
    judge_server.reply = always("", status=400)
    b = await backend(judge_server, max_retries=3)
    with pytest.raises(BackendRejected, match="HTTP 400"):
        await b.chat(REQ, time.monotonic() + 5)
    assert judge_server.calls == 1
    judge_server.reply = lambda body: Reply(raw=b'{"choices": []}')
    with pytest.raises(BackendError, match="malformed"):
        await b.chat(REQ, time.monotonic() + 5)
    await b.close()


async def test_a_context_overflow_is_input_too_long_and_the_breaker_stays_closed(
    judge_server: FakeJudge,
) -> None:
    judge_server.reply = always(
        "This model's maximum context length is 4096 tokens. However, you requested 5210 tokens.", status=400
    )
    b = await backend(judge_server, max_retries=3, breaker_failures=1)
    for _ in range(3):
        with pytest.raises(InputTooLong, match="HTTP 400"):
            await b.chat(REQ, time.monotonic() + 5)
    assert judge_server.calls == 3 and b.client.breaker.describe()["state"] == "closed"
    judge_server.reply = always("", status=401)  # not the input's fault: a failure like any other
    with pytest.raises(BackendError, match="HTTP 401") as info:
        await b.chat(REQ, time.monotonic() + 5)
    assert not isinstance(info.value, BackendRejected | InputTooLong)
    assert b.client.breaker.describe()["state"] == "open"
    await b.close()


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "This model's maximum context length is 4096 tokens. However, you requested 5210 tokens."),
        (400, "The decoder prompt (length 5210) is longer than the maximum model length of 4096."),
        (400, "The input (5210 tokens) is longer than the model's context length (4096 tokens)."),
        (422, "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 5210"),
        (422, "Input validation error: `inputs` must have less than 4096 tokens. Given: 5210"),
        (400, "request (5210 tokens) exceeds the available context size (4096 tokens), try increasing it"),
        (500, "the request exceeds the available context size. try increasing the context size"),
        (400, "Requested tokens (5210) exceed context window of 4096"),
        (400, "prompt is too long: 210000 tokens > 200000 maximum"),
        (
            400,
            "Input length (5210 tokens) exceeds the maximum allowed length (4096 tokens). Use a shorter "
            "input or enable --allow-auto-truncate.",
        ),
        (400, "Input prompt (5210 tokens) is too long and exceeds limit of 4096"),
        (400, "Multimodal prompt is too long after expanding multimodal tokens."),
        (400, "Input is too long for requested model."),
    ],
)
async def test_context_overflow_wordings_of_common_servers(
    judge_server: FakeJudge, status: int, message: str
) -> None:
    """vLLM (two versions), SGLang, TGI (two checks), llama.cpp's server (400, and 500 in some versions:
    still not retried), llama-cpp-python, Anthropic's compatibility layer; SGLang's input-length check
    and the "is too long" of servers on vLLM's engine and of cloud gateways (these were BackendRejected:
    a ``backend_error`` item, not told from a malformed request)."""
    judge_server.reply = always(message, status=status)
    b = await backend(judge_server, max_retries=3, breaker_failures=1)
    with pytest.raises(InputTooLong, match=f"HTTP {status}"):
        await b.chat(REQ, time.monotonic() + 5)
    assert judge_server.calls == 1 and b.client.breaker.describe()["state"] == "closed"
    await b.close()


async def test_slow_server_times_out_at_the_deadline(judge_server: FakeJudge) -> None:
    judge_server.reply = always("late", delay_s=30)
    b = await backend(judge_server, max_retries=5, timeout_s=60)
    with pytest.raises(BackendTimeout):
        await b.chat(REQ, time.monotonic() + 0.4)
    # cut at the deadline, not after the server's 30 s: the client hung up on the answer the server was
    # still holding (which the server counts), where a wall-clock bound on the call was at a loaded
    # host's mercy
    await until(lambda: judge_server.abandoned == 1, "the client never hung up on the slow answer")
    assert judge_server.calls == 1
    await b.close()


async def test_time_spent_waiting_for_a_slot_is_not_the_servers_fault(judge_server: FakeJudge) -> None:
    """With every connection busy, items whose deadline passes before they are sent fail as timeouts
    and leave the breaker closed: the server was never asked."""
    judge_server.reply = always("Score: 4", delay_s=0.3)
    b = await backend(judge_server, max_retries=0, concurrency=1, breaker_failures=1)
    outs = await asyncio.gather(
        b.chat(REQ, time.monotonic() + 10),  # a healthy round trip: wide, for a loaded CI machine
        *(b.chat(REQ, time.monotonic() + 0.2) for _ in range(3)),
        return_exceptions=True,
    )
    assert outs[0].text == "Score: 4"  # type: ignore[union-attr]
    assert all(isinstance(o, BackendTimeout) for o in outs[1:])
    assert b.client.breaker.describe()["state"] == "closed" and judge_server.calls == 1
    await b.close()


async def test_a_server_that_trickles_its_answer_is_cut_at_the_deadline() -> None:
    """httpx's timeout bounds each read, not the call: 4 bytes every 0.25 s, each read well inside
    httpx's per-read timeout, would run for 5 s."""
    body = b'{"choices": [{"message": {"content": "Score: 4"}, "finish_reason": "stop"}]}'
    # how the server's answers to POSTs (not the backend's GET of the model list) ended: "hung up" (by
    # the client) or "sent"
    posts: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        await reader.readexactly(int(length[1]) if length else 0)  # the request's body: then EOF shows
        ended = posts if head.startswith(b"POST") else []
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
        writer.write(b"content-length: %d\r\n\r\n" % len(body))
        try:
            for i in range(0, len(body), 4):
                if reader.at_eof():  # the client closed the connection
                    ended.append("hung up")
                    break
                writer.write(body[i : i + 4])
                await writer.drain()
                await asyncio.sleep(0.25)
            else:
                ended.append("sent")
        except ConnectionError:
            ended.append("hung up")
        except asyncio.CancelledError:
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    b = OpenAIBackend("judge", f"http://127.0.0.1:{port}/v1", "m", None, RemoteOptions(max_retries=0))
    await b.start()
    with pytest.raises(BackendTimeout):
        await b.chat(REQ, time.monotonic() + 1.0)
    # the whole body takes 5 s: the client hung up before the server had sent it (a wall-clock bound on
    # the call was at a loaded host's mercy)
    await until(lambda: bool(posts), "the server's answer never ended")
    assert posts == ["hung up"]
    await b.close()
    server.close()


async def test_breaker_fails_fast_without_calling(judge_server: FakeJudge) -> None:
    judge_server.reply = always("", status=500)
    b = await backend(judge_server, max_retries=0, breaker_failures=2, breaker_cooldown_s=60)
    for _ in range(2):
        with pytest.raises(BackendError):
            await b.chat(REQ, time.monotonic() + 5)
    with pytest.raises(CircuitOpen):
        await b.chat(REQ, time.monotonic() + 5)
    assert judge_server.calls == 2
    assert "sk-key" not in str(b.describe())
    await b.close()


@pytest.mark.parametrize("status", [429, 503])
async def test_a_retry_after_header_is_honoured(judge_server: FakeJudge, status: int) -> None:
    """The server says when to come back; the backoff (here 10-20 ms) alone hammered it."""
    answers = iter([Reply(status=status, headers={"Retry-After": "1"}), Reply("Score: 4")])
    judge_server.reply = lambda body: next(answers)
    b = await backend(judge_server, max_retries=2)
    t0 = time.monotonic()
    out = await b.chat(REQ, time.monotonic() + 5)
    assert out.text == "Score: 4" and judge_server.calls == 2
    assert time.monotonic() - t0 >= 1.0
    # a wait that would end past the deadline is not waited: the call fails at once
    judge_server.reply = always("", status=status, headers={"Retry-After": "30"})
    with pytest.raises(BackendError, match=f"HTTP {status}") as failed:
        await b.chat(REQ, time.monotonic() + 20)
    # the server's answer, not a timeout: a client that waited would have run out of its deadline (or
    # sent again), where a wall-clock bound on the call was at a loaded host's mercy
    assert not isinstance(failed.value, BackendTimeout) and judge_server.calls == 3
    await b.close()


async def test_a_retry_after_holds_back_every_caller_not_only_the_one_it_answered(
    judge_server: FakeJudge,
) -> None:
    """A 429 with Retry-After asks the client to come back later; the calls in flight beside the one it
    answered kept sending at once (each getting its own 429, adding to the load the server shed)."""
    first = [True]

    def reply(body: object) -> Reply:
        if first[0]:
            first[0] = False
            # (8 s: with 2 s, a loaded host that stalled 1.5 s after the others were sent saw the pause
            # end before it counted the calls, and the three went out)
            return Reply(status=429, headers={"Retry-After": "8"})
        return Reply("Score: 4")

    judge_server.reply = reply
    b = await backend(judge_server, max_retries=2)
    try:
        a = asyncio.create_task(b.chat(REQ, time.monotonic() + 20))
        while judge_server.calls < 1:
            await asyncio.sleep(0.01)
        others = [asyncio.create_task(b.chat(REQ, time.monotonic() + 20)) for _ in range(3)]
        await asyncio.sleep(0.5)
        assert judge_server.calls == 1  # the other three wait out the server's 8 s too
        outs = await asyncio.gather(a, *others)
        assert [o.text for o in outs] == ["Score: 4"] * 4 and judge_server.calls == 5
        # a caller whose deadline ends inside the pause is not sent, and says why
        judge_server.reply = lambda body: Reply(status=429, headers={"Retry-After": "30"})
        with pytest.raises(BackendError, match="HTTP 429"):
            await b.chat(REQ, time.monotonic() + 5)
        with pytest.raises(BackendError, match="asked callers to wait"):
            await b.chat(REQ, time.monotonic() + 5)
        assert judge_server.calls == 6
    finally:
        await b.close()


def test_retry_after_ms_is_read_to_the_millisecond() -> None:
    """OpenAI and Azure send ``retry-after-ms`` beside a ``Retry-After`` rounded up to whole seconds:
    a 250 ms wait was waited as 1 s."""

    def wait(**headers: str) -> float | None:
        return _retry_after(httpx.Response(429, headers={k.replace("_", "-"): v for k, v in headers.items()}))

    assert wait(retry_after_ms="250", retry_after="1") == 0.25
    assert wait(retry_after_ms="1500") == 1.5
    assert wait(retry_after_ms="soon", retry_after="2") == 2.0  # unreadable: the standard header
    assert wait(retry_after_ms="nan", retry_after="2") == 2.0
    assert wait() is None


async def test_a_key_with_a_trailing_newline_works_and_is_never_quoted(judge_server: FakeJudge) -> None:
    """A key from a file or a Kubernetes secret often ends in a newline: as a header it was refused
    locally on every call, and the error quoted it into every item's message."""
    judge_server.reply = always("Score: 4")
    b = OpenAIBackend("judge", judge_server.url, "m", "sk-live-SECRET-42\n", RemoteOptions())
    await b.start()
    out = await b.chat(REQ, time.monotonic() + 5)
    assert out.text == "Score: 4" and judge_server.headers[-1]["authorization"] == "Bearer sk-live-SECRET-42"
    await b.close()
    with pytest.raises(ValueError, match="control characters"):
        OpenAIBackend("judge", judge_server.url, "m", "sk-a\x00b", RemoteOptions())


def test_a_key_with_a_non_ascii_character_is_refused_at_start_by_name() -> None:
    """A key pasted with a typographic dash (U+2010) passed the control-character check and crashed the
    start inside httpx ("'ascii' codec can't encode character"), naming neither the backend nor the key
    as the cause. Found in review."""
    with pytest.raises(ConfigError, match="backend 'judge': the API key contains") as info:
        OpenAIBackend("judge", "http://127.0.0.1:9/v1", "m", "sk\u2010live-SECRET", RemoteOptions())
    assert "SECRET" not in str(info.value)


def test_credentials_in_a_backend_url_are_not_described() -> None:
    """/ready needs no key and logs are read widely: a gateway URL's user:token or api_key= stays out."""
    b = OpenAIBackend(
        "judge", "https://svc:tok-SECRET-99@gw.example/v1?api_key=SECRET2", "m", None, RemoteOptions()
    )
    assert "SECRET" not in str(b.describe()) and "gw.example/v1" in str(b.describe())


async def test_a_server_set_by_url_alone_is_asked_without_a_model_name(judge_server: FakeJudge) -> None:
    """REWARDHUB_JUDGE_URL without REWARDHUB_JUDGE_MODEL: the placeholder name went into every request,
    and vLLM answers 404 "The model `default` does not exist" to a name it does not serve."""
    judge_server.reply = always("Score: 4")
    b = OpenAIBackend("judge", judge_server.url, UNNAMED_MODEL, None, RemoteOptions())
    await b.start()
    try:
        assert (await b.chat(REQ, time.monotonic() + 5)).text == "Score: 4"
    finally:
        await b.close()
    assert "model" not in judge_server.requests[-1]


async def test_callers_short_deadlines_do_not_open_the_breaker_of_a_slow_healthy_server(
    judge_server: FakeJudge,
) -> None:
    """A judge that answers in 2 s, within its own 5 s timeout, is healthy: callers whose deadline
    (timeout_s of their request) ends first time out, but opened the breaker for every other caller."""
    # Every caller must reach the server before its deadline (calls == 4): 1 s for that, not 0.3 s as
    # once, on a loaded CI machine; the server's 2 s still outlasts it whatever the load.
    judge_server.reply = always("Score: 4", delay_s=2.0)
    b = await backend(judge_server, max_retries=2, timeout_s=5, breaker_failures=2)
    outs = await asyncio.gather(
        *(b.chat(REQ, time.monotonic() + 1.0) for _ in range(4)), return_exceptions=True
    )
    assert all(isinstance(o, BackendTimeout) for o in outs) and judge_server.calls == 4
    assert b.client.breaker.describe()["state"] == "closed"
    assert (await b.chat(REQ, time.monotonic() + 10)).text == "Score: 4"
    await b.close()


async def test_a_real_backend_timeout_still_opens_the_breaker(judge_server: FakeJudge) -> None:
    """The server's own per-attempt timeout ran out, or an earlier attempt failed before the item's
    deadline cut the next one: the server's failure."""
    # Each attempt must reach the server before its time runs out (the calls counted): 1 s and more for
    # that, not 0.3 s and 0.5 s as once, on a loaded CI machine; the server's 3 s outlasts them all.
    judge_server.reply = always("Score: 4", delay_s=3.0)
    b = await backend(judge_server, max_retries=1, timeout_s=1.0, breaker_failures=1)
    with pytest.raises(BackendError):
        await b.chat(REQ, time.monotonic() + 10)
    assert b.client.breaker.describe()["state"] == "open" and judge_server.calls == 2
    await b.close()
    # the defaults' shape (item deadline == REWARDHUB_BACKEND_TIMEOUT_S): a server that hangs opens it
    b = await backend(judge_server, max_retries=0, timeout_s=1.5, breaker_failures=1)
    with pytest.raises(BackendTimeout):
        await b.chat(REQ, time.monotonic() + 1.5)
    assert b.client.breaker.describe()["state"] == "open" and judge_server.calls == 3
    await b.close()
    answers = iter([Reply(status=503), Reply("Score: 4", delay_s=3.0)])
    judge_server.reply = lambda body: next(answers)
    b = await backend(judge_server, max_retries=1, timeout_s=5, breaker_failures=1)
    with pytest.raises(BackendTimeout):
        await b.chat(REQ, time.monotonic() + 1.5)
    assert b.client.breaker.describe()["state"] == "open" and judge_server.calls == 5
    await b.close()


async def test_a_url_with_a_query_string_keeps_its_path_and_query(judge_server: FakeJudge) -> None:
    """Azure OpenAI's ?api-version=..., a gateway's ?api_key=...: httpx joined the path after the query,
    so every call went to /v1 with the query 'api-version=2024-06-01/chat/completions' (a 404)."""
    judge_server.reply = always("Score: 4")
    b = OpenAIBackend("judge", f"{judge_server.url}?api-version=2024-06-01", "m", None, RemoteOptions())
    await b.start()
    try:
        assert (await b.chat(REQ, time.monotonic() + 5)).text == "Score: 4"
    finally:
        await b.close()
    assert judge_server.queries == ["api-version=2024-06-01"]
    assert "api-version" not in str(b.describe())


async def test_a_404_shows_the_url_it_called(judge_server: FakeJudge) -> None:
    """REWARDHUB_JUDGE_URL without its /v1 (the commonest mistake with an OpenAI-compatible server) gave
    every item "backend 'judge': /chat/completions answered HTTP 404: {"detail":"Not Found"}": nothing
    showed that the call went to http://host:port/chat/completions. Credentials stay out of it."""
    base = judge_server.url.removesuffix("/v1").replace("http://", "http://user:s3cret@")
    b = OpenAIBackend("judge", f"{base}?api_key=k3y", "m", None, RemoteOptions(max_retries=0))
    await b.start()
    try:
        with pytest.raises(BackendError, match="HTTP 404") as info:
            await b.chat(REQ, time.monotonic() + 5)
    finally:
        await b.close()
    root = judge_server.url.removesuffix("/v1")
    assert f"(called {root}/chat/completions)" in str(info.value)
    assert "s3cret" not in str(info.value) and "k3y" not in str(info.value)


async def test_a_key_echoed_in_an_error_answer_is_not_quoted(judge_server: FakeJudge) -> None:
    """A gateway or proxy that answers 401/403 quoting the credential it was sent ("invalid api key
    sk-..."): the answer's text went verbatim into every item's error message, into the breaker's last
    failure (quoted to every item it fails fast) and so to the trainer's logs. Found in review."""
    judge_server.reply = always(
        "Incorrect API key provided: sk-live-SECRET-42 (token k3y-SECRET)", status=401
    )
    b = OpenAIBackend(
        "judge",
        judge_server.url.replace("http://", "http://user:pw-SECRET@") + "?api_key=k3y-SECRET",
        "m",
        "sk-live-SECRET-42",
        RemoteOptions(max_retries=0, breaker_failures=1),
    )
    await b.start()
    try:
        with pytest.raises(BackendError, match="HTTP 401") as info:
            await b.chat(REQ, time.monotonic() + 5)
        with pytest.raises(CircuitOpen) as fast:
            await b.chat(REQ, time.monotonic() + 5)
    finally:
        await b.close()
    assert "Incorrect API key provided" in str(info.value)
    for message in (str(info.value), str(fast.value), str(b.client.breaker.last_failure)):
        assert "SECRET" not in message, message


def _closed_port() -> int:
    import socket

    with socket.socket() as s:  # bound and closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def _fail(url: str, origin: str | None) -> str:
    b = OpenAIBackend("judge", url, "m", "sk-key", RemoteOptions(max_retries=0))
    b.origin = origin
    await b.start()
    try:
        with pytest.raises(BackendError) as info:
            await b.chat(REQ, time.monotonic() + 10)
    finally:
        await b.close()
    return str(info.value)


@pytest.mark.parametrize("failure", ["refused", "no such host", "tls"])
async def test_a_connection_failure_shows_the_url_and_the_setting(
    judge_server: FakeJudge, failure: str
) -> None:
    """An unreachable judge (REWARDHUB_JUDGE_URL with nothing listening) gave every item "backend
    'judge': /chat/completions: ConnectError: All connection attempts failed": neither the address that
    was called nor the setting holding it. Found in review."""
    root = {
        "refused": f"http://127.0.0.1:{_closed_port()}/v1",
        "no such host": "http://no-such-judge.invalid:8000/v1",
        "tls": judge_server.url.replace("http://", "https://"),  # TLS spoken to a plain HTTP server
    }[failure]
    secret = root.replace("://", "://user:s3cret@") + "?api_key=k3y"
    message = await _fail(secret, "REWARDHUB_JUDGE_URL")
    assert "ConnectError" in message
    assert message.endswith(f"(called {root}/chat/completions, configured by REWARDHUB_JUDGE_URL)")
    assert "s3cret" not in message and "k3y" not in message and "sk-key" not in message
    # without a known origin, the URL alone
    assert (await _fail(root, None)).endswith(f"(called {root}/chat/completions)")


async def test_an_open_breaker_says_what_failed() -> None:
    """Once the breaker of an unreachable judge opened, every item said only "backend 'judge' failed 5
    times in a row; calls fail fast for 9.9s more": not what failed nor where. Found in review."""
    root = f"http://127.0.0.1:{_closed_port()}/v1"
    b = OpenAIBackend("judge", root, "m", None, RemoteOptions(max_retries=0, breaker_failures=1))
    b.origin = "REWARDHUB_JUDGE_URL"
    await b.start()
    try:
        with pytest.raises(BackendError):
            await b.chat(REQ, time.monotonic() + 10)
        with pytest.raises(CircuitOpen) as info:
            await b.chat(REQ, time.monotonic() + 10)
    finally:
        await b.close()
    message = str(info.value)
    assert "failed its last call; " in message  # (a threshold of 1: not "1 times in a row")
    assert message.endswith(
        "; last failure: /chat/completions: ConnectError: All connection attempts failed "
        f"(called {root}/chat/completions, configured by REWARDHUB_JUDGE_URL)"
    )


async def test_the_hub_tells_a_remote_backend_which_setting_configured_it(tmp_path: Path) -> None:
    """The origin reaches the backend from the shortcut variable and from the backends file alike."""
    from rewardhub.config import Settings
    from rewardhub.models.hub import ModelHub

    root = f"http://127.0.0.1:{_closed_port()}/v1"
    f = tmp_path / "b.yaml"
    f.write_text(f"backends:\n  judge2: {{kind: openai, url: '{root}', model: m, max_retries: 0}}\n")
    s = Settings(  # type: ignore[call-arg]
        _env_file=None,
        embedding_model="off",
        judge_url=root,
        judge_model="m",
        backends_file=str(f),
        backend_max_retries=0,
    )
    hub = ModelHub.from_settings(s)
    await hub.start()
    try:
        for name, origin in (
            ("judge", "REWARDHUB_JUDGE_URL"),
            ("judge2", f"backends.judge2 in REWARDHUB_BACKENDS_FILE={f}"),
        ):
            with pytest.raises(BackendError) as info:
                await hub.get(name).chat(REQ, time.monotonic() + 10)
            assert str(info.value).endswith(f"(called {root}/chat/completions, configured by {origin})")
    finally:
        await hub.close()


@contextmanager
def _never_accepting() -> Iterator[str]:
    """The API base of a host that never completes a connection, like one that is down or firewalled
    (its SYNs dropped): a listening socket whose accept queue is full (Linux then drops new SYNs)."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    queued = socket.create_connection(("127.0.0.1", port))  # fills the accept queue
    probe = socket.socket()
    probe.settimeout(0.3)
    try:
        probe.connect(("127.0.0.1", port))
        hangs = False
    except TimeoutError:
        hangs = True
    except OSError:
        hangs = False
    probe.close()
    try:
        if not hangs:
            pytest.skip("this system does not drop the SYNs of a full accept queue")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        queued.close()
        server.close()


async def test_a_host_that_never_accepts_opens_the_breaker_under_short_deadlines() -> None:
    """A judge host that is down (its SYNs dropped) with items whose deadline is shorter than the
    backend's timeout_s: every attempt counted as "cut short by the caller", so the breaker never
    opened and every item of every step waited its whole deadline; the message did not name the URL
    either. A server that is up accepts a connection at once, however busy its model: no connection in
    the time given is the server's failure. Found in review."""
    with _never_accepting() as root:
        b = OpenAIBackend("judge", root, "m", None, RemoteOptions(max_retries=0, breaker_failures=1))
        b.origin = "REWARDHUB_JUDGE_URL"
        await b.start()
        try:
            with pytest.raises(BackendTimeout) as info:
                await b.chat(REQ, time.monotonic() + 2.5)  # under 90% of the default 60 s timeout_s
            assert b.client.breaker.describe()["state"] == "open"
            with pytest.raises(CircuitOpen):
                await b.chat(REQ, time.monotonic() + 2.5)
        finally:
            await b.close()
    message = str(info.value)
    assert "no connection" in message
    assert message.endswith(f"(called {root}/chat/completions, configured by REWARDHUB_JUDGE_URL)")


async def test_a_call_past_its_deadline_is_not_blamed_on_the_connection_slots(
    judge_server: FakeJudge,
) -> None:
    """A call made with its deadline already passed (a pairwise judge's second call after the first
    used the item's time) failed with "no free connection slot before the deadline (concurrency 64)"
    although all 64 slots were free: waiting for a slot with no time left never takes one. It now says
    the deadline passed, and the server is not asked."""
    judge_server.reply = always("Score: 4")
    b = await backend(judge_server)
    try:
        with pytest.raises(BackendTimeout, match="deadline passed") as info:
            await b.chat(REQ, time.monotonic() - 0.01)
        assert "slot" not in str(info.value)
    finally:
        await b.close()
    assert judge_server.calls == 0


async def test_a_redirect_names_where_it_points_and_does_not_open_the_breaker() -> None:
    """A judge URL with http:// where the ingress serves https:// answers 308 with a Location. It was
    read as an answer that is not JSON ("answered something that is not JSON: (empty body)"), which hid
    the redirect, and counted against the breaker: 2 calls opened it (breaker_failures=2) on a healthy
    server. The error now names the address it redirects to, and the breaker stays closed."""
    from fastapi import FastAPI
    from fastapi.responses import RedirectResponse

    from fake_openai import serve_app

    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat() -> RedirectResponse:
        return RedirectResponse("https://judge.example/v1/chat/completions?k=secret", status_code=308)

    with serve_app(app) as url:
        b = OpenAIBackend("judge", f"{url}/v1", "m", None, RemoteOptions(breaker_failures=2, max_retries=0))
        await b.start()
        try:
            for _ in range(3):
                with pytest.raises(BackendError, match="HTTP 308") as info:
                    await b.chat(REQ, time.monotonic() + 5)
                assert "https://judge.example/v1/chat/completions" in str(info.value)
                assert "secret" not in str(info.value) and not isinstance(info.value, CircuitOpen)
        finally:
            await b.close()
    assert b.client.breaker.describe()["state"] == "closed"


def openai_embeddings_app(sent: list[int]) -> FastAPI:
    """An /embeddings server with OpenAI's documented request limits: at most 2048 inputs, and at most
    300,000 tokens summed over them (a character is a token here), each refused with a 400 that says
    nothing of a context length."""
    app = FastAPI()

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Any:
        texts = (await request.json())["input"]
        sent.append(len(texts))
        if len(texts) > 2048:
            message = "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."
            return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, 400)
        if (tokens := sum(len(t) for t in texts)) > 300_000:
            message = f"Requested {tokens} tokens, max 300000 tokens per request"
            return JSONResponse({"error": {"message": message, "type": "max_tokens_per_request"}}, 400)
        vectors = [[1.0, float(len(t)), float(t.count("x"))] for t in texts]
        return {"object": "list", "data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]}

    return app


@pytest.mark.parametrize("shape", ["many short texts", "long texts"])
async def test_embeddings_past_openais_per_request_limits_are_sent_in_parts(shape: str) -> None:
    """Every text of a similarity request went into one /embeddings call: OpenAI refuses more than 2048
    inputs or 300,000 tokens in one request (a 400 about the request, not about one input), so a request
    of 1,200 items with their references, or of a few dozen long answers, failed every item. Found in
    review."""
    texts = (
        [f"text {k} " + "x" * (k % 7) for k in range(3000)]
        if shape == "many short texts"
        else [f"answer {k} " + "x" * 8000 for k in range(60)]
    )
    sent: list[int] = []
    with serve_app(openai_embeddings_app(sent)) as url:
        b = OpenAIBackend("embedding", f"{url}/v1", "text-embedding-3-small", None, RemoteOptions())
        await b.start()
        try:
            out = await b.embed(texts, time.monotonic() + 30)
        finally:
            await b.close()
    bad = [e for e in out if isinstance(e, BackendError)]
    assert not bad, bad[0]
    assert [e.vector for e in out] == [[1.0, float(len(t)), float(t.count("x"))] for t in texts]  # type: ignore[union-attr]
    assert sum(sent) == len(texts)  # no text sent twice, none alone after a refusal


def test_served_weights_reads_vllm_s_model_list() -> None:
    """What a /models answer says serves a name: vLLM's root (the checkpoint behind a served name) and a
    LoRA adapter's parent; nothing where the entry says no more than its name, nothing from OpenAI's
    list, and the one model listed when the backend names none."""
    from rewardhub.models.remote import served_weights

    vllm = {"data": [{"id": "judge", "root": "/ckpt/step-400", "parent": None, "max_model_len": 4096}]}
    assert served_weights(vllm, "judge") == ("/ckpt/step-400",)
    assert served_weights(vllm, "other") == ()
    assert served_weights(vllm, UNNAMED_MODEL) == ("/ckpt/step-400",)
    lora = {
        "data": [{"id": "base", "root": "base"}, {"id": "sql-lora", "root": "/loras/sql", "parent": "base"}]
    }
    assert served_weights(lora, "sql-lora") == ("/loras/sql", "base")
    assert served_weights(lora, "base") == ()
    assert served_weights(lora, UNNAMED_MODEL) == ()  # two models: which one serves is not known
    openai = {"object": "list", "data": [{"id": "gpt-4o", "object": "model", "owned_by": "system"}]}
    assert served_weights(openai, "gpt-4o") == ()
    for garbage in (None, [], {"data": "x"}, {"data": [1, "a"]}, {"data": [{"id": "judge", "root": 7}]}):
        assert served_weights(garbage, "judge") == ()
