"""A pool of killable worker processes with a hard deadline per item and batched IPC.

Why not ``concurrent.futures`` or pebble: both put the deadline on a *task*. Sending one task per item
costs a pipe round trip and a pickle per item (the thing that dominates when most items take
microseconds), while sending a batch as one task means one hung item takes the whole batch down with
it. Here a batch crosses the process boundary once; the worker streams back one small result per item,
so the parent knows which item is running and for how long:

* a soft deadline inside the worker (``SIGALRM`` in the worker's main thread raising a
  ``BaseException``) stops pure-Python loops cheaply, and the worker lives on;
* a hard deadline in the parent (soft deadline + grace) covers C code that never checks for signals
  (a long big-integer operation, a C extension's loop): the worker is SIGKILLed, the item is reported
  as a ``timeout``, a fresh worker is started and the rest of the batch continues there;
* a worker that dies (segfault, OOM killer, ``RLIMIT_AS``) costs the item it was on
  (``crash``/``memory``), never the batch or the service;
* a batch whose caller is gone (client disconnected, request deadline, job cancelled) is dropped if it
  has not started; if it is running, it gets ``_CANCEL_GRACE_S`` to finish, and a worker still on it
  then is killed and replaced (restart cause ``cancelled``), instead of working for nobody for up to
  its items' deadlines (an unbounded SymPy simplification: 5 s by default, 60 s at most, holding one of
  two workers on a 2-core host).

Stopping a running batch costs a worker: SIGKILL, a fork from the forkserver and the new worker's ready
message, measured at 27-68 ms (median 45 ms) on a loaded 2-core host, plus a few ms more for its first
item, whose process has not touched SymPy's caches yet. Letting the batch finish costs whatever is left
of it, unknown in advance: most items take well under a millisecond, a pathological one its whole
deadline. So the pool waits about one restart's cost (0.1 s, above the worst measured) before it kills,
the ski-rental rule: a batch that was about to end ends and costs no restart, one that is stuck is
stopped 0.1 s after its caller left, a loss of at most 0.1 s of a worker plus one restart against up to
its whole deadline. A batch is never shared: each :meth:`ProcessPool.run` sends its own, and requests that
share an item (single flight in :mod:`rewardhub.serving`) share the scoring request's result, not its
batch; a request waiting on a cancelled one scores the item itself.

Workers start from a ``forkserver`` that has already imported the heavy modules (SymPy, Math-Verify),
so a replacement is ready in milliseconds and the service process, which runs threads and an event
loop, is never ``fork()``ed.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing as mp
import os
import queue
import resource
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as mp_wait
from typing import Any

import structlog

from rewardhub.errors import Overloaded, ServiceUnavailable, queue_retry_after

__all__ = ["PoolStats", "ProcessPool", "TaskResult", "parent_messages"]

log = structlog.get_logger("rewardhub.pool")

# Seconds the parent waits past an item's soft deadline before it kills the worker.
_HARD_GRACE_S = 0.5
# Seconds a new worker may take to start (fork, initializer) before its first item is run at all.
_START_S = 10.0
# Items per batch sent to one worker: big enough to amortise IPC, small enough to spread load.
_MAX_CHUNK = 64
# Workers that die before they are ready for work, in a row, before a chunk is failed fast.
_MAX_FAILED_STARTS = 3
# A worker's first message: it has started and initialised, so a later death is its item's doing.
_READY = "ready"
# Seconds a running batch whose caller is gone may take to finish before its worker is killed: about the
# cost of replacing the worker (27-68 ms measured, see the module docstring), so that a batch about to
# end is not worth a restart and a stuck one costs little more than one.
_CANCEL_GRACE_S = 0.1


@dataclass(slots=True)
class TaskResult:
    """The outcome of one item. ``error`` is None on success, else one of
    ``timeout`` | ``memory`` | ``crash`` | ``exception`` (or ``cancelled``, which no caller sees: its
    run was cancelled)."""

    ok: bool
    value: Any = None
    error: str | None = None
    message: str | None = None
    elapsed_s: float = 0.0


@dataclass(slots=True)
class PoolStats:
    size: int
    alive: int
    queued_items: int
    busy: int
    restarts: dict[str, int] = field(default_factory=dict)


class _SoftTimeout(BaseException):
    """Raised by SIGALRM inside a worker; a BaseException so ``except Exception`` in libraries can't eat it."""


_alarm_fired = False


def _on_alarm(signum: int, frame: Any) -> None:
    # Remembered as well as raised: a C library that calls back into Python (sqlite3's progress
    # handler, say) swallows exceptions raised in its callbacks, so the raise alone can turn "past the
    # item's deadline" into an ordinary-looking result (a query "interrupted", read as too slow).
    global _alarm_fired
    _alarm_fired = True
    raise _SoftTimeout()


def parent_messages(conn: Connection) -> Iterator[Any]:
    """In a child process: the parent's messages, until it closes the pipe or sends ``None``."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        yield msg


def _worker_main(conn: Connection, memory_bytes: int, initializer: Callable[[], None] | None) -> None:
    """Loop of one worker process: receive a batch, stream back one result per item."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    signal.signal(signal.SIGALRM, _on_alarm)
    if memory_bytes > 0:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    if initializer is not None:
        with contextlib.suppress(Exception):
            initializer()
    try:
        conn.send(_READY)
    except (EOFError, OSError):
        return
    global _alarm_fired
    for msg in parent_messages(conn):
        fn, payloads, deadline_s = msg
        for j, payload in enumerate(payloads):
            t0 = time.perf_counter()
            status, value, message = "ok", None, None
            _alarm_fired = False
            try:
                try:
                    signal.setitimer(signal.ITIMER_REAL, deadline_s)
                    value = fn(payload)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except _SoftTimeout:
                status = "timeout"
            except MemoryError:
                status, value = "memory", None
            except Exception as exc:  # an item's failure is data, reported to the parent
                status, message = "exception", f"{type(exc).__name__}: {exc}"[:500]
            if _alarm_fired:  # the soft timeout fired and something swallowed it (see _on_alarm)
                status, value, message = "timeout", None, None
            elapsed = time.perf_counter() - t0
            try:
                conn.send((j, status, value, message, elapsed))
            except (EOFError, OSError):
                return
            except Exception as exc:  # the value did not pickle
                conn.send((j, "exception", None, f"unpicklable result: {exc}"[:500], elapsed))


@dataclass(slots=True)
class _Chunk:
    fn: Callable[[Any], Any]
    payloads: list[Any]
    deadline_s: float
    deliver: Callable[[list[TaskResult]], None]
    # Both under the pool's lock: a slot claims the chunk (started) or skips it (dropped, its run
    # was cancelled before it started), never both; whichever comes first owns its ``_queued`` items.
    started: bool = False
    dropped: bool = False
    # Under the pool's lock too: the slot running the chunk, whether it has ended, and when its run was
    # cancelled while it ran (monotonic; the slot then stops it, see _CANCEL_GRACE_S).
    slot: _Slot | None = None
    done: bool = False
    cancelled_at: float | None = None


class _Slot:
    """One worker process and the parent thread that drives it (the thread only waits on a pipe)."""

    def __init__(self, pool: ProcessPool, index: int):
        self.pool = pool
        self.index = index
        self.proc: mp.process.BaseProcess | None = None
        self.conn: Connection | None = None
        self.items_done = 0
        self.busy = False
        # Whether the current worker has said it is ready (see _READY), and when (monotonic).
        self.ready = False
        self.ready_at = 0.0
        # Written to (by ProcessPool._drop, under the pool's lock) to wake this slot's thread from its wait
        # on the worker when the run of the chunk it is on is cancelled; -1 once the pool has closed it.
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        # Consecutive deaths of workers that never became ready: a worker that cannot start (bad
        # environment, import error) must not become a tight restart loop. A worker killed by the
        # item it was running did start; counting it failed the rest of a batch of crashing items.
        self.failed_starts = 0
        self.thread = threading.Thread(target=self._loop, name=f"{pool.name}-slot-{index}", daemon=True)

    # --- worker process lifecycle ---
    def spawn(self) -> None:
        parent_conn, child_conn = self.pool.ctx.Pipe(duplex=True)
        proc = self.pool.ctx.Process(
            target=_worker_main,
            args=(child_conn, self.pool.memory_bytes, self.pool.initializer),
            name=f"{self.pool.name}-worker-{self.index}",
            daemon=True,
        )
        proc.start()
        child_conn.close()
        self.proc, self.conn, self.items_done, self.ready = proc, parent_conn, 0, False

    def kill(self) -> None:
        proc, conn = self.proc, self.conn
        self.proc, self.conn = None, None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()
        if proc is not None and proc.is_alive():
            with contextlib.suppress(OSError, ProcessLookupError):
                os.kill(proc.pid or 0, signal.SIGKILL)
        if proc is not None:
            proc.join(timeout=5)

    def stop(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(OSError, ValueError):
                self.conn.send(None)
        if self.proc is not None:
            self.proc.join(timeout=2)
        self.kill()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def wake(self) -> None:
        """Interrupt the slot thread's wait on its worker (it then reads the chunk's ``cancelled_at``)."""
        if self.wake_w >= 0:
            with contextlib.suppress(BlockingIOError, OSError):  # full: a wake-up is pending already
                os.write(self.wake_w, b"\0")

    def _drain_wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self.wake_r, 4096):
                pass

    def close_wake(self) -> None:
        """After the slot's thread has ended: the wake-up pipe (under the pool's lock, see :meth:`wake`)."""
        for fd in (self.wake_r, self.wake_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.wake_r = self.wake_w = -1

    def _replace(self, cause: str) -> None:
        self.failed_starts = self.failed_starts + 1 if not self.ready and cause == "crash" else 0
        self.kill()
        self.pool._count_restart(cause)
        if self.failed_starts >= _MAX_FAILED_STARTS:
            time.sleep(min(5.0, 0.2 * self.failed_starts))  # back off; this thread only drives one worker
        if not self.pool.closing:
            self.spawn()

    # --- dispatch ---
    def _loop(self) -> None:
        while True:
            chunk = self.pool.queue.get()
            if chunk is None:
                return
            if not self.pool._claim(chunk, self):
                continue  # its run was cancelled: its items already left the count
            self.busy = True
            try:
                results = self._run(chunk)
            except Exception as exc:  # a bug here must not lose the caller's future
                log.exception("pool_slot_error", pool=self.pool.name)
                results = [TaskResult(False, error="exception", message=repr(exc)) for _ in chunk.payloads]
            finally:
                self.busy = False
                self.pool._finished(chunk)
            chunk.deliver(results)

    def _run(self, chunk: _Chunk) -> list[TaskResult]:
        n = len(chunk.payloads)
        results: list[TaskResult | None] = [None] * n
        pending = list(range(n))
        hard_s = chunk.deadline_s + _HARD_GRACE_S
        while pending:
            if chunk.cancelled_at is not None:  # its run is gone (after a timeout, say): the rest is moot
                for i in pending:
                    results[i] = TaskResult(False, error="cancelled")
                break
            if self.pool.closing or self.failed_starts >= _MAX_FAILED_STARTS:
                why = "pool is shutting down" if self.pool.closing else "worker process keeps dying at start"
                for i in pending:
                    results[i] = TaskResult(False, error="crash", message=why)
                self.failed_starts = max(0, self.failed_starts - 1)  # let the next chunk try again
                break
            if not self.alive() or self.items_done >= self.pool.max_items_per_worker:
                if self.proc is not None and self.items_done >= self.pool.max_items_per_worker:
                    self.stop()  # planned recycling, not a failure
                else:
                    self.kill()
                self.spawn()
            assert self.conn is not None
            try:
                self.conn.send((chunk.fn, [chunk.payloads[i] for i in pending], chunk.deadline_s))
            except (OSError, ValueError):
                self._replace("crash")
                continue
            k = 0
            started = time.monotonic()
            stop_at: float | None = None  # when to kill the worker, its chunk's run being cancelled
            while k < len(pending):
                # A worker not yet ready is starting (the fork, the initializer), which is not its first
                # item's time: on a loaded host a respawn after a crash took longer than deadline + grace,
                # and the healthy item after the crash was killed as a timeout. Start-up has its own bound.
                limit = hard_s if self.ready else max(hard_s, _START_S)
                if stop_at is None and chunk.cancelled_at is not None and self.ready:
                    # (a worker still starting is not killed: the next chunk would need a new one anyway)
                    stop_at = max(chunk.cancelled_at, self.ready_at) + _CANCEL_GRACE_S
                due = started + limit if stop_at is None else min(started + limit, stop_at)
                try:
                    # (a wake-up written after the check above is still in the pipe: the wait returns)
                    woke = mp_wait([self.conn, self.wake_r], max(0.0, due - time.monotonic()))
                    msg = self.conn.recv() if self.conn in woke else None
                except (EOFError, OSError):
                    code = self.proc.exitcode if self.proc is not None else None
                    results[pending[k]] = TaskResult(
                        False,
                        error="crash",
                        message=f"worker died (exit code {code})",
                        elapsed_s=time.monotonic() - started,
                    )
                    self._replace("crash")
                    pending = pending[k + 1 :]
                    break
                if self.wake_r in woke:
                    self._drain_wake()
                if msg is None:
                    now = time.monotonic()
                    if stop_at is not None and now >= stop_at:  # cancelled, and still running: stop it
                        for i in pending[k:]:
                            results[i] = TaskResult(False, error="cancelled")
                        self._replace("cancelled")
                        pending = []
                        break
                    if now < started + limit:
                        continue  # woken: its run was cancelled (or a stale wake-up), not due yet
                    # hard deadline: C code ignored the soft alarm
                    results[pending[k]] = TaskResult(False, error="timeout", elapsed_s=hard_s)
                    self._replace("timeout")
                    pending = pending[k + 1 :]
                    break
                if msg == _READY:
                    self.ready = True
                    started = self.ready_at = time.monotonic()  # the item's clock starts once it is ready
                    continue
                j, status, value, message, elapsed = msg
                self.items_done += 1
                results[pending[j]] = TaskResult(
                    status == "ok", value, None if status == "ok" else status, message, elapsed
                )
                k = j + 1
                started = time.monotonic()
            else:
                pending = []
        return [r if r is not None else TaskResult(False, error="crash") for r in results]


class ProcessPool:
    """Worker processes for CPU-bound verification, driven from asyncio.

    Args:
        size: number of worker processes.
        name: label for metrics and logs.
        memory_mb: ``RLIMIT_AS`` of each worker (0 = unlimited).
        max_items_per_worker: a worker is replaced after this many items (SymPy caches grow).
        max_queued_items: beyond this many waiting items, :meth:`run` raises :class:`Overloaded` (an
            idle pool takes a batch of any size).
        preload: modules the forkserver imports once, so new workers start warm.
        initializer: called once in each new worker (e.g. to warm up a parser).
    """

    def __init__(
        self,
        *,
        size: int,
        name: str = "cpu",
        memory_mb: int = 2048,
        max_items_per_worker: int = 20_000,
        max_queued_items: int = 100_000,
        preload: Sequence[str] = (),
        initializer: Callable[[], None] | None = None,
    ):
        self.size = size
        self.name = name
        self.memory_bytes = memory_mb * 1024 * 1024
        self.max_items_per_worker = max_items_per_worker
        self.max_queued_items = max_queued_items
        self.initializer = initializer
        self.ctx = mp.get_context("forkserver")
        if preload:
            self.ctx.set_forkserver_preload(list(preload))
        self.queue: queue.SimpleQueue[_Chunk | None] = queue.SimpleQueue()
        self.closing = False
        self.started = False
        self._slots = [_Slot(self, i) for i in range(size)]
        self._lock = threading.Lock()
        self._queued = 0
        self._restarts: dict[str, int] = {}
        self.on_restart: Callable[[str], None] | None = None

    # --- lifecycle ---
    def start(self) -> None:
        """Start the workers (blocking: the first start also boots the forkserver and its imports)."""
        for slot in self._slots:
            slot.spawn()
            slot.thread.start()
        self.started = True

    def close(self) -> None:
        self.closing = True
        for _ in self._slots:
            self.queue.put(None)
        for slot in self._slots:
            if slot.thread.is_alive():
                slot.thread.join(timeout=10)
            slot.stop()
            if not slot.thread.is_alive():
                with self._lock:
                    slot.close_wake()

    # --- accounting ---
    def _count_restart(self, cause: str) -> None:
        with self._lock:
            self._restarts[cause] = self._restarts.get(cause, 0) + 1
        log.warning("pool_worker_replaced", pool=self.name, cause=cause)
        if self.on_restart is not None:
            self.on_restart(cause)

    def _finished(self, chunk: _Chunk) -> None:
        with self._lock:
            chunk.done, chunk.slot = True, None
            self._queued -= len(chunk.payloads)

    def _claim(self, chunk: _Chunk, slot: _Slot) -> bool:
        """In a slot's thread: whether to run ``chunk`` (False: its run was cancelled before it started)."""
        with self._lock:
            chunk.started = not chunk.dropped
            if chunk.started:
                chunk.slot = slot
            return chunk.started

    def _drop(self, chunks: Sequence[_Chunk]) -> None:
        """The run of ``chunks`` was cancelled: those not started are skipped when a slot takes them off
        the queue, and their items leave the count now, so a retry or another request neither waits
        behind them nor is refused for them. The slot running one is woken: the chunk has
        ``_CANCEL_GRACE_S`` to end, then its worker is replaced (see the module docstring); its items
        leave the count when it ends."""
        with self._lock:
            now = time.monotonic()
            for chunk in chunks:
                if not chunk.started and not chunk.dropped:
                    chunk.dropped = True
                    self._queued -= len(chunk.payloads)
                elif chunk.started and not chunk.done and chunk.cancelled_at is None:
                    chunk.cancelled_at = now
                    if chunk.slot is not None:
                        chunk.slot.wake()

    def stats(self) -> PoolStats:
        with self._lock:
            queued, restarts = self._queued, dict(self._restarts)
        return PoolStats(
            size=self.size,
            alive=sum(s.alive() for s in self._slots),
            queued_items=queued,
            busy=sum(s.busy for s in self._slots),
            restarts=restarts,
        )

    # --- work ---
    async def run(
        self, fn: Callable[[Any], Any], payloads: Sequence[Any], deadline_s: float
    ) -> list[TaskResult]:
        """Run ``fn(payload)`` for each payload in the workers; results in the same order.

        ``fn`` must be a module-level function (it is pickled by reference). Each item gets
        ``deadline_s`` seconds; an item past it comes back as ``TaskResult(ok=False, error="timeout")``.
        Cancelled, it drops its chunks that have not started and stops a running one (see :meth:`_drop`).
        """
        n = len(payloads)
        if n == 0:
            return []
        if not self.started or self.closing:
            raise ServiceUnavailable(f"the {self.name} worker pool is not running")
        with self._lock:
            # An idle pool takes a batch of any size: refusing it would be a 429 that no retry gets past
            # (a job, which waits for room, stayed running for ever).
            if self._queued and self._queued + n > self.max_queued_items:
                # Retry-After: about when it fits, once as many items as it is over the bound have run
                # (all of them for one larger than the bound), at ~1000 items/s
                ahead = min(self._queued, self._queued + n - self.max_queued_items)
                raise Overloaded(
                    f"{self._queued} items are already waiting for the {self.name} pool "
                    f"(limit {self.max_queued_items}, REWARDHUB_CPU_QUEUE_MAX_ITEMS)",
                    retry_after_s=queue_retry_after(ahead / 1000),
                )
            self._queued += n
        loop = asyncio.get_running_loop()
        chunk_size = max(1, min(_MAX_CHUNK, math.ceil(n / (2 * self.size))))
        futures: list[asyncio.Future[list[TaskResult]]] = []
        chunks: list[_Chunk] = []
        for start in range(0, n, chunk_size):
            fut: asyncio.Future[list[TaskResult]] = loop.create_future()

            def deliver(res: list[TaskResult], fut: asyncio.Future[list[TaskResult]] = fut) -> None:
                with contextlib.suppress(RuntimeError):  # the loop closed during shutdown
                    loop.call_soon_threadsafe(_resolve, fut, res)

            chunk = _Chunk(fn, list(payloads[start : start + chunk_size]), deadline_s, deliver)
            self.queue.put(chunk)
            chunks.append(chunk)
            futures.append(fut)
        try:
            done = await asyncio.gather(*futures)
        except asyncio.CancelledError:
            # The caller is gone (client disconnected, request deadline, job cancelled): its chunks
            # still queued would run to their per-item deadlines for nobody (see _drop).
            self._drop(chunks)
            raise
        out: list[TaskResult] = []
        for chunk_results in done:
            out.extend(chunk_results)
        return out


def _resolve(fut: asyncio.Future[list[TaskResult]], res: list[TaskResult]) -> None:
    if not fut.done():
        fut.set_result(res)
