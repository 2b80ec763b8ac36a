"""OpenRLHF batches on /compat/openrlhf/get_reward: scored in calls of REWARDHUB_OPENRLHF_PROGRESS_ITEMS
items (each call cached as it ends, so a batch OpenRLHF sends again after its 180 s timeout is served
from the cache) against the anchor of one call per part (progress size 0), in the same run.

Items: MATH test problems (as bench/math_throughput.py), each twice (the gold answer boxed, and a
perturbed one), posted as OpenRLHF does: ``query`` = prompt + response, ``prompts``, ``labels`` = the
gold answer. One server per progress size, all running at once, the cache on (Redis at --redis, or the
embedded cache with --redis ''); each is warmed first on other problems. Then, repetition by
repetition and size by size, the configurations take turns: a COLD batch (every response carries a
fresh tag, so nothing is in the cache, nor twice in the batch), then the same batch --warm-repeat
times, WARM (every valid item from the cache; their median is the repetition's figure). A tag changes
no verdict, and its keys expire after the server's REWARDHUB_CACHE_TTL_S (600 s here). The ratio is
taken pair by pair (one-call seconds / these seconds, same repetition): above 1, faster than one call.

    python bench/openrlhf_batch.py [--sizes 1024 4096] [--progress 64 0] [--repeat 5] [--warm-repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
import uuid
from typing import Any

import httpx

from _server import machine, server
from math_throughput import load_items

PROMPT = "<|im_start|>user\nSolve the problem and box the answer.<|im_end|>\n<|im_start|>assistant\n"


def payload(items: list[dict[str, str]], tag: str) -> dict[str, list[str]]:
    # the item's index too: MATH answers repeat across problems (a batch would deduplicate them)
    responses = [
        it["response"].replace("Let me work it out.", f"Let me work it out ({tag} #{i}).")
        for i, it in enumerate(items)
    ]
    return {
        "query": [PROMPT + r + "<|im_end|>" for r in responses],
        "prompts": [PROMPT] * len(items),
        "labels": [it["reference"] for it in items],
    }


def post(c: httpx.Client, body: dict[str, list[str]]) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    r = c.post("/compat/openrlhf/get_reward", json=body)
    elapsed = time.perf_counter() - t0
    r.raise_for_status()
    return elapsed, r.json()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096], help="items per batch")
    ap.add_argument("--progress", type=int, nargs="+", default=[64, 0], help="progress sizes (0: one call)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warm-repeat", type=int, default=5, help="warm batches after each cold one")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="'' for the embedded cache")
    ap.add_argument("--cpu-workers", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=256, help="items from other problems sent first")
    args = ap.parse_args()
    items = load_items(max(args.sizes))
    warmup = load_items(args.warmup, skip=4000)
    run = uuid.uuid4().hex[:12]
    env = {
        "REWARDHUB_CPU_WORKERS": str(args.cpu_workers),
        "REWARDHUB_CACHE_TTL_S": "600",
        "REWARDHUB_OPENRLHF_DEADLINE_S": "0",  # the batch's whole cost, never cut
    }
    if args.redis:
        env["REWARDHUB_REDIS_URL"] = args.redis
    # seconds[(progress, size, "cold" | "warm")] = one figure per repetition
    seconds: dict[tuple[int, int, str], list[float]] = {}
    misses: dict[tuple[int, int], int] = {}  # warm items not from the cache, over the repetitions
    invalid: dict[tuple[int, int], int] = {}  # cold items invalid, over the repetitions
    with contextlib.ExitStack() as stack:
        clients: dict[int, httpx.Client] = {}
        for p in args.progress:
            url = stack.enter_context(server({**env, "REWARDHUB_OPENRLHF_PROGRESS_ITEMS": str(p)}))
            clients[p] = stack.enter_context(httpx.Client(base_url=url, timeout=600))
            post(clients[p], payload(warmup, f"warm-up {run} {p}"))
        for rep in range(args.repeat):
            for size in args.sizes:
                # alternate which configuration goes first, so neither always follows the other
                order = args.progress if rep % 2 == 0 else args.progress[::-1]
                for p in order:
                    body = payload(items[:size], f"{run} {rep} {size} {p}")
                    t_cold, cold = post(clients[p], body)
                    warm_s = []
                    for _ in range(args.warm_repeat):
                        t_warm, warm = post(clients[p], body)
                        warm_s.append(t_warm)
                    if sum(cold["extra_logs"]["rewardhub_cached"]) != 0:
                        raise RuntimeError("a cold batch found items in the cache")
                    # Invalid results are never cached (a gold answer that does not parse, or a check
                    # that timed out on a loaded host): the warm batch scores those again; counted.
                    valid = sum(cold["extra_logs"]["rewardhub_valid"])
                    misses[(p, size)] = (
                        misses.get((p, size), 0) + size - int(sum(warm["extra_logs"]["rewardhub_cached"]))
                    )
                    invalid[(p, size)] = invalid.get((p, size), 0) + size - int(valid)
                    seconds.setdefault((p, size, "cold"), []).append(t_cold)
                    # the repetition's median: a warm batch is short, so one figure is at the host's mercy
                    seconds.setdefault((p, size, "warm"), []).append(statistics.median(warm_s))
    anchor = 0 if 0 in args.progress else args.progress[-1]
    rows = []
    for size in args.sizes:
        for kind in ("cold", "warm"):
            base = seconds[(anchor, size, kind)]
            for p in args.progress:
                ts = seconds[(p, size, kind)]
                # pair by pair (same repetition): the host's speed drifts less within one than across
                ratios = [b / t for t, b in zip(ts, base, strict=True)]
                rows.append(
                    {
                        "size": size,
                        "batch": kind,
                        "progress_items": p,
                        "items_per_s_median": round(size / statistics.median(ts), 1),
                        "speed_vs_one_call_median": round(statistics.median(ratios), 3),
                        "seconds": [round(t, 3) for t in ts],
                        "invalid_cold_items": invalid[(p, size)] if kind == "cold" else None,
                        "uncached_warm_items": misses[(p, size)] if kind == "warm" else None,
                    }
                )
    print(
        json.dumps(
            {
                "machine": machine(),
                "cache": "redis" if args.redis else "embedded",
                "repeat": args.repeat,
                "rows": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
