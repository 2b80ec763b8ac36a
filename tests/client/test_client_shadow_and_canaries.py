"""Shadow verification and canaries through the client: the ``shadow`` argument, each result's ``shadow``,
``metrics["shadow"]`` added up over the chunks of a batch, and ``canaries()``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from rewardhub_client import AsyncRewardClient, InvalidRequest, RewardSpec, ShadowSpec
from rewardhub_client._core import as_shadow


def items(n: int) -> list[dict[str, Any]]:
    # even items: math reads \frac{i}{1} as i, exact_match sees the LaTeX: they disagree (primary_only);
    # odd items: a bare number both read (both pass)
    return [
        {
            "id": f"m{i}",
            "response": f"\\boxed{{\\frac{{{i}}}{{1}}}}" if i % 2 == 0 else str(i),
            "reference": str(i),
            "metadata": {"data_source": "even" if i % 2 == 0 else "odd"},
        }
        for i in range(n)
    ]


async def test_shadow_over_chunks(client: httpx.AsyncClient) -> None:
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    async with AsyncRewardClient("http://rewardhub.test", transport=transport, chunk_size=4) as c:
        resp = await c.score(items(10), "math", shadow="exact_match")
        assert len(resp.metrics["chunks"]) == 3
        assert resp.scores == [1.0] * 10  # the primary's scores
        assert [r.shadow.agree for r in resp.results if r.shadow] == [i % 2 == 1 for i in range(10)]
        assert all(r.shadow and r.shadow.reward == "exact_match" for r in resp.results)
        assert [r.shadow.outcome for r in resp.results if r.shadow][:2] == ["primary_only", "agree_pass"]
        shadow = resp.metrics["shadow"]
        assert shadow == {
            **shadow,
            "reward": "exact_match",
            "items": 10,
            "compared": 10,
            "agree": 5,
            "agree_pass": 5,
            "primary_only": 5,
            "agreement": 0.5,
        }
        assert shadow["by_source"]["even"]["primary_only"] == 5
        assert shadow["by_source"]["odd"]["agreement"] == 1.0
        job = await c.wait_job(
            (await c.submit_job(items(2), "math", shadow={"reward": "exact_match"})).job_id, timeout_s=60
        )
        assert job.result is not None and job.result.metrics["shadow"]["primary_only"] == 1


async def test_a_shadow_for_some_rewards_over_chunks(client: httpx.AsyncClient) -> None:
    """``ShadowSpec.rewards``: only the math items of a mixed batch are shadowed, over chunks of which the
    last has none of them."""
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    mixed = [*items(4), *({"id": f"f{i}", "response": "x", "reward": "format"} for i in range(2))]
    async with AsyncRewardClient("http://rewardhub.test", transport=transport, chunk_size=2) as c:
        resp = await c.score(mixed, "math", shadow=ShadowSpec(reward="exact_match", rewards=["math"]))
    assert [r.shadow is None for r in resp.results] == [False] * 4 + [True] * 2
    assert resp.metrics["shadow"]["items"] == 4 and resp.metrics["shadow"]["primary_only"] == 2


def test_shadow_arguments() -> None:
    assert as_shadow(None) is None
    assert as_shadow("judge") == ShadowSpec(reward="judge")
    spec = RewardSpec(name="exact_match", config={"normalize": "none"})
    assert as_shadow(spec) == ShadowSpec(reward=spec)
    assert as_shadow({"name": "exact_match", "config": {}}) == ShadowSpec(
        reward=RewardSpec(name="exact_match")
    )
    assert as_shadow({"reward": "f1", "threshold": 0.8}) == ShadowSpec(reward="f1", threshold=0.8)


async def test_a_misspelt_shadow_key_is_refused_not_dropped(client: httpx.AsyncClient) -> None:
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as c:
        with pytest.raises(InvalidRequest):
            await c.score(items(1), "math", shadow={"reward": "exact_match", "treshold": 0.9})


async def test_canaries_through_the_client(client: httpx.AsyncClient) -> None:
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as c:
        sound = await c.canaries("exact_match")
        assert sound.ok and sound.false_positives == 0 and sound.scored == sound.probes > 0
        hackable = await c.canaries(
            "regex", {"pattern": "."}, items=[{"prompt": "What is 2+2?", "reference": "4"}]
        )
        assert (
            not hackable.ok
            and hackable.false_positive_rate is not None
            and hackable.false_positive_rate > 0.9
        )
        assert hackable.by_canary["colon"]["false_positives"] == 1
