"""A dynamic micro-batcher: items from concurrent requests become one forward pass.

A GRPO trainer sends many small requests at once (one per prompt group, or one per rollout worker).
Run one by one, a model on a GPU (or a CPU with a BLAS library) spends most of its time on per-call
overhead; run together, the same items cost little more than the longest one. The batcher sits in front
of one model and:

1. queues items from every request (``submit_many``); a request whose items do not fit in the queue
   (``queue_max``) is refused whole with :class:`~rewardhub.errors.Overloaded` (429 + Retry-After), so a
   trainer backs off instead of piling up work that would miss its deadline anyway (an empty queue
   takes a request of any size, which would otherwise never get in). One request holds at most half
   the queue at a time: a larger one (a job of thousands of items) is fed in as its items finish, so
   it never fills the queue and refuses every other caller with 429 until it is done;
2. once an item is waiting, gathers more until ``max_batch`` items or ``max_wait_ms`` have passed since
   the oldest of them was queued, never more than half an item's time to its deadline (while a forward
   pass runs, new items simply accumulate, and the time they spent waiting for it counts, so under load
   batches start without waiting);
3. drops items whose caller stopped waiting (deadline passed, request cancelled), sorts the rest by
   length so padding is small, splits them so no forward pass exceeds ``max_tokens`` padded tokens, and
   runs each chunk through ``run`` (a coroutine; local models run it in a thread, never on the event loop);
4. scatters the outputs back to each caller's future. A failing chunk fails only its own items, with the
   :class:`~rewardhub.models.errors.BackendError` it raised; a chunk that *crashed*
   (:class:`~rewardhub.models.errors.ForwardCrashed`: the model process died in it, or it ran out of
   memory) is retried in parts, so the one item that crashes it fails alone and its neighbours are
   scored.

``max_batch=1`` turns batching off (one forward per item), which the benchmark compares against.

``in_flight=2`` (the service's default, ``REWARDHUB_BATCH_IN_FLIGHT``) lets a second pass start while
one runs, but only with a full batch (``max_batch`` live items): it is sent to the model process, which
begins it the moment the running one ends, instead of idling while that one's outputs cross back, are
scattered and the next batch is gathered and sent (~10% of the model process's time under 64 one-item
clients on the 2-core benchmark host, BENCHMARKS.md section 5). A batch that is not full still waits for
the running pass to end, so that a quiet service's batches keep filling up behind a pass as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import structlog

from rewardhub.errors import Overloaded, queue_retry_after
from rewardhub.models.errors import BackendError, BackendTimeout, ForwardCrashed

__all__ = ["BatcherStats", "MicroBatcher"]

log = structlog.get_logger("rewardhub.batcher")

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(slots=True)
class BatcherStats:
    """Counters for tests, /ready and the benchmark: how many forward passes of which sizes."""

    batches: int = 0
    items: int = 0
    dropped: int = 0  # items whose caller gave up before their forward pass
    rejected: int = 0  # items refused because the queue was full
    splits: int = 0  # crashed passes retried in parts (see MicroBatcher._split)
    sizes: Counter[int] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, object]:
        return {
            "batches": self.batches,
            "items": self.items,
            "dropped": self.dropped,
            "rejected": self.rejected,
            "splits": self.splits,
            "max_batch_seen": max(self.sizes, default=0),
        }


@dataclass(slots=True)
class _Entry(Generic[In, Out]):
    item: In
    future: asyncio.Future[Out]
    length: int
    wait_until: float  # ``time.monotonic()`` past which this item no longer waits for company


class MicroBatcher(Generic[In, Out]):
    """Gathers items into batches for ``run`` (see the module docstring).

    Args:
        name: label in metrics and logs (``transformers:prm``).
        run: coroutine turning a list of items into a list of outputs, same length and order.
        max_batch: most items per forward pass (1 = batching off).
        max_wait_ms: how long the first item of a batch waits for company.
        queue_max: most items waiting; beyond it requests are refused with 429.
        length: the item's size in tokens (sorting and the token budget).
        max_tokens: most padded tokens (items × longest) per forward pass; None = no limit.
        on_batch: called with each forward pass's size (the batch-size histogram).
        in_flight: most passes running or sent at once; a second one starts only with a full batch.
    """

    def __init__(
        self,
        name: str,
        run: Callable[[list[In]], Awaitable[list[Out]]],
        *,
        max_batch: int,
        max_wait_ms: float,
        queue_max: int,
        length: Callable[[In], int] = lambda _: 1,
        max_tokens: int | None = None,
        on_batch: Callable[[int], None] | None = None,
        in_flight: int = 1,
    ):
        if max_batch < 1 or queue_max < 1 or in_flight < 1:
            raise ValueError("max_batch, queue_max and in_flight must be at least 1")
        self.in_flight = in_flight
        self.name = name
        self._run = run
        self.max_batch = max_batch
        self.max_wait_s = max(0.0, max_wait_ms) / 1000
        self.queue_max = queue_max
        # Most places one request holds (queued or running) at a time: half the queue, so that a large
        # request leaves room for others, but never less than a forward pass.
        self.hold = max(1, min(queue_max, max(queue_max // 2, max_batch)))
        self._item_s: float | None = None  # recent seconds of forward pass per item (a moving average)
        self._done_at = 0.0  # when the last pass ended: a pass sent behind it began then, not when sent
        self._length = length
        self.max_tokens = max_tokens
        self._on_batch = on_batch
        self._queue: deque[_Entry[In, Out]] = deque()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # close() was called (and start() not since): items submitted now fail instead of starting a
        # worker nothing would stop
        self._closed = False
        self.stats = BatcherStats()

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self._closed = False
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name=f"batcher:{self.name}")

    async def close(self) -> None:
        """Stop the worker, wait for the passes in flight to answer their items, fail the queued ones.

        The worker ends cancelled because this cancels it; a cancellation of the task calling close()
        (counted by ``cancelling()``, as ``asyncio.timeout`` tells its own) is that caller's and goes on to
        it, once the items are answered: dropped with the worker's, close() returned as if never
        cancelled, and a timeout around it never fired."""
        task, self._task = self._task, None
        self._closed = True
        me = asyncio.current_task()
        cancels = me.cancelling() if me is not None else 0
        try:
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    if me is not None and me.cancelling() > cancels:
                        raise
        finally:
            while self._queue:
                e = self._queue.popleft()
                if not e.future.done():
                    e.future.set_exception(BackendError(f"batcher {self.name} is shutting down"))

    def depth(self) -> int:
        """Items waiting for a forward pass (not those whose caller stopped waiting)."""
        return sum(1 for e in self._queue if not e.future.done())

    def _purge(self) -> None:
        """Drop the entries nobody waits for (deadline passed, request cancelled): they would otherwise
        hold queue places, and refuse live requests with 429, until the worker reached them."""
        self._queue = deque(e for e in self._queue if not e.future.done())

    # --- submission ----------------------------------------------------------------------------
    def retry_after_s(self) -> float:
        """When a refused caller should come back: about when the items waiting now will have run, at
        the model's recent time per item (1 s before any pass has been timed, at most a minute). A fixed
        1 s sent clients back long before a queue of long items (2.5 s a pass) had moved, to be refused
        again."""
        if self._item_s is None:
            return 1.0
        return queue_retry_after(math.ceil(len(self._queue) * self._item_s))

    async def submit_many(self, items: Sequence[In], deadline: float) -> list[Out | BackendError]:
        """Queue ``items`` and wait for their outputs until ``deadline`` (``time.monotonic()``).

        At most :attr:`hold` of them wait in the queue or run at a time; the rest are queued as those
        finish (an item whose deadline passes before it was queued never reaches the model).

        Raises:
            Overloaded: the queue cannot take them (nothing was queued).
        """
        if not items:
            return []
        if self._closed:
            return [BackendError(f"batcher {self.name} is shutting down") for _ in items]
        if self._task is None:
            self.start()
        hold = min(len(items), self.hold)
        if len(self._queue) + hold > self.queue_max:
            self._purge()
        # An empty queue takes any request, however large: refusing it would be a 429 that no retry
        # can ever get past (the request's own size is bounded by REWARDHUB_MAX_ITEMS).
        if self._queue and len(self._queue) + hold > self.queue_max:
            self.stats.rejected += len(items)
            raise Overloaded(
                f"model batcher {self.name!r} has {len(self._queue)} items waiting (limit "
                f"REWARDHUB_BATCH_QUEUE_MAX={self.queue_max}); retry later",
                retry_after_s=self.retry_after_s(),
            )
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Out] | None] = [None] * len(items)
        pending: set[asyncio.Future[Out]] = set()
        queued = 0
        # Waiting for company must leave the item time to run: at most half of what it has left (a
        # max_wait longer than a request's timeout_s timed every item out on an idle model). Items fed
        # in later keep it: they have waited already.
        now = time.monotonic()
        wait_until = now + min(self.max_wait_s, max(0.0, deadline - now) / 2)

        def feed() -> None:
            nonlocal queued
            while queued < len(items) and len(pending) < hold:
                item = items[queued]
                fut: asyncio.Future[Out] = loop.create_future()
                self._queue.append(_Entry(item, fut, self._length(item), wait_until))
                futures[queued] = fut
                pending.add(fut)
                queued += 1
            self._wakeup.set()

        feed()
        try:
            while pending:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    break
                more = queued < len(items) and self._task is not None  # not after close()
                done, _ = await asyncio.wait(
                    pending,
                    timeout=timeout,
                    return_when=asyncio.FIRST_COMPLETED if more else asyncio.ALL_COMPLETED,
                )
                pending -= done
                if more and self._task is not None:
                    feed()
        except asyncio.CancelledError:  # the request went away: its items are not run
            for f in futures:
                if f is not None:
                    f.cancel()
            raise
        results: list[Out | BackendError] = []
        for f in futures:
            if f is None:
                if self._task is None:
                    results.append(BackendError(f"batcher {self.name} is shutting down"))
                else:
                    results.append(BackendTimeout("the item's deadline passed before it was queued"))
            elif not f.done():
                f.cancel()  # the worker skips it if it has not started it yet
                results.append(BackendTimeout("the item's deadline passed while it waited for the model"))
            elif f.cancelled():
                results.append(BackendError("the item was cancelled"))
            else:
                exc = f.exception()
                if exc is None:
                    results.append(f.result())
                else:
                    results.append(BackendError.of(exc))
        return results

    # --- the worker ----------------------------------------------------------------------------
    async def _loop(self) -> None:
        running: set[asyncio.Task[None]] = set()
        try:
            while True:
                if running and (len(running) >= self.in_flight or self._window()[0] < self.max_batch):
                    await self._until_more(running)  # a pass runs: the next goes now only if full
                    continue
                if not self._queue:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                batch = await self._gather()
                if not batch:
                    continue
                task = asyncio.get_running_loop().create_task(self._guarded(batch))
                running.add(task)
                task.add_done_callback(running.discard)
        except asyncio.CancelledError:  # closing: the passes in flight answer their items, then end
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise

    async def _until_more(self, running: set[asyncio.Task[None]]) -> None:
        """Until a running pass ends or an item is queued (which may complete a batch)."""
        self._wakeup.clear()
        waker = asyncio.ensure_future(self._wakeup.wait())
        try:
            await asyncio.wait({waker, *running}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waker.cancel()

    async def _guarded(self, batch: list[_Entry[In, Out]]) -> None:
        try:
            await self._run_batch(batch)
        except Exception as exc:
            # The forward pass's own errors are the items' (``_pass``); this is a defect around it (a
            # metrics callback, a sort key). Ending the task would leave this batch's callers, and every
            # later one, waiting out their deadlines for a worker that is gone.
            log.exception("batcher_error", batcher=self.name)
            self._fail(batch, BackendError.of(exc))

    async def _gather(self) -> list[_Entry[In, Out]]:
        """Wait until ``max_batch`` live items are queued, or the first of them to stop waiting for
        company (``max_wait`` after it was queued, or half its time to its deadline) does, then take them.

        The window is the items' own, not restarted per batch: items that queued up behind a long forward
        pass have already waited, and holding them another ``max_wait`` left the model idle between every
        two batches of a steady stream smaller than ``max_batch``."""
        while True:
            live, until = self._window()
            if not live or live >= self.max_batch:
                break
            left = until - time.monotonic()
            if left <= 0:
                break
            self._wakeup.clear()
            # not asyncio.wait_for: on Python 3.11 it returns, dropping the cancellation, when the event is
            # set in the turn close() cancels the worker (an item arriving as the service stops), and
            # close() then waited for ever for a worker that went on running
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._wakeup.wait()
        batch: list[_Entry[In, Out]] = []
        while self._queue and len(batch) < self.max_batch:
            e = self._queue.popleft()
            if e.future.done():
                self.stats.dropped += 1
                continue
            batch.append(e)
        return batch

    def _window(self) -> tuple[int, float]:
        """The next batch's live items (at most ``max_batch``) and when the first of them stops waiting."""
        n, until = 0, math.inf
        for e in self._queue:
            if not e.future.done():
                n += 1
                until = min(until, e.wait_until)
                if n >= self.max_batch:
                    break
        return n, until

    def _chunks(self, batch: list[_Entry[In, Out]]) -> list[list[_Entry[In, Out]]]:
        """Sorted by length; split so that items × longest stays within ``max_tokens``."""
        batch.sort(key=lambda e: e.length)
        if self.max_tokens is None:
            return [batch]
        chunks: list[list[_Entry[In, Out]]] = []
        current: list[_Entry[In, Out]] = []
        for e in batch:  # ascending, so the newest item is the longest of its chunk
            if current and (len(current) + 1) * e.length > self.max_tokens:
                chunks.append(current)
                current = []
            current.append(e)
        if current:
            chunks.append(current)
        return chunks

    async def _run_batch(self, batch: list[_Entry[In, Out]]) -> None:
        try:
            for chunk in self._chunks(batch):
                live = [e for e in chunk if not e.future.done()]
                self.stats.dropped += len(chunk) - len(live)
                if live:
                    await self._pass(live)
        except asyncio.CancelledError:  # closing: every item taken from the queue gets an answer, not
            for e in batch:  # only the pass in flight (the later chunks and parts waited until deadline)
                if not e.future.done():
                    e.future.set_exception(BackendError(f"batcher {self.name} is shutting down"))
            raise

    async def _pass(self, live: list[_Entry[In, Out]], retried: bool = False) -> BackendError | None:
        """One forward pass over ``live``; its outputs go to the items' futures. Returns the error the
        items failed with, if they did (a crash is not returned: it is split and retried, and each item
        gets its own outcome)."""
        self.stats.batches += 1
        self.stats.items += len(live)
        self.stats.sizes[len(live)] += 1
        if self._on_batch is not None:
            self._on_batch(len(live))
        started = time.monotonic()
        try:
            try:
                outputs = await self._run([e.item for e in live])
            finally:  # a failed pass also ended: the one sent behind it began then
                ended = time.monotonic()
                begun = max(started, self._done_at)
                self._done_at = ended
            if len(outputs) != len(live):
                raise RuntimeError(f"{len(outputs)} outputs for {len(live)} inputs")
        except ForwardCrashed as exc:
            if len(live) > 1:
                await self._split(live, exc)
                return None
            err: BackendError = exc
            if retried:
                err = ForwardCrashed(
                    f"{exc}; it did so with this item alone: the input, not its batch", exc.died
                )
            return self._fail(live, err)
        except Exception as exc:
            return self._fail(live, BackendError.of(exc))
        per_item = (ended - begun) / len(live)
        self._item_s = per_item if self._item_s is None else 0.8 * self._item_s + 0.2 * per_item
        for e, out in zip(live, outputs, strict=True):
            if not e.future.done():
                e.future.set_result(out)
        return None

    async def _split(self, live: list[_Entry[In, Out]], crash: ForwardCrashed) -> None:
        """Retry a crashed pass in parts, so that one item that crashes the model (or a batch too large
        for its memory) no longer fails every neighbour, on every retry of its request.

        A dead process reloads its model before the next pass: the parts are single items, so the
        reloads are one more per item that kills it (halving would cost one per level). Out of memory
        reloads nothing: halves, which fit sooner. A part that fails otherwise (the model no longer
        loads) fails the rest with it instead of trying again for each item."""
        self.stats.splits += 1
        log.warning("batch_split", batcher=self.name, items=len(live), died=crash.died, error=str(crash))
        if crash.died:
            parts = [[e] for e in live]
        else:
            half = (len(live) + 1) // 2
            parts = [live[:half], live[half:]]
        for i, part in enumerate(parts):
            part = [e for e in part if not e.future.done()]
            if not part:
                continue
            err = await self._pass(part, retried=True)
            if err is not None and not isinstance(err, ForwardCrashed):
                for rest in parts[i + 1 :]:
                    self._fail(rest, err)
                return

    def _fail(self, live: list[_Entry[In, Out]], err: BackendError) -> BackendError:
        log.warning("batch_failed", batcher=self.name, items=len(live), error=f"{type(err).__name__}: {err}")
        for e in live:
            if not e.future.done():
                e.future.set_exception(err)
        return err
