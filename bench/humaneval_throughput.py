"""Benchmark: HumanEval through the `code` reward over HTTP vs a bare loop of bubblewrap runs.

Service: `rewardhub serve` in its own process (a fresh one per repetition: cold cache), warmed with a
few unrelated items, then ONE request with the 164 canonical solutions (each in a fenced block, as a
chat model writes it) scored against their `check(candidate)` tests. Per-test verdicts, the judge /
solution split, the nonce channel, JSON in and out and the cache writes are all included.

Anchor, in the same run: the same 164 programs (prompt + solution + test + `check(entry_point)`) run
as `python3 -I -S -c PROGRAM` under the same bubblewrap flags, the same per-run uids and the same
concurrency (cores), from asyncio subprocesses, pass = exit status 0: the floor any bubblewrap-isolated
scorer pays, with none of the tamper resistance.

    python bench/humaneval_throughput.py [--repeat 5] [--workers N] [--reuse-runs 0]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import statistics
import time
from typing import Any

import httpx

from _server import DATA, machine, server


def load() -> list[dict[str, Any]]:
    with gzip.open(DATA / "HumanEval.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def items(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "id": r["task_id"],
            "response": f"```python\n{r['prompt']}{r['canonical_solution']}\n```",
            "reference": {"tests": r["test"], "entry_point": r["entry_point"]},
        }
        for r in rows
    ]


def run_service(rows: list[dict[str, Any]], workers: int, reuse_runs: int | None) -> tuple[float, int]:
    warm = [
        {"response": f"def f(x):\n    return x + {k}\n", "reference": {"tests": f"assert f(0) == {k}"}}
        for k in range(8)
    ]
    env = {
        "REWARDHUB_SANDBOX_WORKERS": str(workers),
        **({"REWARDHUB_SANDBOX_PIN_CPUS": os.environ["PIN"]} if os.environ.get("PIN") else {}),
        **({"REWARDHUB_SANDBOX_REUSE_RUNS": str(reuse_runs)} if reuse_runs is not None else {}),
    }
    with server(env) as url, httpx.Client(base_url=url, timeout=600) as c:
        c.post("/v1/score", json={"reward": "code", "items": warm}).raise_for_status()
        t0 = time.perf_counter()
        r = c.post("/v1/score", json={"reward": "code", "items": items(rows)})
        elapsed = time.perf_counter() - t0
        r.raise_for_status()
        passed = sum(1 for x in r.json()["results"] if x["score"] == 1.0)
    return elapsed, passed


async def run_bare(rows: list[dict[str, Any]], workers: int) -> tuple[float, int]:
    from rewardhub.sandbox import Limits, SandboxPool

    # The pool is used only for its probed command line (flags, interpreter, uid block); it runs nothing.
    pool = SandboxPool(workers=workers, max_queued=0, limits=Limits())
    await pool.start()
    cmd = pool.command
    assert cmd is not None and cmd.bwrap is not None, pool.message
    uids = list(pool.uids) or [None] * workers
    python = os.path.realpath(cmd.python)
    programs = [
        f"{r['prompt']}{r['canonical_solution']}\n{r['test']}\ncheck({r['entry_point']})\n" for r in rows
    ]
    sem = asyncio.Semaphore(workers)

    async def one(program: str) -> int:
        async with sem:
            uid = uids.pop()
            try:
                prefix = (
                    []
                    if uid is None
                    else [
                        cmd.setpriv or "setpriv",
                        f"--reuid={uid}",
                        f"--regid={uid}",
                        "--clear-groups",
                        "--",
                    ]
                )
                proc = await asyncio.create_subprocess_exec(
                    *prefix, cmd.bwrap, *cmd.bwrap_flags, "--", python, "-I", "-S", "-c", program,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=True,
                )  # fmt: skip
                await asyncio.wait_for(proc.communicate(), 30)
                return proc.returncode or 0
            finally:
                uids.append(uid)

    t0 = time.perf_counter()
    codes = await asyncio.gather(*(one(p) for p in programs))
    elapsed = time.perf_counter() - t0
    await pool.close()
    return elapsed, sum(1 for c in codes if c == 0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workers", type=int, default=0, help="concurrent runs on both sides (default: cores)")
    ap.add_argument(
        "--reuse-runs",
        type=int,
        default=None,
        help="REWARDHUB_SANDBOX_REUSE_RUNS for the service (default: its default, warm sandboxes; 0: fresh)",
    )
    args = ap.parse_args()
    rows = load()
    workers = args.workers or len(os.sched_getaffinity(0))
    svc_times: list[float] = []
    bare_times: list[float] = []
    svc_passed = bare_passed = 0
    for _ in range(args.repeat):
        ts, svc_passed = run_service(rows, workers, args.reuse_runs)
        tb, bare_passed = asyncio.run(run_bare(rows, workers))
        svc_times.append(ts)
        bare_times.append(tb)
    n = len(rows)
    svc = n / statistics.median(svc_times)
    bare = n / statistics.median(bare_times)
    print(
        json.dumps(
            {
                "machine": machine(),
                "problems": n,
                "concurrency": workers,
                "service_sandboxes": "fresh per run" if args.reuse_runs == 0 else "warm (default)",
                "service_problems_per_s_median": round(svc, 1),
                "bare_bwrap_problems_per_s_median": round(bare, 1),
                "ratio_median": round(svc / bare, 2),
                "service_s": [round(t, 3) for t in svc_times],
                "bare_s": [round(t, 3) for t in bare_times],
                "service_passed": svc_passed,
                "bare_passed": bare_passed,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
