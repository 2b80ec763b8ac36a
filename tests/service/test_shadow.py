"""Shadow verification (``ScoreRequest.shadow``) through the real app: the primary reward's scores are
unchanged, each result carries the shadow's result, and ``metrics.shadow`` counts where they part ways."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx

MakeApp = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]

# math against exact_match (SQuAD normalisation of the whole response): the four ways two verdicts meet
ITEMS: list[dict[str, Any]] = [
    # math reads 1/2 = 0.5; exact_match sees "\boxed{\frac{1}{2}}" against "0.5": primary_only
    {
        "id": "frac",
        "response": "\\boxed{\\frac{1}{2}}",
        "reference": "0.5",
        "metadata": {"data_source": "gsm"},
    },
    # both pass
    {"id": "same", "response": "0.5", "reference": "0.5", "metadata": {"data_source": "gsm"}},
    # both fail
    {"id": "wrong", "response": "7", "reference": "8", "metadata": {"data_source": "math500"}},
    # math cannot read the gold ("the answer is 7" is not math): 0; exact_match (articles dropped) passes
    {"id": "prose", "response": "The answer is 7", "reference": "the answer is 7"},
    # no reference: math cannot score it
    {"id": "noref", "response": "7"},
]
SHADOW = {"reward": {"name": "exact_match", "config": {}}}


async def test_shadow_results_and_counts(make_app: MakeApp) -> None:
    async with make_app() as c:
        plain = await c.post("/v1/score", json={"reward": "math", "items": ITEMS})
        shadowed = await c.post("/v1/score", json={"reward": "math", "items": ITEMS, "shadow": SHADOW})
    assert shadowed.status_code == 200, shadowed.text
    body = shadowed.json()
    results = body["results"]
    # the scores are the primary reward's, as without a shadow
    assert [(r["score"], r["reason"]) for r in results] == [
        (r["score"], r["reason"]) for r in plain.json()["results"]
    ]
    assert all("shadow" not in r for r in plain.json()["results"])
    by_id = {r["id"]: r for r in results}
    assert by_id["frac"]["score"] == 1.0
    assert by_id["frac"]["shadow"] == {
        **by_id["frac"]["shadow"],
        "reward": "exact_match",
        "score": 0.0,
        "valid": True,
        "agree": False,
        "outcome": "primary_only",
    }
    assert by_id["same"]["shadow"]["agree"] is True
    assert by_id["wrong"]["shadow"]["agree"] is True
    assert by_id["prose"]["score"] == 0.0 and by_id["prose"]["shadow"]["score"] == 1.0
    assert by_id["prose"]["shadow"]["agree"] is False
    # an item the primary could not score is no agreement either way; the shadow's own reason is kept
    assert by_id["noref"]["valid"] is False and by_id["noref"]["shadow"]["agree"] is None
    assert by_id["noref"]["shadow"]["reason"] == "missing_reference"
    assert by_id["noref"]["shadow"]["outcome"] == "primary_invalid"
    assert by_id["prose"]["shadow"]["outcome"] == "shadow_only"
    assert by_id["same"]["shadow"]["reward_version"]

    shadow = body["metrics"]["shadow"]
    assert shadow == {
        **shadow,
        "reward": "exact_match",
        "threshold": 0.5,
        "items": 5,
        "compared": 4,
        "agree": 2,
        "agreement": 0.5,
        "agree_pass": 1,
        "agree_fail": 1,
        "primary_only": 1,
        "shadow_only": 1,
        "primary_invalid": 1,
        "shadow_invalid": 0,
    }
    # per data source, else per primary reward
    assert set(shadow["by_source"]) == {"gsm", "math500", "math"}
    assert shadow["by_source"]["gsm"] == {
        **shadow["by_source"]["gsm"],
        "items": 2,
        "compared": 2,
        "agree": 1,
        "primary_only": 1,
        "agreement": 0.5,
    }
    assert shadow["by_source"]["math"]["shadow_only"] == 1
    assert shadow["by_source"]["math"]["primary_invalid"] == 1


async def test_the_shadow_is_cached_and_counted_for_prometheus(make_app: MakeApp, redis_server: Any) -> None:
    request = {"reward": "math", "items": ITEMS[:3], "shadow": SHADOW}
    async with make_app(redis_url=redis_server.url) as c:
        first = (await c.post("/v1/score", json=request)).json()
        again = (await c.post("/v1/score", json=request)).json()
        metrics = (await c.get("/metrics")).text
        dashboard = (await c.get("/dashboard/data")).json()
    assert not any(r["shadow"]["cached"] for r in first["results"])
    assert all(r["shadow"]["cached"] and r["cached"] for r in again["results"])
    assert again["metrics"]["shadow"]["agree"] == first["metrics"]["shadow"]["agree"] == 2
    line = 'rewardhub_shadow_items_total{outcome="primary_only",reward="math",shadow="exact_match"} 2.0'
    assert line in metrics, [x for x in metrics.splitlines() if "shadow" in x]
    # and the dashboard's window: both requests, 6 items compared, 4 agreeing
    assert dashboard["shadow"] == [
        {
            "reward": "math",
            "shadow": "exact_match",
            "items": 6,
            "compared": 6,
            "agreement": 4 / 6,
            "primary_only": 2,
            "shadow_only": 0,
        }
    ]


async def test_threshold_and_a_shadow_without_a_correct_component(client: httpx.AsyncClient) -> None:
    # f1 has no `correct` component: its score (2/3 here) against the threshold is its verdict
    item = {"response": "Paris France", "reference": "paris"}
    for threshold, agree in ((0.5, False), (0.9, True)):
        resp = await client.post(
            "/v1/score",
            json={
                "reward": "exact_match",
                "items": [item],
                "shadow": {"reward": "f1", "threshold": threshold},
            },
        )
        assert resp.status_code == 200, resp.text
        result = resp.json()["results"][0]
        assert result["score"] == 0.0 and abs(result["shadow"]["score"] - 2 / 3) < 1e-9
        assert result["shadow"]["agree"] is agree


async def test_without_details_the_shadow_has_none(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/score",
        json={"reward": "math", "items": ITEMS[:1], "shadow": SHADOW, "options": {"include_details": False}},
    )
    result = resp.json()["results"][0]
    assert result["details"] == {} and result["shadow"]["details"] == {}
    assert result["shadow"]["score"] == 0.0


async def test_a_bad_shadow_spec_is_refused_before_scoring(client: httpx.AsyncClient) -> None:
    unknown = await client.post(
        "/v1/score", json={"reward": "math", "items": ITEMS[:1], "shadow": {"reward": "no_such_reward"}}
    )
    assert unknown.status_code == 404, unknown.text
    assert unknown.json()["error"]["param"] == "shadow.reward"
    bad = await client.post(
        "/v1/score",
        json={
            "reward": "math",
            "items": ITEMS[:1],
            "shadow": {"reward": {"name": "exact_match", "config": {"normalize": "bogus"}}},
        },
    )
    assert bad.status_code == 422, bad.text
    assert bad.json()["error"]["param"].startswith("shadow.reward.config")
    # a field the shadow does not have is refused, not ignored
    extra = await client.post(
        "/v1/score",
        json={"reward": "math", "items": ITEMS[:1], "shadow": {"reward": "exact_match", "treshold": 0.9}},
    )
    assert extra.status_code == 422, extra.text


async def test_a_job_carries_its_shadow(client: httpx.AsyncClient) -> None:
    submitted = await client.post("/v1/jobs", json={"reward": "math", "items": ITEMS[:2], "shadow": SHADOW})
    assert submitted.status_code in (200, 201, 202), submitted.text
    job_id = submitted.json()["job_id"]
    for _ in range(200):
        job = (await client.get(f"/v1/jobs/{job_id}")).json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            break
        await asyncio.sleep(0.05)
    assert job["status"] == "succeeded", job
    assert [r["shadow"]["agree"] for r in job["result"]["results"]] == [False, True]
    assert job["result"]["metrics"]["shadow"]["primary_only"] == 1


async def test_a_mixed_batch_shadows_only_the_named_rewards(client: httpx.AsyncClient) -> None:
    """A mixed math and format batch with a shadow for its math items: the format items were scored by
    the shadow too (a judge reading code, say) and counted in the agreement, so the figure mixed two
    domains. ``shadow.rewards`` picks the items; the others carry ``shadow: null``."""
    items = [
        *ITEMS[:3],
        {"id": "fmt", "response": "<think>x</think><answer>7</answer>", "reward": "format"},
        {"id": "fmt2", "response": "7", "reference": "7", "reward": {"name": "format", "config": {}}},
    ]
    body = {"reward": "math", "items": items, "shadow": {**SHADOW, "rewards": ["math"]}}
    resp = await client.post("/v1/score", json=body)
    assert resp.status_code == 200, resp.text
    out = resp.json()
    by_id = {r["id"]: r for r in out["results"]}
    assert by_id["fmt"]["shadow"] is None and by_id["fmt2"]["shadow"] is None
    assert by_id["fmt"]["score"] == 1.0  # scored by its own reward as usual
    assert [by_id[k]["shadow"]["outcome"] for k in ("frac", "same", "wrong")] == [
        "primary_only",
        "agree_pass",
        "agree_fail",
    ]
    assert out["metrics"]["shadow"]["items"] == 3 and set(out["metrics"]["shadow"]["by_source"]) == {
        "gsm",
        "math500",
    }
    # naming only a reward no item has: nothing is shadowed, nothing counted
    none = await client.post(
        "/v1/score", json={"reward": "math", "items": ITEMS[:2], "shadow": {**SHADOW, "rewards": ["code"]}}
    )
    assert none.status_code == 200, none.text
    assert [r["shadow"] for r in none.json()["results"]] == [None, None]
    assert none.json()["metrics"]["shadow"]["items"] == 0
    # a misspelt name is refused, not a shadow of nothing
    typo = await client.post(
        "/v1/score", json={"reward": "math", "items": ITEMS[:1], "shadow": {**SHADOW, "rewards": ["maths"]}}
    )
    assert typo.status_code == 404, typo.text
    assert typo.json()["error"]["param"] == "shadow.rewards.0"


async def test_shadow_rewards_that_split_a_group(client: httpx.AsyncClient) -> None:
    """``shadow.rewards`` picking some items of a group (a group mixing a math item and a format item):
    the shadow's request held part of the group. With ``options.group_size`` the whole, valid request was
    422 "group 'g1' has 1 item ..., send each group whole" (it was whole); a group reward as the shadow
    scored the part as if it were the group (a majority of one) and remembered that part as the group, so
    a later request scoring the whole group with it was 422. Now a non-group shadow scores the picked
    items, and a group shadow is refused at ``shadow.rewards``, naming the group, before anything runs."""
    items = [
        {
            "id": "f",
            "response": "<think>x</think><answer>7</answer>",
            "group": "split-g1",
            "reward": "format",
        },
        {"id": "a", "response": "7", "reference": "7", "group": "split-g1"},
        {"id": "b", "response": "7", "reference": "7", "group": "split-g2"},
        {"id": "c", "response": "8", "reference": "7", "group": "split-g2"},
    ]
    sized = await client.post(
        "/v1/score",
        json={
            "reward": "math",
            "items": items,
            "options": {"group_size": 2},
            "shadow": {**SHADOW, "rewards": ["math"]},
        },
    )
    assert sized.status_code == 200, sized.text
    assert [r["shadow"] and r["shadow"]["outcome"] for r in sized.json()["results"]] == [
        None,
        "agree_pass",
        "agree_pass",
        "agree_fail",
    ]
    # a group size the request itself breaks is still refused, at the request's own item
    short = await client.post(
        "/v1/score",
        json={
            "reward": "math",
            "items": items[:3],
            "options": {"group_size": 2},
            "shadow": {**SHADOW, "rewards": ["math"]},
        },
    )
    assert short.status_code == 422, short.text
    assert short.json()["error"]["param"] == "items.2.group"

    vote = {"reward": {"name": "majority_vote", "config": {"min_votes": 1}}, "rewards": ["math"]}
    split = await client.post("/v1/score", json={"reward": "math", "items": items, "shadow": vote})
    assert split.status_code == 422, split.text
    error = split.json()["error"]
    assert error["param"] == "shadow.rewards" and "'split-g1'" in error["message"], error
    # nothing was remembered of g1: its whole group scores with that reward afterwards
    whole = await client.post(
        "/v1/score", json={"reward": vote["reward"], "items": [{**i, "reward": None} for i in items]}
    )
    assert whole.status_code == 200, whole.text
    # a group shadow over whole groups is fine
    g2 = await client.post("/v1/score", json={"reward": "math", "items": items[2:], "shadow": vote})
    assert g2.status_code == 200, g2.text
