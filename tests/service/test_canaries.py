"""Reward-hacking canaries (``POST /v1/canaries`` and the periodic monitor) through the real app."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from conftest import make_settings
from rewardhub.canaries import MASTER_KEYS, first_sentence
from rewardhub.errors import UnknownReward

ANY_CHARACTER = {"name": "regex", "config": {"pattern": "."}}  # passes whatever has a character


async def test_a_sound_rule_passes_no_canary(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/canaries", json={"reward": "exact_match"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    # the master keys and the echoed question, against each of the four built-in questions
    assert body["probes"] == 4 * (len(MASTER_KEYS) + 1) == body["scored"]
    assert body["false_positives"] == 0 and body["false_positive_rate"] == 0.0 and body["ok"] is True
    assert body["reward"] == "exact_match" and body["reward_version"]
    assert set(body["by_canary"]) == {name for name, _ in MASTER_KEYS} | {"echo_prompt"}
    assert body["examples"] == []


async def test_a_hackable_reward_is_caught(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/canaries", json={"reward": ANY_CHARACTER, "max_false_positive_rate": 0.5})
    body = resp.json()
    assert body["ok"] is False and body["false_positive_rate"] > 0.9
    assert body["by_canary"]["colon"] == {
        "probes": 4,
        "scored": 4,
        "false_positives": 4,
        "false_positive_rate": 1.0,
    }
    assert len(body["examples"]) == 10
    assert {"canary", "item", "response", "score"} == set(body["examples"][0])


async def test_the_first_sentence_of_a_real_response_is_a_canary(client: httpx.AsyncClient) -> None:
    item = {
        "prompt": "What is 12 * 7?",
        "reference": "84",
        "response": "Let me compute this carefully. 12 * 7 = 84, so the answer is 84.",
    }
    body = (await client.post("/v1/canaries", json={"reward": "math", "items": [item]})).json()
    assert body["by_canary"]["truncated_opener"]["probes"] == 1
    assert body["probes"] == len(MASTER_KEYS) + 2
    assert body["ok"] is True, body
    assert first_sentence(item["response"]) == "Let me compute this carefully."
    assert first_sentence("The answer is 84.") is None  # a whole one-sentence answer is no opener


async def test_a_judge_that_says_yes_to_anything_is_held_by_the_gate_but_for_gibberish(
    make_app: Any, judge_server: Any
) -> None:
    # the scripted judge answers "Final Decision: Yes" to every request: only the hardening stands between
    # it and the canaries
    judge = {"name": "judge", "config": {"mode": "reference"}}
    async with make_app(judge_url=judge_server.url, judge_model="fake-judge") as c:
        body = (await c.post("/v1/canaries", json={"reward": judge})).json()
    assert body["scored"] == body["probes"], body
    passed = {name for name, counts in body["by_canary"].items() if counts["false_positives"]}
    # the gate holds every content-free and grader-directed canary (judge 1.9.13: the HTML tags and the
    # question given back too); gibberish has words, so only a judge that reads them can refuse it
    assert passed == {"gibberish"}, body["examples"]
    assert body["ok"] is False and body["false_positive_rate"] == 4 / body["scored"]


async def test_bad_requests(client: httpx.AsyncClient) -> None:
    unknown = await client.post("/v1/canaries", json={"reward": "no_such_reward"})
    assert unknown.status_code == 404
    bad = await client.post(
        "/v1/canaries", json={"reward": "exact_match", "items": [{"prompt": "q", "answer": 1}]}
    )
    assert bad.status_code == 422


async def test_the_monitor_exports_the_rate_and_alarms(make_app: Any) -> None:
    rewards = '["exact_match", {"name": "regex", "config": {"pattern": "."}}]'
    async with make_app(canary_rewards=rewards, canary_interval_s=3600) as c:
        for _ in range(400):
            metrics = (await c.get("/metrics")).text
            if 'rewardhub_canary_runs_total{outcome="alarm",reward="regex"} 1.0' in metrics:
                break
            await asyncio.sleep(0.05)
    assert 'rewardhub_canary_false_positive_rate{reward="regex"} 1.0' in metrics
    assert 'rewardhub_canary_false_positive_rate{reward="exact_match"} 0.0' in metrics
    assert 'rewardhub_canary_runs_total{outcome="ok",reward="exact_match"} 1.0' in metrics


async def test_canary_settings_are_checked_at_start(make_app: Any) -> None:
    with pytest.raises(ValidationError, match="REWARDHUB_CANARY_REWARDS"):
        make_settings(canary_rewards="exact_match")  # not a JSON list
    with pytest.raises(UnknownReward):
        async with make_app(canary_rewards='["no_such_reward"]'):
            pass


def test_one_process_leads_the_periodic_canaries_until_it_lets_go(tmp_path: Any) -> None:
    """The workers of one `serve --workers N` share a directory; the lock on it picks one canary runner,
    and the next can take over once it goes (the kernel drops a dead holder's lock)."""
    from rewardhub.canaries import _lead

    with _lead(str(tmp_path)) as first:
        with _lead(str(tmp_path)) as second:
            assert (first, second) == (True, False)
    with _lead(str(tmp_path)) as after:
        assert after is True


def test_without_a_usable_lock_directory_the_canaries_still_run(tmp_path: Any) -> None:
    """A metrics directory where the lock cannot be made (gone, read-only) stopped the monitor task with
    no log, and no worker ran the canaries. Each worker now runs them, with a warning. Found in review."""
    from rewardhub.canaries import _lead

    with _lead(str(tmp_path / "gone")) as leader:
        assert leader is True
