"""Whole-group checks (``options.group_size``, a group split across requests) and per-group statistics,
through the real app."""

from __future__ import annotations

import math
import uuid
from typing import Any

import httpx
import pytest


def gid() -> str:
    return f"g-{uuid.uuid4().hex}"


def mv_items(answers: list[str], group: str) -> list[dict[str, Any]]:
    return [{"response": f"\\boxed{{{a}}}", "group": group} for a in answers]


async def post(
    c: httpx.AsyncClient, reward: Any, items: list[dict[str, Any]], **options: Any
) -> httpx.Response:
    return await c.post("/v1/score", json={"reward": reward, "items": items, "options": options})


async def test_group_size_option(client: httpx.AsyncClient) -> None:
    a, b = gid(), gid()
    items = (
        mv_items(["1", "1", "2"], a)
        + mv_items(["1", "2"], b)
        + [{"response": "\\boxed{1}", "reference": "1"}]
    )
    resp = await post(client, "majority_vote", items, group_size=3)
    assert resp.status_code == 422
    err = resp.json()["error"]
    assert err["type"] == "invalid_request" and err["param"] == "items.3.group"
    assert err["message"] == (
        f"group '{b}' has 2 items in this request, options.group_size is 3; send each group whole in one request"
    )
    ok = await post(client, "math", items[:3] + [items[5]], group_size=3)  # the ungrouped item is not counted
    assert ok.status_code == 200, ok.text


async def test_group_split_across_requests(client: httpx.AsyncClient) -> None:
    g = gid()
    whole = mv_items(["1", "1", "2", "3"], g)
    first = await post(client, "majority_vote", whole)
    assert first.status_code == 200, first.text
    # the identical group again (a retry, in another order) is fine
    retry = await post(client, "majority_vote", whole[::-1])
    assert retry.status_code == 200, retry.text
    # part of it, or other members, under the same id: 422 naming the group and the counts
    for items in (whole[:2], [*whole[:3], *mv_items(["9"], g)]):
        resp = await post(client, "majority_vote", items)
        assert resp.status_code == 422, resp.text
        err = resp.json()["error"]
        assert err["type"] == "invalid_request" and err["param"] == "items.0.group"
        assert err["message"] == (
            f"group '{g}' was already scored with 4 different items in an earlier request "
            f"(this request sends {len(items)}); send each group whole in one request (or use a new group id)"
        )
    # a new group id is fine; a non-group reward never checks
    assert (await post(client, "majority_vote", mv_items(["1", "1"], gid()))).status_code == 200
    assert (await post(client, "math", [{**whole[0], "reference": "1"}])).status_code == 200


async def test_group_ids_of_one_api_key_do_not_collide_with_another_keys(make_app: Any) -> None:
    """The remembered member sets were keyed by reward and group id alone, so on a service shared by
    two teams one team's group "0" made the other team's group "0" a 422 ("already scored with ...
    different items") for the cache TTL, and told it that the id had been used. They are now kept per
    API key; within one key a reused id is still refused. Found in review."""
    async with make_app(api_keys="team-a,team-b") as c:
        a, b = {"X-API-Key": "team-a"}, {"X-API-Key": "team-b"}
        body = {"reward": "majority_vote", "items": mv_items(["1", "1", "2"], "0")}
        assert (await c.post("/v1/score", json=body, headers=a)).status_code == 200
        other = {"reward": "majority_vote", "items": mv_items(["7", "8"], "0")}
        assert (await c.post("/v1/score", json=other, headers=b)).status_code == 200
        again = await c.post("/v1/score", json=other, headers=a)  # team a reusing its own id: refused
        assert again.status_code == 422 and "already scored with 3 different items" in again.text


async def test_group_split_through_a_composite(client: httpx.AsyncClient) -> None:
    g = gid()
    reward = {"name": "composite", "config": {"components": [{"reward": "majority_vote"}]}}
    assert (await post(client, reward, mv_items(["1", "2", "2"], g))).status_code == 200
    resp = await post(client, reward, mv_items(["1", "2"], g))
    assert resp.status_code == 422 and f"group '{g}' was already scored with 3 different items" in resp.text


async def test_group_split_between_configs_in_one_request(client: httpx.AsyncClient) -> None:
    g = gid()
    items = [
        {**mv_items(["1"], g)[0], "reward": "majority_vote"},
        {**mv_items(["2"], g)[0], "reward": {"name": "majority_vote", "config": {"tie_break": "none"}}},
    ]
    resp = await post(client, None, items)
    assert resp.status_code == 422
    err = resp.json()["error"]
    assert err["param"] == "items.1.group", err
    assert err["message"] == (
        f"group '{g}' is split between two configs of reward 'majority_vote' in this request "
        '(items 0 and 1 differ in config.tie_break: "first" vs "none"); '
        "a group reward needs the whole group under one config"
    ), err


async def test_a_group_under_one_config_written_two_ways_is_one_group(client: httpx.AsyncClient) -> None:
    """A group reward's config written differently ({} here, its defaults spelled out there, a part named
    "majority_vote" or {"name": "majority_vote"}) is one config: the group was refused as "split between
    two configs" (two spellings were two plans). Each is scored as one group of four."""
    g, h = gid(), gid()
    spellings: list[Any] = [
        "majority_vote",
        {"name": "majority_vote"},
        {"name": "majority_vote", "config": {}},
        {"name": "majority_vote", "config": {"tie_break": "first", "min_votes": 2, "equivalence": "math"}},
    ]
    items = [{**mv_items([a], g)[0], "reward": s} for a, s in zip("1121", spellings, strict=True)]
    parts: list[Any] = ["majority_vote", {"name": "majority_vote", "config": {}}]
    items += [
        {**mv_items([a], h)[0], "reward": {"name": "composite", "config": {"components": [{"reward": part}]}}}
        for a, part in zip("3344", parts * 2, strict=True)
    ]
    resp = await post(client, None, items)
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    assert [r["score"] for r in results[:4]] == [1.0, 1.0, 0.0, 1.0], results  # "1" has 3 of 4 votes
    assert [r["details"]["group_size"] for r in results[:4]] == [4] * 4, results
    assert [r["score"] for r in results[4:]] == [1.0, 1.0, 0.0, 0.0], results  # a tie: the first wins
    # different configs of one composite are still two configs
    other = {"name": "composite", "config": {"components": [{"reward": "majority_vote"}], "gate_score": 0.5}}
    resp = await post(client, None, [*items[4:6], *({**i, "reward": other} for i in items[6:])])
    assert resp.status_code == 422, resp.text
    assert "differ in config.gate_score: 0.0 vs 0.5" in resp.json()["error"]["message"], resp.text


async def test_one_lookup_only_for_group_rewards(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = client.app.state.scoring.cache  # type: ignore[attr-defined]
    calls: list[int] = []
    real = cache.get_many

    async def counting(keys: Any) -> Any:
        calls.append(len(keys))
        return await real(keys)

    monkeypatch.setattr(cache, "get_many", counting)
    await post(client, "math", [{"response": "1", "reference": "1", "group": gid()}], use_cache=False)
    assert calls == []  # no group reward: no lookup at all
    g1, g2 = gid(), gid()
    await post(client, "majority_vote", mv_items(["1", "2"], g1) + mv_items(["3"], g2), use_cache=False)
    assert calls == [2]  # one batched lookup for both groups


async def test_group_statistics_for_any_reward(client: httpx.AsyncClient) -> None:
    a, b, c = gid(), gid(), gid()
    items = [
        {"response": "x", "reference": "x", "group": a},
        {"response": "x", "reference": "x", "group": a},
        {"response": "x", "reference": "x", "group": b},
        {"response": "y", "reference": "x", "group": b},
        {"response": "y", "reference": "x", "group": b},
        {"response": "x", "group": c},  # invalid: no reference
        {"response": "x", "reference": "x"},  # no group
    ]
    resp = await post(client, "exact_match", items)
    m = resp.json()["metrics"]["groups"]
    assert m["count"] == 3 and m["zero_variance"] == 1 and m["zero_variance_fraction"] == 0.5
    assert m["groups"][a] == {
        "n": 2,
        "valid": 2,
        "mean": 1.0,
        "std": 0.0,
        "min": 1.0,
        "max": 1.0,
        "zero_variance": True,
    }
    gb = m["groups"][b]
    assert (gb["n"], gb["valid"], gb["min"], gb["max"], gb["zero_variance"]) == (3, 3, 0.0, 1.0, False)
    assert gb["mean"] == pytest.approx(1 / 3)
    # sample std (Bessel): sqrt(((2/3)^2 + 2 (1/3)^2) / 2) = sqrt(1/3)
    assert gb["std"] == pytest.approx(math.sqrt(1 / 3))
    assert m["groups"][c] == {
        "n": 1,
        "valid": 0,
        "mean": None,
        "std": None,
        "min": None,
        "max": None,
        "zero_variance": None,
    }
    no_groups = await post(client, "exact_match", [{"response": "x", "reference": "x"}])
    assert "groups" not in no_groups.json()["metrics"]


async def test_split_detected_across_service_processes_via_redis(make_app: Any, redis_server: Any) -> None:
    g = gid()
    async with make_app(redis_url=redis_server.url, cache_ttl_s=600) as c:
        assert (await post(c, "majority_vote", mv_items(["1", "2", "2"], g))).status_code == 200
    key = f"rh:v1:group:anonymous:majority_vote:response:{g}"  # the key id, the reward, the fields, the group
    assert 0 < redis_server.client().ttl(key) <= 600  # remembered for the cache TTL
    async with make_app(redis_url=redis_server.url) as c:  # another service process
        resp = await post(c, "majority_vote", mv_items(["1", "2"], g))
        assert (
            resp.status_code == 422 and f"group '{g}' was already scored with 3 different items" in resp.text
        )
        assert (await post(c, "majority_vote", mv_items(["2", "1", "2"], g))).status_code == 200


async def test_the_same_group_under_a_config_reading_other_fields_is_not_a_split(
    make_app: Any, judge_server: Any
) -> None:
    """The fingerprint hashes the fields the config reads, and was compared across configs: a group
    scored with composite {majority_vote}, then the very same items with a composite that adds a judge
    (which reads the prompt), was refused as 'already scored with 3 different items'. A group that
    really changed is still refused under either config."""
    from fake_openai import always

    judge_server.reply = always("Score: 4")
    g = gid()
    items = [
        {"prompt": "What is 2+2?", "response": r, "group": g}
        for r in ("The answer is \\boxed{4}.", "So \\boxed{4}.", "It is \\boxed{5}.")
    ]
    train = {"name": "composite", "config": {"components": [{"reward": "majority_vote"}]}}
    judge = {"name": "judge", "config": {"mode": "pointwise"}}
    monitor = {
        "name": "composite",
        "config": {"components": [{"reward": "majority_vote"}, {"reward": judge, "weight": 0.5}]},
    }
    async with make_app(judge_url=judge_server.url, judge_model="fake-judge") as c:
        for spec in (train, monitor, train, monitor):
            resp = await post(c, spec, items)
            assert resp.status_code == 200, resp.text
        for spec in (train, monitor):
            resp = await post(c, spec, items[:2])
            assert resp.status_code == 422 and "already scored with 3 different items" in resp.text


def test_a_flat_group_has_its_score_as_mean_and_zero_std() -> None:
    """Three rollouts scored 0.1 each: mean 0.1 and std 0.0 exactly, not 0.10000000000000002 and 1.7e-17
    (a trainer that tests ``std == 0`` to drop zero-variance groups would keep this one)."""
    from rewardhub.groups import group_stats
    from rewardhub.protocol import ScoreItem

    items = [ScoreItem(response=f"r{i}", group="g") for i in range(3)]
    results = [{"valid": True, "score": 0.1} for _ in items]
    stats = group_stats(items, results)
    assert stats is not None
    g = stats["groups"]["g"]
    assert (g["mean"], g["std"], g["zero_variance"]) == (0.1, 0.0, True)
    assert stats["groups"]["g"]["min"] == 0.1
    uneven = group_stats(items, [{"valid": True, "score": s} for s in (0.1, 0.2, 0.3)])
    assert uneven is not None and uneven["groups"]["g"]["std"] == pytest.approx(0.1)
