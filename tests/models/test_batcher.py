"""MicroBatcher: gathering, ordering, token budget, deadlines, failures and back-pressure."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time

import pytest

from rewardhub.errors import Overloaded
from rewardhub.models import batcher as batcher_module
from rewardhub.models.batcher import MicroBatcher
from rewardhub.models.errors import BackendError, BackendTimeout, ForwardCrashed
from waiting import until


def far() -> float:
    return time.monotonic() + 10


class Recorder:
    def __init__(self, delay_s: float = 0.0, fail_on: str | None = None):
        self.calls: list[list[str]] = []
        self.delay_s = delay_s
        self.fail_on = fail_on

    async def __call__(self, items: list[str]) -> list[str]:
        self.calls.append(list(items))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_on is not None and self.fail_on in items:
            raise RuntimeError("boom")
        return [s.upper() for s in items]


async def test_concurrent_submits_become_one_batch_sorted_by_length() -> None:
    rec = Recorder()
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=8, max_wait_ms=50, queue_max=100, length=len)
    b.start()
    words = ["ccc", "a", "bb", "dddd"]
    results = await asyncio.gather(*(b.submit_many([w], far()) for w in words))
    assert [r[0] for r in results] == ["CCC", "A", "BB", "DDDD"]  # scattered back to each caller
    assert rec.calls == [["a", "bb", "ccc", "dddd"]]  # one forward pass, shortest first
    assert b.stats.sizes[4] == 1 and b.stats.batches == 1
    await b.close()


async def test_max_batch_and_token_budget_split_batches() -> None:
    rec = Recorder()
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=3, max_wait_ms=20, queue_max=100)
    await b.submit_many([str(k) for k in range(7)], far())
    assert [len(c) for c in rec.calls] == [3, 3, 1]
    await b.close()
    rec = Recorder()
    # 4 items × 10 tokens > 25: split so that items × longest stays within the budget
    b = MicroBatcher("t", rec, max_batch=8, max_wait_ms=0, queue_max=100, length=lambda s: 10, max_tokens=25)
    await b.submit_many(["w", "x", "y", "z"], far())
    assert [len(c) for c in rec.calls] == [2, 2]
    await b.close()


async def test_busy_model_accumulates_the_next_batch() -> None:
    # The first pass lasts until the test ends it, once the others are queued (a 0.05 s pass and a 0.01 s
    # sleep: a loop stalled on a loaded host could end the pass before the others were submitted).
    rec = Recorder()
    release = asyncio.Event()

    async def held(items: list[str]) -> list[str]:
        out = await rec(items)
        await release.wait()
        return out

    b: MicroBatcher[str, str] = MicroBatcher("t", held, max_batch=16, max_wait_ms=0, queue_max=100)
    first = asyncio.create_task(b.submit_many(["first"], far()))
    await until(lambda: rec.calls == [["first"]], "the first forward pass never started")
    rest = [asyncio.create_task(b.submit_many([f"r{k}"], far())) for k in range(5)]
    await until(lambda: b.depth() == 5, "the others were never queued")
    release.set()
    assert await asyncio.gather(*rest) == [[f"R{k}"] for k in range(5)] and await first == ["FIRST"]
    assert [len(c) for c in rec.calls] == [1, 5]
    await b.close()


async def test_full_queue_refuses_the_whole_request() -> None:
    rec = Recorder()
    release = asyncio.Event()

    async def held(items: list[str]) -> list[str]:  # the passes wait for the test (a 0.2 s pass and a
        await release.wait()  # 0.05 s sleep: a loaded host could finish "a" before the test looked)
        return await rec(items)

    b: MicroBatcher[str, str] = MicroBatcher("t", held, max_batch=1, max_wait_ms=0, queue_max=4)
    running = [asyncio.create_task(b.submit_many([s], far())) for s in "abcd"]
    await until(lambda: b.depth() == 3, "the first pass never started")  # "a" runs
    with pytest.raises(Overloaded) as exc:
        await b.submit_many(["e", "f"], far())  # 3 waiting + 2 > 4: nothing of it is queued
    assert exc.value.headers["Retry-After"] == "1"
    assert b.stats.rejected == 2 and b.depth() == 3
    release.set()
    assert await asyncio.gather(*running) == [["A"], ["B"], ["C"], ["D"]]
    assert rec.calls == [["a"], ["b"], ["c"], ["d"]]
    await b.close()


async def test_retry_after_is_when_the_waiting_items_will_have_run() -> None:
    """A full queue answered Retry-After: 1 whatever it held: clients came back long before a queue of
    slow passes had moved, and were refused again. Once a pass is timed, it is the queue's drain time."""
    rec = Recorder(delay_s=0.4)
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=1, max_wait_ms=0, queue_max=6)
    running = [asyncio.create_task(b.submit_many([f"i{k}"], far())) for k in range(6)]
    while b._item_s is None:  # until the first pass (0.4 s for one item, more on a loaded host) is timed
        await asyncio.sleep(0.01)
    waiting = b.depth()
    # one done; the next one running, or (a loaded host) still about to be taken from the queue: the
    # answer below is read from the same depth either way (nothing yields between here and the refusal)
    assert waiting in (4, 5)
    with pytest.raises(Overloaded) as exc:
        await b.submit_many(["x", "y", "z"], far())
    # the queue's drain time at the pace measured, rounded up (on a loaded host the pace is slower, and
    # so is the answer): never the fixed 1 s
    assert exc.value.headers["Retry-After"] == str(math.ceil(waiting * b._item_s))
    assert int(exc.value.headers["Retry-After"]) >= 2
    await b.close()
    await asyncio.gather(*running, return_exceptions=True)


async def test_a_request_larger_than_half_the_queue_is_fed_in_and_leaves_room_for_others() -> None:
    """A job of thousands of items went into the queue whole (an empty queue takes any size) and every
    other caller of the model got 429 until the job was done: it now holds at most half the queue at a
    time, its other items queued as those finish, and a small request gets in and runs next."""
    rec = Recorder(delay_s=0.02)
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=2, max_wait_ms=0, queue_max=8)
    big = [f"j{k}" for k in range(40)]
    job = asyncio.create_task(b.submit_many(big, far()))
    await asyncio.sleep(0.05)
    assert b.depth() <= 4  # half the queue, less what runs
    assert await b.submit_many(["small"], far()) == ["SMALL"]
    assert await job == [s.upper() for s in big]  # every item, in order, once
    ran = [s for call in rec.calls for s in call]
    assert sorted(ran) == sorted([*big, "small"])
    assert ran.index("small") < len(ran) - 6  # it did not wait for the job's end
    assert b.depth() == 0 and b.stats.rejected == 0
    await b.close()


async def test_items_of_a_fed_request_not_yet_queued_at_its_deadline_never_run() -> None:
    # The first pass answers at once, the second waits for the test until the deadline has passed (a
    # 0.2 s pass within a 0.5 s deadline left a loaded host 0.3 s to answer the first two items)
    rec = Recorder()
    release = asyncio.Event()

    async def held(items: list[str]) -> list[str]:
        rec.calls.append(list(items))
        if len(rec.calls) == 2:
            await release.wait()
        return [s.upper() for s in items]

    b: MicroBatcher[str, str] = MicroBatcher("t", held, max_batch=2, max_wait_ms=0, queue_max=4)
    out = await b.submit_many([f"x{k}" for k in range(20)], time.monotonic() + 2.0)
    assert out[:2] == ["X0", "X1"]
    assert all(isinstance(r, BackendTimeout) for r in out[2:])
    release.set()
    # queued after everything the request left behind, so it runs after any of it would have
    assert await b.submit_many(["last"], far()) == ["LAST"]
    assert rec.calls == [["x0", "x1"], ["x2", "x3"], ["last"]]  # the rest never reached the model
    assert b.depth() == 0
    await b.close()


async def test_a_cancelled_fed_request_queues_nothing_more() -> None:
    # Cancelled while its first item's pass runs (held until the test ends it; it was a 0.05 s pass and
    # a cancel after 0.07 s, then 0.15 s to see what else ran, which a stalled loop could reorder).
    rec = Recorder()
    release = asyncio.Event()

    async def held(items: list[str]) -> list[str]:
        out = await rec(items)
        if items == ["x0"]:
            await release.wait()
        return out

    b: MicroBatcher[str, str] = MicroBatcher("t", held, max_batch=1, max_wait_ms=0, queue_max=4)
    job = asyncio.create_task(b.submit_many([f"x{k}" for k in range(20)], far()))
    await until(lambda: rec.calls == [["x0"]] and b.depth() == 1, "the job was never fed in")  # x1 waits
    job.cancel()
    await asyncio.gather(job, return_exceptions=True)
    assert b.depth() == 0
    release.set()
    # queued after anything the job left behind, so it runs after any of it would have
    assert await b.submit_many(["last"], far()) == ["LAST"]
    assert rec.calls == [["x0"], ["last"]]
    await b.close()


async def test_deadline_drops_waiting_items() -> None:
    # dropped at its deadline, not when the slow batch ends: the batch ends only when the test says so,
    # after the item's answer (a timed batch against a bound on the answer left a loaded host little slack)
    rec = Recorder()
    release = asyncio.Event()

    async def held(items: list[str]) -> list[str]:
        rec.calls.append(list(items))
        await release.wait()
        return [s.upper() for s in items]

    b: MicroBatcher[str, str] = MicroBatcher("t", held, max_batch=1, max_wait_ms=0, queue_max=100)
    slow = asyncio.create_task(b.submit_many(["slow"], far()))
    await until(lambda: bool(rec.calls), "the slow batch never started")
    # an answer held until the batch ends never comes: wait_for's 30 s fails it
    (late,) = await asyncio.wait_for(b.submit_many(["late"], time.monotonic() + 0.1), 30.0)
    assert isinstance(late, BackendTimeout) and not slow.done()
    release.set()
    assert await slow == ["SLOW"]
    await until(lambda: b.stats.dropped == 1, "the expired item was never dropped")
    assert rec.calls == [["slow"]]  # "late" never sent to the model
    await b.close()


async def test_a_cancelled_request_leaves_nothing_behind() -> None:
    """A request that goes away (client disconnect, handler timeout) takes its items with it: they are
    not run, and neither they nor timed-out items hold queue places (which refused live requests with
    429 while a long forward pass ran)."""
    # the busy pass lasts until the test ends it (a 0.3 s pass had to outlast the steps below, which a
    # loaded host could stall past its end, so the expired items ran)
    rec = Recorder()
    release = asyncio.Event()

    async def held(items: list[str]) -> list[str]:
        rec.calls.append(list(items))
        if items == ["busy"]:
            await release.wait()
        return [s.upper() for s in items]

    b: MicroBatcher[str, str] = MicroBatcher("t", held, max_batch=1, max_wait_ms=0, queue_max=3)
    busy = asyncio.create_task(b.submit_many(["busy"], far()))
    await until(lambda: bool(rec.calls), "the busy pass never started")
    gone = asyncio.create_task(b.submit_many(["x", "y"], far()))
    await until(lambda: b.depth() == 1, "the request's first item was never queued")
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    assert b.depth() == 0
    late = await b.submit_many(["p", "q", "r"], time.monotonic() + 0.05)  # the queue's 3 places, expired
    assert all(isinstance(x, BackendTimeout) for x in late) and b.depth() == 0
    live = asyncio.create_task(b.submit_many(["live"], far()))  # no 429: the expired entries hold nothing
    await until(lambda: b.depth() == 1, "the live item was never queued")
    release.set()
    assert await live == ["LIVE"] and await busy == ["BUSY"]
    assert rec.calls == [["busy"], ["live"]]
    await b.close()


async def test_a_failing_chunk_fails_only_its_items() -> None:
    rec = Recorder(fail_on="bad")
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=2, max_wait_ms=20, queue_max=100, length=len)
    out = await b.submit_many(["ok", "bad", "fine", "good"], far())
    # sorted by length: [ok, bad] fail together, [fine, good] succeed
    assert isinstance(out[0], BackendError) and isinstance(out[1], BackendError)
    assert "boom" in str(out[1])
    assert out[2:] == ["FINE", "GOOD"]
    await b.close()


class Crasher:
    """A model that crashes on any pass holding "bad", or (out of memory) on passes over ``fits`` items."""

    def __init__(self, died: bool, fits: int = 100, then: BackendError | None = None):
        self.calls: list[list[str]] = []
        self.died, self.fits, self.then = died, fits, then

    async def __call__(self, items: list[str]) -> list[str]:
        self.calls.append(list(items))
        if self.then is not None and len(self.calls) > 1:
            raise self.then
        if "bad" in items or len(items) > self.fits:
            raise ForwardCrashed("the model process of 't' died (killed by SIGSEGV)", died=self.died)
        return [s.upper() for s in items]


async def test_a_pass_that_kills_the_model_fails_only_the_item_that_did_it() -> None:
    """One input that kills the model process failed its whole batch, and did so again on every retry of
    its request, with new neighbours each time: the pass is retried one item at a time (a dead process
    reloads its model, so halving would cost more reloads)."""
    rec = Crasher(died=True)
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=8, max_wait_ms=20, queue_max=100)
    out = await b.submit_many(["a", "b", "bad", "c"], far())
    assert out[:2] == ["A", "B"] and out[3] == "C"
    assert (
        isinstance(out[2], ForwardCrashed) and "SIGSEGV" in str(out[2]) and "this item alone" in str(out[2])
    )
    assert rec.calls == [["a", "b", "bad", "c"], ["a"], ["b"], ["bad"], ["c"]]
    assert b.stats.splits == 1 and b.stats.as_dict()["splits"] == 1
    await b.close()


async def test_an_out_of_memory_pass_is_retried_in_halves() -> None:
    rec = Crasher(died=False, fits=2)
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=8, max_wait_ms=20, queue_max=100)
    words = ["p", "q", "r", "s", "t"]
    assert await b.submit_many(words, far()) == [w.upper() for w in words]
    assert rec.calls == [words, ["p", "q", "r"], ["p", "q"], ["r"], ["s", "t"]]
    await b.close()


async def test_a_split_stops_when_the_model_fails_otherwise() -> None:
    """A model that no longer loads after its process died fails the rest of the batch with that error,
    instead of one more reload attempt per item."""
    rec = Crasher(died=True, then=BackendError("restarting the model process failed: no such file"))
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=8, max_wait_ms=20, queue_max=100)
    out = await b.submit_many(["bad", "x", "y"], far())
    assert all(isinstance(o, BackendError) and "no such file" in str(o) for o in out)
    assert len(rec.calls) == 2
    await b.close()


async def test_closing_mid_batch_answers_every_item_taken_from_the_queue() -> None:
    """Only the pass in flight was failed on close: the batch's later chunks had left the queue and
    were in no pass yet, so their callers waited out their deadlines for an answer that never came."""
    rec = Recorder(delay_s=5.0)
    b: MicroBatcher[str, str] = MicroBatcher(
        "t", rec, max_batch=8, max_wait_ms=0, queue_max=100, length=lambda s: 10, max_tokens=20
    )
    b.start()
    job = asyncio.create_task(b.submit_many(["w", "x", "y", "z"], far()))
    while not rec.calls:
        await asyncio.sleep(0.01)
    await b.close()
    out = await asyncio.wait_for(job, 5.0)  # the old code answered at the deadline, 10 s
    assert [len(c) for c in rec.calls] == [2]
    assert all(isinstance(o, BackendError) and "shutting down" in str(o) for o in out)


async def test_an_empty_queue_takes_a_request_larger_than_its_limit() -> None:
    """Refusing it would be a 429 that no retry could ever get past."""
    rec = Recorder()
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=4, max_wait_ms=0, queue_max=3)
    assert await b.submit_many(list("abcde"), far()) == list("ABCDE")
    assert b.stats.rejected == 0
    await b.close()


async def test_items_queued_behind_a_forward_pass_do_not_wait_for_company_again() -> None:
    """``max_wait`` counts from when an item was queued: items that waited for a busy model start the
    moment it is free. The window restarted after every pass, so a steady stream smaller than
    ``max_batch`` left the model idle ``max_wait`` between every two batches."""
    starts: list[float] = []
    # (a 2.5 s pass and a 1 s window: with 0.4 s and 0.2 s, the bound below left 0.1 s of slack, a chance
    # failure on a loaded host)
    rec = Recorder(delay_s=2.5)

    async def run(items: list[str]) -> list[str]:
        starts.append(time.monotonic())
        return await rec(items)

    b: MicroBatcher[str, str] = MicroBatcher("t", run, max_batch=8, max_wait_ms=1000, queue_max=100)
    first = asyncio.create_task(b.submit_many(["first"], far()))
    await until(lambda: bool(rec.calls), "the first pass never started")  # from 1 s to 3.5 s
    # queued once the first pass runs: it has waited its 1 s by the time the model is free
    assert await b.submit_many(["second"], far()) == ["SECOND"]
    await first
    assert rec.calls == [["first"], ["second"]]
    # started when the model was free (a window restarted then would start it 1 s later)
    assert starts[1] - starts[0] < 2.5 + 0.9
    await b.close()


class Clock:
    """The batcher's ``time``: the host's monotonic clock, moved on by the test (``offset``)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


async def test_an_item_never_waits_for_company_past_half_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``max_wait`` longer than a request's ``timeout_s`` held its items until their deadline had
    passed: every item timed out, never run, on an idle model."""
    # The batcher's clock is moved rather than waited out, so a loaded host only adds real seconds to a
    # span of 600 (a wall-clock bound, 1.8 s against half of 2 s, left it 0.8 s of slack)
    clock = Clock()
    monkeypatch.setattr(batcher_module, "time", clock)
    rec = Recorder()
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=8, max_wait_ms=10_000_000, queue_max=100)
    job = asyncio.create_task(b.submit_many(["x"], clock.monotonic() + 600))
    await until(lambda: b.depth() == 1, "the item was never queued")
    clock.offset = 290.0  # short of half its 600 s: it still waits for company
    b._wakeup.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert not rec.calls
    clock.offset = 310.0  # past half, far from its deadline and from max_wait (10 000 s)
    b._wakeup.set()
    await until(lambda: job.done(), "the item waited for company past half its time to its deadline")
    assert await job == ["X"] and rec.calls == [["x"]]
    await b.close()


async def test_a_defect_outside_the_forward_pass_fails_its_batch_and_the_worker_goes_on() -> None:
    """The forward pass's own errors were caught, but an error elsewhere in the worker (here the batch-size
    callback, the metrics histogram in the service) ended its task: that batch's callers, and every later
    one, waited out their deadlines for a worker that was gone. It fails that batch and serves the next."""
    calls = 0

    def on_batch(size: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ValueError("histogram broke")

    rec = Recorder()
    b: MicroBatcher[str, str] = MicroBatcher(
        "t", rec, max_batch=4, max_wait_ms=0, queue_max=10, on_batch=on_batch
    )
    first = await b.submit_many(["a", "b"], time.monotonic() + 2)
    assert [type(r) for r in first] == [BackendError, BackendError]
    assert "histogram broke" in str(first[0])
    assert await b.submit_many(["c"], far()) == ["C"]
    await b.close()


async def test_a_full_batch_is_sent_while_a_pass_runs_and_a_partial_one_waits_for_it() -> None:
    """``in_flight=2``: the model process starts the next batch the moment one ends instead of idling
    while its outputs cross back and the next batch is gathered (~10% of its time under 64 one-item
    clients). Only a full batch goes early: a partial one still waits behind the running pass, where it
    keeps filling up (with ``max_wait_ms=0`` it would otherwise go out as a batch of one)."""
    rec = Recorder()
    releases: list[asyncio.Event] = []

    async def held(items: list[str]) -> list[str]:
        out = await rec(items)
        release = asyncio.Event()
        releases.append(release)
        await release.wait()
        return out

    b: MicroBatcher[str, str] = MicroBatcher(
        "t", held, max_batch=3, max_wait_ms=0, queue_max=100, in_flight=2
    )
    first = asyncio.create_task(b.submit_many(["a", "b", "c"], far()))
    await until(lambda: len(rec.calls) == 1, "the first pass never started")
    partial = asyncio.create_task(b.submit_many(["d"], far()))
    await until(lambda: b.depth() == 1, "the partial batch was never queued")
    await asyncio.sleep(0.05)
    assert len(rec.calls) == 1  # one item waits behind the running pass
    more = asyncio.create_task(b.submit_many(["e", "f"], far()))
    await until(lambda: len(rec.calls) == 2, "a full batch did not start while a pass ran")
    assert rec.calls[1] == ["d", "e", "f"]
    tail = asyncio.create_task(b.submit_many(["g", "h", "i"], far()))
    await until(lambda: b.depth() == 3, "the third batch was never queued")
    await asyncio.sleep(0.05)
    assert len(rec.calls) == 2  # two passes in flight at most, even with a full batch waiting
    releases[0].set()
    assert await first == ["A", "B", "C"]
    await until(lambda: len(rec.calls) == 3, "the third batch did not start when a pass ended")
    for r in releases[1:]:
        r.set()
    assert await partial == ["D"] and await more == ["E", "F"] and await tail == ["G", "H", "I"]
    await b.close()


async def test_closing_with_two_passes_in_flight_answers_both() -> None:
    rec = Recorder(delay_s=5.0)
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=2, max_wait_ms=0, queue_max=100, in_flight=2)
    jobs = [asyncio.create_task(b.submit_many([f"{k}a", f"{k}b"], far())) for k in range(2)]
    await until(lambda: len(rec.calls) == 2, "both passes never started")
    await b.close()
    for job in jobs:
        out = await asyncio.wait_for(job, 5.0)
        assert all(isinstance(o, BackendError) and "shutting down" in str(o) for o in out)


@pytest.mark.timeout(60)
async def test_close_is_not_lost_when_an_item_arrives_in_the_same_turn() -> None:
    """An item queued in the loop iteration in which the batcher is closed (a request arriving as the
    service stops) woke the worker's wait for company as the cancellation reached it: Python 3.11's
    ``asyncio.wait_for`` then returns the result and drops the cancellation, so the worker went on and
    close() waited for it for ever. (Hangs on the code before: ended by the timeout mark. close() is
    awaited here, not in a task of its own, so that it cancels the worker in that very turn.)"""
    rec = Recorder()
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=2, max_wait_ms=60_000, queue_max=100)
    first = asyncio.create_task(b.submit_many(["a"], far()))
    await until(lambda: b.depth() == 1, "the first item was never queued")
    await asyncio.sleep(0.01)  # the worker waits for company
    second = asyncio.create_task(b.submit_many(["b"], far()))
    await asyncio.sleep(0)  # the second item is queued and wakes the worker; the close comes in that turn
    await b.close()
    for job in (first, second):
        out = await asyncio.wait_for(job, 30)
        assert all(isinstance(o, BackendError) for o in out), out


async def test_a_pass_sent_behind_a_failed_one_is_timed_from_when_that_one_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The time per item behind Retry-After: a pass sent while another ran began when that one ended.
    A failed pass did not record its end, so the next one was timed from when it was sent, its wait
    behind the failed pass counted as its own work. The batcher's clock is moved, not waited out."""
    clock = Clock()
    monkeypatch.setattr(batcher_module, "time", clock)
    gates = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def run(items: list[str]) -> list[str]:
        await gates[items[0]].wait()
        if items[0] == "a":
            raise RuntimeError("boom")
        return [s.upper() for s in items]

    b: MicroBatcher[str, str] = MicroBatcher("t", run, max_batch=1, max_wait_ms=0, queue_max=10, in_flight=2)
    first = asyncio.create_task(b.submit_many(["a"], clock.monotonic() + 10_000))
    second = asyncio.create_task(b.submit_many(["b"], clock.monotonic() + 10_000))
    await until(lambda: b.stats.batches == 2, "the second pass was not sent behind the first")
    clock.offset = 100.0
    gates["a"].set()
    (failed,) = await first
    assert isinstance(failed, BackendError)
    clock.offset = 101.0
    gates["b"].set()
    assert await second == ["B"]
    assert b._item_s == pytest.approx(1.0, abs=0.5)  # not 101: it began when "a" failed, at 100
    await b.close()


async def test_a_cancelled_close_is_cancelled_and_still_answers_every_item() -> None:
    """close() waits for the passes in flight to end. A cancellation of the task calling it (a shutdown
    bounded by ``asyncio.timeout``, a lifespan cancelled) was caught together with the worker's own, the
    one close() had caused, and dropped: close() returned as if never cancelled, so its caller ran on
    (and a timeout around it never fired). It now goes on to the caller, and the items are answered
    all the same."""
    stopping, release = asyncio.Event(), asyncio.Event()

    async def slow_to_stop(items: list[str]) -> list[str]:
        try:
            await asyncio.Event().wait()  # the pass runs until close() cancels it
        except asyncio.CancelledError:
            stopping.set()
            while not release.is_set():  # then takes a while to stop (a device call to finish)
                with contextlib.suppress(asyncio.CancelledError):
                    await release.wait()
            raise
        return items

    b: MicroBatcher[str, str] = MicroBatcher("t", slow_to_stop, max_batch=1, max_wait_ms=0, queue_max=10)
    running = asyncio.create_task(b.submit_many(["a"], far()))
    await until(lambda: b.stats.batches == 1, "the pass never started")
    waiting = asyncio.create_task(b.submit_many(["b"], far()))
    await until(lambda: b.depth() == 1, "the second item was never queued")
    closer = asyncio.create_task(b.close())
    await until(stopping.is_set, "close() never cancelled the pass")
    closer.cancel()
    release.set()
    await asyncio.gather(closer, return_exceptions=True)
    assert closer.cancelled()
    for job in (running, waiting):
        (out,) = await asyncio.wait_for(job, 30)
        assert isinstance(out, BackendError) and "shutting down" in str(out), out
    await b.close()  # closed already: nothing left to do


async def test_close_in_the_cleanup_of_a_cancelled_task_returns() -> None:
    """A task already cancelled (its handler cleaning up before it re-raises) is not cancelled again by
    the worker's end: close() returns there, and the cleanup after it runs."""
    rec = Recorder()
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=1, max_wait_ms=0, queue_max=10)
    assert await b.submit_many(["a"], far()) == ["A"]
    closed: list[bool] = []

    async def owner() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await b.close()
            closed.append(True)
            raise

    task = asyncio.create_task(owner())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and closed == [True]


async def test_a_closed_batcher_fails_new_items_and_starts_no_worker() -> None:
    """A request reaching a batcher after its close() (one still in flight as the service stops) started
    a fresh worker, which nothing would ever stop (a task pending when the loop ends), and ran its items
    on a model being shut down. It fails them as the items left in the queue at the close are."""
    rec = Recorder()
    b: MicroBatcher[str, str] = MicroBatcher("t", rec, max_batch=4, max_wait_ms=0, queue_max=10)
    assert await b.submit_many(["a"], far()) == ["A"]
    await b.close()
    (late,) = await asyncio.wait_for(b.submit_many(["b"], far()), 30)
    assert isinstance(late, BackendError) and "shutting down" in str(late), late
    assert b._task is None and rec.calls == [["a"]] and b.depth() == 0
    b.start()  # started again on purpose: it serves again
    assert await b.submit_many(["c"], far()) == ["C"]
    await b.close()
