"""Single flight (serving.py): a cacheable item another request of this process is scoring is waited
for, not scored again. The item here is a judge's, whose calls the fake OpenAI server holds until the
test lets them go (``Reply.hold``), so each test counts the judge calls, the item's scorings, instead of
timing anything."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import httpx

from fake_openai import FakeJudge, Reply
from waiting import until

REWARD = {"name": "judge", "config": {"mode": "reference", "rule": None}}


def held_judge(server: FakeJudge) -> threading.Event:
    """Every call to the judge is answered "Yes" once the returned gate is set."""
    gate = threading.Event()
    server.reply = lambda body: Reply("Final Decision: Yes", hold=gate)
    return gate


def body(item: dict[str, Any], **options: Any) -> dict[str, Any]:
    return {"reward": REWARD, "items": [item], "options": options}


def an_item() -> dict[str, Any]:
    return {"prompt": f"What is 3+4? ({uuid.uuid4().hex})", "response": "So \\boxed{7}.", "reference": "7"}


def judge_app(make_app: Any, server: FakeJudge) -> Any:
    return make_app(judge_url=server.url, judge_model="fake-judge")


def result(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 200, resp.text
    (r,) = resp.json()["results"]
    return r  # type: ignore[no-any-return]


async def test_items_waiting_for_another_request_are_a_queue_depth(
    make_app: Any, judge_server: FakeJudge
) -> None:
    """``rewardhub_queue_depth{pool="single_flight"}``: the items waiting now for another request's
    result (how much of a retry's work the process is absorbing), back to 0 once they have it."""
    gate = held_judge(judge_server)
    item = an_item()
    async with judge_app(make_app, judge_server) as c:
        scoring = c.app.state.scoring
        first = asyncio.create_task(c.post("/v1/score", json=body(item)))
        await until(lambda: judge_server.calls == 1)  # the first request is scoring the item
        second = asyncio.create_task(c.post("/v1/score", json=body(item)))
        await until(lambda: scoring.waiting == 1)
        assert 'rewardhub_queue_depth{pool="single_flight"} 1.0' in (await c.get("/metrics")).text
        gate.set()
        a, b = result(await first), result(await second)
        assert 'rewardhub_queue_depth{pool="single_flight"} 0.0' in (await c.get("/metrics")).text
    assert (a["score"], a["cached"], b["score"], b["cached"]) == (1.0, False, 1.0, True), (a, b)
    assert judge_server.calls == 1
