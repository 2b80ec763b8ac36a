"""Asynchronous scoring jobs: ``POST /v1/jobs`` now, ``GET /v1/jobs/{id}`` later, ``DELETE`` to cancel.

A job wraps exactly the scoring call of ``/v1/score``. Its state lives where the cache lives, unless jobs
have a Redis of their own:

* with Redis (``REWARDHUB_JOB_REDIS_URL``, else ``REWARDHUB_REDIS_URL``), in Redis — the job record, its
  request body, a "pending" index and the idempotency keys — so a restarted service (or another replica)
  finds unfinished jobs and runs them, and finished results stay retrievable for ``REWARDHUB_JOB_TTL_S``;
* with the embedded default, in process (a restart forgets jobs; use Redis when that matters).

``REWARDHUB_JOB_TTL_S`` counts from when a job finished: a job waiting or running is kept until it finishes
(the pending index makes some runner finish it), so a long queue cannot expire a job before it ran —
counted from submission, a job queued past the TTL vanished (404) or failed "the job's request body was
lost", and its Idempotency-Key lapsed so a retry made a second job.

Idempotency: a submission with an ``Idempotency-Key`` already seen (per API key) returns the existing job
and computes nothing; the same key with a different body is a 409. Running a job takes a short lease in
Redis, renewed while it runs, so two replicas never run the same job, and a job whose runner died is
picked up again once its lease expires. Re-running is safe: scoring is a pure function of the request.

Cancelling writes the job ``cancelled`` (its last write, as a finish is) at once, wherever it runs; a
runner's later writes of that job are dropped (the store's ``save`` reads the record first, in Redis under
WATCH), so a result that comes in after the cancel never replaces it; nor does any write replace a job
another runner finished (one that took it up after this runner's lease lapsed). Each job also has a small
summary (no result) and a per-API-key index, newest first, for ``GET /v1/jobs``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol, cast

import orjson
import structlog
from cachetools import TTLCache
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import RedisError, WatchError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_incrementing,
)

from rewardhub import jsonutil
from rewardhub.admission import Admission
from rewardhub.errors import (
    Conflict,
    LimitExceeded,
    NotFound,
    Overloaded,
    RewardHubError,
    ServiceUnavailable,
)
from rewardhub.protocol import ScoreRequest
from rewardhub.security import ANONYMOUS, ANONYMOUS_KEY_ID, Caller
from rewardhub.serving import ScoringService

__all__ = ["JOB_REDIS_TIMEOUT_S", "JobRunner", "JobStore", "MemoryJobStore", "RedisJobStore"]

log = structlog.get_logger("rewardhub.jobs")

_LEASE_S = 30.0
_RESCAN_S = 15.0
# Per Redis operation of the job store: a job's body or result can be tens of megabytes.
JOB_REDIS_TIMEOUT_S = 30.0
# A job's last write (its result) that fails is tried this many times (tenacity), then replaced by a small "failed"
# record: a result too large for Redis, or any write that keeps failing, left the job pending with its
# lease, and every runner took it up again and scored it again, for ever.
_SAVE_TRIES = 3
_SAVE_RETRY_S = 0.5
# How often a runner scoring a job reads whether it was cancelled meanwhile (by DELETE on another replica;
# one on this replica stops the scoring at once).
_CANCEL_POLL_S = 2.0
# A job started this many times without finishing (its last write failed each time, or its runner died
# with it: a process killed for memory) is marked failed instead of run again.
_MAX_STARTS = 3
_IDEM_CLAIM_S = 30  # an Idempotency-Key's claim before its job is written (then kept as long as the job)
_STORED = "stored"  # the mark of an Idempotency-Key (in Redis) whose job was written
#: A job's states after which nothing runs it again (its last write was made).
FINISHED = frozenset({"succeeded", "failed", "cancelled"})
#: What ``GET /v1/jobs`` shows of a job: all but its result (which can be tens of megabytes).
SUMMARY_FIELDS = ("job_id", "status", "created_at", "started_at", "finished_at", "items", "error")
#: ``GET /v1/jobs`` looks through an API key's newest jobs up to this many (its Redis index keeps no more).
LIST_WINDOW = 1000
_LIST_PAGE = 128  # ids read from the Redis index at a time
_WATCH_TRIES = 10  # a Redis transaction on a job's record retried when the record changed meanwhile


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class JobStore(Protocol):
    async def create(self, job: dict[str, Any], body: bytes, idem: str | None) -> tuple[dict[str, Any], bool]:
        """Store a new job, or return the job already holding ``idem`` (and False)."""
        ...

    async def find(self, idem: str, digest: str) -> dict[str, Any] | None:
        """The job already holding ``idem`` (Conflict if it was made from another body), or None."""
        ...

    async def get(self, job_id: str) -> dict[str, Any] | None: ...

    async def body(self, job_id: str) -> bytes | None: ...

    async def save(self, job: dict[str, Any], *, done: bool = False) -> bool:
        """Write the job (``done``: its last write, which gives it ``ttl_s``); False, writing nothing, when the
        job has finished meanwhile: cancelled, or finished by another runner, or its record is gone
        (evicted from Redis) (the runner drops what it has)."""
        ...

    async def cancel(self, job_id: str, now: float) -> dict[str, Any] | None:
        """Write a waiting or running job ``cancelled`` (as its last write: out of the pending index, its body
        gone) and return it; a finished job is returned as it is, None when there is no such job."""
        ...

    async def jobs_of(self, caller: str, status: str | None, limit: int) -> tuple[list[dict[str, Any]], bool]:
        """Summaries of ``caller``'s jobs (``SUMMARY_FIELDS``), newest first, of ``status`` if given, at most
        ``limit``, among its ``LIST_WINDOW`` newest; and whether more matched."""
        ...

    async def claim(self, job_id: str, owner: str) -> bool:
        """Take the job's lease; False when someone else holds it."""
        ...

    async def renew(self, job_id: str, owner: str) -> bool:
        """Extend the job's lease (taken back if it lapsed with no one taking it); False when another runner
        holds it now (this runner's lapsed, and the job is theirs)."""
        ...

    async def release(self, job_id: str, owner: str) -> None:
        """Give the lease back (the job was interrupted by a shutdown and will run again)."""
        ...

    async def pending(self) -> list[str]: ...

    async def forget(self, job_id: str) -> None:
        """Drop a pending job whose record is gone (expired, or evicted) from the pending index."""
        ...

    async def keep_listed(self, job_ids: list[str]) -> None:
        """Keep the waiting or running jobs ``job_ids`` (the pending index, read by the runner's rescan) in
        their API keys' listings (``jobs_of``), however long they wait."""
        ...


class MemoryJobStore:
    """In-process job state (the embedded default).

    Finished jobs are kept for ``ttl_s`` and within ``max_bytes`` of results (REWARDHUB_JOB_MAX_BYTES): a
    result can be tens of megabytes (a job of REWARDHUB_JOB_MAX_ITEMS items), and a day of them, one per
    training step, grew the process by gigabytes. Past the budget the oldest finished jobs go (the
    newest stays, whatever its size); a job waiting or running is never dropped for it."""

    def __init__(self, ttl_s: int, max_bytes: int = 1 << 30, timer: Callable[[], float] = time.monotonic):
        # finished jobs (and their keys) expire ``ttl_s`` after they finished; unfinished ones are held in
        # plain dicts until they finish, however long they wait
        self._jobs: TTLCache[str, dict[str, Any]] = TTLCache(maxsize=100_000, ttl=ttl_s, timer=timer)
        self._idem: TTLCache[str, tuple[str, str]] = TTLCache(maxsize=100_000, ttl=ttl_s, timer=timer)
        self._open: dict[str, dict[str, Any]] = {}
        self._open_idem: dict[str, tuple[str, str]] = {}
        self._bodies: dict[str, bytes] = {}
        self._pending: dict[str, None] = {}
        self._leases: set[str] = set()
        self.max_bytes = max_bytes
        self._finished: dict[str, int] = {}  # finished job -> its size in bytes, oldest first
        self._finished_bytes = 0
        # API key -> its newest LIST_WINDOW job ids, oldest first (GET /v1/jobs reads no more than these)
        self._by_caller: dict[str, dict[str, None]] = {}

    async def create(self, job: dict[str, Any], body: bytes, idem: str | None) -> tuple[dict[str, Any], bool]:
        digest = job["body_sha256"]
        held = (self._open_idem.get(idem) or self._idem.get(idem)) if idem is not None else None
        if held is not None:
            existing_id, existing_digest = held
            if existing_digest != digest:
                raise Conflict("this Idempotency-Key was already used with a different request body")
            existing = await self.get(existing_id)
            if existing is not None:
                return existing, False
        if idem is not None:
            job["idem"] = idem  # so the key is kept as long as the job (moved with it when it finishes)
            self._open_idem[idem] = (job["job_id"], digest)
        self._open[job["job_id"]] = job
        self._bodies[job["job_id"]] = body
        self._pending[job["job_id"]] = None
        mine = self._by_caller.setdefault(job.get("caller") or ANONYMOUS_KEY_ID, {})
        mine[job["job_id"]] = None
        if len(mine) > LIST_WINDOW:
            del mine[next(iter(mine))]
        return job, True

    async def find(self, idem: str, digest: str) -> dict[str, Any] | None:
        held = self._open_idem.get(idem) or self._idem.get(idem)
        if held is None:
            return None
        existing_id, existing_digest = held
        if existing_digest != digest:
            raise Conflict("this Idempotency-Key was already used with a different request body")
        return await self.get(existing_id)

    async def get(self, job_id: str) -> dict[str, Any] | None:
        return self._open.get(job_id) or self._jobs.get(job_id)

    async def body(self, job_id: str) -> bytes | None:
        return self._bodies.get(job_id)

    async def save(self, job: dict[str, Any], *, done: bool = False) -> bool:
        if job["job_id"] not in self._open and job["job_id"] in self._jobs:
            return False  # finished (its last write was made): cancelled, or by another worker
        if not done:
            self._open[job["job_id"]] = job
            return True
        self._open.pop(job["job_id"], None)
        self._jobs[job["job_id"]] = job  # its TTL starts now
        idem = job.get("idem")
        if idem is not None and idem in self._open_idem:
            self._idem[idem] = self._open_idem.pop(idem)
        self._pending.pop(job["job_id"], None)
        self._bodies.pop(job["job_id"], None)
        self._leases.discard(job["job_id"])
        self._keep_within_budget(job["job_id"], len(jsonutil.dumps(job)))
        return True

    async def cancel(self, job_id: str, now: float) -> dict[str, Any] | None:
        job = self._open.get(job_id)
        if job is None:
            return self._jobs.get(job_id)
        if job["status"] in FINISHED:
            # the runner's own record, which its scoring filled in (GET answers it so) before the runner
            # saves it: the job has finished, and keeps its outcome
            return job
        # a new record: the runner holds the old one and may still change it (it writes nothing more)
        cancelled = {**job, "status": "cancelled", "finished_at": now}
        await self.save(cancelled, done=True)
        return cancelled

    async def jobs_of(self, caller: str, status: str | None, limit: int) -> tuple[list[dict[str, Any]], bool]:
        ids = self._by_caller.get(caller, {})
        mine = []
        for job_id in list(ids):
            job = self._open.get(job_id) or self._jobs.get(job_id)
            if job is None:  # expired, or dropped past max_bytes
                del ids[job_id]
            else:
                mine.append(job)
        mine.sort(key=lambda job: job["created_at"], reverse=True)
        picked = [summary(job) for job in mine if status is None or job["status"] == status]
        return picked[:limit], len(picked) > limit

    def _keep_within_budget(self, job_id: str, size: int) -> None:
        """Count a newly finished job and drop the oldest finished ones past ``max_bytes`` (and forget
        those the TTL already took)."""
        self._finished_bytes += size - self._finished.pop(job_id, 0)
        self._finished[job_id] = size
        while len(self._finished) > 1:
            oldest = next(iter(self._finished))
            if oldest in self._jobs and self._finished_bytes <= self.max_bytes:
                break
            self._finished_bytes -= self._finished.pop(oldest)
            self._jobs.pop(oldest, None)

    async def claim(self, job_id: str, owner: str) -> bool:
        if job_id in self._leases:
            return False
        self._leases.add(job_id)
        return True

    async def renew(self, job_id: str, owner: str) -> bool:
        return True  # (one runner per process: no one else takes its jobs)

    async def release(self, job_id: str, owner: str) -> None:
        self._leases.discard(job_id)

    async def pending(self) -> list[str]:
        return list(self._pending)

    async def keep_listed(self, job_ids: list[str]) -> None:
        return None  # an unfinished job stays in its key's index (only expired or dropped jobs leave it)

    async def forget(self, job_id: str) -> None:
        self._pending.pop(job_id, None)
        self._bodies.pop(job_id, None)
        self._leases.discard(job_id)
        job = self._open.pop(job_id, None)
        if job is not None and job.get("idem") is not None:
            self._open_idem.pop(job["idem"], None)


class RedisJobStore:
    """Job state in Redis (survives restarts; shared by replicas).

    A waiting or running job's record, body and Idempotency-Key have no expiry; the job's last write
    (``save(done=True)``) gives the record and the key ``ttl_s`` from then and deletes the body."""

    P = "rh:v1"

    def __init__(self, redis: Redis, ttl_s: int):
        self.r = redis
        self.ttl_s = ttl_s

    def _k(self, kind: str, ident: str) -> str:
        return f"{self.P}:{kind}:{ident}"

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except (TimeoutError, RedisError, OSError) as exc:
            raise ServiceUnavailable(
                f"jobs need Redis, which is not answering ({type(exc).__name__})"
            ) from None

    async def create(self, job: dict[str, Any], body: bytes, idem: str | None) -> tuple[dict[str, Any], bool]:
        job_id, digest = job["job_id"], job["body_sha256"]
        if idem is not None:
            # Claimed for a short while only, made to last with the job's write below: a claim whose job
            # was never written (Redis failed in between) must not make every retry with the key wait for
            # that job and answer 503 for the whole TTL.
            key, claim = self._k("idem", idem), f"{job_id}|{digest}"
            raw: bytes | None = None
            for _ in range(3):
                claimed = await self._call(self.r.set(key, claim, nx=True, ex=_IDEM_CLAIM_S))
                if claimed:
                    break
                # the key and its expiry read together, before the job's record (see below)
                read = self.r.pipeline(transaction=True)
                read.get(key)
                read.ttl(key)
                raw, ttl = await self._call(read.execute())
                if raw is None:
                    # the claim went away between the two calls (given up by a failed write, or expired):
                    # take it again rather than compare the body with nothing
                    continue
                existing_id, existing_digest, stored = _held(raw)
                if existing_digest != digest:
                    raise Conflict("this Idempotency-Key was already used with a different request body")
                # A key that lasts (no expiry, or longer than any claim's) is its job's, marked or not: a
                # key written before keys were marked was made to last by PERSIST in the transaction that
                # wrote its job's record, and given the job's TTL with the job's last write. A claim
                # always expires within _IDEM_CLAIM_S. (Read before the record: a key seen lasting had
                # its record written already.)
                if not (stored or ttl == -1 or ttl > _IDEM_CLAIM_S):
                    break  # its job is being written (below, by the request that claimed the key)
                existing = await self.get(existing_id)
                if existing is not None:
                    return existing, False
                # Its job was stored and is gone: its record evicted before its key (a Redis with
                # maxmemory-policy volatile-lru evicts finished results, allkeys-lru any), or both
                # expiring as this ran. The key named no job until it expired (up to
                # REWARDHUB_JOB_TTL_S; never, for a job that was waiting), so every retry with it waited
                # for that job and answered 503; it is this job's now (as with the embedded store), if
                # it still names the one that is gone.
                claimed = await self._swap(key, raw, claim)
                if claimed:
                    break
            if not claimed:
                if raw is None:
                    raise ServiceUnavailable("a job with this Idempotency-Key is being created; retry")
                existing_id, _, _ = _held(raw)
                # The winner may still be writing its record: give it a moment.
                for _ in range(50):
                    existing = await self.get(existing_id)
                    if existing is not None:
                        return existing, False
                    await asyncio.sleep(0.02)
                raise ServiceUnavailable("a job with this Idempotency-Key is being created; retry")
        pipe = self.r.pipeline(transaction=True)
        if idem is not None:
            job["idem"] = idem  # so the job's last write can give the key its TTL
        self._write(pipe, job, done=False)
        pipe.set(self._k("job-body", job_id), body)
        pipe.zadd(self._k("jobs", "pending"), {job_id: job["created_at"]})
        if idem is not None:  # (no expiry until the job's last write; marked: its job is stored)
            pipe.set(self._k("idem", idem), f"{job_id}|{digest}|{_STORED}")
        try:
            await self._call(pipe.execute())
        except BaseException:
            # Give the claim up at once if Redis lets us (else it expires soon), unless the write happened
            # and only its answer was lost (a timeout, a dropped connection, a client that hung up): the
            # job exists and will run, and a retry with the key must find it, not make a second one.
            if idem is not None:
                with contextlib.suppress(Exception):
                    if not await self.r.exists(self._k("job", job_id)):
                        await self.r.delete(self._k("idem", idem))
            raise
        return job, True

    async def find(self, idem: str, digest: str) -> dict[str, Any] | None:
        raw = await self._call(self.r.get(self._k("idem", idem)))
        if not raw:
            return None
        existing_id, existing_digest, _ = _held(raw)
        if existing_digest != digest:
            raise Conflict("this Idempotency-Key was already used with a different request body")
        return await self.get(existing_id)

    async def _swap(self, key: str, old: bytes, new: str) -> bool:
        """Set ``key`` to ``new`` (as a claim) if it still holds ``old``."""

        def plan(raw: bytes | None) -> Callable[[Pipeline], None] | None:
            if raw != old:
                return None

            def write(pipe: Pipeline) -> None:
                pipe.set(key, new, ex=_IDEM_CLAIM_S)

            return write

        return await self._transaction(key, plan)

    async def get(self, job_id: str) -> dict[str, Any] | None:
        raw = await self._call(self.r.get(self._k("job", job_id)))
        return orjson.loads(raw) if raw else None

    async def body(self, job_id: str) -> bytes | None:
        raw: bytes | None = await self._call(self.r.get(self._k("job-body", job_id)))
        return raw

    def _write(self, pipe: Pipeline, job: dict[str, Any], *, done: bool) -> None:
        """Queue the writes of ``job`` on ``pipe``: its record and summary, its place in its key's index, and
        with ``done`` what its last write does (the TTL from now, out of the pending index, body and lease
        deleted)."""
        job_id = job["job_id"]
        ttl = self.ttl_s if done else None
        pipe.set(self._k("job", job_id), jsonutil.dumps(job), ex=ttl)
        pipe.set(self._k("job-sum", job_id), jsonutil.dumps(summary(job)), ex=ttl)
        self._list(pipe, job.get("caller") or ANONYMOUS_KEY_ID, {job_id: job["created_at"]})
        if done:
            pipe.zrem(self._k("jobs", "pending"), job_id)
            pipe.delete(self._k("job-body", job_id), self._k("job-lease", job_id))
            if job.get("idem") is not None:
                pipe.expire(self._k("idem", job["idem"]), self.ttl_s)

    def _list(self, pipe: Pipeline, caller: str, jobs: dict[str, float]) -> None:
        """Queue on ``pipe`` the writes putting ``jobs`` (id -> created_at) in ``caller``'s index.

        The index lives ``ttl_s`` from its latest write (the TTL of the key's latest finished job, at least),
        and keeps the key's newest LIST_WINDOW jobs; an id whose job expired is dropped as a listing meets
        it. A job waiting longer than the TTL, with no other write from its key meanwhile, is kept in it by
        the runner's rescan (``keep_listed``): the index expired under it, and the job, still queued, was
        missing from ``GET /v1/jobs`` until it started."""
        index = self._k("jobs-of", caller)
        pipe.zadd(index, jobs)
        pipe.zremrangebyrank(index, 0, -LIST_WINDOW - 1)
        pipe.expire(index, self.ttl_s)

    async def _transaction(
        self, key: str, plan: Callable[[bytes | None], Callable[[Pipeline], None] | None]
    ) -> bool:
        """Read ``key`` and make the writes ``plan`` answers for its value (None: none, and False is returned)
        in a transaction that fails if the key changed since the read (WATCH), read and planned again then."""
        try:
            async with self.r.pipeline(transaction=True) as pipe:
                for _ in range(_WATCH_TRIES):
                    try:
                        await pipe.watch(key)
                        writes = plan(cast(bytes | None, await pipe.get(key)))
                        if writes is None:
                            return False
                        pipe.multi()  # type: ignore[no-untyped-call]
                        writes(pipe)
                        await pipe.execute()
                        return True
                    except WatchError:
                        continue
        except (TimeoutError, RedisError, OSError) as exc:
            raise ServiceUnavailable(
                f"jobs need Redis, which is not answering ({type(exc).__name__})"
            ) from None
        raise ServiceUnavailable(f"{key} kept changing during {_WATCH_TRIES} tries to write it; retry")

    async def save(self, job: dict[str, Any], *, done: bool = False) -> bool:
        def plan(raw: bytes | None) -> Callable[[Pipeline], None] | None:
            # Nothing is written over a finished job: a cancel, and also another runner's result (it took
            # the job up after this runner's lease lapsed): this runner's shutdown hand-back wrote the job
            # "queued" over it, without a TTL and out of the pending index, so it was never run nor
            # expired and its result was gone; its own outcome replaced the other's.
            # Nor over a record that is gone: a waiting or running job's record evicted (allkeys-lru) was
            # written afresh by the runner's next write, outside the pending index (its entry forgotten
            # or evicted too) and without a TTL, a "running" job no runner would take up or expire.
            if raw is None or orjson.loads(raw).get("status") in FINISHED:
                return None
            return lambda pipe: self._write(pipe, job, done=done)

        return await self._transaction(self._k("job", job["job_id"]), plan)

    async def cancel(self, job_id: str, now: float) -> dict[str, Any] | None:
        read: list[dict[str, Any]] = []

        def plan(raw: bytes | None) -> Callable[[Pipeline], None] | None:
            read[:] = [orjson.loads(raw)] if raw else []
            if not read or read[0]["status"] in FINISHED:
                return None
            read[0].update(status="cancelled", finished_at=now)
            return lambda pipe: self._write(pipe, read[0], done=True)

        await self._transaction(self._k("job", job_id), plan)
        return read[0] if read else None

    async def jobs_of(self, caller: str, status: str | None, limit: int) -> tuple[list[dict[str, Any]], bool]:
        index = self._k("jobs-of", caller)
        picked: list[dict[str, Any]] = []
        seen: set[str] = set()  # a job submitted between two pages moves the ids after it down by one
        start = 0
        while start < LIST_WINDOW:
            asked = min(_LIST_PAGE, LIST_WINDOW - start)
            ids = [i.decode() for i in await self._call(self.r.zrevrange(index, start, start + asked - 1))]
            if not ids:
                break
            raws = await self._call(self.r.mget([self._k("job-sum", i) for i in ids]))
            gone = [i for i, raw in zip(ids, raws, strict=True) if raw is None]
            if gone:  # expired: out of the index, and the ids after them move up by as many
                await self._call(self.r.zrem(index, *gone))
            start += len(ids) - len(gone)
            found = [
                orjson.loads(raw)
                for i, raw in zip(ids, raws, strict=True)
                if raw is not None and i not in seen
            ]
            seen.update(ids)
            picked += [job for job in found if status is None or job["status"] == status]
            if len(picked) > limit or len(ids) < asked:  # enough, or the end of the index
                break
        return picked[:limit], len(picked) > limit

    async def claim(self, job_id: str, owner: str) -> bool:
        ok = await self._call(self.r.set(self._k("job-lease", job_id), owner, nx=True, ex=int(_LEASE_S)))
        return bool(ok)

    async def renew(self, job_id: str, owner: str) -> bool:
        """Compared and set (WATCH): a lease that lapsed (a renewal lost to a Redis that did not answer, a
        loop held up) and was taken by another runner was overwritten with this runner's name, and both
        ran the job to its end, each writing its result; the other's lease is left alone now."""
        key = self._k("job-lease", job_id)

        def plan(raw: bytes | None) -> Callable[[Pipeline], None] | None:
            if raw is not None and raw.decode() != owner:
                return None

            def write(pipe: Pipeline) -> None:
                pipe.set(key, owner, ex=int(_LEASE_S))

            return write

        try:
            return await self._transaction(key, plan)
        except RewardHubError:
            return True  # Redis not answering: tried again at the next renewal

    async def release(self, job_id: str, owner: str) -> None:
        """Compared and deleted (WATCH): read, then deleted, a lease that lapsed between the two and was
        taken by another runner was deleted under it, and a third could take the job up too."""
        key = self._k("job-lease", job_id)

        def plan(raw: bytes | None) -> Callable[[Pipeline], None] | None:
            if raw is None or raw.decode() != owner:
                return None

            def write(pipe: Pipeline) -> None:
                pipe.delete(key)

            return write

        with contextlib.suppress(RewardHubError):
            await self._transaction(key, plan)

    async def pending(self) -> list[str]:
        ids = await self._call(self.r.zrange(self._k("jobs", "pending"), 0, -1))
        return [i.decode() if isinstance(i, bytes) else str(i) for i in ids]

    async def keep_listed(self, job_ids: list[str]) -> None:
        """Put each unfinished job back in its key's index, and give the index ``ttl_s`` again: the records
        read (an MGET a page at a time: a waiting job's record holds no result) and one pipeline, however
        many jobs wait. (A job finishing meanwhile is put in the index by its own last write too.)"""
        by_caller: dict[str, dict[str, float]] = {}
        for start in range(0, len(job_ids), _LIST_PAGE):
            page = job_ids[start : start + _LIST_PAGE]
            raws = await self._call(self.r.mget([self._k("job", i) for i in page]))
            for job_id, raw in zip(page, raws, strict=True):
                # (a record this cannot read is skipped: the rescan that called it goes on)
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    job = orjson.loads(raw) if raw else None
                    if job is not None and job["status"] not in FINISHED:
                        mine = by_caller.setdefault(job.get("caller") or ANONYMOUS_KEY_ID, {})
                        mine[job_id] = float(job["created_at"])
        if by_caller:
            pipe = self.r.pipeline(transaction=False)
            for caller, jobs in by_caller.items():
                self._list(pipe, caller, jobs)
            await self._call(pipe.execute())

    async def forget(self, job_id: str) -> None:
        pipe = self.r.pipeline(transaction=True)
        pipe.zrem(self._k("jobs", "pending"), job_id)
        pipe.delete(self._k("job-body", job_id), self._k("job-sum", job_id))
        await self._call(pipe.execute())


def _held(raw: bytes) -> tuple[str, str, bool]:
    """What an Idempotency-Key holds: its job's id, the digest of that job's body, and whether the job was
    stored (a claim whose job is still being written is not marked)."""
    job_id, _, rest = raw.decode().partition("|")
    digest, _, mark = rest.partition("|")
    return job_id, digest, mark == _STORED


def _fail(job: dict[str, Any], message: str, error_type: str = "internal_error", **more: Any) -> None:
    """Mark ``job`` failed now, with the error a client polling it reads (``more``: e.g. ``param``)."""
    job.update(
        status="failed", finished_at=time.time(), error={"type": error_type, "message": message, **more}
    )


def summary(job: dict[str, Any]) -> dict[str, Any]:
    """What ``GET /v1/jobs`` shows of the job (no result)."""
    return {k: job.get(k) for k in SUMMARY_FIELDS}


def public(job: dict[str, Any]) -> dict[str, Any]:
    """The job as the API shows it (internal bookkeeping left out)."""
    return {k: v for k, v in job.items() if k not in ("body_sha256", "caller", "idem", "starts")}


class JobRunner:
    """Runs queued jobs with bounded concurrency; resumes unfinished ones at start and periodically."""

    def __init__(
        self,
        store: JobStore,
        scoring: ScoringService,
        admission: Admission,
        *,
        concurrency: int,
        queue_max: int,
        max_items: int,
        queue_max_per_key: int = 0,
    ):
        self.store = store
        self.scoring = scoring
        self.admission = admission
        self.concurrency = concurrency
        self.queue_max = queue_max
        self.max_items = max_items
        self.queue_max_per_key = queue_max_per_key
        self._owners: dict[str, str] = {}  # queued job -> the key that submitted it here
        self.owner = f"runner-{uuid.uuid4().hex[:12]}"
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._scoring: dict[str, asyncio.Task[None]] = {}  # job -> its scoring here, which a cancel stops
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._worker(i)) for i in range(self.concurrency)]
        self._tasks.append(asyncio.create_task(self._rescan_loop()))

    async def close(self) -> None:
        """Stop the workers and the rescan loop.

        A cancellation that lands inside a Redis call can come back out of redis-py as a connection
        error, which the loops treat as "Redis is down" and survive; so the flag stops them at their next
        turn, and a task still running after a short wait is cancelled again.
        """
        self._closing = True
        for _ in range(5):
            pending = [t for t in self._tasks if not t.done()]
            if not pending:
                break
            for t in pending:
                t.cancel()
            await asyncio.wait(pending, timeout=1.0)
        for t in self._tasks:
            if t.done() and not t.cancelled():
                t.exception()  # retrieved, so asyncio does not log it as never retrieved

    def _enqueue(self, job_id: str) -> None:
        if job_id not in self._queued:
            self._queued.add(job_id)
            self._queue.put_nowait(job_id)

    async def resume(self) -> int:
        """Queue every unfinished job (after a restart, or one a dead replica left behind), keep each in its
        key's listing however long it waits, and let go of the places of queued jobs no longer pending
        (cancelled by a DELETE that reached another replica)."""
        with contextlib.suppress(RewardHubError):
            known = set(self._queued)  # (a job queued after the read below is pending, unread)
            ids = await self.store.pending()
            gone = known - set(ids)
            self._queued -= gone  # its entry in the queue stays; the worker that gets to it skips it
            for job_id in gone:
                self._owners.pop(job_id, None)
            for job_id in ids:
                self._enqueue(job_id)
            # a job waiting longer than REWARDHUB_JOB_TTL_S stays in its key's GET /v1/jobs
            await self.store.keep_listed(ids)
            return len(ids)
        return 0

    async def _rescan_loop(self) -> None:
        """Rescan every ``_RESCAN_S``. ``resume`` survives Redis being down; any other failure of a turn (a
        record this code cannot read, a bug) is logged and the next turn runs: the loop ending would leave
        jobs handed back by other replicas, and cancels made there, unseen for the life of the process."""
        while not self._closing:
            try:
                await self.resume()
            except Exception:
                log.exception("job_rescan_failed")
            await asyncio.sleep(_RESCAN_S)

    async def submit(
        self, body: bytes, request: ScoreRequest, caller: Caller, idempotency_key: str | None
    ) -> tuple[dict[str, Any], bool]:
        if len(request.items) > self.max_items:
            raise LimitExceeded(
                f"items: {len(request.items)} items exceed the limit of {self.max_items} per job "
                f"(setting REWARDHUB_JOB_MAX_ITEMS)",
                param="items",
            )
        self.scoring.validate(request, max_items=self.max_items)  # 404 / 422 now, not when it runs
        idem = f"{caller.key_id}:{idempotency_key}" if idempotency_key else None
        digest = body_digest(body)
        full = self._no_room(caller)
        if full is not None:
            # a retry of a job that exists is answered with that job, full queue or not: a client that
            # lost the 202 must not be told "429, try later" about work it already handed over
            existing = await self.store.find(idem, digest) if idem else None
            if existing is not None:
                return public(existing), False
            raise full
        now = time.time()
        job = {
            "job_id": f"job_{uuid.uuid4().hex}",
            "status": "queued",
            "created_at": now,
            "started_at": None,
            "finished_at": None,
            "items": len(request.items),
            "result": None,
            "error": None,
            "body_sha256": digest,
            "caller": caller.key_id,
        }
        stored, created = await self.store.create(job, body, idem)
        if created:
            self._owners[stored["job_id"]] = caller.key_id
            self._enqueue(stored["job_id"])
        return public(stored), created

    def _no_room(self, caller: Caller) -> Overloaded | None:
        """Why a new job of ``caller`` cannot be queued now (the queue, or the key's share of it is full)."""
        if len(self._queued) >= self.queue_max:
            return Overloaded(
                f"{len(self._queued)} jobs are waiting (limit {self.queue_max}, REWARDHUB_JOB_QUEUE_MAX)",
                retry_after_s=5.0,
            )
        if self.queue_max_per_key and not caller.anonymous:
            mine = sum(1 for key in self._owners.values() if key == caller.key_id)
            if mine >= self.queue_max_per_key:
                return Overloaded(
                    f"this API key has {mine} jobs waiting or running (limit {self.queue_max_per_key} per "
                    "key, REWARDHUB_JOB_QUEUE_MAX_PER_KEY)",
                    retry_after_s=5.0,
                )
        return None

    async def get(self, job_id: str, caller: Caller) -> dict[str, Any]:
        return public(_owned(await self.store.get(job_id), job_id, caller))

    async def cancel(self, job_id: str, caller: Caller) -> dict[str, Any]:
        """Cancel the caller's waiting or running job and answer it, ``cancelled`` (again, for a job already
        cancelled: a retried DELETE); a finished job is a Conflict (its result stands)."""
        _owned(await self.store.get(job_id), job_id, caller)
        job = _owned(await self.store.cancel(job_id, time.time()), job_id, caller)
        if job["status"] != "cancelled":
            raise Conflict(
                f"job {job_id!r} has already {job['status']}: only a queued or running job can be "
                "cancelled (GET it for its outcome)",
                param="job_id",
            )
        self._stop(job_id)
        # its place in the queue (and in its key's share, REWARDHUB_JOB_QUEUE_MAX_PER_KEY) is free now
        self._queued.discard(job_id)
        self._owners.pop(job_id, None)
        log.info("job_cancelled", job_id=job_id)
        return public(job)

    async def jobs(self, caller: Caller, status: str | None, limit: int) -> dict[str, Any]:
        """The caller's jobs, newest first, without their results (``GET /v1/jobs``)."""
        found, more = await self.store.jobs_of(caller.key_id, status, limit)
        return {"data": [summary(job) for job in found], "has_more": more}

    def _stop(self, job_id: str) -> None:
        """Stop the job's scoring if it runs here (its runner then writes nothing)."""
        scoring = self._scoring.get(job_id)
        if scoring is not None:
            scoring.cancel()

    async def _worker(self, index: int) -> None:
        while not self._closing:
            job_id = await self._queue.get()
            try:
                await self._run(job_id)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("job_runner_error", job_id=job_id)
            finally:
                self._queued.discard(job_id)
                self._owners.pop(job_id, None)

    async def _run(self, job_id: str) -> None:
        job = await self.store.get(job_id)
        if job is None:
            # expired or evicted before it ran: out of the pending index, or every rescan takes it up again
            await self.store.forget(job_id)
            return
        if job["status"] in FINISHED:
            return
        try:
            claimed = await self.store.claim(job_id, self.owner)
            # Read again under the lease: another runner (worker, replica) may have finished the job
            # between the read above and the claim, dropping its lease as it did; run from the old
            # record, this one found the body gone and wrote the finished job over as failed.
            current = await self.store.get(job_id) if claimed else None
        except asyncio.CancelledError:
            # The lease may have been taken with the answer lost: give it back if it is ours.
            with contextlib.suppress(Exception):
                await self.store.release(job_id, self.owner)
            raise
        if not claimed:
            return  # another runner (replica) has it
        if current is None or current["status"] in FINISHED:
            await self.store.release(job_id, self.owner)
            return
        job = current
        starts = int(job.get("starts") or 0)
        try:
            scored = await self._run_claimed(job_id, job)
            finished = scored and await self._finish(job_id, job)
        except asyncio.CancelledError:
            # Shutdown before the job finished (scoring it, still reading its body, or writing its result,
            # which for a large one over a slow link takes a while): hand the job back so the next start
            # (or another replica) runs it at once, not after its lease expires.
            # A shutdown is not one of the job's failed starts: the start this runner counted (if it got
            # that far; the job may be running, or have just reached its outcome) is given back.
            job["starts"] = starts
            # (an outcome the scoring reached as the shutdown came is not written: the job runs again;
            # a result write that did land as the shutdown came stands: nothing is written over it)
            job.update(status="queued", started_at=None, finished_at=None, result=None, error=None)
            with contextlib.suppress(Exception):
                await self.store.save(job)
            with contextlib.suppress(Exception):
                await self.store.release(job_id, self.owner)
            raise
        if finished:
            log.info("job_done", job_id=job_id, status=job["status"], items=job["items"])
            return
        # cancelled meanwhile (the cancel was the job's last write, and its lease went with it), or taken
        # up by another runner after this one's lease lapsed (it runs the job; release leaves its lease)
        await self.store.release(job_id, self.owner)
        log.info("job_dropped", job_id=job_id, reason="cancelled or taken over")

    async def _finish(self, job_id: str, job: dict[str, Any]) -> bool:
        """The job's last write, tried ``_SAVE_TRIES`` times; then the job is written as failed without its
        result (a few hundred bytes, which a Redis that refused the result still takes). If even that
        fails, Redis is down: the error propagates, the lease expires and the job runs again later (at
        most ``_MAX_STARTS`` times in all). False when the job was cancelled meanwhile (nothing written)."""

        def failed(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            log.warning(
                "job_save_failed",
                job_id=job_id,
                attempt=state.attempt_number,
                error=getattr(exc, "message", exc),
            )

        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(_SAVE_TRIES),
                wait=wait_incrementing(_SAVE_RETRY_S, _SAVE_RETRY_S),  # 0.5 s, then 1 s
                retry=retry_if_exception_type(RewardHubError),
                after=failed,
                reraise=True,
            ):
                with attempt:
                    saved = await self.store.save(job, done=True)
            return saved
        except RewardHubError as exc:
            error = exc.message
        size = len(jsonutil.dumps(job.get("result")))
        job["result"] = None
        _fail(
            job,
            f"the job's result ({size} bytes) could not be stored after {_SAVE_TRIES} tries: {error}"[:500],
        )
        return await self.store.save(job, done=True)

    async def _run_claimed(self, job_id: str, job: dict[str, Any]) -> bool:
        """Score the job whose lease this runner holds; its outcome is left in ``job`` (not yet saved).
        False when the job was cancelled, or its lease lost to another runner, before it had one (nothing
        to write)."""
        body = await self.store.body(job_id)
        if body is None:
            _fail(job, "the job's request body was lost")
            return True
        starts = int(job.get("starts") or 0) + 1
        if starts > _MAX_STARTS:
            _fail(
                job,
                f"the job was started {starts - 1} times and never finished (its result could not be "
                "stored, or its runner died with it); it is not run again",
            )
            return True
        job.update(status="running", started_at=time.time(), starts=starts)
        if not await self.store.save(job):
            return False
        # The scoring runs in a task of its own, which a cancel stops without stopping this worker.
        scoring = asyncio.create_task(self._score(job_id, job, body))
        self._scoring[job_id] = scoring
        watch = asyncio.create_task(self._keep_lease(job_id, scoring))
        try:
            await asyncio.wait([scoring])
        except asyncio.CancelledError:  # shutdown: the scoring stops with the worker
            scoring.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await scoring
            raise
        finally:
            # The lease keeper ends before the job's lease is released or the job handed back: one still
            # running would renew the lease after that (a renewal takes a lapsed lease back) and keep the
            # next start, or another replica, off the job for _LEASE_S. A cancel landing inside its Redis
            # call can come back as a connection error, which it survives; it also stops at its next
            # turn, the scoring being done. (asyncio.wait: a shutdown's cancel of this task propagates.)
            watch.cancel()
            await asyncio.wait([watch])
            self._scoring.pop(job_id, None)
        return not scoring.cancelled()

    async def _score(self, job_id: str, job: dict[str, Any], body: bytes) -> None:
        try:
            request = ScoreRequest.model_validate_json(body)
            caller = Caller(job.get("caller") or ANONYMOUS.key_id)
            waiting_since = time.monotonic()  # kept across retries: its place in the admission line
            while True:
                try:
                    async with self.admission.admit_when_room(caller, request.work, since=waiting_since):
                        result = await self.scoring.score(
                            request, max_items=self.max_items, tenant=caller.key_id
                        )
                    break
                except Overloaded as exc:  # a job waits for room (e.g. a full CPU queue) instead of failing
                    await asyncio.sleep(exc.retry_after_s)
            job.update(status="succeeded", finished_at=time.time(), result=result)
        except RewardHubError as exc:
            _fail(job, exc.message, exc.error_type, param=exc.param)
        except Exception as exc:
            log.exception("job_failed", job_id=job_id)
            _fail(job, f"{type(exc).__name__}: {exc}"[:300])

    async def _keep_lease(self, job_id: str, scoring: asyncio.Task[None]) -> None:
        """While the job is scored: renew its lease, and stop the scoring once the job was cancelled
        elsewhere (a DELETE that reached another replica) or finished by another runner (one that took it
        up after this runner's lease lapsed, and whose last write deleted the lease: this runner's next
        renewal took it back, and it scored the job to its end, for a result the store then dropped).
        (In process the record read is the runner's own, which the scoring marks finished as it ends.)

        The first read is made at once, the scoring registered: a cancel that committed between this
        runner's "running" write and that registration (a DELETE here then found no scoring to stop, one
        elsewhere came just after the write) was seen only at the next poll, the scoring holding its slot
        meanwhile. Any cancel committed later stops it at once here, or at a poll from elsewhere."""
        renewed = time.monotonic()
        while not scoring.done():
            with contextlib.suppress(RewardHubError):
                current = await self.store.get(job_id)
                if current is not None and current["status"] in FINISHED:
                    self._stop(job_id)
                    return
            await asyncio.sleep(_CANCEL_POLL_S)
            if scoring.done():
                return  # (no renewal for a job whose scoring is over: its lease goes with its last write)
            if time.monotonic() - renewed >= _LEASE_S / 3:
                if not await self.store.renew(job_id, self.owner):
                    # another runner took the job up after this one's lease lapsed: it is theirs now
                    log.warning("job_lease_lost", job_id=job_id)
                    self._stop(job_id)
                    return
                renewed = time.monotonic()


def _owned(job: dict[str, Any] | None, job_id: str, caller: Caller) -> dict[str, Any]:
    """``job`` if ``caller`` submitted it, else NotFound. A job belongs to the API key that submitted it
    (as its Idempotency-Key does): another key gets the same 404 as an unknown id, so it learns neither the
    result nor that the job exists."""
    if job is None or (job.get("caller") or ANONYMOUS.key_id) != caller.key_id:
        raise NotFound(
            f"no job {job_id!r} (unknown, or expired after REWARDHUB_JOB_TTL_S; without Redis, also "
            "dropped past REWARDHUB_JOB_MAX_BYTES or lost with a restart)",
            param="job_id",
        )
    return job
