"""Benchmark 4: `prm` (or `orm`) throughput and latency with the dynamic micro-batcher on vs off, in the same run.

A PRM (a Qwen2 token classifier with random weights, built from a config with a locally trained
tokenizer, saved with `save_pretrained` and loaded by the service's real loading code) is served by a
real `rewardhub serve` subprocess four times (then `--pairs` more on/off pairs, below): batching on
(`REWARDHUB_BATCH_MAX_SIZE=--max-batch`, shared-prefix passes as `--share-prefix` says: by default the
service's `auto`, on for a CPU and off for a GPU; the result shows what it resolved to; shared prompts
kept across batches by the default `REWARDHUB_BATCH_PREFIX_CACHE_MB`), batching off
(`REWARDHUB_BATCH_MAX_SIZE=1`: one forward pass per item), batching on with
`REWARDHUB_BATCH_SHARE_PREFIX=false` (plain padded batches), and the same as the first with
`REWARDHUB_BATCH_PREFIX_CACHE_MB=0` (each batch runs its prompts again).
`--clients` concurrent clients each send one-item `/v1/score` requests back to back; the items completed
within a window of `--duration` seconds (after `--warmup` seconds) are counted. Every item is distinct
and the result cache is off, so every item is a forward pass. Items cycle through five questions, so
concurrent items share prompts as a GRPO group's rollouts do, but no two responses are the same.

A last run sends the same one-item requests to the free `exact_match` reward: the rate the HTTP side
alone can carry on this machine, so the highest speedup any batching could show (`speedup_ceiling`).

Batching on and off run one after the other, and `--pairs K` more times after the other modes (in
alternating order: off then on, on then off, ...). A shared 2-core virtual machine's speed drifts (the
"on" rate of one code on one host, idle, varied by 40% between runs, the model's CPU per one-item pass by
37%), so a ratio of two runs a minute apart moves with it: those four runs gave 4.79-6.64x. Each pair's ratio is of two runs adjacent in time, and
`speedup_median` is the median of the first ratio and the pairs' (`speedup_pairs`), with the lowest
beside it (`speedup_min`).

Reported per mode: items/s, per-item latency p50/p99 (client side, the whole HTTP round trip), the mean
forward-pass batch size (from `/metrics`), errors, and CPU milliseconds per item over the measured
window for the service process, its child processes (the model process, the idle verifier workers) and
this load generator. Their sum bounds the rate on this machine: ``cores / total`` items per second
however well the processes overlap (`cpu_bound_items_per_s`). `speedup` is items/s on / off.

    python bench/prm_batching.py                          # tiny CPU model, 64 clients, 10 s per mode
    python bench/prm_batching.py --duration 3 --warmup 1  # a quick sanity run
    python bench/prm_batching.py --device cuda --hidden 1536 --layers 24   # ~0.48B parameters on a GPU
    python bench/prm_batching.py --reward orm             # the same for an outcome RM (`orm`)
    python bench/prm_batching.py --convention implicit    # PRIME's implicit PRM: two causal LMs per item
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from _load import post_json, session
from _server import ROOT, machine, server_process

sys.path.insert(0, str(ROOT / "tests"))
from tiny_models import build_tiny_causal_lm, build_tiny_orm, build_tiny_qwen_prm

QUESTIONS = [
    "What is (2 + 3) * 4?",
    "A train travels 60 km in 1.5 hours. What is its average speed?",
    "Solve for x: 3x - 7 = 11.",
    "How many positive divisors does 36 have?",
    "What is the sum of the interior angles of a hexagon?",
]


def make_short_item(k: int, rng: random.Random) -> dict[str, str]:
    """Three one-line steps (~30 tokens): the regime where a forward pass is dominated by its fixed cost."""
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    steps = [
        f"{a} + {b} = {a + b}",
        f"times {k % 7 + 2}",
        f"So the answer is \\boxed{{{(a + b) * (k % 7 + 2)}}}.",
    ]
    return {"prompt": QUESTIONS[k % len(QUESTIONS)], "response": "\n\n".join(steps)}


def make_item(k: int, rng: random.Random) -> dict[str, str]:
    steps = [
        f"Step {j + 1}: we compute {rng.randint(2, 99)} + {rng.randint(2, 99)} and carry the {k % 10}."
        + " Then we check it." * rng.randint(0, 3)
        for j in range(rng.randint(3, 6))
    ]
    steps.append(f"So the answer is \\boxed{{{rng.randint(1, 500)}}}.")
    return {"prompt": QUESTIONS[k % len(QUESTIONS)], "response": "\n\n".join(steps)}


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


BATCHERS = {"prm": "prm:steps", "orm": "orm:classify"}


def batch_stats(metrics_text: str, batcher: str = "prm:steps") -> tuple[float, float]:
    """(sum, count) of rewardhub_batch_size for one batcher (the model reward's)."""
    total = count = 0.0
    for line in metrics_text.splitlines():
        m = re.match(
            r'rewardhub_batch_size_(sum|count)\{batcher="' + re.escape(batcher) + r'"\} ([0-9.e+]+)', line
        )
        if m:
            if m.group(1) == "sum":
                total = float(m.group(2))
            else:
                count = float(m.group(2))
    return total, count


def prefix_cache_lookups(metrics_text: str) -> dict[str, float]:
    """hit / miss totals of the model processes' prompt cache (every backend summed; one here)."""
    out = {"hit": 0.0, "miss": 0.0}
    for line in metrics_text.splitlines():
        m = re.match(
            r'rewardhub_prefix_cache_lookups_total\{[^}]*outcome="(hit|miss)"[^}]*\} ([0-9.e+]+)', line
        )
        if m:
            out[m.group(1)] += float(m.group(2))
    return out


def run_delay_s(pid: int) -> float:
    """Seconds ``pid`` has spent runnable but waiting for a core (Linux ``/proc/PID/schedstat``, second
    field; 0 where there is none). Tells a model process that was preempted (the cores busy with the
    service and the load generator) from one that was idle waiting for its next batch: both show as CPU
    time not spent."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_seconds(server_pid: int) -> dict[str, float]:
    """User + system CPU seconds so far: the service process, its children, and this process; and, as
    ``wait:<name>``, the seconds each spent waiting for a core (:func:`run_delay_s`)."""
    server = psutil.Process(server_pid)
    children = waiting = 0.0
    for child in server.children(recursive=True):
        try:
            t = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        children += t.user + t.system
        waiting += run_delay_s(child.pid)
    me = psutil.Process()
    own, srv = me.cpu_times(), server.cpu_times()
    return {
        "service": srv.user + srv.system,
        "model_and_workers": children,
        "load_generator": own.user + own.system,
        "wait:service": run_delay_s(server_pid),
        "wait:model_and_workers": waiting,
        "wait:load_generator": run_delay_s(me.pid),
    }


async def drive(
    url: str,
    clients: int,
    duration: float,
    warmup: float,
    seed: int,
    short: bool = False,
    reward: str = "prm",
    server_pid: int | None = None,
) -> dict[str, Any]:
    """``reward="exact_match"``: the same requests scored by a reward that costs nothing (against a
    dummy reference), which measures what the HTTP side alone can carry. ``server_pid``: account the CPU
    of that process tree and of this one over the measured window."""
    rng = random.Random(seed)
    batcher = BATCHERS.get(reward, "")
    counter = 0
    latencies: list[float] = []
    errors: dict[str, int] = {}
    async with session(clients) as http:
        start = time.perf_counter()
        t_measure = start + warmup
        t_end = t_measure + duration
        before = (0.0, 0.0)
        measured_from: float | None = None
        cpu_before: dict[str, float] = {}
        cpu_after: dict[str, float] = {}
        lookups_before: dict[str, float] = {}

        async def metrics() -> str:
            async with http.get(f"{url}/metrics") as r:
                return await r.text()

        async def client() -> None:
            nonlocal counter, before, measured_from
            while True:
                now = time.perf_counter()
                if now >= t_end:
                    return
                if measured_from is None and now >= t_measure:
                    measured_from = now
                    text = await metrics()
                    before = batch_stats(text, batcher)
                    lookups_before.update(prefix_cache_lookups(text))
                counter += 1
                item: dict[str, str] = make_short_item(counter, rng) if short else make_item(counter, rng)
                if reward not in BATCHERS:
                    item = {**item, "reference": "-"}
                t0 = time.perf_counter()
                status, body = await post_json(
                    http,
                    f"{url}/v1/score",
                    {"reward": reward, "items": [item], "options": {"use_cache": False, "timeout_s": 60}},
                )
                t1 = time.perf_counter()
                if status != 200:
                    errors[f"http_{status}"] = errors.get(f"http_{status}", 0) + 1
                    continue
                res = body["results"][0]
                if not res["valid"]:
                    errors[res["reason"]] = errors.get(res["reason"], 0) + 1
                elif t_measure <= t1 <= t_end:  # completions inside the measured window
                    latencies.append(t1 - t0)

        async def cpu_window() -> None:
            """CPU at the window's two ends exactly (requests still running after it are not counted)."""
            if server_pid is None:
                return
            await asyncio.sleep(max(0.0, t_measure - time.perf_counter()))
            cpu_before.update(cpu_seconds(server_pid))
            await asyncio.sleep(max(0.0, t_end - time.perf_counter()))
            cpu_after.update(cpu_seconds(server_pid))

        await asyncio.gather(cpu_window(), *(client() for _ in range(clients)))
        text = await metrics()
        after = batch_stats(text, batcher)
        lookups_after = prefix_cache_lookups(text)
    window = duration
    # prompts looked up in the cache kept across batches while measuring (requests finishing just after
    # the window are counted too; the rate is what matters)
    lookups = {k: lookups_after[k] - lookups_before.get(k, 0.0) for k in lookups_after}
    looked_up = lookups["hit"] + lookups["miss"]
    batches = after[1] - before[1]
    cpu: dict[str, Any] = {}
    if cpu_before and latencies:
        per_item = {k: (cpu_after[k] - cpu_before[k]) * 1000 / len(latencies) for k in cpu_before}
        used = {k: v for k, v in per_item.items() if not k.startswith("wait:")}
        total = sum(used.values())
        cpu = {
            "cpu_ms_per_item": {**{k: round(v, 3) for k, v in used.items()}, "total": round(total, 3)},
            "cpu_bound_items_per_s": round((psutil.cpu_count() or 1) * 1000 / total, 1),
            # ms per item each process was runnable but had no core (preempted, not idle)
            "runqueue_wait_ms_per_item": {
                k.removeprefix("wait:"): round(v, 3) for k, v in per_item.items() if k.startswith("wait:")
            },
        }
    return {
        "items": len(latencies),
        "items_per_s": round(len(latencies) / window, 1),
        "latency_p50_ms": round(percentile(latencies, 50) * 1000, 1) if latencies else None,
        "latency_p99_ms": round(percentile(latencies, 99) * 1000, 1) if latencies else None,
        "latency_mean_ms": round(statistics.fmean(latencies) * 1000, 1) if latencies else None,
        "mean_batch_size": round((after[0] - before[0]) / batches, 2) if batches else None,
        "errors": errors,
        "prefix_cache_hit_rate": round(lookups["hit"] / looked_up, 3) if looked_up else None,
        **cpu,
    }


def run_mode(
    model: str,
    args: argparse.Namespace,
    max_batch: int,
    share_prefix: str = "auto",
    reward: str = "prm",
    prefix_cache_mb: float | None = None,
) -> dict[str, Any]:
    """One served run; ``reward`` is what the clients ask for (the model reward, or exact_match);
    ``prefix_cache_mb`` None: the service's default ``REWARDHUB_BATCH_PREFIX_CACHE_MB``."""
    env = {
        "REWARDHUB_BATCH_SHARE_PREFIX": share_prefix,
        **({} if prefix_cache_mb is None else {"REWARDHUB_BATCH_PREFIX_CACHE_MB": str(prefix_cache_mb)}),
        **(
            {"REWARDHUB_ORM_MODEL": model}
            if args.reward == "orm"
            else {
                "REWARDHUB_PRM_MODEL": model,
                "REWARDHUB_PRM_CONVENTION": args.convention,
                **({"REWARDHUB_PRM_REF_MODEL": args.ref_model} if args.convention == "implicit" else {}),
            }
        ),
        "REWARDHUB_MODEL_DEVICE": args.device,
        "REWARDHUB_BATCH_MAX_SIZE": str(max_batch),
        "REWARDHUB_BATCH_MAX_WAIT_MS": str(args.max_wait_ms),
        **({} if args.in_flight is None else {"REWARDHUB_BATCH_IN_FLIGHT": str(args.in_flight)}),
        "REWARDHUB_BATCH_QUEUE_MAX": "100000",
        "REWARDHUB_CACHE_ENABLED": "false",
        "REWARDHUB_CPU_WORKERS": "1",
        "REWARDHUB_EMBEDDING_MODEL": "off",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    with server_process(env) as (url, proc):
        result = asyncio.run(
            drive(
                url,
                args.clients,
                args.duration,
                args.warmup,
                args.seed,
                args.items == "short",
                reward,
                server_pid=proc.pid,
            )
        )
        if reward == "prm":  # what the setting resolved to on this device (auto: on for a CPU only)
            check = httpx.get(f"{url}/ready", timeout=10).json()["checks"].get("model:prm", {})
            result["share_prefix"] = check.get("share_prefix")
            result["prefix_cache_mb"] = check.get("prefix_cache_mb")
        return result


def progress(mode: str, result: dict[str, Any]) -> dict[str, Any]:
    print(json.dumps({"mode": mode, **result}), file=sys.stderr, flush=True)
    return result


def ratio(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    return round(a["items_per_s"] / b["items_per_s"], 2) if b["items_per_s"] else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=64, help="concurrent one-item clients")
    ap.add_argument("--duration", type=float, default=10.0, help="measured seconds per mode")
    ap.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds per mode first")
    ap.add_argument(
        "--max-batch", type=int, default=32, help="REWARDHUB_BATCH_MAX_SIZE with batching on (the default)"
    )
    ap.add_argument("--max-wait-ms", type=float, default=5.0, help="REWARDHUB_BATCH_MAX_WAIT_MS")
    ap.add_argument(
        "--in-flight",
        type=int,
        default=None,
        help="REWARDHUB_BATCH_IN_FLIGHT in every mode (default: the service's, 2)",
    )
    ap.add_argument("--hidden", type=int, default=256, help="hidden size of the PRM built for the run")
    ap.add_argument("--layers", type=int, default=4, help="layers of the PRM built for the run")
    ap.add_argument("--device", default="cpu", help="cpu | cuda | auto (REWARDHUB_MODEL_DEVICE)")
    ap.add_argument(
        "--share-prefix",
        default="auto",
        choices=("auto", "true", "false"),
        help="REWARDHUB_BATCH_SHARE_PREFIX of the 'batching on' mode (auto: the service default)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--reward",
        choices=tuple(BATCHERS),
        default="prm",
        help="prm: a Qwen2 token-classifier PRM; orm: a Qwen2 sequence-classifier reward model (same sizes)",
    )
    ap.add_argument(
        "--convention",
        choices=("qwen", "implicit"),
        default="qwen",
        help="prm only. qwen: a token-classifier PRM; implicit: PRIME's implicit PRM, a causal LM and its "
        "reference (two models of the same size, different seeds), each item a pass through both",
    )
    ap.add_argument(
        "--items",
        choices=("long", "short"),
        default="long",
        help="long: 4-7 sentence steps (hundreds of tokens); short: three one-line steps (~30 tokens)",
    )
    ap.add_argument(
        "--pairs",
        type=int,
        default=2,
        help="batching on/off pairs run again after the other modes, each pair adjacent in time (the "
        "ratio is reported per pair and as the median)",
    )
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="rewardhub-bench-prm-") as tmp:
        if args.reward == "orm":
            model = build_tiny_orm(Path(tmp) / "orm", hidden=args.hidden, layers=args.layers)
        elif args.convention == "implicit":
            kw = {"hidden": args.hidden, "layers": args.layers, "max_positions": 4096}
            model = build_tiny_causal_lm(Path(tmp) / "policy", seed=args.seed, **kw)
            args.ref_model = str(build_tiny_causal_lm(Path(tmp) / "reference", seed=args.seed + 1, **kw))
        else:
            model = build_tiny_qwen_prm(
                Path(tmp) / "prm", hidden=args.hidden, layers=args.layers, max_positions=4096
            )
        auto = {"orm": "AutoModelForSequenceClassification", "prm": "AutoModelForTokenClassification"}[
            args.reward
        ]
        if args.reward == "prm" and args.convention == "implicit":
            auto = "AutoModelForCausalLM"  # parameters of one of the two models
        params = sum(
            p.numel() for p in getattr(__import__("transformers"), auto).from_pretrained(model).parameters()
        )
        # each mode is also printed to stderr as it ends: a run cut off by a time limit (a lent GPU's
        # lease) keeps the modes it finished
        r = args.reward
        on = progress("on", run_mode(str(model), args, args.max_batch, args.share_prefix, r))
        # off next: the two runs the target compares, adjacent in time
        off = progress("off", run_mode(str(model), args, 1, reward=r))
        # shared-prompt passes are a PRM feature: an ORM has no plain-batches variant to compare
        on_plain = (
            progress("on_plain", run_mode(str(model), args, args.max_batch, "false", r))
            if r == "prm"
            else None
        )
        # the same without prompts kept across batches (REWARDHUB_BATCH_PREFIX_CACHE_MB=0)
        on_uncached = (
            progress(
                "on_no_prefix_cache", run_mode(str(model), args, args.max_batch, args.share_prefix, r, 0)
            )
            if r == "prm"
            else None
        )
        ceiling = progress("ceiling", run_mode(str(model), args, 1, reward="exact_match"))
        pairs = []
        for k in range(args.pairs):
            order = ("off", "on") if k % 2 == 0 else ("on", "off")
            got = {
                mode: progress(
                    f"{mode} (pair {k + 1})",
                    run_mode(str(model), args, args.max_batch, args.share_prefix, r)
                    if mode == "on"
                    else run_mode(str(model), args, 1, reward=r),
                )
                for mode in order
            }
            pairs.append(
                {
                    "order": "-".join(order),
                    "on_items_per_s": got["on"]["items_per_s"],
                    "off_items_per_s": got["off"]["items_per_s"],
                    "on_latency_p50_ms": got["on"]["latency_p50_ms"],
                    "on_latency_p99_ms": got["on"]["latency_p99_ms"],
                    "ratio": ratio(got["on"], got["off"]),
                }
            )
    ratios = [x for x in (ratio(on, off), *(p["ratio"] for p in pairs)) if x is not None]
    result = {
        "machine": machine(),
        "device": args.device,
        "reward": args.reward,
        "convention": args.convention if args.reward == "prm" else None,
        "model": {"hidden": args.hidden, "layers": args.layers, "parameters": params},
        "clients": args.clients,
        "items_kind": args.items,
        "duration_s": args.duration,
        "batching_on": {
            "max_batch": args.max_batch,
            "max_wait_ms": args.max_wait_ms,
            "in_flight": args.in_flight if args.in_flight is not None else "default",
            "share_prefix_setting": args.share_prefix,
            **on,
        },
        "batching_on_no_prefix_sharing": {"max_batch": args.max_batch, **on_plain} if on_plain else None,
        "batching_on_no_prefix_cache": {"max_batch": args.max_batch, **on_uncached} if on_uncached else None,
        "batching_off": {"max_batch": 1, **off},
        "http_ceiling_exact_match": ceiling,
        "speedup_items_per_s": ratio(on, off),
        "speedup_pairs": pairs,
        "speedup_median": round(statistics.median(ratios), 2) if ratios else None,
        "speedup_min": min(ratios) if ratios else None,
        "speedup_ceiling": ratio(ceiling, off),
        "speedup_without_prefix_sharing": ratio(on_plain, off) if on_plain else None,
        "speedup_without_prefix_cache": ratio(on_uncached, off) if on_uncached else None,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
