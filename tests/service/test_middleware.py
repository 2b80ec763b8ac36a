"""The app's own ASGI middleware, through the real app with its lifespan."""

from __future__ import annotations

from typing import Any

import httpx
from starlette.types import Message


async def asgi_call(app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]]) -> list[Message]:
    """The messages ``app`` sends for one bodiless request (httpx's in-process transport drops a HEAD
    answer's body itself, so what the app sends is read here, as a server would read it)."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"rewardhub.test"), *headers],
        "client": ("127.0.0.1", 1234),
        "server": ("rewardhub.test", 80),
    }
    await app(scope, receive, send)
    # The server's own scope keeps the method it was sent: uvicorn reads it as it writes the answer (a
    # HEAD answered with no body where a GET's Content-Length bytes were due reset the connection).
    assert scope["method"] == method
    return sent


async def test_head_is_answered_as_get_without_a_body(make_app: Any) -> None:
    """FastAPI routes a GET route's GET only: HEAD /health and /ready (an AWS ALB or uptime checker's
    probe, ``curl -I``) were a 405, a service that never came up."""
    key = [(b"x-api-key", b"k-one")]
    async with make_app(api_keys="k-one") as c:
        for path, headers in [
            ("/health", []),
            ("/ready", []),
            ("/metrics", []),
            ("/openapi.json", []),
            ("/dashboard", []),
            ("/v1/rewards", key),
        ]:
            get = await c.get(path, headers={k.decode(): v.decode() for k, v in headers})
            assert get.status_code == 200 and get.content, path
            sent = await asgi_call(c.app, "HEAD", path, headers)  # type: ignore[attr-defined]
            start = sent[0]
            assert start["status"] == 200, (path, sent)
            got = dict(start["headers"])
            assert got[b"content-type"] == get.headers["content-type"].encode(), path
            assert b"".join(m.get("body", b"") for m in sent[1:]) == b"", path

        # The same authentication as GET: the catalog needs a key, the probes stay open.
        assert (await c.head("/v1/rewards")).status_code == 401
        assert (await c.head("/v1/rewards", headers={"X-API-Key": "nope"})).status_code == 403
        assert (await c.head("/v1/rewards", headers={"X-API-Key": "k-one"})).status_code == 200
        assert (await c.head("/v1/jobs/job_x")).status_code == 401
        # A route without GET still refuses HEAD, and says what it allows.
        post_only = await c.head("/v1/score", headers={"X-API-Key": "k-one"})
        assert post_only.status_code == 405 and post_only.headers["allow"] == "POST"
        # Counted under its route, as the GET is (one each).
        metrics = (await c.get("/metrics")).text
        assert 'rewardhub_requests_total{route="/health",status="200"} 2.0' in metrics


async def test_get_still_has_its_body(client: httpx.AsyncClient) -> None:
    """The body is dropped for HEAD only."""
    sent = await asgi_call(client.app, "GET", "/health", [])  # type: ignore[attr-defined]
    assert sent[0]["status"] == 200
    assert b'"status":"ok"' in b"".join(m.get("body", b"") for m in sent[1:])


async def test_the_openapi_document_and_docs_are_counted_under_their_paths(client: httpx.AsyncClient) -> None:
    """FastAPI serves /openapi.json and /docs as plain Starlette routes, which set no ``route`` in the
    scope: they were counted as ``unmatched``, with the paths nothing serves. A made-up path still is."""
    assert (await client.get("/openapi.json")).status_code == 200
    assert (await client.get("/docs")).status_code == 200
    assert (await client.get("/no/such/path/4711")).status_code == 404
    metrics = (await client.get("/metrics")).text
    assert 'rewardhub_requests_total{route="/openapi.json",status="200"}' in metrics
    assert 'rewardhub_requests_total{route="/docs",status="200"}' in metrics
    assert "/no/such" not in metrics  # (not the bare number: a *_created timestamp once held "4711")
    assert 'route="unmatched",status="404"' in metrics


async def test_head_is_counted_under_the_route_its_get_is(make_app: Any) -> None:
    """HEAD on /openapi.json or /docs (plain Starlette routes, counted by the endpoint and path
    parameters the router sets) was counted as ``unmatched``: the router's choice was made in the
    scope HeadAsGetMiddleware hands inside, and only ``route`` came back out."""
    async with make_app() as c:
        for path in ("/openapi.json", "/docs"):
            assert (await c.head(path)).status_code == 200, path
        assert (await c.head("/no/such/path/4712")).status_code == 404
        metrics = (await c.get("/metrics")).text
        assert 'rewardhub_requests_total{route="/openapi.json",status="200"} 1.0' in metrics
        assert 'rewardhub_requests_total{route="/docs",status="200"} 1.0' in metrics
        assert 'route="unmatched",status="200"' not in metrics
        assert "/no/such" not in metrics


async def test_a_cross_site_page_cannot_post(client: httpx.AsyncClient, make_app: Any) -> None:
    """A page on another site can make its visitor's browser POST a text/plain body (no CORS preflight)
    to a service on localhost; every route reads JSON whatever the content type, so the page could run
    code in the sandbox or spend judge calls. A foreign ``Origin`` is refused; no ``Origin`` (trainers,
    curl), the service's own, or an allowed one passes."""
    body = '{"reward": "exact_match", "items": [{"response": "a", "reference": "a"}]}'
    plain = {"content-type": "text/plain"}
    evil = await client.post("/v1/score", content=body, headers={**plain, "origin": "https://evil.example"})
    assert evil.status_code == 403, evil.text
    assert evil.json()["error"]["type"] == "forbidden"
    assert "REWARDHUB_ALLOWED_ORIGINS" in evil.json()["error"]["message"]
    sandboxed = await client.post("/v1/score", content=body, headers={**plain, "origin": "null"})
    assert sandboxed.status_code == 403
    # the drop-in routes too (they read a JSON body under any content type)
    rm = await client.post(
        "/compat/slime/reward",
        content='{"prompt": "", "response": "4", "label": "4"}',
        headers={**plain, "origin": "http://localhost:3000"},
    )
    assert rm.status_code == 403, rm.text
    assert (
        await client.post("/compat/slime/reward", content='{"prompt": "", "response": "4", "label": "4"}')
    ).status_code == 200
    own = (
        {},  # no browser
        {"origin": "http://127.0.0.1:8000", "host": "127.0.0.1:8000"},  # the service's own /docs, by address
        {"origin": "http://localhost:8000", "host": "localhost:8000"},
        {"origin": "http://[::1]:8000", "host": "[::1]:8000"},
    )
    for headers in own:
        ok = await client.post("/v1/score", content=body, headers={**plain, **headers})
        assert ok.status_code == 200, ok.text
    # DNS rebinding: the attacker's own name, pointed at 127.0.0.1, has its Origin match its Host
    rebound = {"origin": "http://rebind.evil.example:8000", "host": "rebind.evil.example:8000"}
    assert (await client.post("/v1/score", content=body, headers={**plain, **rebound})).status_code == 403
    # reading is not refused (a GET changes nothing)
    assert (await client.get("/health", headers={"origin": "https://evil.example"})).status_code == 200
    async with make_app(allowed_origins="https://ui.example.com/, https://other.example") as c:
        allowed = await c.post(
            "/v1/score", content=body, headers={**plain, "origin": "https://ui.example.com"}
        )
        assert allowed.status_code == 200, allowed.text
        assert (
            await c.post("/v1/score", content=body, headers={**plain, "origin": "https://evil.example"})
        ).status_code == 403
    async with make_app(allowed_origins="*") as c:
        anyone = await c.post("/v1/score", content=body, headers={**plain, "origin": "https://evil.example"})
        assert anyone.status_code == 200, anyone.text


async def test_an_allowed_origin_gets_cors(client: httpx.AsyncClient, make_app: Any) -> None:
    """An allowed origin's page could only send blind text/plain posts: a JSON request's preflight was
    405 and no answer was readable (no CORS). With REWARDHUB_ALLOWED_ORIGINS set the service answers
    preflights and marks answers readable for those origins alone. Found in review."""
    preflight = {
        "origin": "https://ui.example.com",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, authorization",
    }
    assert (await client.options("/v1/score", headers=preflight)).status_code == 405  # none configured
    async with make_app(allowed_origins="https://ui.example.com") as c:
        answer = await c.options("/v1/score", headers=preflight)
        assert answer.status_code == 200, answer.text
        assert answer.headers["access-control-allow-origin"] == "https://ui.example.com"
        assert "POST" in answer.headers["access-control-allow-methods"]
        scored = await c.post(
            "/v1/score",
            json={"reward": "exact_match", "items": [{"response": "a", "reference": "a"}]},
            headers={"origin": "https://ui.example.com"},
        )
        assert scored.status_code == 200
        assert scored.headers["access-control-allow-origin"] == "https://ui.example.com"
        other = await c.options("/v1/score", headers={**preflight, "origin": "https://evil.example"})
        assert other.status_code == 400 and "access-control-allow-origin" not in other.headers


async def test_an_allowed_origin_is_read_as_browsers_write_origins(make_app: Any) -> None:
    """Browsers send an origin's scheme and host in lower case and leave out the scheme's default port;
    an allowed origin written ``https://UI.Example.com:443`` never equalled the ``https://ui.example.com``
    its page sent, and each of its requests was 403 "goes in REWARDHUB_ALLOWED_ORIGINS" though it was
    there. Found in review."""
    body = '{"reward": "exact_match", "items": [{"response": "a", "reference": "a"}]}'
    plain = {"content-type": "text/plain"}
    async with make_app(allowed_origins="HTTPS://UI.Example.com:443/, http://Tool.example:80") as c:
        for origin in ("https://ui.example.com", "http://tool.example"):
            ok = await c.post("/v1/score", content=body, headers={**plain, "origin": origin})
            assert ok.status_code == 200, (origin, ok.text)
        for origin in ("https://ui.example.com:8443", "http://ui.example.com", "https://tool.example"):
            refused = await c.post("/v1/score", content=body, headers={**plain, "origin": origin})
            assert refused.status_code == 403, origin
