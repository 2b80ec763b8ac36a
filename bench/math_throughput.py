"""Benchmark 1: `math` over HTTP vs Math-Verify in-process, single-threaded, on the same items.

Items: the first N/2 problems of the MATH test set, each twice: a response with the correct answer
(the gold, boxed) and one with a perturbed answer (the last integer in it changed, or "+1" appended).
The service runs on its embedded default in its own process with a COLD cache (a fresh process per
repetition, `use_cache` left on so the cost of cache writes is included); before timing, the process is
warmed with `--warmup` items from *other* problems (MATH test rows 4000+), as a long-running service is. The anchor is
`math_verify.verify(parse(gold), parse(response))` in this process's main thread, Math-Verify's own
signal timeouts on, on the same items, in the same run.

    python bench/math_throughput.py [--items 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections import Counter
from typing import Any

import httpx

from _server import DATA, machine, server


def boxed(solution: str) -> str | None:
    i = solution.rfind("\\boxed")
    if i < 0:
        return None
    j = solution.find("{", i)
    depth = 0
    for k in range(j, len(solution)):
        if solution[k] == "{":
            depth += 1
        elif solution[k] == "}":
            depth -= 1
            if depth == 0:
                return solution[j + 1 : k]
    return None


def perturb(ans: str) -> str:
    nums = list(re.finditer(r"\d+", ans))
    if nums:
        m = nums[-1]
        return ans[: m.start()] + str(int(m.group()) + 1) + ans[m.end() :]
    return ans + "+1"


def load_items(n: int, skip: int = 0) -> list[dict[str, str]]:
    items: list[dict[str, str]] = []
    with open(DATA / "math_test.jsonl") as f:
        for k, line in enumerate(f):
            if k < skip:
                continue
            gold = boxed(json.loads(line)["solution"])
            if not gold:
                continue
            for ans in (gold, perturb(gold)):
                items.append(
                    {
                        "response": f"Let me work it out. The final answer is $\\boxed{{{ans}}}$.",
                        "reference": gold,
                    }
                )
            if len(items) >= n:
                break
    return items[:n]


def run_service(
    items: list[dict[str, str]],
    batch: int,
    warmup: list[dict[str, str]],
    shadow: dict[str, Any] | None = None,
    outcomes: Counter[str] | None = None,
) -> tuple[float, list[float | None]]:
    """Seconds for ``items`` and their scores; with ``shadow``, each request carries it and ``outcomes``
    counts the shadow outcomes of the items."""
    extra = {"shadow": shadow} if shadow else {}
    with server() as url, httpx.Client(base_url=url, timeout=600) as c:
        # Warm the process (not the result cache) on different problems, as a running service would be.
        if warmup:
            c.post("/v1/score", json={"reward": "math", "items": warmup, **extra}).raise_for_status()
        t0 = time.perf_counter()
        scores: list[float | None] = []
        for i in range(0, len(items), batch):
            r = c.post("/v1/score", json={"reward": "math", "items": items[i : i + batch], **extra})
            r.raise_for_status()
            for x in r.json()["results"]:
                scores.append(x["score"])
                if outcomes is not None and x.get("shadow"):
                    outcomes[x["shadow"]["outcome"]] += 1
        return time.perf_counter() - t0, scores


def run_math_verify(items: list[dict[str, str]]) -> tuple[float, list[float]]:
    from math_verify import parse, verify

    t0 = time.perf_counter()
    scores = []
    for it in items:
        gold = parse(f"$\\boxed{{{it['reference']}}}$")
        pred = parse(it["response"])
        scores.append(1.0 if verify(gold, pred) else 0.0)
    return time.perf_counter() - t0, scores


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1000, help="items per HTTP request")
    ap.add_argument("--warmup", type=int, default=200, help="items from other problems sent before timing")
    ap.add_argument(
        "--shadow",
        default=None,
        help='a shadow spec as JSON ({"reward": ...}): each repetition also times the requests with it, '
        "in the same run, and reports its cost and the shadow's outcomes",
    )
    args = ap.parse_args()
    if args.shadow:
        shadow_run(args, json.loads(args.shadow))
        return
    items = load_items(args.items)
    warmup = load_items(args.warmup, skip=4000) if args.warmup else []
    svc_times, mv_times, ratios = [], [], []
    for _ in range(args.repeat):
        ts, s_scores = run_service(items, args.batch, warmup)
        tm, m_scores = run_math_verify(items)
        svc_times.append(ts)
        mv_times.append(tm)
        ratios.append(tm / ts)
    agree = sum(1 for a, b in zip(s_scores, m_scores, strict=True) if a == b)
    invalid = sum(1 for a in s_scores if a is None)
    result = {
        "machine": machine(),
        "items": len(items),
        "service_items_per_s_median": round(len(items) / statistics.median(svc_times), 1),
        "math_verify_items_per_s_median": round(len(items) / statistics.median(mv_times), 1),
        "ratio_median": round(statistics.median(ratios), 2),
        "ratios": [round(r, 2) for r in ratios],
        "service_s": [round(t, 3) for t in svc_times],
        "math_verify_s": [round(t, 3) for t in mv_times],
        "verdict_agreement": f"{agree}/{len(items)}",
        "service_correct": sum(1 for a in s_scores if a == 1.0),
        "math_verify_correct": sum(1 for a in m_scores if a == 1.0),
        "service_invalid": invalid,
    }
    print(json.dumps(result, indent=2))


def shadow_run(args: argparse.Namespace, shadow: dict[str, Any]) -> None:
    """math alone vs math with the shadow, alternately in each repetition (a fresh service each time)."""
    items = load_items(args.items)
    warmup = load_items(args.warmup, skip=4000) if args.warmup else []
    alone, shadowed = [], []
    outcomes: Counter[str] = Counter()
    for _ in range(args.repeat):
        t_alone, s_alone = run_service(items, args.batch, warmup)
        counts: Counter[str] = Counter()
        t_shadow, s_shadow = run_service(items, args.batch, warmup, shadow, counts)
        assert s_alone == s_shadow, "a shadow changed the primary scores"
        alone.append(t_alone)
        shadowed.append(t_shadow)
        outcomes = counts
    result = {
        "machine": machine(),
        "items": len(items),
        "shadow": shadow,
        "alone_items_per_s_median": round(len(items) / statistics.median(alone), 1),
        "shadowed_items_per_s_median": round(len(items) / statistics.median(shadowed), 1),
        "cost_ratio_median": round(statistics.median(t / a for t, a in zip(shadowed, alone, strict=True)), 2),
        "alone_s": [round(t, 3) for t in alone],
        "shadowed_s": [round(t, 3) for t in shadowed],
        "outcomes": dict(sorted(outcomes.items())),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
