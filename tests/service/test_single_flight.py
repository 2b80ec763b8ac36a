"""Single flight (serving.py): a cacheable item another request of this process is scoring is waited
for, not scored again. The item here is a judge's, whose calls the fake OpenAI server holds until the
test lets them go (``Reply.hold``), so each test counts the judge calls, the item's scorings, instead of
timing anything."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fake_openai import FakeJudge, Reply
from rewardhub.cache import CLAIM_TTL_S
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


# --- across processes: two services sharing one Redis -------------------------------------------------
# Each ``make_app`` is one service process as far as Redis can tell (its own cache client, its own claims):
# a client's retry landing on another worker (``--workers 2``, replicas) meets the first process's
# scoring only there.


def two_services(make_app: Any, server: FakeJudge, redis_url: str) -> tuple[Any, Any]:
    settings = {"judge_url": server.url, "judge_model": "fake-judge", "redis_url": redis_url}
    return make_app(**settings), make_app(**settings)


@contextlib.asynccontextmanager
async def waiting_elsewhere(
    make_app: Any, server: FakeJudge, redis_url: str, item: dict[str, Any]
) -> AsyncIterator[tuple[httpx.AsyncClient, asyncio.Task[httpx.Response], asyncio.Task[httpx.Response]]]:
    """Two processes on one Redis, the first scoring ``item`` (its judge call made) and the second's
    request of it (``timeout_s`` 30) waiting for the first's: the second's client, and both requests."""
    one, two = two_services(make_app, server, redis_url)
    async with one as a, two as b:
        first = asyncio.create_task(a.post("/v1/score", json=body(item)))
        await until(lambda: server.calls == 1)
        second = asyncio.create_task(b.post("/v1/score", json=body(item, timeout_s=30)))
        await until(lambda: b.app.state.scoring.waiting == 1, "the second process never waited")
        yield b, first, second


def remote_waits(metrics: str, outcome: str) -> float:
    """``rewardhub_single_flight_remote_waits_total`` of the judge's items that ended so."""
    line = f'rewardhub_single_flight_remote_waits_total{{outcome="{outcome}",reward="judge"}} '
    return sum(float(x[len(line) :]) for x in metrics.splitlines() if x.startswith(line))


async def test_an_item_another_process_is_scoring_is_waited_for_not_scored_again(
    make_app: Any, judge_server: FakeJudge, redis_server: Any
) -> None:
    """Single flight was per process: a retry of a batch still being scored that landed on another
    worker (docker-compose runs two, k8s replicas) scored every item again, concurrently, doubling the
    judge calls of a service already slow. Found in review. The second process now sees the first's
    claim in Redis and waits for the result it writes: one judge call, the second answer a cache hit."""
    gate = held_judge(judge_server)
    item = an_item()
    one, two = two_services(make_app, judge_server, redis_server.url)
    async with one as a, two as b:
        first = asyncio.create_task(a.post("/v1/score", json=body(item)))
        await until(lambda: judge_server.calls == 1)  # the first process is scoring the item
        second = asyncio.create_task(b.post("/v1/score", json=body(item)))
        other = b.app.state.scoring
        await until(lambda: other.waiting == 1 or judge_server.calls > 1)
        assert judge_server.calls == 1, "the second process called the judge as well"
        assert 'rewardhub_queue_depth{pool="single_flight"} 1.0' in (await b.get("/metrics")).text
        gate.set()
        x, y = result(await first), result(await second)
        metrics = (await b.get("/metrics")).text
        assert other.waiting == 0 and other._inflight == {}
    assert judge_server.calls == 1
    assert (x["score"], x["cached"], y["score"], y["cached"]) == (1.0, False, 1.0, True), (x, y)
    assert {k: v for k, v in y.items() if k not in ("cached", "latency_ms", "id")} == {
        k: v for k, v in x.items() if k not in ("cached", "latency_ms", "id")
    }
    assert remote_waits(metrics, "cached") == 1.0
    with redis_server.client() as r:  # the claim went with the scoring: only the result is left
        assert len(r.keys("*")) == 1, r.keys("*")


async def test_when_the_process_scoring_an_item_gives_it_up_the_waiting_one_scores_it(
    make_app: Any, judge_server: FakeJudge, redis_server: Any
) -> None:
    """The request scoring the item in the first process goes away (its client hung up) while the
    second process waits for it: its claim is released, and the second takes the item over at once
    (not at its deadline), scoring it itself."""
    gate = held_judge(judge_server)
    item = an_item()
    async with waiting_elsewhere(make_app, judge_server, redis_server.url, item) as (b, first, second):
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        # (released, not left to lapse: well before CLAIM_TTL_S)
        await until(lambda: judge_server.calls == 2, "the item was not taken over", timeout_s=CLAIM_TTL_S / 2)
        gate.set()
        y = result(await second)
        metrics = (await b.get("/metrics")).text
    assert (y["score"], y["valid"], y["cached"]) == (1.0, True, False), y
    assert remote_waits(metrics, "taken_over") == 1.0


async def test_of_two_processes_waiting_for_a_given_up_item_one_takes_it_over(
    make_app: Any, judge_server: FakeJudge, redis_server: Any
) -> None:
    """Three processes: the first scores the item, the two others wait for it; the first's request goes
    away. Exactly one of the waiting processes takes the item over (its poll claims it) and the other
    waits for that one's result: two judge calls in all, not three."""
    gate = held_judge(judge_server)
    item = an_item()
    settings = {"judge_url": judge_server.url, "judge_model": "fake-judge", "redis_url": redis_server.url}
    async with make_app(**settings) as a, make_app(**settings) as b, make_app(**settings) as c:
        first = asyncio.create_task(a.post("/v1/score", json=body(item)))
        await until(lambda: judge_server.calls == 1)
        others = [asyncio.create_task(x.post("/v1/score", json=body(item, timeout_s=30))) for x in (b, c)]
        await until(
            lambda: b.app.state.scoring.waiting == 1 and c.app.state.scoring.waiting == 1,
            "the other processes never waited",
        )
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        await until(
            lambda: judge_server.calls >= 2, "no process took the item over", timeout_s=CLAIM_TTL_S / 2
        )
        await until(  # one is waiting again, for the one that took it over (or, wrongly, scoring it too)
            lambda: b.app.state.scoring.waiting + c.app.state.scoring.waiting == 1 or judge_server.calls > 2
        )
        gate.set()
        got = [result(await o) for o in others]
    assert judge_server.calls == 2, f"{judge_server.calls - 1} scorings after the owner went away"
    assert sorted((r["score"], r["cached"]) for r in got) == [(1.0, False), (1.0, True)], got


async def test_an_invalid_result_elsewhere_is_taken_over_not_waited_for_to_the_deadline(
    make_app: Any, judge_server: FakeJudge, redis_server: Any
) -> None:
    """The first process's judge answers something unreadable (parse_error: invalid, never cached): the
    second process, waiting for a result in the cache that will never come, takes the item over once
    the first's claim is gone, instead of waiting to its deadline (a judge's: answered ``timeout``)."""
    gate = threading.Event()
    judge_server.reply = lambda body: Reply(
        "no decision here" if judge_server.calls == 1 else "Final Decision: Yes", hold=gate
    )
    item = an_item()
    async with waiting_elsewhere(make_app, judge_server, redis_server.url, item) as (b, first, second):
        gate.set()
        x = result(await first)
        # (its claim released with the request, not left to lapse: well before CLAIM_TTL_S)
        y = result(await asyncio.wait_for(second, timeout=CLAIM_TTL_S / 2))
        metrics = (await b.get("/metrics")).text
    assert remote_waits(metrics, "taken_over") == 1.0
    assert (x["valid"], x["reason"]) == (False, "parse_error"), x
    assert (y["score"], y["valid"], y["cached"]) == (1.0, True, False), y
    assert judge_server.calls == 2


async def test_a_scoring_longer_than_a_claims_lifetime_keeps_its_claim(
    make_app: Any, judge_server: FakeJudge, redis_server: Any
) -> None:
    """A claim lapses ``CLAIM_TTL_S`` after its holder's last renewal (so that a crashed holder frees its
    items), and the holder renews it while it scores: a batch scoring for longer than that (a retried
    batch of thousands is the case single flight is for) is still waited for, not scored again by the
    other process once the claim's first lifetime is over."""
    gate = held_judge(judge_server)
    item = an_item()
    one, two = two_services(make_app, judge_server, redis_server.url)
    async with one as a, two as b:
        first = asyncio.create_task(a.post("/v1/score", json=body(item)))
        await until(lambda: judge_server.calls == 1)
        second = asyncio.create_task(b.post("/v1/score", json=body(item)))
        await until(lambda: b.app.state.scoring.waiting == 1, "the second process never waited")
        await asyncio.sleep(CLAIM_TTL_S * 1.5)  # (past the claim's first lifetime)
        calls = judge_server.calls
        gate.set()
        x, y = result(await first), result(await second)
    assert calls == 1, "the waiting process took over an item still being scored"
    assert (x["cached"], y["score"], y["cached"]) == (False, 1.0, True), (x, y)


async def test_a_judge_item_waited_for_elsewhere_past_its_deadline_is_a_timeout(
    make_app: Any, judge_server: FakeJudge, redis_server: Any
) -> None:
    """The deadline rule of single flight holds across processes: a judge's item waited for past its own
    deadline, counted from its request's start, answers ``timeout`` with no call of its own, and the
    first process's scoring goes on (and is cached)."""
    gate = held_judge(judge_server)
    item = an_item()
    one, two = two_services(make_app, judge_server, redis_server.url)
    async with one as a, two as b:
        first = asyncio.create_task(a.post("/v1/score", json=body(item)))
        await until(lambda: judge_server.calls == 1)
        short = result(await b.post("/v1/score", json=body(item, timeout_s=1)))
        calls = judge_server.calls
        gate.set()
        done = result(await first)
        again = result(await b.post("/v1/score", json=body(item)))
        metrics = (await b.get("/metrics")).text
    assert calls == 1, "the waiting process called the judge"
    assert remote_waits(metrics, "deadline") == 1.0
    assert (short["valid"], short["reason"], short["cached"]) == (False, "timeout", False), short
    assert (done["score"], again["score"], again["cached"]) == (1.0, 1.0, True), (done, again)


async def test_with_redis_down_each_process_scores_its_own_items(
    make_app: Any, judge_server: FakeJudge, redis_server: Any
) -> None:
    """No Redis, no claims: two processes holding one item both score it, as before, and neither waits
    on the cache."""
    gate = held_judge(judge_server)
    item = an_item()
    one, two = two_services(make_app, judge_server, redis_server.url)
    async with one as a, two as b:
        redis_server.stop()
        try:
            first = asyncio.create_task(a.post("/v1/score", json=body(item)))
            second = asyncio.create_task(b.post("/v1/score", json=body(item)))
            await until(lambda: judge_server.calls == 2, "one process waited for the other")
            gate.set()
            x, y = result(await first), result(await second)
        finally:
            redis_server.start()
    assert [(r["score"], r["cached"]) for r in (x, y)] == [(1.0, False), (1.0, False)], (x, y)


async def test_an_item_waited_for_elsewhere_is_scored_here_when_redis_goes_away(
    make_app: Any, judge_server: FakeJudge, redis_server: Any
) -> None:
    """Redis gone while the second process waits for the first's item: its poll has no claim answer (a
    connection error marks Redis down), and the item is taken over and scored there, as without Redis,
    not waited for to its deadline. (The poll's reading of "no answer", untested before.)"""
    gate = held_judge(judge_server)
    item = an_item()
    async with waiting_elsewhere(make_app, judge_server, redis_server.url, item) as (b, first, second):
        redis_server.stop()
        try:
            await until(lambda: judge_server.calls == 2, "the item was not scored without Redis")
            gate.set()
            x, y = result(await first), result(await second)
            metrics = (await b.get("/metrics")).text
        finally:
            redis_server.start()
    assert remote_waits(metrics, "taken_over") == 1.0
    assert 'rewardhub_cache_errors_total{op="claim"} 1.0' in metrics
    assert [(r["score"], r["cached"]) for r in (x, y)] == [(1.0, False), (1.0, False)], (x, y)


async def test_an_unreadable_entry_of_an_item_waited_for_elsewhere_is_scored_here_and_written_over(
    make_app: Any, judge_server: FakeJudge, redis_server: Any
) -> None:
    """The poll of an item another process is scoring finds an entry that is no result (written over by
    another program sharing the Redis): as an unreadable entry at lookup, it is a miss, taken over and
    scored here, and its entry written over with the result; not an answer, nor a reason to keep waiting.
    (The poll's reading of an unreadable entry, untested before.)"""
    gate = held_judge(judge_server)
    item = an_item()
    store = redis_server.client()
    async with waiting_elsewhere(make_app, judge_server, redis_server.url, item) as (b, first, second):
        (claim,) = store.keys("rh:claim:*")
        key = claim[len(b"rh:claim:") :]
        store.set(key, b"garbage{")
        await until(lambda: judge_server.calls == 2, "the unreadable entry was not scored again")
        gate.set()
        x, y = result(await first), result(await second)
        metrics = (await b.get("/metrics")).text
    assert remote_waits(metrics, "taken_over") == 1.0 and remote_waits(metrics, "cached") == 0.0
    assert [(r["score"], r["cached"]) for r in (x, y)] == [(1.0, False), (1.0, False)], (x, y)
    assert json.loads(store.get(key))["score"] == 1.0  # written over with the result


def _sleeping_code_item(sleep_s: float) -> dict[str, Any]:
    token = uuid.uuid4().hex
    program = f"import time\ntime.sleep({sleep_s})\nprint({token!r})"
    return {"response": f"```python\n{program}\n```", "reference": {"cases": [{"stdout": token}]}}


async def _queue_depth(c: httpx.AsyncClient, pool: str) -> str:
    return next(
        line.rsplit(" ", 1)[1]
        for line in (await c.get("/metrics")).text.splitlines()
        if line.startswith(f'rewardhub_queue_depth{{pool="{pool}"}}')
    )


async def _until_depth(c: httpx.AsyncClient, pool: str, what: str) -> None:
    for _ in range(600):
        if await _queue_depth(c, pool) == "1.0":
            return
        await asyncio.sleep(0.05)
    raise AssertionError(what)


@pytest.mark.integration
async def test_two_service_processes_score_an_item_once_and_survive_a_crashed_one(
    live_server_factory: Any, redis_server: Any
) -> None:
    """Two ``rewardhub serve`` processes on one Redis (two workers, two replicas). A code item whose
    program sleeps is sent to both: the first runs it, the second waits and answers the first's result
    from the cache (one sandbox run in all; before, one in each process). Then the first process is
    killed (SIGKILL: nothing released) while it runs another such item and the second waits for it: its
    claim lapses within ``CLAIM_TTL_S`` and the second runs the item itself."""
    env = {"REWARDHUB_REDIS_URL": redis_server.url}
    x, y = _sleeping_code_item(2), _sleeping_code_item(3)
    with (
        live_server_factory(env=env) as one,
        live_server_factory(env=env) as two,
    ):
        async with (
            httpx.AsyncClient(base_url=one.url, timeout=120) as a,
            httpx.AsyncClient(base_url=two.url, timeout=120) as b,
        ):
            for item in (x, y):
                first = asyncio.create_task(a.post("/v1/score", json={"reward": "code", "items": [item]}))
                await _until_depth(a, "inflight_items", "the first process never began scoring the item")
                second = asyncio.create_task(
                    b.post(
                        "/v1/score", json={"reward": "code", "items": [item], "options": {"timeout_s": 50}}
                    )
                )
                await _until_depth(b, "single_flight", "the second process never waited for the first")
                if item is x:
                    got = [result(await first), result(await second)]
                    assert [(g["score"], g["cached"]) for g in got] == [(1.0, False), (1.0, True)], got
                    runs = [
                        line
                        for c in (a, b)
                        for line in (await c.get("/metrics")).text.splitlines()
                        if line.startswith('rewardhub_reward_batch_latency_seconds_count{reward="code"}')
                    ]
                    assert runs == ['rewardhub_reward_batch_latency_seconds_count{reward="code"} 1.0'], runs
                else:
                    one.proc.kill()
                    with contextlib.suppress(httpx.HTTPError):
                        await first
                    taken = result(await second)
                    assert (taken["score"], taken["valid"], taken["cached"]) == (1.0, True, False), taken
                    metrics = (await b.get("/metrics")).text
                    assert (
                        'rewardhub_single_flight_remote_waits_total{outcome="taken_over",reward="code"} 1.0'
                        in metrics
                    )
                    assert (
                        'rewardhub_single_flight_remote_waits_total{outcome="cached",reward="code"} 1.0'
                        in metrics
                    )
