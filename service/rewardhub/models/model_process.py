"""A model in its own process: batches cross a pipe, the forward pass never meets the event loop's GIL.

Running a model on a thread of the service process looks free (torch releases the GIL inside its
kernels), but a forward pass is thousands of small operator calls, each re-acquiring the GIL, and the
event loop holds it while it parses requests. Measured here: a tiny PRM forward of 32 items took 23 ms on
an idle thread, 72 ms next to one busy Python thread, and about 340 ms inside a service answering 64
concurrent clients — so batching bought nothing. In its own process the model has the interpreter to
itself and the service's loop stays responsive; what crosses the boundary is one small message per
*batch* (queries in, floats out), which costs microseconds. This is the same split vLLM makes between
its API server and its engine.

The child loads the model with the backend's loader (a picklable callable, so ``from_pretrained`` runs
there, CUDA included) and then runs ``fn(loaded, items)`` for each batch it receives. It dies with the
service (``daemon``); if it dies on its own (out of memory, a segfault), or ends after a CUDA error that
leaves its device unusable (a device-side assert), the batch in flight fails as a
:class:`~rewardhub.models.errors.ForwardCrashed` and the next batch starts a fresh process. One that died
while idle is noticed before a batch is sent, so that batch is served by the fresh process; a restart
that fails (the model's files are gone) is kept in :attr:`ModelProcess.error` for readiness to report.

Calls may overlap (the batcher sends the next full batch while one runs, ``REWARDHUB_BATCH_IN_FLIGHT``):
the child takes them in the order sent, so it starts the next the moment one ends instead of idling
while its reply crosses the pipe, wakes the service's event loop, is scattered to the callers and the
next batch is gathered and sent back (measured on the 2-core benchmark host: the model process busy
~90% of the time with one batch in flight). Batches go to the child on one pipe and replies come back on
another: the event loop's reader leaves its pipe non-blocking (uvloop), which a sender in another thread
must not share. A reader task hands the replies out in order; when the child dies, the batch it was
running fails as a crash and those sent after it, which it never started, go to its successor.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import pickle
import signal
from collections import deque
from collections.abc import Callable
from functools import partial
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any, NoReturn

import structlog

from rewardhub.models.errors import BackendError, ForwardCrashed
from rewardhub.runtime import heap
from rewardhub.runtime.process_pool import parent_messages

__all__ = ["ModelProcess"]

log = structlog.get_logger("rewardhub.models.process")


def _describe(loaded: Any) -> dict[str, Any]:
    """The loaded model's facts for the service process, and its tokenizer's special-token strings:
    what the model process removes from user text, which the service needs to tell what of a text
    reaches the model (a PRM step of only such strings is an empty step there)."""
    info = {
        k: getattr(loaded, k)
        for k in ("device", "dtype", "max_length", "task", "share_prefix", "prefix_cache_mb", "pass_overhead")
        if hasattr(loaded, k)
    }
    tok = getattr(loaded, "tokenizer", None)
    if tok is not None:
        from rewardhub.models.hf_compute import special_strings

        info["specials"] = list(special_strings(tok))
    return info


def _child(requests: Connection, conn: Connection, loader: Callable[[], Any]) -> None:
    """The model process: load, report, then serve the batches read from ``requests`` until that pipe
    closes; every message back goes on ``conn``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the service decides when this process stops
    from rewardhub.models.hf_compute import inference

    try:
        loaded = loader()
    except BaseException as exc:
        conn.send(("error", _portable(exc)))
        return
    heap.settle()  # the model's and its libraries' objects out of every later collection
    conn.send(("loaded", _describe(loaded)))
    for fn, items in parent_messages(requests):
        try:
            with inference():
                out = fn(loaded, items)
            counters = getattr(loaded, "counters", None)
            conn.send(("ok", out, counters() if callable(counters) else {}))
        except Exception as exc:  # a batch's failure is reported, the process lives on
            if _device_lost(exc):
                # every later CUDA call of this process would fail too: it ends, and the parent starts a
                # fresh one (a crash, so the batch is retried item by item and its culprit fails alone)
                lost = f"the model process's device is unusable after {type(exc).__name__}: {exc}"[:500]
                conn.send(("error", ForwardCrashed(f"{lost}; it restarts", died=True)))
                return
            oom = ForwardCrashed.out_of_memory(exc)
            if oom is not None:
                _release_cached_memory()
            conn.send(("error", oom or _portable(exc)))


# CUDA's "sticky" errors, in its own words: once one is raised the process's CUDA context is unusable
# and every later CUDA call fails with it, whatever its input (other CUDA errors leave it usable).
_STICKY_CUDA_ERRORS = (
    "device-side assert triggered",
    "illegal memory access",
    "unspecified launch failure",
    "misaligned address",
    "illegal instruction",
    "hardware stack error",
    "invalid program counter",
    "uncorrectable ECC error",
    "launch timed out",
)


def _device_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is a CUDA error that leaves the process's device unusable: a device-side assert
    (an index out of range in a kernel), an illegal memory access... (:data:`_STICKY_CUDA_ERRORS`). Only
    a new process recovers from one. torch raises them as ``AcceleratorError`` (2.8+) or a RuntimeError
    "CUDA error: ...". By name and text, so no torch import."""
    text = str(exc)
    cuda = any(t.__name__ == "AcceleratorError" for t in type(exc).__mro__) or (
        isinstance(exc, RuntimeError) and "CUDA error" in text
    )
    return cuda and any(e in text for e in _STICKY_CUDA_ERRORS)


def _release_cached_memory() -> None:
    """After an out-of-memory pass, hand the allocator's cached blocks back, so that the halves the
    batcher retries start from a clean CUDA heap instead of a fragmented one."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def _portable(exc: BaseException) -> BackendError:
    """The error as the parent raises it: a :class:`BackendError` keeps its type (a missing extra is
    ``unsupported`` with its install hint, not a ``backend_error``), anything else becomes one."""
    if isinstance(exc, BackendError):
        with contextlib.suppress(Exception):  # an error type that cannot be rebuilt goes as its text
            pickle.loads(pickle.dumps(exc))
            return exc
    return BackendError(f"{type(exc).__name__}: {exc}"[:1000])


def _ending(code: int | None) -> str:
    """A child's exit status in words: ``-9`` is a SIGKILL, most often the out-of-memory killer."""
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = ", the out-of-memory killer?" if -code == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exit code {code}"


def _raise(payload: Any) -> NoReturn:
    raise payload if isinstance(payload, BackendError) else BackendError(str(payload))


# How long close() waits for a child to end on its own once asked to (an idle one exits at once; a batch
# whose caller still waits may end meanwhile) before killing it. A child that cannot read the stop message
# (loading its model, or busy with batches nobody waits for) is killed without it.
STOP_GRACE_S = 5.0


class _NotStarted(Exception):
    """A batch sent behind the one the child died in (or was killed in): it never began, so it goes to
    the successor as it is, not split as a crash's suspect."""


def _close_quietly(conn: Connection) -> None:
    with contextlib.suppress(OSError):
        conn.close()


def _consume(fut: asyncio.Future[Any]) -> None:
    """A sender thread's outcome nobody awaits any more (its caller was cancelled, the process dropped)."""
    if not fut.cancelled():
        fut.exception()


class ModelProcess:
    """One model served by one child process. Calls may overlap: they are sent in turn and the child
    runs them in that order (see the module docstring)."""

    def __init__(
        self,
        name: str,
        loader: Callable[[], Any],
        on_restart: Callable[[], None] | None = None,
        stall_s: float | None = None,
        on_counters: Callable[[dict[str, int]], None] | None = None,
    ):
        self.name = name
        # given the model's counters (Loaded.counters: the prefix cache's) with each batch's reply
        self.on_counters = on_counters
        # A batch's reply not come after this long (from when the child could start it): the child hangs
        # (a GPU kernel that never returns, a deadlock in a native library). Without a bound the batch
        # waited for ever, and every later one queued behind it while /ready said the model was loaded.
        self.stall_s = stall_s
        self._loader = loader
        self._on_restart = on_restart  # called before a dead process's successor loads the model
        self._ctx = mp.get_context("spawn")  # never fork a process that runs threads and an event loop
        self._proc: mp.process.BaseProcess | None = None
        self._conn: Connection | None = None  # replies from the child
        self._requests: Connection | None = None  # batches to the child
        self._lock = asyncio.Lock()  # sending, and starting a successor: one caller at a time
        # Per batch sent and not yet answered, in the order sent: where its reply goes (a cancelled
        # caller's slot is cancelled: its reply is read and dropped, never handed to the next call).
        self._owed: deque[asyncio.Future[tuple[str, Any]]] = deque()
        self._reader: asyncio.Task[None] | None = None
        self._sending: asyncio.Future[None] | None = None  # a send on a thread not finished yet
        # _recv's waits for a readable pipe: a drop stops watching the pipe, so it fails them, or a
        # restart's wait for "loaded" that close() interrupted waited for ever
        self._waiting: set[asyncio.Future[None]] = set()
        self.info: dict[str, Any] = {}
        self.restarts = 0
        # Why the last restart failed (None once one succeeds): without it readiness would still show
        # the model loaded while every batch fails.
        self.error: str | None = None
        # close() was called: a caller still sending (or resending a batch the close killed) fails as
        # stopped instead of taking the process for dead and starting one nobody would close
        self._closed = False
        # start() waits for the child's "loaded": a close() meanwhile kills it (see _heeds_stop)
        self._loading = False
        self._ended: list[mp.process.BaseProcess] = []  # children dropped, not known to be reaped yet
        # Per child dropped, its reaper (_reap_soon) while it runs: held here, as the loop keeps only a weak
        # reference to a task, and close() waits for them.
        self._reapers: dict[mp.process.BaseProcess, asyncio.Task[None]] = {}

    async def start(self) -> dict[str, Any]:
        """Spawn the process and wait for the model to load; raise BackendError if it cannot."""
        self._closed = False
        replies, child_replies = self._ctx.Pipe(duplex=False)
        child_requests, requests = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(
            target=_child,
            args=(child_requests, child_replies, self._loader),
            name=f"model-{self.name}",
            daemon=True,
        )
        proc.start()
        child_replies.close()
        child_requests.close()
        self._proc, self._conn, self._requests = proc, replies, requests
        self._loading = True
        try:
            kind, payload, *_ = await self._recv()
        except asyncio.CancelledError:  # its "loaded" would later be read as a batch's reply
            self._drop()
            raise
        except ForwardCrashed as exc:  # it died loading: no batch's fault, and no batch to split
            raise BackendError(f"{exc} while loading the model") from None
        finally:
            self._loading = False
        if kind != "loaded":
            await self._stop()  # not close(): the next batch tries again
            _raise(payload)
        self.info = payload
        return self.info

    async def _recv(self) -> tuple[Any, ...]:
        conn = self._conn
        if conn is None:
            raise BackendError(f"model process {self.name!r} is not running")
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        fd = conn.fileno()

        def on_readable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(fd, on_readable)
        self._waiting.add(ready)
        try:
            await ready
        finally:
            self._waiting.discard(ready)
            if self._conn is conn:  # dropped meanwhile: closed, and its number maybe another pipe's now
                loop.remove_reader(fd)
                # uvloop's add_reader leaves the descriptor non-blocking (libuv polls it that way), and
                # then a reply larger than the pipe's buffer (32 MiniLM embeddings: ~110 KB) failed with
                # EAGAIN half read, which read as the process's death: a healthy model killed and
                # reloaded. The writer is mid-message once the pipe is readable, so a blocking read is
                # brief.
                os.set_blocking(fd, True)
        try:
            msg: tuple[Any, ...] = conn.recv()
        except (EOFError, OSError):
            raise await self._died() from None
        return msg

    async def _died(self) -> ForwardCrashed:
        """Forget a child whose pipe closed, and say how it ended; the batch it was running fails with
        that, the ones sent behind it go to its successor. Its exit status is read after a short wait: at
        the pipe's end of file the child is usually not reaped yet, and every crash (an out-of-memory
        kill included) read "exit code None"."""
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(proc.join, 2.0)
        code = proc.exitcode if proc is not None else None
        crash = ForwardCrashed(f"the model process of {self.name!r} died ({_ending(code)})", died=True)
        self._drop(crash)
        return crash

    async def call(self, fn: Callable[[Any, list[Any]], list[Any]], items: list[Any]) -> list[Any]:
        """Run ``fn(loaded, items)`` in the model process (``fn`` is pickled by reference)."""
        while True:
            try:
                slot = await self._send(fn, items)
                kind, payload = await slot  # cancelled: the reader drops its reply when it comes
            except _NotStarted:
                continue  # the child ended before it began this batch: its successor runs it
            break
        if kind != "ok":
            _raise(payload)
        result: list[Any] = payload
        return result

    async def _send(
        self, fn: Callable[[Any, list[Any]], list[Any]], items: list[Any]
    ) -> asyncio.Future[tuple[str, Any]]:
        """Send a batch, first starting a successor if the child is gone; returns where its reply goes."""
        async with self._lock:
            if self._sending is not None:  # a cancelled caller's send may still be writing: never interleave
                await asyncio.wait([self._sending])
                self._sending = None
            if self._closed:
                raise BackendError(f"the model process of {self.name!r} was stopped")
            if not self._owed and self._conn is not None and not self._alive():
                # it died while idle: not this batch's fault
                log.warning("model_process_died_idle", backend=self.name, exitcode=self._exitcode())
                self._drop()
            if self._conn is None:  # it died: a fresh process (the model reloads)
                self.restarts += 1
                log.warning("model_process_restart", backend=self.name, restarts=self.restarts)
                if self._on_restart is not None:
                    self._on_restart()
                try:
                    await self.start()
                except BackendError as exc:
                    self.error = f"restarting the model process failed: {exc}"[:1000]
                    raise
                self.error = None
            requests = self._requests
            assert requests is not None
            # pickled first: an item that cannot be is the caller's error, and no reply is owed for it
            data = ForkingPickler.dumps((fn, items))
            loop = asyncio.get_running_loop()
            slot: asyncio.Future[tuple[str, Any]] = loop.create_future()
            busy = bool(self._owed)
            self._owed.append(slot)
            try:
                if not busy:  # the child waits in recv: it reads while this writes, however large
                    requests.send_bytes(data)
                else:
                    # The child reads it only when the batches before it end: sent from a thread, so that
                    # a batch larger than the pipe's buffer does not hold the event loop until then.
                    sending = loop.run_in_executor(None, requests.send_bytes, data)
                    # known while it writes, cancelled or not: close() must not write into the pipe then
                    self._sending = sending
                    try:
                        await asyncio.shield(sending)
                    except asyncio.CancelledError:
                        sending.add_done_callback(_consume)
                        # owed still (the batch reaches the child), but nobody awaits it: cancelled as a
                        # cancelled waiter's slot is, so its reply is dropped and a drop settling it with
                        # an error logs no "Future exception was never retrieved"
                        slot.cancel()
                        raise
                    self._sending = None
            except (
                OSError,
                ValueError,
                TypeError,
            ):  # the child is gone (TypeError: its pipe closed mid-send)
                if slot in self._owed:
                    self._owed.remove(slot)
                elif slot.done() and not slot.cancelled():
                    slot.exception()  # dropped meanwhile (a stall killed it): settled, and answered here
                if not busy:
                    raise await self._died() from None
                # the reader fails the batch it was running when it reads the end of the pipe, and
                # this one goes to the successor
                reader = self._reader
                if reader is not None:
                    await asyncio.wait([reader])
                raise _NotStarted from None
            if self._reader is None or self._reader.done():
                self._reader = loop.create_task(self._read_replies(), name=f"replies:{self.name}")
            return slot

    async def _read_replies(self) -> None:
        """Hand each reply to its batch's slot, in the order sent, while any is owed. A child that dies
        or stalls takes its process with it (:meth:`_drop`: the batch it ran fails as a crash, the ones
        behind it go to its successor)."""
        while self._owed:
            try:
                kind, payload, *more = await self._reply()
            except ForwardCrashed:  # dropped, every slot settled
                return
            except BackendError as exc:  # no process (dropped meanwhile)
                self._drop(exc)
                return
            except Exception as exc:  # a whole reply that would not unpickle: that batch's failure
                kind, payload = "error", BackendError.of(exc)
            if not self._owed:  # dropped while this read
                return
            head = self._owed.popleft()
            if not head.done():
                head.set_result((kind, payload))
            if more and more[0] and self.on_counters is not None:
                try:
                    self.on_counters(more[0])
                except Exception:  # a metrics defect must not stop the replies
                    log.exception("model_counters_failed", backend=self.name)
            if isinstance(payload, ForwardCrashed) and payload.died:
                # the child says it is ending (its device was lost): a batch sent to it would be lost and
                # blamed for its death; the ones behind go to its successor
                log.warning("model_process_device_lost", backend=self.name, error=str(payload))
                self._drop()
                return

    async def _reply(self) -> tuple[Any, ...]:
        """The next reply, or, past ``stall_s``, the hung child killed: a crash, so the batcher retries
        the batch's items that still have time one at a time, in a fresh process."""
        if self.stall_s is None:
            return await self._recv()
        try:
            async with asyncio.timeout(self.stall_s):
                return await self._recv()
        except TimeoutError:
            log.error("model_process_stalled", backend=self.name, stall_s=self.stall_s)
            crash = ForwardCrashed(
                f"the model process of {self.name!r} did not answer within {self.stall_s:g} s "
                "(REWARDHUB_MODEL_STALL_TIMEOUT_S) and was killed",
                died=True,
            )
            self._drop(crash)
            raise crash from None

    def _alive(self) -> bool:
        """Whether the child can take a batch. Called with no reply owed, so a readable pipe is its
        end-of-file: the child is gone (even where ``is_alive`` cannot tell, its exit status having
        been collected by someone else)."""
        proc, conn = self._proc, self._conn
        if proc is None or conn is None or not proc.is_alive():
            return False
        try:
            return not conn.poll()
        except (OSError, ValueError):
            return False

    def _exitcode(self) -> int | None:
        return self._proc.exitcode if self._proc is not None else None

    def _drop(self, crash: BackendError | None = None, *, stopping: bool = False) -> None:
        """Forget the child (killed if alive, then reaped on a thread) and settle every batch owed a reply:
        the first, the one it was running, with ``crash``; the rest, which it never started, are sent again
        by their callers (or, ``stopping``, fail: the service is closing)."""
        conn, requests, proc = self._conn, self._requests, self._proc
        self._conn, self._requests, self._proc = None, None, None
        owed, self._owed = self._owed, deque()
        reader, self._reader = self._reader, None
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()
        for ready in self._waiting:
            if not ready.done():
                ready.set_exception(BackendError(f"the model process of {self.name!r} was stopped"))
        for i, slot in enumerate(owed):
            if slot.done():
                continue
            if stopping:
                slot.set_exception(BackendError(f"the model process of {self.name!r} was stopped"))
            elif i == 0 and crash is not None:
                slot.set_exception(crash)
            else:
                slot.set_exception(_NotStarted())
        if conn is not None:
            with contextlib.suppress(Exception):  # a reader still registered on it (close())
                asyncio.get_running_loop().remove_reader(conn.fileno())
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            # exitcode collects the ones a reaper gave up on that have ended since
            self._ended = [p for p in self._ended if p.exitcode is None]
            if proc.exitcode is None:  # not reaped yet (a crash's is, by _died): it is now, on a thread
                self._ended.append(proc)
                self._reap_soon(proc)
        if conn is not None:
            _close_quietly(conn)
        sending = self._sending
        if requests is not None and sending is not None and not sending.done():
            # a batch still being written on a thread: closed under it, its descriptor could be another
            # file's by the thread's next write; the write fails (EPIPE) now that the child is gone
            sending.add_done_callback(lambda _: _close_quietly(requests))
        elif requests is not None:
            _close_quietly(requests)

    async def close(self) -> None:
        """Stop the process for good: a batch sent after this fails (see :attr:`_closed`)."""
        self._closed = True
        await self._stop()

    def _heeds_stop(self) -> bool:
        """Whether the child would act on a stop message soon enough to be worth waiting for: it reads
        one only after the batches before it, so not while it loads its model (minutes for a large
        checkpoint) nor while it runs batches whose callers have all gone (the batcher's close cancels
        them before the backend closes the process), which a hung child never ends. A batch whose caller
        still waits gets :data:`STOP_GRACE_S` to end; an idle child ends at once."""
        if self._loading:
            return False
        return not self._owed or any(not slot.done() for slot in self._owed)

    async def _stop(self) -> None:
        """Ask the child to end after the batches sent to it (see :meth:`_heeds_stop`), else kill it; then
        reap it, so that no zombie is left, and close its pipes. Cancelled meanwhile, it still does.

        The stop message is written without blocking, and not at all while a batch is still being
        written on a thread: that batch waits behind a running one the child may never finish (it hangs),
        so the pipe is full, and a blocking write here held the event loop, every request and the
        shutdown itself, for as long as the child hung (its bytes could also land inside the batch's)."""
        requests, proc = self._requests, self._proc
        try:
            if proc is not None and self._heeds_stop():
                loop = asyncio.get_running_loop()
                until = loop.time() + STOP_GRACE_S
                if self._sending is not None:
                    await asyncio.wait([self._sending], timeout=STOP_GRACE_S)
                if requests is not None and (self._sending is None or self._sending.done()):
                    with contextlib.suppress(OSError, ValueError):
                        os.set_blocking(requests.fileno(), False)  # a full pipe: killed below instead
                        requests.send(None)
                await asyncio.to_thread(proc.join, max(0.0, until - loop.time()))
        finally:
            sending = self._sending
            self._drop(stopping=True)  # killed if it has not ended; its pipes closed
            if sending is not None and not sending.done():  # its write fails now, and closes the pipe
                await asyncio.wait([sending], timeout=STOP_GRACE_S)
            await self._reap()

    def _reap_soon(self, proc: mp.process.BaseProcess) -> asyncio.Task[None] | None:
        """Collect a dropped child's exit status once it ends, on a thread, so that it is not left a
        zombie: one killed for stalling, or ended after its device was lost, or killed loading a model
        (a cancelled start) was reaped only by the next drop or close(), and a service that saw no more
        calls for that model kept it meanwhile. Returns its reaper (one per child at a time); none where
        no event loop runs (close() reaps it then)."""
        task = self._reapers.get(proc)
        if task is None or task.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return None
            task = loop.create_task(self._join(proc), name=f"reap:{self.name}")
            self._reapers[proc] = task
            task.add_done_callback(partial(self._reaped, proc))
        return task

    def _reaped(self, proc: mp.process.BaseProcess, task: asyncio.Task[None]) -> None:
        if self._reapers.get(proc) is task:
            del self._reapers[proc]

    async def _join(self, proc: mp.process.BaseProcess) -> None:
        """Wait for a dropped child to end, bounded: a killed child ends at once, but one stuck in the
        kernel (a GPU driver call) ends only when that returns; it stays in :attr:`_ended` then, for the
        next close() (or the next process start, which collects every ended child) to collect."""
        await asyncio.to_thread(proc.join, STOP_GRACE_S)
        if proc.exitcode is not None and proc in self._ended:
            self._ended.remove(proc)

    async def _reap(self) -> None:
        """Collect the exit status of every child dropped (killed, or ended on its own), so that none is
        left a zombie after close(): the reapers still waiting are waited for, and a child a reaper gave
        up on gets one more bounded wait. Cancelled meanwhile, the reapers go on."""
        reapers = [t for t in map(self._reap_soon, list(self._ended)) if t is not None]
        if reapers:
            await asyncio.wait(reapers)
