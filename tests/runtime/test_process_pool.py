"""The CPU worker pool: per-item deadlines, crashes and memory limits never cost more than their item."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from pool_funcs import behave, die_at_start, double, hold, slow_start

from rewardhub.errors import Overloaded
from rewardhub.runtime import process_pool
from rewardhub.runtime.process_pool import ProcessPool
from waiting import until


@pytest.fixture(scope="module")
async def pool():
    p = ProcessPool(size=2, name="test", memory_mb=512, max_items_per_worker=10_000)
    await asyncio.to_thread(p.start)
    yield p
    await asyncio.to_thread(p.close)


async def test_batch_results_in_order(pool: ProcessPool) -> None:
    results = await pool.run(double, list(range(500)), deadline_s=5)
    assert [r.value for r in results] == [2 * i for i in range(500)]
    assert all(r.ok and r.error is None for r in results)


# Seconds of hard grace for the items the soft deadline must stop: no loaded host keeps a worker from its
# alarm that long, so a hard kill there means the soft deadline failed (with the pool's 0.5 s, a worker not
# scheduled in time on a loaded host was killed instead, and the test had to accept either).
SOFT_ONLY_GRACE_S = 30.0


@pytest.mark.parametrize(
    "kind, error, restarts, grace_s",
    [
        # soft deadline: SIGALRM in the worker, which lives on
        ("python_loop", "timeout", {}, SOFT_ONLY_GRACE_S),
        ("c_hang", "timeout", {"timeout": 1}, None),  # hard deadline: the parent kills the worker
        ("crash", "crash", {"crash": 1}, None),  # the worker process exits mid-item
        ("memory", "memory", {}, None),  # RLIMIT_AS turns a huge allocation into MemoryError
        ("raise", "exception", {}, None),  # an ordinary exception is reported with its message
        ("swallowed", "timeout", {}, SOFT_ONLY_GRACE_S),  # the soft timeout eaten by sqlite3 still counts
    ],
)
async def test_bad_item_costs_only_itself(
    pool: ProcessPool,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    error: str,
    restarts: dict[str, int],
    grace_s: float | None,
) -> None:
    # (It also bounded the call's wall time, deadline + grace + respawn + 10 s of slack: a bound a loaded
    # host could pass or fail either way, and no hard kill's absence shows in it that the restarts and the
    # error do not. A worker never killed hangs the call: pytest's timeout ends it.)
    if grace_s is not None:
        monkeypatch.setattr(process_pool, "_HARD_GRACE_S", grace_s)  # read by the pool's slot threads
    before = pool.stats().restarts
    results = await pool.run(behave, ["a", kind, "b"], deadline_s=0.5)
    after = pool.stats().restarts
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].error == error
    assert results[0].value == "a" and results[2].value == "b"
    replaced = {cause: n - before.get(cause, 0) for cause, n in after.items() if n != before.get(cause, 0)}
    assert replaced == restarts  # the worker killed, or not, as the item's failure requires
    if kind == "raise":
        assert results[1].message == "ValueError: bad item"


async def test_hung_worker_is_replaced(pool: ProcessPool) -> None:
    before = pool.stats().restarts.get("timeout", 0)
    await pool.run(behave, ["c_hang"], deadline_s=0.3)
    stats = pool.stats()
    assert stats.restarts.get("timeout", 0) == before + 1
    assert stats.alive == 2
    # and the replacement works
    assert [r.value for r in await pool.run(double, [1, 2, 3], deadline_s=5)] == [2, 4, 6]


async def test_other_work_continues_while_one_item_hangs(pool: ProcessPool) -> None:
    hung = asyncio.create_task(pool.run(behave, ["c_hang"], deadline_s=4.0))
    # (a fixed 0.1 s: on a loaded host the batch below could reach the workers first, and the test
    # passed without one of them stuck)
    await until(lambda: pool.stats().busy == 1, "no worker took the hanging item")
    fast = await pool.run(double, list(range(50)), deadline_s=5)
    # served by the other worker while the first is still stuck (its hung item ends only at its 4 s
    # deadline), not after it; no wall-clock bound of our own (one of 2.5 s was a chance failure risk)
    assert not hung.done()
    assert all(r.ok for r in fast)
    assert (await hung)[0].error == "timeout"


async def test_overload_raises_429() -> None:
    p = ProcessPool(size=1, name="tiny", max_queued_items=10)
    await asyncio.to_thread(p.start)
    try:
        # An idle pool takes a batch over the bound: refusing it was a 429 no retry could get past, and
        # a job (which waits for room) stayed running for ever.
        assert [r.value for r in await p.run(double, list(range(11)), deadline_s=5)] == [
            2 * i for i in range(11)
        ]
        # (a deadline of 1 s with a fixed 0.2 s sleep: a host stalled 0.8 s let the hang time out first,
        # the pool was idle again and took the batch; wait until a worker holds it, with room to spare)
        busy = asyncio.create_task(p.run(behave, ["c_hang"], deadline_s=5.0))
        await until(lambda: p.stats().busy == 1, "no worker took the hanging item")
        with pytest.raises(Overloaded) as info:
            await p.run(double, list(range(10)), deadline_s=1)
        assert info.value.status_code == 429
        assert "REWARDHUB_CPU_QUEUE_MAX_ITEMS" in info.value.message
        assert "Retry-After" in info.value.headers
        assert (await busy)[0].error == "timeout"
    finally:
        await asyncio.to_thread(p.close)


async def test_workers_are_recycled_after_max_items() -> None:
    p = ProcessPool(size=1, name="recycle", max_items_per_worker=5)
    await asyncio.to_thread(p.start)
    try:
        pids = {r.value for r in await p.run(behave, ["pid"] * 5, deadline_s=5)}
        pids |= {r.value for r in await p.run(behave, ["pid"] * 5, deadline_s=5)}
        assert len(pids) == 2  # a fresh worker after the fifth item
        assert p.stats().restarts == {}  # planned recycling is not a failure
    finally:
        await asyncio.to_thread(p.close)


async def test_items_that_crash_their_worker_do_not_fail_the_rest_of_the_batch() -> None:
    # A group of identical bad answers (GRPO samples one prompt many times) crashes one fresh worker
    # after another. Each worker started fine and was killed by its item: that is not a worker that
    # cannot start, and the batch's other items must still be run.
    p = ProcessPool(size=1, name="crashes", memory_mb=512)
    await asyncio.to_thread(p.start)
    try:
        results = await p.run(behave, ["crash"] * 4 + ["a", "b"], deadline_s=5)
        assert [r.error for r in results] == ["crash"] * 4 + [None, None]
        assert [r.value for r in results[4:]] == ["a", "b"]
    finally:
        await asyncio.to_thread(p.close)


async def test_workers_that_cannot_start_fail_the_chunk_fast() -> None:
    p = ProcessPool(size=1, name="broken", initializer=die_at_start)
    await asyncio.to_thread(p.start)
    try:
        results = await p.run(double, [1, 2, 3, 4, 5], deadline_s=5)
        assert all(r.error == "crash" for r in results)
        assert "keeps dying at start" in (results[-1].message or "")
    finally:
        await asyncio.to_thread(p.close)


async def test_a_worker_s_start_up_is_not_charged_to_its_first_item() -> None:
    """A fresh worker's first item waited for the worker's start-up (the forkserver's fork, the
    initializer) within its own hard deadline: on a loaded host a respawn after a crash took longer than
    deadline + grace, and the healthy item after the crash was killed as a timeout. Here the start-up
    (1.5 s) is longer than that (0.5 s + 0.5 s); the items' clocks start once the worker is ready."""
    p = ProcessPool(size=1, name="slow-start", initializer=slow_start)
    await asyncio.to_thread(p.start)
    try:
        results = await p.run(behave, ["a", "crash", "b"], deadline_s=0.5)
        assert [(r.value, r.error) for r in results] == [("a", None), (None, "crash"), ("b", None)], results
        assert p.stats().restarts == {"crash": 1}
    finally:
        await asyncio.to_thread(p.close)


async def test_a_cancelled_run_leaves_the_queue_at_once(tmp_path: Path) -> None:
    """A run cancelled (client gone, request deadline, job cancelled) kept its queued chunks: they ran to
    completion after it, a new batch waited behind that dead work, and their items counted against
    REWARDHUB_CPU_QUEUE_MAX_ITEMS (429s after a burst of disconnects). Its chunks not yet started are
    dropped and leave the count at once; the one running is stopped and leaves it then."""
    p = ProcessPool(size=1, name="cancel", max_queued_items=3)
    await asyncio.to_thread(p.start)
    try:
        first, second = str(tmp_path / "first"), str(tmp_path / "second")
        # one worker, two items: two chunks of one, the first running, the second queued behind it
        run = asyncio.create_task(p.run(hold, [first, second], deadline_s=60))
        await until(lambda: os.path.exists(first + ".started"))
        assert p.stats().queued_items == 2
        with pytest.raises(Overloaded):  # 2 + 2 waiting items is past the bound of 3
            await p.run(double, [1, 2], deadline_s=5)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert p.stats().queued_items <= 1  # the running item at most (its worker is being stopped)
        after = asyncio.create_task(p.run(double, [1, 2], deadline_s=5))  # 1 + 2: room again
        Path(first + ".release").touch()
        Path(second + ".release").touch()  # were the dropped item still queued, it would now run
        assert [r.value for r in await after] == [2, 4]
        assert not os.path.exists(second + ".started")  # answered without running the cancelled item
        assert p.stats().queued_items == 0
    finally:
        await asyncio.to_thread(p.close)


async def test_a_cancelled_run_stops_its_running_chunk(tmp_path: Path) -> None:
    """A run cancelled while its chunk was running left that chunk to run to its items' deadline (here
    60 s), holding one of the workers for nobody. The worker on it is now replaced, and the next batch
    runs there; another run's chunk, running beside it, is not touched."""
    p = ProcessPool(size=2, name="cancel-running")
    await asyncio.to_thread(p.start)
    try:
        mine, other = str(tmp_path / "mine"), str(tmp_path / "other")
        run = asyncio.create_task(p.run(hold, [mine], deadline_s=60))
        kept = asyncio.create_task(p.run(hold, [other], deadline_s=60))
        await until(lambda: os.path.exists(mine + ".started") and os.path.exists(other + ".started"))
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await until(lambda: p.stats().restarts.get("cancelled", 0) == 1 and p.stats().busy == 1)
        assert p.stats().queued_items == 1  # the other run's item
        assert [r.value for r in await p.run(double, [1, 2, 3], deadline_s=5)] == [2, 4, 6]
        assert not kept.done()
        Path(other + ".release").touch()
        assert [(r.value, r.error) for r in await kept] == [(other, None)]
        stats = p.stats()
        assert (stats.restarts, stats.alive, stats.busy, stats.queued_items) == ({"cancelled": 1}, 2, 0, 0)
    finally:
        Path(mine + ".release").touch()
        await asyncio.to_thread(p.close)


async def test_a_full_queue_asks_for_the_wait_until_there_is_room(tmp_path: Path) -> None:
    """Retry-After was the time for every waiting item to run (at 1000 items/s), uncapped: a request of
    8 items refused by a queue of 2000 was told 2 s, and one refused by a queue set to a million items
    1000 s, past the 120 s the client waits (it raised at once). A request fits once as many items as
    it is over the bound have run: that is the wait now, at most a minute."""
    p = ProcessPool(size=1, name="full", max_queued_items=2000)
    await asyncio.to_thread(p.start)
    path = str(tmp_path / "item")
    try:
        busy = asyncio.create_task(p.run(hold, [path] * 2000, deadline_s=60))
        await until(lambda: os.path.exists(path + ".started"), "the first item never started")
        with pytest.raises(Overloaded) as info:
            await p.run(double, list(range(8)), deadline_s=5)
        assert info.value.headers["Retry-After"] == "1"  # 8 items past the bound, not the 2000 ahead
        Path(path + ".release").touch()
        assert all(r.ok for r in await busy)
    finally:
        await asyncio.to_thread(p.close)
