"""Benchmark 4b: does batching change a PRM's rewards? Per-step scores of the same items, scored one
forward pass per item and in batched passes, against a float32 reference.

The micro-batcher packs items from different requests into one padded forward pass, or, with
``REWARDHUB_BATCH_SHARE_PREFIX`` on, one pass per shared prompt. In exact arithmetic neither changes a
score. In float32 on a CPU the differences are rounding noise (~1e-6); in bfloat16 on a GPU, padding and
a different batch shape pick different kernels and reduction orders, and a step score can move by more.
A reward that depends on who else was in the batch is noise in the policy gradient, so this measures it.

The PRM is built from a config (random weights) exactly as in ``prm_batching.py`` and served by a real
``rewardhub serve`` per mode; ``--items`` distinct items (five shared questions, as in a GRPO group) are
posted in one request per mode, with the result cache off. Modes:

- ``reference``: float32, one item per forward pass (``REWARDHUB_BATCH_MAX_SIZE=1``), on ``--ref-device``;
- ``single``: the model's own dtype on ``--device``, one item per pass;
- ``batched_plain``: padded batches of up to ``--max-batch``, prefix sharing off;
- ``batched_prefix``: batches with shared-prefix passes (the default).

Reported per mode: the max and mean absolute difference of the per-step scores (``details.steps``)
and of the aggregate (``score``, ``min`` by default) from the reference, and from ``single``.

    python bench/prm_consistency.py                                   # tiny CPU model
    python bench/prm_consistency.py --device cuda --hidden 1536 --layers 24
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from _server import ROOT, machine, server
from prm_batching import make_item

sys.path.insert(0, str(ROOT / "tests"))
from tiny_models import build_tiny_qwen_prm


def score(
    model: str, items: list[dict[str, str]], device: str, dtype: str, max_batch: int, prefix: bool
) -> Any:
    env = {
        "REWARDHUB_PRM_MODEL": model,
        "REWARDHUB_PRM_CONVENTION": "qwen",
        "REWARDHUB_MODEL_DEVICE": device,
        "REWARDHUB_MODEL_DTYPE": dtype,
        "REWARDHUB_BATCH_MAX_SIZE": str(max_batch),
        "REWARDHUB_BATCH_SHARE_PREFIX": "true" if prefix else "false",
        "REWARDHUB_CACHE_ENABLED": "false",
        "REWARDHUB_CPU_WORKERS": "1",
        "REWARDHUB_EMBEDDING_MODEL": "off",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    with server(env) as url:
        r = httpx.post(
            f"{url}/v1/score",
            json={"reward": "prm", "items": items, "options": {"use_cache": False, "timeout_s": 300}},
            timeout=600,
        )
        r.raise_for_status()
        results = r.json()["results"]
    bad = [res.get("reason") for res in results if not res["valid"]]
    if bad:
        raise RuntimeError(f"invalid results: {bad[:5]}")
    return [([s["score"] for s in res["details"]["steps"]], res["score"]) for res in results]


def diff(a: Any, b: Any) -> dict[str, float]:
    steps = [abs(x - y) for (sa, _), (sb, _) in zip(a, b, strict=True) for x, y in zip(sa, sb, strict=True)]
    agg = [abs(x - y) for (_, x), (_, y) in zip(a, b, strict=True)]
    return {
        "steps_max_abs": round(max(steps), 6),
        "steps_mean_abs": round(statistics.fmean(steps), 6),
        "score_max_abs": round(max(agg), 6),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=64)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--device", default="cpu", help="device of the modes under test")
    ap.add_argument("--dtype", default="auto", help="their dtype: auto is float32 on CPU, bfloat16 on CUDA")
    ap.add_argument("--ref-device", default="cpu", help="device of the float32 reference")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    items = [make_item(k, rng) for k in range(args.items)]
    with tempfile.TemporaryDirectory(prefix="rewardhub-bench-prmc-") as tmp:
        model = str(
            build_tiny_qwen_prm(Path(tmp) / "prm", hidden=args.hidden, layers=args.layers, max_positions=4096)
        )
        ref = score(model, items, args.ref_device, "float32", 1, False)
        single = score(model, items, args.device, args.dtype, 1, False)
        plain = score(model, items, args.device, args.dtype, args.max_batch, False)
        prefix = score(model, items, args.device, args.dtype, args.max_batch, True)
    n_steps = sum(len(s) for s, _ in ref)
    result = {
        "machine": machine(),
        "device": args.device,
        "dtype": args.dtype,
        "model": {"hidden": args.hidden, "layers": args.layers},
        "items": args.items,
        "steps": n_steps,
        "vs_float32_reference": {
            "single": diff(single, ref),
            "batched_plain": diff(plain, ref),
            "batched_prefix": diff(prefix, ref),
        },
        "vs_single": {"batched_plain": diff(plain, single), "batched_prefix": diff(prefix, single)},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
