"""Benchmark 2: cache-hit throughput over HTTP, batches of 512.

The service runs in its own process (one uvicorn worker) on the embedded cache, and again on Redis
when `--redis-url` is given. The cache is warmed with `--distinct` `math` items (half correct, half
perturbed answers from the MATH test set); then `--clients` concurrent connections post batches of 512
of those items for `--seconds` seconds. Requests are encoded once up front so the client measures the
service, not its own JSON encoder. The anchor, in the same run, is the cold pass that computed the same
items (the ratio says what the cache buys).

    python bench/cache_throughput.py [--redis-url redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import httpx
import orjson

from _load import post_json, session
from _server import machine, server
from math_throughput import load_items


async def hammer(url: str, bodies: list[bytes], clients: int, seconds: float) -> tuple[int, int, float]:
    done_items = 0
    non_cached = 0
    async with session(clients) as s:
        stop = time.perf_counter() + seconds

        async def worker(k: int) -> None:
            nonlocal done_items, non_cached
            i = k
            while time.perf_counter() < stop:
                status, body = await post_json(s, f"{url}/v1/score", bodies[i % len(bodies)])
                if status != 200:
                    raise RuntimeError(f"{status}: {str(body)[:200]}")
                results = body["results"]
                done_items += len(results)
                non_cached += sum(1 for x in results if not x["cached"])
                i += clients

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(clients)))
        return done_items, non_cached, time.perf_counter() - t0


def run(
    env: dict[str, str], items: list[dict[str, str]], batch: int, clients: int, seconds: float
) -> dict[str, float]:
    bodies = [
        orjson.dumps({"reward": "math", "items": items[i : i + batch]}) for i in range(0, len(items), batch)
    ]
    with server(env) as url, httpx.Client(base_url=url, timeout=600) as c:
        t0 = time.perf_counter()
        for b in bodies:
            c.post("/v1/score", content=b, headers={"content-type": "application/json"}).raise_for_status()
        cold_s = time.perf_counter() - t0
        n, misses, elapsed = asyncio.run(hammer(url, bodies, clients, seconds))
    return {
        "cold_items_per_s": round(len(items) / cold_s, 1),
        "hit_items_per_s": round(n / elapsed, 1),
        "hit_requests_per_s": round(n / batch / elapsed, 1),
        "ratio_hit_vs_cold": round((n / elapsed) / (len(items) / cold_s), 1),
        "non_cached_results": misses,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--distinct", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--redis-url", default=None)
    args = ap.parse_args()
    items = load_items(args.distinct)
    out: dict[str, object] = {
        "machine": machine(),
        "batch": args.batch,
        "clients": args.clients,
        "distinct_items": len(items),
    }
    out["embedded"] = run({}, items, args.batch, args.clients, args.seconds)
    if args.redis_url:
        import redis

        redis.Redis.from_url(args.redis_url).flushdb()
        out["redis"] = run(
            {"REWARDHUB_REDIS_URL": args.redis_url}, items, args.batch, args.clients, args.seconds
        )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
