"""Scale-out on one machine: `rewardhub serve --workers 1` vs `--workers 2`, both on a shared Redis.

Two workloads, each measured for both worker counts in the same run:

* cache hits — 4096 `math` items scored once, then 8 concurrent connections post batches of 512 of them
  for `--seconds` (JSON parsing, hashing and Redis round trips: CPU in the service process itself);
* cold `math` — 1000 MATH items (correct + perturbed answers), cache off, 4 concurrent requests of 250
  (CPU verifier processes; with 2 uvicorn workers each gets one of the 2 cores' verifier slots).

    python bench/workers_scaling.py --redis-url redis://127.0.0.1:6379/14
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import httpx
import orjson

from _server import machine, server
from cache_throughput import hammer
from math_throughput import load_items


async def cold_math(url: str, items: list[dict[str, str]], concurrency: int) -> float:
    chunk = len(items) // concurrency
    bodies = [
        orjson.dumps({"reward": "math", "items": items[i : i + chunk], "options": {"use_cache": False}})
        for i in range(0, len(items), chunk)
    ]
    async with httpx.AsyncClient(base_url=url, timeout=600) as c:
        t0 = time.perf_counter()
        rs = await asyncio.gather(
            *(c.post("/v1/score", content=b, headers={"content-type": "application/json"}) for b in bodies)
        )
        for r in rs:
            r.raise_for_status()
        return len(items) / (time.perf_counter() - t0)


def measure(workers: int, redis_url: str, seconds: float) -> dict[str, float]:
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    items = load_items(4096)
    bodies = [
        orjson.dumps({"reward": "math", "items": items[i : i + 512]}) for i in range(0, len(items), 512)
    ]
    with server({"REWARDHUB_REDIS_URL": redis_url}, workers=workers) as url:
        with httpx.Client(base_url=url, timeout=600) as c:
            for b in bodies:  # warm the shared cache
                c.post(
                    "/v1/score", content=b, headers={"content-type": "application/json"}
                ).raise_for_status()
        n, misses, elapsed = asyncio.run(hammer(url, bodies, 8, seconds))
        cold = [asyncio.run(cold_math(url, load_items(1000), 4)) for _ in range(3)]
    return {
        "cache_hit_items_per_s": round(n / elapsed, 1),
        "cold_math_items_per_s": round(sorted(cold)[1], 1),
        "non_cached_hits": misses,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args()
    one = measure(1, args.redis_url, args.seconds)
    two = measure(2, args.redis_url, args.seconds)
    print(
        json.dumps(
            {
                "machine": machine(),
                "workers_1": one,
                "workers_2": two,
                "ratio_cache_hits_2_vs_1": round(
                    two["cache_hit_items_per_s"] / one["cache_hit_items_per_s"], 2
                ),
                "ratio_cold_math_2_vs_1": round(
                    two["cold_math_items_per_s"] / one["cold_math_items_per_s"], 2
                ),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
