"""Soak test: N concurrent clients for M minutes against a local service; errors, latency, memory.

    python bench/soak.py --clients 200 --minutes 10            # starts its own `rewardhub serve`
    python bench/soak.py --url http://127.0.0.1:8000 --pid 1234  # an already running one (loopback only)

Each client loops: POST /v1/score with a mixed batch (math, exact_match, format, f1) drawn from a fixed
pool of distinct items, so the cache fills during warm-up and then serves a steady hit/miss mix. Every
non-200 answer and every transport error counts as an error. The load comes from aiohttp (see
bench/_load.py: httpx's pool, not the service, would be the bottleneck at 200 connections). The server's resident memory (the service
process and its CPU workers) is sampled every few seconds; growth is measured from the end of the
warm-up to the end of the run. Loopback only: this is not a tool for loading other people's servers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path
from urllib.parse import urlparse

import aiohttp

from _load import post_json, session
from _server import machine, server_process


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, MiB (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    total_kb, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            pass
        stack.extend(children.get(p, []))
    return total_kb / 1024


def item_pool(size: int, seed: int = 0) -> list[dict[str, object]]:
    rng = random.Random(seed)
    pool: list[dict[str, object]] = []
    for i in range(size):
        kind = i % 4
        a, b = rng.randint(1, 999), rng.randint(1, 999)
        if kind == 0:
            answer = a + b if rng.random() < 0.7 else a + b + 1
            pool.append(
                {"reward": "math", "response": f"{a}+{b} = \\boxed{{{answer}}}", "reference": str(a + b)}
            )
        elif kind == 1:
            pool.append(
                {"reward": "exact_match", "response": f"The {a} answer", "reference": f"the {a} answer"}
            )
        elif kind == 2:
            pool.append(
                {
                    "reward": {"name": "format", "config": {"preset": "think_answer"}},
                    "response": f"<think>{a}</think><answer>{b}</answer>" if a % 3 else f"{a}",
                }
            )
        else:
            pool.append(
                {"reward": "f1", "response": f"red green {a} blue", "reference": f"green {a} blue yellow"}
            )
    return pool


async def run(
    url: str, pid: int, clients: int, seconds: float, warmup_s: float, batch: int
) -> dict[str, object]:
    pool = item_pool(20_000)
    latencies: list[float] = []
    errors: list[str] = []
    rss: list[tuple[float, float]] = []
    stop_at = time.monotonic() + seconds
    t_start = time.monotonic()
    async with session(clients) as c:

        async def client(k: int) -> None:
            rng = random.Random(k)
            while time.monotonic() < stop_at:
                items = [dict(rng.choice(pool), id=str(j)) for j in range(batch)]
                t0 = time.perf_counter()
                try:
                    status, body = await post_json(c, f"{url}/v1/score", {"items": items})
                    if status != 200:
                        errors.append(f"{status}: {str(body)[:200]}")
                    elif len(body["results"]) != batch:
                        errors.append("wrong number of results")
                except (aiohttp.ClientError, TimeoutError) as exc:
                    errors.append(repr(exc)[:200])
                latencies.append((time.perf_counter() - t0) * 1000)

        async def sampler() -> None:
            while time.monotonic() < stop_at:
                rss.append((time.monotonic() - t_start, tree_rss_mb(pid)))
                await asyncio.sleep(5)
            rss.append((time.monotonic() - t_start, tree_rss_mb(pid)))

        await asyncio.gather(sampler(), *(client(k) for k in range(clients)))

    after_warmup = [m for t, m in rss if t >= warmup_s] or [m for _, m in rss]
    lat = sorted(latencies)
    return {
        "machine": machine(),
        "clients": clients,
        "seconds": round(seconds, 1),
        "items_per_request": batch,
        "requests": len(latencies),
        "requests_per_s": round(len(latencies) / seconds, 1),
        "errors": len(errors),
        "error_examples": errors[:5],
        "latency_ms_p50": round(statistics.median(lat), 1) if lat else None,
        "latency_ms_p99": round(lat[int(0.99 * (len(lat) - 1))], 1) if lat else None,
        "rss_mb_start": round(rss[0][1], 1),
        "rss_mb_after_warmup": round(after_warmup[0], 1),
        "rss_mb_end": round(after_warmup[-1], 1),
        "rss_mb_max": round(max(m for _, m in rss), 1),
        "rss_growth_after_warmup_pct": round(100 * (after_warmup[-1] - after_warmup[0]) / after_warmup[0], 2),
        "rss_series": [(round(t), round(m, 1)) for t, m in rss],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--warmup-s", type=float, default=60.0, help="memory growth is measured after this")
    ap.add_argument("--batch", type=int, default=8, help="items per request")
    ap.add_argument("--url", default=None, help="an already running service (loopback only)")
    ap.add_argument("--pid", type=int, default=None, help="its process id, for memory sampling")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args()
    seconds = args.minutes * 60
    if args.url:
        host = urlparse(args.url).hostname
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit("soak.py only loads services on loopback")
        if args.pid is None:
            raise SystemExit("--pid is required with --url")
        result = asyncio.run(run(args.url, args.pid, args.clients, seconds, args.warmup_s, args.batch))
    else:
        with server_process() as (url, proc):
            result = asyncio.run(run(url, proc.pid, args.clients, seconds, args.warmup_s, args.batch))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
