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
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import structlog
from cachetools import TTLCache
from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from rewardhub import jsonutil

__all__ = [
    "Cache",
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

    async def set_many(self, pairs: Sequence[tuple[str, bytes]]) -> None: ...

    async def ping(self) -> bool: ...


class NullCache:
    """Caching switched off (``REWARDHUB_CACHE_ENABLED=false``)."""

    backend = "off"
    up = True

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return [None] * len(keys)

    async def set_many(self, pairs: Sequence[tuple[str, bytes]]) -> None:
        return None

    async def ping(self) -> bool:
        return True


# What an entry costs besides its value's bytes: the key (about 100 characters), the bytes object and the
# cache's own bookkeeping (its dict slot, LRU and expiry links).
_ENTRY_OVERHEAD = 256


def _entry_size(value: bytes) -> int:
    return len(value) + _ENTRY_OVERHEAD


class MemoryCache:
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

    async def set_many(self, pairs: Sequence[tuple[str, bytes]]) -> None:
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
        if await self.ping():
            self._set_up(True)
        else:
            # Down from the start is no change of state (``_up`` starts False), so ``_set_up`` logs
            # nothing: say it here, or a wrong URL runs without its cache unannounced.
            log.warning("redis_state", up=False, url=_redact(self.url))
            self._mark_down("connect")

    async def close(self) -> None:
        self._closed = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnect_task
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
        try:
            values: list[Any] = []
            for start in range(0, len(keys), _MGET_KEYS):  # one round trip per part (see _MGET_KEYS)
                values.extend(await self._redis.mget(list(keys[start : start + _MGET_KEYS])))
            return [v.encode() if isinstance(v, str) else v for v in values]
        except ResponseError:
            self._refused("get")
            return [None] * len(keys)
        except (TimeoutError, RedisError, OSError):
            self._mark_down("get")
            return [None] * len(keys)

    async def set_many(self, pairs: Sequence[tuple[str, bytes]]) -> None:
        if not pairs or not self._up:
            return
        try:
            for batch in _write_batches(pairs):
                async with self._redis.pipeline(transaction=False) as pipe:
                    for k, v in batch:
                        pipe.set(k, v, ex=self.ttl_s)
                    await pipe.execute()
        except ResponseError:
            self._refused("set")
        except (TimeoutError, RedisError, OSError):
            self._mark_down("set")

    # Jobs and other small state use the same connection (see jobs.py).
    @property
    def client(self) -> Redis:
        return self._redis


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
