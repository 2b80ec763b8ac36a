"""Request bodies are read one way on every route of the API that takes one (rewardhub.routes.body)."""

from __future__ import annotations

import json
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


# Each drop-in route with a body, a body its peer sends, and the key of its answer compared ("": all).
_GRADER = {"type": "string_check", "input": "{{sample.output_text}}", "reference": "a", "operation": "eq"}
_NEMO = {
    "responses_create_params": {"input": [{"role": "user", "content": "2+2?"}]},
    "response": {"output": [{"type": "message", "role": "assistant", "content": [{"text": "\\boxed{4}"}]}]},
    "expected_answer": "4",
}
COMPAT: dict[str, tuple[dict[str, Any], str]] = {
    "/compat/openrlhf/get_reward": ({"query": ["\\boxed{1}"], "prompts": [""], "labels": ["1"]}, "rewards"),
    "/compat/slime/reward": ({"prompt": "q", "response": "\\boxed{1}", "label": "1"}, "reward"),
    "/compat/nemo-gym/verify": (_NEMO, "reward"),
    "/verify": (_NEMO, "reward"),
    "/compat/nemo-gym/seed_session": ({"resources_session_id": "s1"}, "resources_session_id"),
    "/seed_session": ({"resources_session_id": "s1"}, "resources_session_id"),
    "/compat/nemo-gym/close_session": ({"resources_session_id": "s1"}, "resources_session_id"),
    "/close_session": ({"resources_session_id": "s1"}, "resources_session_id"),
    "/compat/nemo-gym/aggregate_metrics": ({"verify_responses": []}, ""),
    "/aggregate_metrics": ({"verify_responses": []}, ""),
    "/compat/openai/graders/run": ({"grader": _GRADER, "model_sample": "a", "item": {}}, "reward"),
    "/compat/openai/fine_tuning/alpha/graders/run": ({"grader": _GRADER, "model_sample": "a"}, "reward"),
    "/compat/openai/graders/validate": ({"grader": _GRADER}, "grader"),
    "/compat/openai/fine_tuning/alpha/graders/validate": ({"grader": _GRADER}, "grader"),
    "/compat/sandboxfusion/run_code": ({"code": "print(1)", "language": "python"}, "status"),
    "/run_code": ({"code": "print(1)", "language": "python"}, "status"),
}


async def test_a_peer_route_reads_a_json_body_whatever_its_content_type(client: httpx.AsyncClient) -> None:
    """The drop-in routes keep FastAPI's declared bodies, which it parsed only under a JSON Content-Type:
    ``curl -d '{...}'`` (form type), ``text/plain`` or no type at all was answered 422 "Input should be
    a valid dictionary" / "Field required". The same body is the same answer under every type now."""
    spec = (await client.get("/openapi.json")).json()
    posted = {path for path, ops in spec["paths"].items() if "compat" in ops.get("post", {}).get("tags", ())}
    assert posted == set(COMPAT), posted ^ set(COMPAT)  # every drop-in route with a body is checked
    for path, (body, key) in COMPAT.items():
        raw = json.dumps(body).encode()
        as_json = await client.post(path, content=raw, headers={"content-type": "application/json"})
        assert as_json.status_code == 200, (path, as_json.text)
        want = as_json.json()
        for content_type in (None, "text/plain", "application/x-www-form-urlencoded"):
            headers = {"content-type": content_type} if content_type else {}
            r = await client.post(path, content=raw, headers=headers)
            assert r.status_code == 200, (path, content_type, r.text)
            got = r.json()
            assert (got[key] == want[key]) if key else (got == want), (path, content_type, got, want)


async def test_a_peer_route_answers_a_body_that_is_not_json_as_such(client: httpx.AsyncClient) -> None:
    """Under any type, a body that is not JSON is the app's 422 (not a form read, not a 500), and an
    empty one is "needs a JSON body" where the route needs one."""
    for path in ("/compat/openrlhf/get_reward", "/compat/slime/reward", "/verify", "/run_code"):
        for content_type in (None, "text/plain", "application/x-www-form-urlencoded", "application/json"):
            headers = {"content-type": content_type} if content_type else {}
            r = await client.post(path, content=b"query=a&labels=b", headers=headers)
            assert r.status_code == 422, (path, content_type, r.text)
            error = r.json()["error"]
            assert error["type"] == "invalid_request" and error["message"].startswith("Invalid JSON"), error
            r = await client.post(path, content=b"", headers=headers)
            assert r.status_code == 422, (path, content_type, r.text)
            assert r.json()["error"]["message"] == "the request needs a JSON body", r.text
