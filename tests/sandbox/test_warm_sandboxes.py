"""Warm sandboxes' own life cycle, on the real pool and real bubblewrap: recycling after
``reuse_runs``, a deadline that ends the slot, and a dead zygote replaced before the next run."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rewardhub.errors import Overloaded
from rewardhub.sandbox import Limits, SandboxPool
from rewardhub.sandbox.languages import available_languages
from rewardhub.sandbox.runner import process_state

SOLUTION = "def add(a, b):\n    return a + b\n"
TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\n"


async def pool_with(reuse_runs: int) -> SandboxPool:
    pool = SandboxPool(workers=1, max_queued=16, limits=Limits(), reuse_runs=reuse_runs)
    await pool.start()
    if pool.level != "bubblewrap":
        pytest.skip(f"needs bubblewrap: {pool.message}")
    assert pool.reuse_runs == reuse_runs, pool.message
    return pool


@pytest.fixture
async def pool() -> AsyncIterator[SandboxPool]:
    p = await pool_with(2)
    yield p
    await p.close()


def alive(pid: int, grace_s: float = 2.0) -> bool:
    """Whether ``pid`` still runs after ``grace_s`` (a zombie, killed and not yet reaped, is gone).

    bwrap is killed and reaped at once; its child, the zygote, dies of its parent-death signal a moment
    later and is reaped by whoever inherits it."""
    deadline = time.monotonic() + grace_s
    while process_state(pid) not in (None, b"Z", b"X"):
        if time.monotonic() > deadline:
            return True
        time.sleep(0.02)
    return False


async def passes(pool: SandboxPool) -> bool:
    report, _ = await pool.run_tests(solution=SOLUTION, tests=TESTS)
    return report.done and all(ok for ok, _ in report.verdicts.values()) and len(report.verdicts) == 2


async def test_a_slot_is_replaced_after_reuse_runs(pool: SandboxPool) -> None:
    seen: list[set[int]] = []
    for _ in range(5):
        assert await passes(pool)
        seen.append(pool.warm_pids())
        assert pool.stats()["warm_sandboxes"] == 1
    # runs 1-2 in one sandbox, 3-4 in the next, 5 in a third (the probe's run counts towards the first)
    distinct = {frozenset(s) for s in seen}
    assert len(distinct) >= 2
    assert pool.stats()["warm_sandbox_ends"]["recycled"] == len(distinct) - 1
    current = pool.warm_pids()
    for old in distinct - {frozenset(current)}:
        assert not any(alive(pid) for pid in old), "a replaced slot must be gone"


async def test_a_deadline_ends_the_slot_and_the_next_run_gets_a_new_one(
    pool: SandboxPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await passes(pool)
    before = pool.warm_pids()
    # The service's deadline before the guest's own (1 s): the service must kill the whole sandbox.
    monkeypatch.setattr("rewardhub.sandbox.pool._START_SLACK_S", -0.7)
    report, raw = await pool.run_program(
        language=available_languages()["python"],
        code="while True:\n    pass\n",
        stdins=[b""],
        run_timeout_s=1.0,
        total_timeout_s=1.0,
    )
    assert raw.deadline_hit and not report.done
    monkeypatch.undo()
    assert not any(alive(pid) for pid in before)
    assert await passes(pool)
    assert pool.warm_pids().isdisjoint(before)
    assert pool.stats()["warm_sandbox_ends"]["deadline"] == 1


async def test_a_zygote_killed_between_runs_is_replaced() -> None:
    pool = await pool_with(1000)
    try:
        assert await passes(pool)
        pids = pool.warm_pids()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        assert await passes(pool)
        assert pool.warm_pids().isdisjoint(pids)
        assert pool.stats()["warm_sandbox_ends"]["lost"] == 1
    finally:
        await pool.close()


async def test_service_processes_pin_their_runs_to_their_own_cores(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`serve --workers N` shares the cores out between the workers' sandbox slots, but every process
    pinned its slots to the same first cores: N programs per core there, the others idle (found in
    review). Two service processes' pools, one slot each on a 2-core affinity, must run on two cores."""
    from rewardhub.sandbox import pool as pool_module
    from rewardhub.sandbox import probe

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 cores")
    own = f"-test-{os.getpid()}-{tmp_path.name}"  # this test's claims only, not a running server's
    monkeypatch.setattr(
        pool_module,
        "claim_index",
        lambda name, count=4096: probe.claim_index(name + own, count),
        raising=False,
    )
    real = os.sched_getaffinity
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(cpus[:2]))
    pools = [SandboxPool(workers=1, max_queued=16, limits=Limits()) for _ in range(2)]
    monkeypatch.setattr(os, "sched_getaffinity", real)
    ran_on = []
    try:
        for pool in pools:
            await pool.start()
            if pool.level != "bubblewrap":
                pytest.skip(f"needs bubblewrap: {pool.message}")
            report, _ = await pool.run_program(
                language=available_languages()["python"],
                code="import os\nprint(sorted(os.sched_getaffinity(0)))\n",
                stdins=[b""],
            )
            ran_on.append(report.runs[0].stdout.strip())
    finally:
        for pool in pools:
            await pool.close()
        shutil.rmtree(Path(tempfile.gettempdir()) / f"rewardhub-sandbox-cpus-{os.getuid()}{own}", True)
    assert len(set(ran_on)) == 2, ran_on


async def test_ending_a_slot_waits_for_its_processes_off_the_event_loop(pool: SandboxPool) -> None:
    """Ending a warm sandbox waited for bwrap to be reaped (up to 5 s) and for the zygote to go (up to
    0.5 s) on the event loop, holding every other request while a big sandbox was torn down. The waits
    run in a thread now: here bwrap's reaping is held until end() has returned, which an end() waiting
    on the loop would never do (the hold then times out and the order below is wrong)."""
    import asyncio
    import threading

    assert await passes(pool)
    (box,) = pool._warm.values()
    release = threading.Event()
    order: list[str] = []
    real_wait = box.proc.wait

    def held_wait(timeout: float | None = None) -> int:
        order.append("reaping" if release.wait(timeout=10) else "reaping, never released")
        return real_wait(timeout)

    box.proc.wait = held_wait  # type: ignore[method-assign]
    box.end("closed")
    order.append("end returned")
    release.set()
    await asyncio.wait_for(box.ended(), 30)
    assert order == ["end returned", "reaping"]
    assert box.proc.returncode is not None and not alive(box.proc.pid)
    assert await passes(pool)  # the slot's next run starts a new sandbox


async def test_a_fresh_run_after_a_slot_lost_twice_waits_for_its_reaping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run whose slot is lost before it begins is repeated once in a new warm sandbox, and when that
    one is lost too the run goes to a fresh sandbox under the slot's uid. That fresh run started while
    the lost sandbox's reaping (a kill of every process of the uid, the wait for bwrap and the zygote)
    was still running in its thread, the processes still counted against the uid's limit and the kill
    able to hit the fresh run's. Here every sandbox's zygote is unreachable (its control socket shut),
    and the last one's reaping is held until the fresh run begins, which it must not do before."""
    pool = await pool_with(1000)
    try:
        await _lost_twice(pool, monkeypatch)
    finally:
        await pool.close()


async def _lost_twice(pool: SandboxPool, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import threading

    from rewardhub.sandbox import pool as pool_module
    from rewardhub.sandbox.warm import WarmSandbox

    assert await passes(pool)
    (first,) = pool._warm.values()
    first.sock.shutdown(socket.SHUT_WR)
    release = threading.Event()
    order: list[str] = []
    real_start = WarmSandbox.start
    real_run_process = pool_module.run_process

    async def unreachable(cmd: Any, uid: int | None) -> WarmSandbox:
        box = await real_start(cmd, uid)
        real_wait = box.proc.wait

        def held_wait(timeout: float | None = None) -> int:
            order.append("reaped" if release.wait(timeout=3) else "reaped, not held")
            return real_wait(timeout)

        box.proc.wait = held_wait  # type: ignore[method-assign]
        box.sock.shutdown(socket.SHUT_WR)
        return box

    async def fresh_run(*args: Any, **kwargs: Any) -> Any:
        order.append("fresh run")
        release.set()
        return await real_run_process(*args, **kwargs)

    monkeypatch.setattr(WarmSandbox, "start", unreachable)
    monkeypatch.setattr(pool_module, "run_process", fresh_run)
    assert await passes(pool)
    assert order == ["reaped, not held", "fresh run"], order
    assert pool.stats()["warm_sandbox_ends"]["lost"] == 2


async def test_a_run_while_the_pool_closes_leaves_no_warm_sandbox_running() -> None:
    """close() ends every slot and then awaits each one's reaping, and a run in those seconds started a
    warm sandbox of its own: on a slot that had none, close() raised (the slots' dict changed size while
    it iterated over it), leaving that sandbox, the uid block and the guest dir behind; on a slot that
    had one, the new sandbox was dropped from the pool still running. A run once close() has begun gets
    a fresh sandbox, which its run reaps. Here the first slot's reaping is held while the run goes."""
    import asyncio
    import threading

    pool = SandboxPool(workers=2, max_queued=16, limits=Limits(), reuse_runs=1000)
    await pool.start()
    if pool.level != "bubblewrap":
        pytest.skip(f"needs bubblewrap: {pool.message}")
    (box,) = pool._warm.values()  # the probe's
    release = threading.Event()
    real_wait = box.proc.wait

    def held_wait(timeout: float | None = None) -> int:
        release.wait(timeout=10)
        return real_wait(timeout)

    box.proc.wait = held_wait  # type: ignore[method-assign]
    closing = asyncio.create_task(pool.close())
    await asyncio.sleep(0)  # close() has ended the slot and awaits its reaping
    try:
        assert await passes(pool)
        started = pool.warm_pids()
    finally:
        release.set()
        await closing
    assert not pool._warm
    assert not any(alive(pid) for pid in started), started


def test_a_full_sandbox_queue_asks_for_the_wait_until_there_is_room() -> None:
    """Retry-After was the time to run every admitted run (50 ms each per slot), uncapped: with the
    default queue (REWARDHUB_SANDBOX_QUEUE_MAX_ITEMS=10000) on one to four slots (a small machine, or
    cores shared between --workers) a full queue answered 125 to 500 s, past the 120 s the client waits
    (it raised at once: a training step failed on backpressure it would have got past), and past when
    there is room: a request fits once as many runs as it is over the bound have ended. It is now the
    wait for those runs, at most a minute."""
    pool = SandboxPool(workers=1, max_queued=10_000, limits=Limits())
    with pool.admit(10_001):  # an idle pool takes a request of any size
        with pytest.raises(Overloaded) as small:
            with pool.admit(8):
                pass
        with pytest.raises(Overloaded) as large:
            with pool.admit(10_001):
                pass
    # 8 runs past the bound: room once 8 of the runs ahead have ended (~0.4 s), whole seconds up
    assert small.value.headers["Retry-After"] == "1"
    assert 1 <= int(large.value.headers["Retry-After"]) <= 60  # never past the client's patience
    with pool.admit(8):  # the runs ahead ended: room again
        pass


async def test_a_warm_sandbox_cancelled_while_it_starts_leaves_nothing_running(
    pool: SandboxPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run cancelled (its request gone) while its slot's warm sandbox was starting left the zygote
    running, its socket and stderr pipe open: seen on a loaded host as ResourceWarnings (errors under
    this suite's filters) in whatever test came next. The starting sandbox is ended now."""
    import asyncio
    import gc
    import subprocess
    import warnings

    from rewardhub.sandbox.warm import WarmSandbox

    assert await passes(pool)
    (first,) = pool._warm.values()
    first.sock.shutdown(socket.SHUT_WR)  # (the next run starts a new one, whose command we keep)
    seen: list[Any] = []
    real_start = WarmSandbox.start

    async def keep(cmd: Any, uid: int | None) -> WarmSandbox:
        seen.append((cmd, uid))
        return await real_start(cmd, uid)

    monkeypatch.setattr(WarmSandbox, "start", keep)
    assert await passes(pool)
    (cmd, uid), started = seen[0], []
    real_popen = subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(WarmSandbox, "start", real_start)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        monkeypatch.setattr(subprocess, "Popen", popen)
        starting = asyncio.create_task(real_start(cmd, uid))
        await asyncio.sleep(0)  # spawned, waiting for its "ready"
        monkeypatch.setattr(subprocess, "Popen", real_popen)
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        del starting
        assert started and started[0].wait(timeout=30) is not None  # killed, not left running
        for _ in range(3):
            gc.collect()
            await asyncio.sleep(0)
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == []
