"""Single flight (serving.py): a cacheable item another request of this process is scoring is waited
for, not scored again. The item here is a judge's, whose calls the fake OpenAI server holds until the
test lets them go (``Reply.hold``), so each test counts the judge calls, the item's scorings, instead of
timing anything."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from typing import Any

import httpx

from fake_openai import FakeJudge, Reply
from rewardhub.protocol import RewardSpec, ScoreRequest
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


async def test_when_the_request_scoring_an_item_goes_away_one_waiter_scores_it_for_the_others(
    make_app: Any, judge_server: FakeJudge
) -> None:
    """The request scoring an item is cancelled (its client disconnected: OpenRLHF's timeout, before
    its retries) while two others wait for the item. Each of them scored it itself: three judge calls
    for one item, the load single flight is there to spare. Found in review. One of them now takes the
    item over and the other waits for it: two calls, the cancelled one's and the new owner's."""
    gate = held_judge(judge_server)
    item = an_item()
    async with judge_app(make_app, judge_server) as c:
        scoring = c.app.state.scoring
        first = asyncio.create_task(c.post("/v1/score", json=body(item)))
        await until(lambda: judge_server.calls == 1)
        waiters = [asyncio.create_task(c.post("/v1/score", json=body(item))) for _ in range(2)]
        await until(lambda: scoring.waiting == 2)
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        await until(lambda: judge_server.calls >= 2)  # an item scored again: the owner's is gone
        # the other waiter waits for it (or, before the fix, scored it too)
        await until(lambda: scoring.waiting == 1 or judge_server.calls > 2)
        gate.set()
        got = [result(await w) for w in waiters]
        assert scoring._inflight == {} and scoring.waiting == 0
    assert judge_server.calls == 2, f"{judge_server.calls - 1} scorings after the owner went away"
    assert [r["score"] for r in got] == [1.0, 1.0], got
    assert sorted(r["cached"] for r in got) == [False, True], got


async def test_when_the_owner_scored_an_item_under_a_shorter_deadline_one_waiter_scores_it_again(
    make_app: Any, judge_server: FakeJudge
) -> None:
    """The request scoring an item had a shorter deadline (``timeout_s``) than those waiting for it and
    its judge call timed out: that ``timeout`` is not an answer for a request that gave the item more
    time, so the waiters score the item again. Each did: N more calls for N waiters. One of them now
    takes the item over and the others wait for its result."""
    gate = held_judge(judge_server)
    item = an_item()
    async with judge_app(make_app, judge_server) as c:
        scoring = c.app.state.scoring
        first = asyncio.create_task(c.post("/v1/score", json=body(item, timeout_s=3)))
        await until(lambda: judge_server.calls == 1)
        waiters = [asyncio.create_task(c.post("/v1/score", json=body(item))) for _ in range(3)]
        await until(lambda: scoring.waiting == 3 or first.done())
        short = result(await first)  # the gate is closed: the judge never answered it
        await until(lambda: judge_server.calls >= 2)
        await until(lambda: scoring.waiting == 2 or judge_server.calls > 2)
        gate.set()
        got = [result(await w) for w in waiters]
    assert (short["valid"], short["reason"]) == (False, "timeout"), short
    assert judge_server.calls == 2, f"{judge_server.calls - 1} scorings after the owner's timeout"
    assert [r["score"] for r in got] == [1.0, 1.0, 1.0], got
    assert sorted(r["cached"] for r in got) == [False, True, True], got


async def test_a_waiter_whose_deadline_passes_answers_timeout_instead_of_calling_the_model_again(
    make_app: Any, judge_server: FakeJudge
) -> None:
    """A request waiting for a judge's item another request is scoring under a longer deadline (the
    judge's 60 s against its ``timeout_s``) waited until its own deadline and then called the judge
    itself, under its whole deadline again: up to twice its ``timeout_s`` for an answer. A model call's
    deadline runs from the call, so that call would have been cut off at the same moment had the
    request made it from its start: the item is now answered ``timeout`` (invalid, never cached) at its
    deadline, with no second call, and the other request's scoring goes on."""
    gate = held_judge(judge_server)
    item = an_item()
    async with judge_app(make_app, judge_server) as c:
        first = asyncio.create_task(c.post("/v1/score", json=body(item)))
        await until(lambda: judge_server.calls == 1)
        short = result(await c.post("/v1/score", json=body(item, timeout_s=1)))
        calls = judge_server.calls
        gate.set()
        done = result(await first)
        metrics = (await c.get("/metrics")).text
    assert calls == 1, "the waiting request called the judge again"
    assert (short["valid"], short["reason"], short["cached"]) == (False, "timeout", False), short
    assert (done["score"], done["valid"]) == (1.0, True), done
    assert 'rewardhub_invalid_total{reason="timeout",reward="judge"} 1.0' in metrics


async def test_which_deadlines_bound_wall_time(make_app: Any, judge_server: FakeJudge) -> None:
    """The rule above holds for a model reward and a composite of model rewards only: a composite with a
    rule part (math's deadline is its CPU time) or a code item is scored by the waiter itself at its cut."""
    judge = {"reward": REWARD}
    async with judge_app(make_app, judge_server) as c:
        scoring = c.app.state.scoring

        def wall(spec: Any) -> bool:
            spec = spec if isinstance(spec, str) else RewardSpec.model_validate(spec)
            return bool(scoring._plan_for(spec, True, {}, "reward").wall_clock)

        both = {"name": "composite", "config": {"components": [judge, {"reward": "similarity"}]}}
        mixed = {"name": "composite", "config": {"components": [judge, {"reward": "math"}]}}
        assert [wall(REWARD), wall(both), wall(mixed), wall("math"), wall("code")] == [
            True,
            True,
            False,
            False,
            False,
        ]


async def test_a_request_cancelled_as_it_starts_scoring_leaves_no_item_claimed(
    make_app: Any, judge_server: FakeJudge
) -> None:
    """A request that waits for one item another request is scoring and scores a second item itself
    runs the two as tasks; its client hung up in the same turn of the event loop (the disconnect heard
    together with the cache's answer), so it was cancelled before those tasks had started. A task
    cancelled before it starts never runs its ``finally``: the second item's claim was never released,
    and every later request for that item waited for it until its deadline. For a judge that is a
    ``timeout`` (invalid) for that item on every request, until the process restarts."""
    gate = held_judge(judge_server)
    shared, own = an_item(), an_item()
    async with judge_app(make_app, judge_server) as c:
        scoring = c.app.state.scoring
        first = asyncio.create_task(c.post("/v1/score", json=body(shared)))
        await until(lambda: judge_server.calls == 1)  # the first request is scoring `shared`
        request = ScoreRequest.model_validate({"reward": REWARD, "items": [shared, own]})
        second = asyncio.create_task(scoring.score(request))
        asyncio.get_running_loop().call_soon(second.cancel)  # (the disconnect, in the same turn)
        with contextlib.suppress(asyncio.CancelledError):
            await second
        gate.set()
        assert result(await first)["score"] == 1.0
        later = result(await c.post("/v1/score", json=body(own, timeout_s=2)))
        assert (later["score"], later["valid"]) == (1.0, True), later
        assert scoring._inflight == {} and scoring.waiting == 0
