"""``POST /v1/rewards/check``: a reward spec resolved as scoring would, plus what cannot run here.

The trainer calls it before its first step; before it existed the trainer mirrored which rewards have
parts (and missed a judge's ``rule``), and trusted any config that named a backend."""

from __future__ import annotations

from typing import Any

NO_SANDBOX = {"sandbox_bwrap": "/nonexistent/bwrap", "sandbox_allow_unisolated": False}


async def check(make_app: Any, body: dict[str, Any], **settings: Any) -> tuple[int, dict[str, Any]]:
    async with make_app(**settings) as c:
        r = await c.post("/v1/rewards/check", json=body)
        return r.status_code, r.json()


async def test_a_plain_rule_reward_is_ok_with_what_scoring_would_use(client: Any) -> None:
    r = await client.post("/v1/rewards/check", json={"reward": "math"})
    assert r.status_code == 200
    body = r.json()
    assert body["ok"] is True and body["unavailable"] == []
    assert body["name"] == "math" and body["reads"] == ["response", "reference"]
    assert body["group_aware"] is False and body["cacheable"] is True
    # the version is the one results carry
    scored = await client.post(
        "/v1/score", json={"reward": "math", "items": [{"response": "\\boxed{1}", "reference": "1"}]}
    )
    assert scored.json()["results"][0]["reward_version"] == body["version"]


async def test_every_part_that_cannot_run_is_named_with_its_path(client: Any) -> None:
    spec = {
        "name": "composite",
        "config": {
            "components": [
                {"reward": "math"},
                {"reward": {"name": "calibration", "config": {"verifier": "prm"}}},
                {"reward": {"name": "judge", "config": {"mode": "reference", "rule": "orm"}}},
            ]
        },
    }
    r = await client.post("/v1/rewards/check", json={"reward": spec})
    assert r.status_code == 200
    body = r.json()
    assert body["ok"] is False
    found = {(u["where"], u["reward"]) for u in body["unavailable"]}
    assert found == {
        ("reward.config.components.1.reward.config.verifier", "prm"),
        ("reward.config.components.2.reward", "judge"),
        ("reward.config.components.2.reward.config.rule", "orm"),  # a judge's rule is a part too
    }
    messages = {u["reward"]: u["message"] for u in body["unavailable"]}
    assert "REWARDHUB_PRM_MODEL" in messages["prm"] and "REWARDHUB_JUDGE_URL" in messages["judge"]


async def test_a_named_backend_the_service_lacks_is_unavailable(client: Any) -> None:
    r = await client.post(
        "/v1/rewards/check", json={"reward": {"name": "prm", "config": {"backend": "mine"}}}
    )
    body = r.json()
    assert body["ok"] is False
    assert "no model backend named 'mine'" in body["unavailable"][0]["message"]
    # a backend that is there but cannot do what the reward asks: the ORM needs a classifier
    r = await client.post(
        "/v1/rewards/check", json={"reward": {"name": "orm", "config": {"backend": "embedding"}}}
    )
    assert r.json()["unavailable"][0]["message"].startswith(
        "backend 'embedding' (transformers) cannot do 'classify'"
    )
    # the embedded MiniLM backend is there: similarity can run
    r = await client.post("/v1/rewards/check", json={"reward": "similarity"})
    assert r.json()["ok"] is True


async def test_unknown_names_and_bad_configs_answer_as_scoring_would(client: Any) -> None:
    r = await client.post("/v1/rewards/check", json={"reward": "nope"})
    assert r.status_code == 404 and r.json()["error"]["type"] == "unknown_reward"
    nested = {"name": "composite", "config": {"components": [{"reward": "nope"}]}}
    r = await client.post("/v1/rewards/check", json={"reward": nested})
    assert r.status_code == 404 and r.json()["error"]["param"] == "reward.config.components.0.reward"
    r = await client.post("/v1/rewards/check", json={"reward": {"name": "math", "config": {"bogus": 1}}})
    assert r.status_code == 422 and r.json()["error"]["param"] == "reward.config.bogus"
    r = await client.post("/v1/rewards/check", json={"items": []})
    assert r.status_code == 422


async def test_code_without_a_sandbox_and_with_a_default_language(make_app: Any) -> None:
    status, body = await check(make_app, {"reward": "code"}, **NO_SANDBOX)
    assert status == 200 and body["ok"] is False
    assert "bubblewrap" in body["unavailable"][0]["message"]
    # a language no one knows is the config's typo: 422, as scoring answers it
    status, body = await check(make_app, {"reward": {"name": "code", "config": {"language": "cobol"}}})
    assert status == 422 and "unknown language 'cobol'" in body["error"]["message"]
    # an uninstalled default is not refused: items may name their own language
    js = {"reward": {"name": "code", "config": {"language": "javascript"}}}  # installed here or not
    status, body = await check(make_app, js, sandbox_allow_unisolated=True)  # with or without bwrap
    assert status == 200 and body["ok"] is True


async def test_group_rewards_say_so(make_app: Any) -> None:
    spec = {"name": "group_length", "config": {"correctness": "metadata"}}
    status, body = await check(make_app, {"reward": spec})
    assert status == 200 and body["ok"] is True and body["group_aware"] is True
    assert body["cacheable"] is False


async def test_the_check_needs_a_key_when_keys_are_set(make_app: Any) -> None:
    async with make_app(api_keys="k1") as c:
        assert (await c.post("/v1/rewards/check", json={"reward": "math"})).status_code == 401
        r = await c.post("/v1/rewards/check", json={"reward": "math"}, headers={"x-api-key": "k1"})
        assert r.status_code == 200


async def test_text_similarity_metrics_this_server_cannot_compute(make_app: Any, monkeypatch: Any) -> None:
    """meteor without WordNet and cosine without an embedding model: every item comes back
    ``unsupported``, so the check must not say ok (it did: text_similarity had no answer of its own)."""
    from rewardhub.rewards import text_similarity

    monkeypatch.setattr(text_similarity, "_wordnet_available", lambda: False)
    item = {"response": "a b c", "reference": "a b c"}
    async with make_app(embedding_model="off") as c:
        for metric, needle in (("meteor", "WordNet"), ("cosine", "REWARDHUB_EMBEDDING_MODEL")):
            spec = {"name": "text_similarity", "config": {"metric": metric}}
            scored = (await c.post("/v1/score", json={"reward": spec, "items": [item]})).json()
            assert scored["results"][0]["reason"] == "unsupported"
            body = (await c.post("/v1/rewards/check", json={"reward": spec})).json()
            assert body["ok"] is False, metric
            assert needle in body["unavailable"][0]["message"]
            # and as a part: a composite of it scores nothing either
            nested = {"name": "composite", "config": {"components": [{"reward": spec}]}}
            body = (await c.post("/v1/rewards/check", json={"reward": nested})).json()
            assert [u["where"] for u in body["unavailable"]] == ["reward.config.components.0.reward"]
        ok = {"name": "text_similarity", "config": {"metric": "bleu"}}
        assert (await c.post("/v1/rewards/check", json={"reward": ok})).json()["ok"] is True


async def test_timeout_s_is_the_deadline_scoring_applies(make_app: Any, monkeypatch: Any) -> None:
    """Without ``options.timeout_s`` scoring caps a reward's default at REWARDHUB_MAX_ITEM_TIMEOUT_S, and
    a rule reward (no default of its own) gets REWARDHUB_ITEM_TIMEOUT_S; the check said 60 and null."""
    from rewardhub.rewards.base import Outcome
    from rewardhub.rewards.math_answer import MathReward
    from rewardhub.rewards.similarity import SimilarityReward

    seen: dict[str, float] = {}

    def recording(name: str) -> Any:
        async def score(self: Any, items: Any, config: Any, ctx: Any) -> list[Outcome]:
            seen[name] = ctx.deadline_s
            return [Outcome(1.0) for _ in items]

        return score

    monkeypatch.setattr(MathReward, "score", recording("math"))
    monkeypatch.setattr(SimilarityReward, "score", recording("similarity"))
    async with make_app(item_timeout_s=3.0, max_item_timeout_s=20.0) as c:
        for reward in ("similarity", "math"):
            body = (await c.post("/v1/rewards/check", json={"reward": reward})).json()
            item = {"response": "x", "reference": "x"}
            r = await c.post(
                "/v1/score", json={"reward": reward, "items": [item], "options": {"use_cache": False}}
            )
            assert r.status_code == 200
            assert body["timeout_s"] == seen[reward], reward
        assert seen == {"similarity": 20.0, "math": 3.0}


async def test_a_body_that_is_not_json_is_named_as_such(client: Any) -> None:
    """The check (and every route with a declared body) answered "0: JSON decode error" with param "0",
    a field that does not exist, and "Field required" for no body at all; /v1/score says Invalid JSON."""
    for path in ("/v1/rewards/check", "/v1/jobs", "/v1/score"):
        r = await client.post(path, content=b"not json", headers={"content-type": "application/json"})
        assert r.status_code == 422
        err = r.json()["error"]
        assert err["type"] == "invalid_request" and err["param"] is None, path
        assert err["message"].startswith("Invalid JSON"), path
    r = await client.post("/v1/rewards/check", headers={"content-type": "application/json"})
    err = r.json()["error"]
    assert r.status_code == 422 and err["param"] is None and "JSON body" in err["message"]


async def test_a_lone_surrogate_in_a_spec_is_answered_not_a_500(client: Any) -> None:
    """The check's body was parsed by the standard library, which reads "\\ud800" as a lone surrogate;
    hashing the spec (and writing the error naming it) failed to encode it as UTF-8: a 500. It is read
    by /v1/score's parser now, which refuses it as invalid JSON (a 422, as /v1/score answers)."""
    for spec in (b'{"reward": "\\ud800"}', b'{"reward": {"name": "exact_match", "config": {"\\ud800": 1}}}'):
        r = await client.post("/v1/rewards/check", content=spec, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["type"] == "invalid_request" and error["message"].startswith("Invalid JSON"), error


async def test_a_spec_nested_too_deeply_is_a_422_not_a_500(client: Any) -> None:
    """The standard library's parser reads a few hundred levels of nesting; orjson writes 254, and the
    fallback's recursion (hashing the spec) ran out of stack: a RecursionError, a 500."""
    deep = b"[" * 600 + b"]" * 600
    body = b'{"reward": {"name": "exact_match", "config": {"x": ' + deep + b"}}}"
    r = await client.post("/v1/rewards/check", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["type"] == "invalid_request"
