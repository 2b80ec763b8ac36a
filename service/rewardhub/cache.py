"""Result cache: an embedded TTL-LRU by default, Redis when ``REWARDHUB_REDIS_URL`` is set.

Both speak bytes and batches: one ``get_many`` (Redis ``MGET``, one after the other in parts of 256 keys
for more) and one ``set_many`` (one pipelined round trip of ``SET ... EX``; more than 4 MB of values in
several) per request, never a round trip per item.

The cache is an accelerator, never a dependency: when Redis stops answering, :class:`RedisCache` marks
itself down, turns every lookup into a miss and every write into a no-op (counted in the metrics), and a
background task pings Redis until it answers again. A command Redis answers with an error (a write over
``maxmemory`` under ``noeviction``, a write to a read-only replica) is counted and dropped, without
marking Redis down: its reads still serve. A request therefore never fails because of the cache, and
waits no longer than ``REWARDHUB_REDIS_TIMEOUT_S`` on a Redis that stopped answering.

Claims (single flight across processes, serving.py): Redis is shared by every worker and replica, so
an item one process is scoring is claimed there too, under ``rh:claim:<its cache key>``, valued by the
claiming request's :class:`Claims` (this process's token, then the request's own part). Without them a
client's retry of a batch still being scored that landed on another worker scored every item again. A
claim is taken, or an item another process holds looked up, by :meth:`RedisCache.claim` (one script per
256 keys: the result if it is in the cache by now, else the claim taken when it is free or this
process's, else "held elsewhere"); it is released with the request's write of its results, in the same
pipeline after them, so another process sees the claim until it can see the result. A claim lives
``CLAIM_TTL_S`` and the process renews those it holds every third of it: a holder that crashed or lost
Redis frees its items within that time, while a batch that scores for minutes keeps them. Only requests
with misses make these round trips; a lookup is still one ``MGET``. The embedded and null caches take
no claims (their ``claim`` answers None), nor does a Redis that is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from cachetools import TTLCache
from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from rewardhub import jsonutil

__all__ = [
    "CLAIM_TTL_S",
    "Cache",
    "Claims",
    "MemoryCache",
    "NullCache",
    "RedisCache",
    "config_digest",
    "item_key",
]

log = structlog.get_logger("rewardhub.cache")

KEY_PREFIX = "rh:v1"

# redis-py bounds the send of a whole pipeline, and the read of each reply, by the socket timeout
# (REWARDHUB_REDIS_TIMEOUT_S): one large batch (4,096 code results with their test logs, tens of MB) took
# longer than that on a healthy Redis, which was then marked down. A lookup of more keys is several MGETs,
# each sent once the one before it was answered (Redis answers a pipeline only once it has run all of it,
# so in one pipeline the first reply waited for the whole batch), and a write of more bytes several
# pipelines (one round trip for all but the largest batches).
_MGET_KEYS = 256
_WRITE_BYTES = 4 << 20

CLAIM_PREFIX = "rh:claim:"
# How long a claim outlives its holder's last renewal (renewed every third of it while held), seconds.
CLAIM_TTL_S = 10.0

# KEYS: n result keys, then their n claim keys. ARGV: the claim's value, this process's token, the TTL
# in ms. Per key: the result when the cache holds it; else 1 once the claim is this request's (it was
# free, or this process's: within a process the requests' own single flight decides who scores); else 0.
_CLAIM = """
local n = #KEYS / 2
local out = {}
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v then
    out[i] = v
  else
    local c = redis.call('GET', KEYS[n + i])
    if (not c) or string.sub(c, 1, #ARGV[2]) == ARGV[2] then
      redis.call('SET', KEYS[n + i], ARGV[1], 'PX', ARGV[3])
      out[i] = 1
    else
      out[i] = 0
    end
  end
end
return out
"""
# KEYS: claim keys; ARGV[1]: the value they must still have; ARGV[2]: "del", or a TTL in ms to renew them
# with. Per key 1 when it was still this value (another request of the process may have taken it over).
_SETTLE = """
local out = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    if ARGV[2] == 'del' then redis.call('DEL', KEYS[i]) else redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
"""


class Claims:
    """The items one request claimed in Redis, released together with the write of its results.

    ``value`` is this process's token followed by the request's own part: a request sees an item
    claimed by its own process as free (its process's requests wait for each other in memory), and
    releases only a claim still its own, not one another request of the process has taken over since."""

    __slots__ = ("keys", "value")

    def __init__(self, value: str):
        self.value = value
        self.keys: set[str] = set()  # the cache keys claimed and not released yet


def config_digest(config: dict[str, Any]) -> bytes:
    """Canonical JSON of a validated config (defaults filled in, keys sorted): equal configs hash equal."""
    return jsonutil.canonical(config)


def item_key(name: str, version: str, config_json: bytes, fields: Sequence[Any]) -> str:
    """``rh:v1:{name}:{version}:{sha256(config, fields the reward reads)}``."""
    h = hashlib.sha256(config_json)
    h.update(b"\x00")
    h.update(jsonutil.canonical(list(fields)))
    return f"{KEY_PREFIX}:{name}:{version}:{h.hexdigest()}"


class Cache(Protocol):
    backend: str

    @property
    def up(self) -> bool: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]: ...

    async def set_many(self, pairs: Sequence[tuple[str, bytes]], claims: Claims | None = None) -> None:
        """Write ``pairs``, then release ``claims`` (after them: whoever sees a claim gone sees the result)."""
        ...

    async def ping(self) -> bool: ...

    def new_claims(self) -> Claims | None:
        """A request's claims, or None when this cache takes none (not shared between processes)."""
        ...

    async def claim(self, keys: Sequence[str], claims: Claims) -> list[bytes | bool] | None:
        """Per key: the result when the cache holds it by now, True once claimed (into ``claims``), False
        when another process holds it; None when no claim can be taken (Redis down or refusing)."""
        ...

    async def release(self, claims: Claims) -> None: ...


class _Unshared:
    """A cache of one process: it takes no claims, so its process's requests wait for each other in memory
    only (serving.py) and no process waits for another."""

    def new_claims(self) -> Claims | None:
        return None

    async def claim(self, keys: Sequence[str], claims: Claims) -> list[bytes | bool] | None:
        return None

    async def release(self, claims: Claims) -> None:
        return None


class NullCache(_Unshared):
    """Caching switched off (``REWARDHUB_CACHE_ENABLED=false``)."""

    backend = "off"
    up = True

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return [None] * len(keys)

    async def set_many(self, pairs: Sequence[tuple[str, bytes]], claims: Claims | None = None) -> None:
        return None

    async def ping(self) -> bool:
        return True


# What an entry costs besides its value's bytes: the key (about 100 characters), the bytes object and the
# cache's own bookkeeping (its dict slot, LRU and expiry links).
_ENTRY_OVERHEAD = 256


def _entry_size(value: bytes) -> int:
    return len(value) + _ENTRY_OVERHEAD


class MemoryCache(_Unshared):
    """In-process TTL + LRU cache (the embedded default; one per service process), bounded in entries and
    in bytes: a result takes from a few hundred bytes to tens of kilobytes (a code result lists up to 100
    tests), so a bound on the count alone let the cache grow to gigabytes. The least recently used entry
    goes first past either bound; a value larger than the whole byte budget is not cached."""

    backend = "memory"
    up = True

    def __init__(self, max_entries: int, ttl_s: int, max_bytes: int = 1 << 30):
        if max_entries < 1:  # (Settings refuses it: REWARDHUB_CACHE_ENABLED=false turns caching off)
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        self.max_entries = max_entries
        self._data: TTLCache[str, bytes] = TTLCache(
            maxsize=max(1, max_bytes), ttl=ttl_s, getsizeof=_entry_size
        )

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        self._data.clear()

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        get = self._data.get
        return [get(k) for k in keys]

    async def set_many(self, pairs: Sequence[tuple[str, bytes]], claims: Claims | None = None) -> None:
        data = self._data
        for k, v in pairs:
            try:
                data[k] = v
            except ValueError:  # larger than the whole byte budget
                continue
            while len(data) > self.max_entries:
                data.popitem()  # the least recently used

    async def ping(self) -> bool:
        return True

    def __len__(self) -> int:
        return len(self._data)


class RedisCache:
    """Redis-backed cache that degrades to "no cache" while Redis is unreachable.

    Args:
        url: ``redis://host:port/db``.
        ttl_s: lifetime of every entry.
        timeout_s: socket timeout per operation; slower counts as down.
        retry_interval_s: how often a down Redis is pinged.
        on_error: called with the operation name on every failure (for metrics).
        on_state: called with True/False when Redis comes up / goes down (for metrics).
    """

    backend = "redis"

    def __init__(
        self,
        url: str,
        *,
        ttl_s: int,
        timeout_s: float = 0.25,
        retry_interval_s: float = 1.0,
        on_error: Callable[[str], None] | None = None,
        on_state: Callable[[bool], None] | None = None,
    ):
        self.url = url
        self.ttl_s = ttl_s
        self.retry_interval_s = retry_interval_s
        self._on_error = on_error
        self._on_state = on_state
        self._redis: Redis = Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry_on_timeout=False,
            health_check_interval=0,
        )
        self._up = False
        self._reconnect_task: asyncio.Task[None] | None = None
        self._closed = False
        # single flight across processes: this process's token, the claims it holds (claim key -> the
        # value it holds it with), renewed every third of their TTL by _renew_task
        self.token = uuid.uuid4().hex
        self._held: dict[str, str] = {}
        self._claim_script = self._redis.register_script(_CLAIM)
        self._renew_task: asyncio.Task[None] | None = None

    @property
    def up(self) -> bool:
        return self._up

    def _set_up(self, up: bool) -> None:
        if up != self._up:
            log.warning("redis_state", up=up, url=_redact(self.url))
            self._up = up
            if self._on_state is not None:
                self._on_state(up)

    async def start(self) -> None:
        """Connect if possible; a Redis that is down at start is retried in the background."""
        self._renew_task = asyncio.get_running_loop().create_task(self._renew())
        if await self.ping():
            self._set_up(True)
        else:
            # Down from the start is no change of state (``_up`` starts False), so ``_set_up`` logs
            # nothing: say it here, or a wrong URL runs without its cache unannounced.
            log.warning("redis_state", up=False, url=_redact(self.url))
            self._mark_down("connect")

    async def close(self) -> None:
        self._closed = True
        for task in (self._reconnect_task, self._renew_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._redis.aclose()

    async def ping(self) -> bool:
        """Whether Redis answers now. A failed ping of a cache thought up marks it down (and starts the
        reconnect loop): ``up`` otherwise changed only with a cache operation, so an idle service's
        ``/ready`` said the cache was up long after its Redis had gone."""
        try:
            return bool(await self._redis.ping())
        except (TimeoutError, RedisError, OSError):
            if self._up:
                self._mark_down("ping")
            return False

    @contextlib.contextmanager
    def _attempt(self, op: str) -> Iterator[_Failure]:
        """Run the Redis commands of operation ``op`` (for the metrics), the cache's one reading of their
        failure: an error Redis answers with is counted (:meth:`_refused`), one that says Redis stopped
        answering marks it down (:meth:`_mark_down`); either ends the block, not the caller, and is left
        in what it yields for a caller that undoes part of its work."""
        failure = _Failure()
        try:
            yield failure
        except ResponseError:  # (a RedisError: first)
            self._refused(op)
            failure.refused = True
        except (TimeoutError, RedisError, OSError):
            self._mark_down(op)
            failure.down = True

    def _refused(self, op: str) -> None:
        """Redis answered with an error (over ``maxmemory`` with ``noeviction``, a read-only replica):
        counted, but Redis is up, and its other operations (the reads of a full Redis) still work."""
        if self._on_error is not None:
            self._on_error(op)

    def _mark_down(self, op: str) -> None:
        if self._on_error is not None:
            self._on_error(op)
        self._set_up(False)
        if not self._closed and (self._reconnect_task is None or self._reconnect_task.done()):
            self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        while not self._closed and not self._up:
            await asyncio.sleep(self.retry_interval_s)
            # Drop pooled sockets to the dead server so the ping opens a fresh connection.
            with contextlib.suppress(Exception):
                await self._redis.connection_pool.disconnect(inuse_connections=True)
            if await self.ping():
                self._set_up(True)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        if not self._up:
            return [None] * len(keys)
        with self._attempt("get"):
            values: list[Any] = []
            for start in range(0, len(keys), _MGET_KEYS):  # one round trip per part (see _MGET_KEYS)
                values.extend(await self._redis.mget(list(keys[start : start + _MGET_KEYS])))
            return [v.encode() if isinstance(v, str) else v for v in values]
        return [None] * len(keys)

    async def set_many(self, pairs: Sequence[tuple[str, bytes]], claims: Claims | None = None) -> None:
        release = self._forget(claims) if claims is not None else []
        if not (pairs or release) or not self._up:
            return
        with self._attempt("set"):
            batches = _write_batches(pairs) if pairs else [()]
            for n, batch in enumerate(batches, 1):
                async with self._redis.pipeline(transaction=False) as pipe:
                    for k, v in batch:
                        pipe.set(k, v, ex=self.ttl_s)
                    if n == len(batches) and release:  # (after every result: see the module docstring)
                        assert claims is not None
                        self._settle(pipe, release, claims.value, "del")
                    await pipe.execute()

    # --- claims (single flight across processes) --------------------------------------------------
    def new_claims(self) -> Claims | None:
        return Claims(f"{self.token}:{uuid.uuid4().hex[:16]}")

    async def claim(self, keys: Sequence[str], claims: Claims) -> list[bytes | bool] | None:
        if not keys:
            return []
        if not self._up:
            return None
        ttl_ms = int(CLAIM_TTL_S * 1000)
        out: list[bytes | bool] = []
        part: list[str] = []
        with self._attempt("claim") as failure:
            for start in range(0, len(keys), _MGET_KEYS):  # (as get_many: one part after the other)
                part = list(keys[start : start + _MGET_KEYS])
                # (counted as claimed until the answer says otherwise: a request cancelled while the
                # script runs releases what it may have claimed, not leave it to lapse)
                claims.keys.update(part)
                got = await self._claim_script(
                    keys=part + [CLAIM_PREFIX + k for k in part], args=[claims.value, self.token, ttl_ms]
                )
                for k, v in zip(part, got, strict=True):
                    if v == 1:
                        self._held[CLAIM_PREFIX + k] = claims.value
                        out.append(True)
                        continue
                    claims.keys.discard(k)
                    out.append(False if v == 0 else v.encode() if isinstance(v, str) else v)
            return out
        if failure.refused:
            # (a read-only replica, a full Redis under noeviction: the script stopped at its first SET,
            # after the ones before it; DEL is still allowed there)
            await self.release(self._split(claims, keys))
        else:  # (Redis down: they lapse within CLAIM_TTL_S, unrenewed)
            self._forget(self._split(claims, keys))
        return None

    @staticmethod
    def _split(claims: Claims, keys: Sequence[str]) -> Claims:
        """The claims among ``keys`` (those of a failed :meth:`claim`), no longer part of ``claims``."""
        part = Claims(claims.value)
        part.keys = claims.keys.intersection(keys)
        claims.keys -= part.keys
        return part

    async def release(self, claims: Claims) -> None:
        """Release what ``claims`` still holds (a request that failed or went away: its results, if any,
        are not written)."""
        release = self._forget(claims)
        if not release or not self._up:
            return
        with self._attempt("release"):
            async with self._redis.pipeline(transaction=False) as pipe:
                self._settle(pipe, release, claims.value, "del")
                await pipe.execute()

    def _forget(self, claims: Claims) -> list[str]:
        """The claim keys of ``claims``, no longer renewed by this process (a claim another request of the
        process took over since keeps being renewed for it)."""
        names = [CLAIM_PREFIX + k for k in claims.keys]
        claims.keys.clear()
        held = self._held
        for name in names:
            if held.get(name) == claims.value:
                del held[name]
        return names

    @staticmethod
    def _settle(pipe: Any, names: list[str], value: str, how: str) -> None:
        # (EVAL, not a registered script's EVALSHA: redis-py checks a pipeline's scripts with a round
        # trip of its own before sending it)
        for part in _parts(names):
            pipe.eval(_SETTLE, len(part), *part, value, how)

    async def _renew(self) -> None:
        """Renew this process's claims every third of their TTL, in one round trip; a claim found lost
        (it lapsed while Redis was away) is no longer this process's to renew."""
        while not self._closed:
            await asyncio.sleep(CLAIM_TTL_S / 3)
            held = dict(self._held)
            if not held or not self._up:
                continue
            by_value: dict[str, list[str]] = {}
            for name, value in held.items():
                by_value.setdefault(value, []).append(name)
            with self._attempt("renew") as failure:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for value, names in by_value.items():
                        self._settle(pipe, names, value, str(int(CLAIM_TTL_S * 1000)))
                    replies = await pipe.execute()
            if failure.refused or failure.down:
                continue
            lost = [
                name
                for names, got in zip(
                    (part for ns in by_value.values() for part in _parts(ns)), replies, strict=True
                )
                for name, ok in zip(names, got, strict=True)
                if not ok
            ]
            for name in lost:
                if self._held.get(name) == held[name]:
                    del self._held[name]

    # Jobs and other small state use the same connection (see jobs.py).
    @property
    def client(self) -> Redis:
        return self._redis


@dataclass(slots=True)
class _Failure:
    """How the commands run under :meth:`RedisCache._attempt` failed, if they did."""

    refused: bool = False  # Redis answered with an error (it is up: counted, not marked down)
    down: bool = False  # Redis stopped answering (marked down)


def _parts(names: list[str]) -> list[list[str]]:
    """``names`` as :meth:`RedisCache._settle` sends them, one script call per part."""
    return [names[start : start + _MGET_KEYS] for start in range(0, len(names), _MGET_KEYS)]


def _write_batches(pairs: Sequence[tuple[str, bytes]]) -> list[Sequence[tuple[str, bytes]]]:
    """``pairs`` in runs of at most ``_WRITE_BYTES`` of values (a larger value alone)."""
    batches: list[Sequence[tuple[str, bytes]]] = []
    start = size = 0
    for i, (_, v) in enumerate(pairs):
        if i > start and size + len(v) > _WRITE_BYTES:
            batches.append(pairs[start:i])
            start, size = i, 0
        size += len(v)
    batches.append(pairs[start:])
    return batches


def _redact(url: str) -> str:
    """Hide a password in a redis URL before logging it."""
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.split('@', 1)[1]}"
