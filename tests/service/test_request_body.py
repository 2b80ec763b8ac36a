"""Request bodies are read one way on every route of the API that takes one (rewardhub.routes.body)."""

from __future__ import annotations

from typing import Any

import httpx

ITEMS = [{"response": "a", "reference": "a"}]
# Each route with a body of its own, a valid body, and the status it answers it with.
ROUTES: list[tuple[str, bytes, int]] = [
    ("/v1/score", b'{"reward": "exact_match", "items": [{"response": "a", "reference": "a"}]}', 200),
    ("/v1/jobs", b'{"reward": "exact_match", "items": [{"response": "a", "reference": "a"}]}', 202),
    ("/v1/rewards/check", b'{"reward": "exact_match"}', 200),
]


async def test_a_json_body_is_read_whatever_its_content_type(client: httpx.AsyncClient) -> None:
    """/v1/score read its raw body whatever the Content-Type; /v1/rewards/check and /v1/jobs, with
    FastAPI's declared bodies, refused one sent without ``application/json`` (``curl -d``'s form type, a
    client that sends none) with 422 "Input should be a valid dictionary"."""
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded", "application/json"):
        headers = {"content-type": content_type} if content_type else {}
        for path, body, status in ROUTES:
            r = await client.post(path, content=body, headers=headers)
            assert r.status_code == status, (path, content_type, r.text)


async def test_a_bad_body_is_answered_alike_on_every_route(client: httpx.AsyncClient) -> None:
    """The same 422, word for word, for a body that is not JSON, holds a lone surrogate (which the
    standard library's parser reads and pydantic's refuses) or nests deeper than /v1/score reads."""
    deep = b"[" * 300 + b"]" * 300
    bodies = {
        "not json": b'{"reward": "exact_match", "items": [}',
        "lone surrogate": b'{"reward": "exact\\ud800"}',
        "too deep": b'{"reward": "exact_match", "x": ' + deep + b"}",
        "empty": b"",
    }
    for what, body in bodies.items():
        answers = {}
        for path, _, _ in ROUTES:
            r = await client.post(path, content=body, headers={"content-type": "text/plain"})
            assert r.status_code == 422, (what, path, r.text)
            answers[path] = r.json()
        first, *others = answers.values()
        assert all(other == first for other in others), (what, answers)
        assert first["error"]["type"] == "invalid_request", (what, first)


async def test_a_key_is_asked_for_before_the_body_is_read(make_app: Any) -> None:
    """401 for a request without a key, however broken its body (as a declared body was answered)."""
    async with make_app(api_keys="k-one") as c:
        for path, _, _ in ROUTES:
            r = await c.post(path, content=b"{not json")
            assert r.status_code == 401, (path, r.text)
        r = await c.post(
            "/v1/rewards/check", content=b'{"reward": "exact_match"}', headers={"x-api-key": "k-one"}
        )
        assert r.status_code == 200, r.text


async def test_the_document_still_describes_each_body(client: httpx.AsyncClient) -> None:
    """FastAPI no longer sees these bodies: the document declares them, and their models are components."""
    spec = (await client.get("/openapi.json")).json()
    for path, model in (
        ("/v1/score", "ScoreRequest"),
        ("/v1/jobs", "ScoreRequest"),
        ("/v1/rewards/check", "RewardCheckRequest"),
    ):
        body = spec["paths"][path]["post"]["requestBody"]
        assert body["required"] is True
        assert body["content"]["application/json"]["schema"] == {"$ref": f"#/components/schemas/{model}"}
        assert "reward" in spec["components"]["schemas"][model]["properties"]
    # the job's Idempotency-Key header is still a parameter
    params = spec["paths"]["/v1/jobs"]["post"]["parameters"]
    assert [p["name"] for p in params] == ["idempotency-key"]
