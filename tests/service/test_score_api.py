"""POST /v1/score through the real app (lifespan, worker pool, embedded cache)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

EM = {"name": "exact_match", "config": {}}


def em_items(n: int, prefix: str = "") -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i}", "response": f"The Answer {i}", "reference": f"answer {i}"} for i in range(n)
    ]


async def test_results_one_per_item_in_order(client: httpx.AsyncClient) -> None:
    items = [
        {"id": "a", "response": "Paris", "reference": "paris"},
        {"response": "Berlin", "reference": "Paris"},
        {"id": "c", "response": "the Paris.", "reference": ["Lyon", "Paris"]},
    ]
    resp = await client.post("/v1/score", json={"reward": "exact_match", "items": items})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["request_id"].startswith("req_")
    assert resp.headers["x-request-id"] == body["request_id"]
    results = body["results"]
    assert [r["id"] for r in results] == ["a", "1", "c"]
    assert [r["score"] for r in results] == [1.0, 0.0, 1.0]
    for r in results:
        assert set(r) == {
            "id",
            "reward",
            "score",
            "valid",
            "reason",
            "components",
            "details",
            "cached",
            "reward_version",
            "latency_ms",
        }
        assert r["valid"] is True and r["reward"] == "exact_match" and r["reward_version"]
        assert r["latency_ms"] >= 0
    assert body["metrics"]["items"] == 3
    assert body["metrics"]["rewards"]["exact_match"]["mean_score"] == 2 / 3


async def test_invalid_item_is_data_not_an_http_error(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/score",
        json={"reward": "exact_match", "items": [{"response": "x"}, {"response": "y", "reference": "y"}]},
    )
    assert resp.status_code == 200
    first, second = resp.json()["results"]
    assert first == {**first, "score": None, "valid": False, "reason": "missing_reference"}
    assert second["score"] == 1.0
    assert resp.json()["metrics"]["invalid_reasons"] == {"missing_reference": 1}


async def test_second_identical_request_is_cached(client: httpx.AsyncClient) -> None:
    payload = {"reward": EM, "items": em_items(4, "cache-")}
    first = (await client.post("/v1/score", json=payload)).json()["results"]
    second = (await client.post("/v1/score", json=payload)).json()["results"]
    assert [r["cached"] for r in first] == [False] * 4
    assert [r["cached"] for r in second] == [True] * 4

    def strip(r: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in r.items() if k not in ("cached", "latency_ms")}

    assert [strip(r) for r in first] == [strip(r) for r in second]


async def test_use_cache_false_recomputes(client: httpx.AsyncClient) -> None:
    payload = {"reward": "exact_match", "items": em_items(2, "nocache-"), "options": {"use_cache": False}}
    await client.post("/v1/score", json=payload)
    again = (await client.post("/v1/score", json=payload)).json()["results"]
    assert [r["cached"] for r in again] == [False, False]


async def test_duplicates_within_a_request_are_computed_once(client: httpx.AsyncClient) -> None:
    items = [{"id": str(i), "response": "same", "reference": "same"} for i in range(6)]
    body = (
        await client.post(
            "/v1/score", json={"reward": "exact_match", "items": items, "options": {"use_cache": False}}
        )
    ).json()
    assert [r["id"] for r in body["results"]] == [str(i) for i in range(6)]
    assert all(r["score"] == 1.0 for r in body["results"])
    assert body["metrics"]["deduplicated"] == 5


async def test_config_changes_the_cache_key(client: httpx.AsyncClient) -> None:
    items = [{"id": "k", "response": "Paris", "reference": "paris"}]
    await client.post("/v1/score", json={"reward": "exact_match", "items": items})
    other = await client.post(
        "/v1/score",
        json={
            "reward": {"name": "exact_match", "config": {"normalize": "none", "case_sensitive": True}},
            "items": items,
        },
    )
    r = other.json()["results"][0]
    assert r["cached"] is False and r["score"] == 0.0


async def test_per_item_reward_override(client: httpx.AsyncClient) -> None:
    items = [
        {"response": "The answer is \\boxed{\\frac{1}{2}}", "reference": "0.5", "reward": "math"},
        {"response": "paris", "reference": "Paris"},
    ]
    body = (await client.post("/v1/score", json={"reward": "exact_match", "items": items})).json()
    assert [r["reward"] for r in body["results"]] == ["math", "exact_match"]
    assert [r["score"] for r in body["results"]] == [1.0, 1.0]


async def test_unknown_reward_is_404_listing_known_names(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/score", json={"reward": "nope", "items": [{"response": "x"}]})
    assert resp.status_code == 404
    err = resp.json()["error"]
    assert err["type"] == "unknown_reward" and err["code"] == 404
    assert "math" in err["message"] and "exact_match" in err["message"]


async def test_bad_config_is_422_naming_the_field(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/score",
        json={
            "reward": {"name": "exact_match", "config": {"normalize": "loud"}},
            "items": [{"response": "x"}],
        },
    )
    assert resp.status_code == 422
    err = resp.json()["error"]
    assert err["param"] == "reward.config.normalize"
    unknown = await client.post(
        "/v1/score",
        json={"reward": {"name": "exact_match", "config": {"typo": 1}}, "items": [{"response": "x"}]},
    )
    assert unknown.status_code == 422 and unknown.json()["error"]["param"] == "reward.config.typo"


async def test_an_items_own_bad_reward_spec_is_named_by_its_path(client: httpx.AsyncClient) -> None:
    # A per-item spec's param was re-based by prefixing the item's path to one that already starts with
    # "reward" (items.1.reward.reward.config.normalize), and an unknown name was left at "reward".
    cases = [
        ({"name": "exact_match", "config": {"normalize": "loud"}}, 422, "items.1.reward.config.normalize"),
        ({"name": "regex", "config": {}}, 422, "items.1.reward.config.pattern"),
        (
            {"name": "composite", "config": {"components": [{"reward": {"name": "nope"}}]}},
            404,
            "items.1.reward.config.components.0.reward",
        ),
        ("nope", 404, "items.1.reward"),
    ]
    for spec, status, param in cases:
        items = [{"response": "x"}, {"response": "x", "reward": spec}]
        resp = await client.post("/v1/score", json={"reward": "exact_match", "items": items})
        assert resp.status_code == status, resp.text
        assert resp.json()["error"]["param"] == param


async def test_missing_reward_is_422(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/score", json={"items": [{"response": "x"}]})
    assert resp.status_code == 422
    assert resp.json()["error"]["param"] == "items.0.reward"


async def test_malformed_body_is_422_in_the_error_envelope(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/score", json={"reward": "math", "items": [{"prompt": "no response"}]})
    assert resp.status_code == 422
    err = resp.json()["error"]
    assert err["type"] == "invalid_request" and err["param"] == "items.0.response"
    assert (
        await client.post("/v1/score", content=b"{not json", headers={"content-type": "application/json"})
    ).status_code == 422


async def test_broken_json_is_described_alike_on_every_route(client: httpx.AsyncClient) -> None:
    """/v1/score parses with pydantic, whose error has no character offset: its message ended in
    "(at character body)", and an empty body was "EOF while parsing" where the other routes say that
    a JSON body is needed."""
    json_ct = {"content-type": "application/json"}
    for path in ("/v1/score", "/v1/jobs"):
        empty = await client.post(path, content=b"", headers=json_ct)
        assert empty.status_code == 422
        assert empty.json()["error"]["message"] == "the request needs a JSON body", path
        broken = (await client.post(path, content=b'{"items": [}', headers=json_ct)).json()["error"]
        assert broken["type"] == "invalid_request" and broken["message"].startswith("Invalid JSON: ")
        assert "character body" not in broken["message"], path
    broken = (await client.post("/v1/score", content=b'{"items": [}', headers=json_ct)).json()["error"]
    assert "line 1 column 12" in broken["message"]


async def test_limits_name_their_setting(make_app: Any) -> None:
    async with make_app(max_items=3, max_field_bytes=100, max_request_bytes=2000) as c:
        too_many = await c.post("/v1/score", json={"reward": "exact_match", "items": em_items(4)})
        assert too_many.status_code == 422
        assert too_many.json()["error"]["type"] == "limit_exceeded"
        assert "REWARDHUB_MAX_ITEMS" in too_many.json()["error"]["message"]

        long_field = await c.post(
            "/v1/score", json={"reward": "exact_match", "items": [{"response": "é" * 60, "reference": "x"}]}
        )
        assert long_field.status_code == 422
        assert "REWARDHUB_MAX_FIELD_BYTES" in long_field.json()["error"]["message"]
        assert long_field.json()["error"]["param"] == "items.0.response"

        big = await c.post("/v1/score", json={"reward": "exact_match", "items": [{"response": "x" * 3000}]})
        assert big.status_code == 413
        assert "REWARDHUB_MAX_REQUEST_BYTES" in big.json()["error"]["message"]


async def test_a_streamed_body_over_the_limit_is_a_413_on_every_route(make_app: Any) -> None:
    """A body sent without Content-Length (chunked) is counted as it arrives; on the routes whose body
    FastAPI parses, the refusal came out as FastAPI's 400 "error parsing the body" instead of the 413."""
    body = json.dumps({"reward": "exact_match", "items": [{"response": "x" * 1000}] * 8}).encode()

    async def chunks() -> Any:
        for i in range(0, len(body), 1024):
            yield body[i : i + 1024]

    async with make_app(max_request_bytes=2000) as c:
        for path in ("/v1/score", "/v1/jobs", "/v1/rewards/check", "/compat/openrlhf/get_reward"):
            resp = await c.post(path, content=chunks(), headers={"content-type": "application/json"})
            assert "content-length" not in resp.request.headers
            assert resp.status_code == 413, (path, resp.text)
            assert resp.json()["error"]["type"] == "payload_too_large"
            assert "REWARDHUB_MAX_REQUEST_BYTES" in resp.json()["error"]["message"]


async def test_a_client_that_hangs_up_during_its_upload_counts_as_499(make_app: Any) -> None:
    """A trainer that gives up while its (large, chunked) body is still on the way: Starlette's
    ClientDisconnect reached the catch-all handler, a 500 with a logged traceback on /v1/score (the
    catch-all's "internal_error") and FastAPI's 400 "error parsing the body" on the routes whose body it
    parses; counted as server or client errors that nobody received. It is a hang-up: 499, no answer."""
    async with make_app() as c:
        app = c.app  # type: ignore[attr-defined]
        for path in ("/v1/score", "/v1/rewards/check", "/v1/jobs"):
            sent: list[dict[str, Any]] = []
            parts = [{"type": "http.request", "body": b'{"reward": "exact_match", ', "more_body": True}]

            async def receive(parts: list[dict[str, Any]] = parts) -> dict[str, Any]:
                return parts.pop(0) if parts else {"type": "http.disconnect"}

            async def send(message: dict[str, Any], sent: list[dict[str, Any]] = sent) -> None:
                sent.append(message)

            scope = {
                "type": "http",
                "asgi": {"version": "3.0"},
                "http_version": "1.1",
                "method": "POST",
                "scheme": "http",
                "path": path,
                "raw_path": path.encode(),
                "query_string": b"",
                "root_path": "",
                "headers": [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")],
                "client": ("127.0.0.1", 50000),
                "server": ("rewardhub.test", 80),
            }
            await app(scope, receive, send)  # the hang-up is not an exception of the app's
            assert [m for m in sent if m["type"] == "http.response.start"] == [], path
        text = (await c.get("/metrics")).text
        for path in ("/v1/score", "/v1/rewards/check", "/v1/jobs"):
            assert f'rewardhub_requests_total{{route="{path}",status="499"}} 1.0' in text, (path, text)
        assert 'status="500"' not in text and 'status="400"' not in text


async def test_an_unexpected_error_is_answered_with_its_request_id(make_app: Any) -> None:
    """A 500 is answered by the catch-all handler, outside the middleware that adds X-Request-ID and
    binds the id to the log context: the answer had no request id and its ``unhandled_error`` log line
    none either, so a caller's report of a 500 could not be matched with its traceback."""
    from structlog.testing import capture_logs

    async def boom() -> None:
        raise RuntimeError("a bug")

    async with make_app() as c:
        app = c.app  # type: ignore[attr-defined]
        app.add_api_route("/test-only/boom", boom)  # a route with a bug, on the real app
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://rewardhub.test") as raw:
            with capture_logs() as logs:
                r = await raw.get("/test-only/boom", headers={"x-request-id": "rid-boom"})
    assert r.status_code == 500
    assert r.json() == {
        "error": {"message": "internal server error", "type": "internal_error", "param": None, "code": 500}
    }
    assert r.headers.get("x-request-id") == "rid-boom"
    (line,) = [e for e in logs if e["event"] == "unhandled_error"]
    assert line["request_id"] == "rid-boom"


async def test_catalog_lists_rewards_with_schemas(client: httpx.AsyncClient) -> None:
    rewards = {r["name"]: r for r in (await client.get("/v1/rewards")).json()["rewards"]}
    assert {"math", "exact_match"} <= set(rewards)
    math = rewards["math"]
    assert math["cacheable"] is True and math["version"]
    assert "extraction" in math["config_schema"]["properties"]
    assert math["reads"] == ["response", "reference"]


async def test_health_ready_metrics(client: httpx.AsyncClient) -> None:
    health = (await client.get("/health")).json()
    assert health["status"] == "ok" and health["cache"] == "memory"
    ready = await client.get("/ready")
    assert ready.status_code == 200 and ready.json()["checks"]["cpu_pool"]["alive"] == 2
    await client.post("/v1/score", json={"reward": "exact_match", "items": em_items(2, "metrics-")})
    text = (await client.get("/metrics")).text
    for name in (
        "rewardhub_requests_total",
        "rewardhub_items_total",
        "rewardhub_reward_batch_latency_seconds_bucket",
        "rewardhub_cache_hits_total",
        "rewardhub_cache_misses_total",
        "rewardhub_queue_depth",
        "rewardhub_invalid_total",
    ):
        assert name in text, name
    assert 'rewardhub_items_total{reward="exact_match"}' in text


async def test_openapi_documents_the_api(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    assert {"/v1/score", "/v1/rewards", "/health", "/ready", "/metrics"} <= set(spec["paths"])
    post = spec["paths"]["/v1/score"]["post"]
    assert {"200", "404", "413", "422", "429"} <= set(post["responses"])
    assert "ScoreResponse" in spec["components"]["schemas"]
    # the route parses its own body (routes/score.py): the document must still describe it
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ScoreRequest"}
    refs = re.findall(r'"\$ref": ?"#/components/schemas/([^"]+)"', json.dumps(spec))
    assert refs and set(refs) <= set(spec["components"]["schemas"])


async def test_integers_beyond_64_bits_are_accepted(client: httpx.AsyncClient) -> None:
    # Found by the fuzzer: orjson refuses such integers; the service must still answer (JSON allows them).
    big = -9223372036854775809
    resp = await client.post(
        "/v1/score",
        json={
            "reward": "exact_match",
            "items": [
                {"response": "x", "reference": [big, "x"]},
                {"response": "y", "reference": {"a": 2**70}},
            ],
        },
    )
    assert resp.status_code == 200
    assert [r["score"] for r in resp.json()["results"]] == [1.0, None]


async def test_nan_next_to_an_integer_beyond_64_bits_is_accepted(client: httpx.AsyncClient) -> None:
    # The parser accepts NaN/Infinity; with a huge integer beside them the standard-library fallback of
    # jsonutil.dumps refused the non-finite float and the request failed with a 500.
    body = (
        b'{"reward": "exact_match", "items": ['
        b'{"response": "x", "reference": [NaN, -9223372036854775809, "x"]},'
        b'{"response": "y", "reference": [Infinity, 18446744073709551616, "z"]}]}'
    )
    resp = await client.post("/v1/score", content=body, headers={"content-type": "application/json"})
    assert resp.status_code == 200, resp.text
    assert [r["score"] for r in resp.json()["results"]] == [1.0, 0.0]


async def test_a_result_holding_an_integer_beyond_64_bits_is_answered_not_cached(
    client: httpx.AsyncClient,
) -> None:
    # length echoes the caller's token count in details: the cache write encoded the result with plain
    # orjson, which refuses such integers, and the whole request failed with a 500 (with use_cache off
    # it answered). A result the cache cannot hold as it is answered fresh, and again fresh.
    body = {
        "reward": {
            "name": "length",
            "config": {"unit": "tokens", "mode": "dapo_overlong", "max_length": 100, "cache_length": 10},
        },
        "items": [{"response": "x", "metadata": {"completion_tokens": 2**70}}],
    }
    for _ in range(2):
        resp = await client.post("/v1/score", json=body)
        assert resp.status_code == 200, resp.text
        (result,) = resp.json()["results"]
        assert (result["score"], result["cached"], result["details"]["length"]) == (-1.0, False, 2**70)


async def test_nan_in_a_reference_is_not_served_nulls_cached_result(client: httpx.AsyncClient) -> None:
    # The cache key hashed NaN as null, so after {"const": null} had scored "null" 1.0, {"const": NaN}
    # (fresh: 0.0, NaN equals nothing) was served that cached 1.0; in one request it was deduplicated too.
    def body(*consts: bytes) -> bytes:
        items = b",".join(
            b'{"response": "null", "reference": {"title": "nan-key", "const": %s}}' % c for c in consts
        )
        return b'{"reward": "json_schema", "items": [%s]}' % items

    async def scores(raw: bytes) -> list[tuple[float, bool]]:
        resp = await client.post("/v1/score", content=raw, headers={"content-type": "application/json"})
        assert resp.status_code == 200, resp.text
        return [(r["score"], r["cached"]) for r in resp.json()["results"]]

    assert await scores(body(b"null")) == [(1.0, False)]
    assert await scores(body(b"NaN")) == [(0.0, False)]
    assert await scores(body(b"null", b"NaN", b"Infinity")) == [(1.0, True), (0.0, True), (0.0, False)]
    # The same through the config: the schema there was dumped with NaN as None before it was hashed.
    for const, want in ((b"null", 1.0), (b"NaN", 0.0)):
        raw = (
            b'{"reward": {"name": "json_schema", "config": {"schema": {"title": "nan-config", "const": %s}}},'
            b' "items": [{"response": "null"}]}' % const
        )
        assert await scores(raw) == [(want, False)]


async def test_a_bad_key_in_a_reward_spec_is_named_in_the_error(client: httpx.AsyncClient) -> None:
    """``reward`` is a name or a spec object; for an object with a misspelt key the 422 reported the
    string member's complaint ("reward.str: Input should be a valid string") and never the key. Found in
    review. Now the key is the param, and a wrong-typed reward names the field without pydantic's tag."""
    item = {"response": "a", "reference": "a"}
    r = await client.post(
        "/v1/score", json={"reward": {"name": "exact_match", "configs": {}}, "items": [item]}
    )
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["param"] == "reward.configs", err
    assert err["message"].startswith("reward.configs: Extra inputs are not permitted"), err
    r = await client.post("/v1/score", json={"reward": 5, "items": [item]})
    assert r.status_code == 422 and r.json()["error"]["param"] == "reward", r.json()


async def test_a_wrong_typed_field_inside_a_reward_spec_is_named(client: httpx.AsyncClient) -> None:
    """``"config": null`` (a Python caller's ``config=None``) in a spec: both union members fail with a
    type error, and the string member's came first, so the 422 said "reward: Input should be a valid
    string", blaming the spec instead of its config. The member the object did match is named now."""
    item = {"response": "a", "reference": "a"}
    for body, param in (
        ({"reward": {"name": "exact_match", "config": None}, "items": [item]}, "reward.config"),
        (
            {"reward": "exact_match", "items": [{**item, "reward": {"name": "f1", "config": []}}]},
            "items.0.reward.config",
        ),
    ):
        r = await client.post("/v1/score", json=body)
        assert r.status_code == 422
        err = r.json()["error"]
        assert err["param"] == param, err
        assert err["message"].startswith(f"{param}: Input should be an object"), err


async def test_case_sensitive_with_squad_normalisation_is_refused(client: httpx.AsyncClient) -> None:
    """``case_sensitive: true`` under the default ``normalize: squad`` (which lower-cases) was ignored
    without a word, so "Paris" matched "paris" for a caller who asked otherwise. Found in review."""
    item = {"response": "Paris", "reference": "paris"}
    bad = await client.post(
        "/v1/score",
        json={"reward": {"name": "exact_match", "config": {"case_sensitive": True}}, "items": [item]},
    )
    assert bad.status_code == 422 and "case_sensitive" in bad.json()["error"]["message"], bad.text
    ok = await client.post(
        "/v1/score",
        json={
            "reward": {"name": "exact_match", "config": {"case_sensitive": True, "normalize": "whitespace"}},
            "items": [item],
        },
    )
    assert ok.status_code == 200 and ok.json()["results"][0]["score"] == 0.0


async def test_a_request_that_cannot_be_scored_is_not_a_429_under_load(make_app: Any) -> None:
    """Admission came before validation: with the service busy, a request naming an unknown reward or
    over the item limit got 429 with Retry-After, which a client retries for ever without learning of
    its 404 or 422. Found in review."""
    from conftest import hold_the_service

    async with make_app(max_inflight_items=2) as c:
        busy = await hold_the_service(c, 2)
        unknown = await c.post("/v1/score", json={"reward": "no_such_reward", "items": [{"response": "1"}]})
        valid = await c.post(
            "/v1/score", json={"reward": "exact_match", "items": [{"response": "1", "reference": "1"}]}
        )
        await busy
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "unknown_reward", unknown.text
    assert valid.status_code == 429  # a request that can be scored still waits its turn
