"""Reward-wait fraction of rewardhub-train with overlap on vs off (the same run, same seed, same prompts).

    python bench/trainer_overlap.py                      # tiny random model, `math` reward, 30 steps each
    python bench/trainer_overlap.py --model runs/models/smollm2-135m-instruct --steps 5 --max-new-tokens 40

Starts its own `rewardhub serve` on a free port. Runs alternate on/off/on/off (``--repeats``) so that a
change in machine load hits both settings. Reports, per setting: wall time of the training loop, the time
the loop was blocked on reward futures, that fraction, and steps/s. With overlap on, a chunk's groups are
scored while the next chunk generates; only the last chunk of a step is waited for.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _server import server_process


def run(url: str, model: str, run_dir: Path, overlap: bool, args: argparse.Namespace) -> dict[str, Any]:
    from rewardhub_trainer.config import TrainConfig
    from rewardhub_trainer.trainer import train

    cfg = TrainConfig.model_validate(
        {
            "model": {"path": model, "device": "cpu", "torch_threads": args.threads},
            "reward": {"url": url, "name": "math", "overlap": overlap, "use_cache": False},
            "data": {"prompt_template": "{question}\nGive the final answer in \\boxed{{}}."},
            "generation": {
                "group_size": args.group_size,
                "max_new_tokens": args.max_new_tokens,
                "prompts_per_generate": args.prompts_per_generate,
            },
            "training": {
                "steps": args.steps,
                "prompts_per_step": args.prompts_per_step,
                "learning_rate": 1e-5,
            },
            "output": {
                "run_dir": str(run_dir),
                "progress": False,
                "tensorboard": False,
                "save_final_model": False,
            },
        }
    )
    return train(cfg)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny", help="a model directory, or 'tiny' (random Qwen2, built here)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--prompts-per-step", type=int, default=8)
    p.add_argument("--prompts-per-generate", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model == "tiny":
            from tiny_models import build_tiny_causal_lm

            model = str(build_tiny_causal_lm(Path(tmp) / "tiny", hidden=128))
        results: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
        with server_process({"REWARDHUB_CPU_WORKERS": "1"}) as (url, _):
            for r in range(args.repeats):
                for setting in ("on", "off"):
                    s = run(url, model, Path(tmp) / f"{setting}{r}", setting == "on", args)
                    results[setting].append(s)
        print(
            f"model={args.model} steps={args.steps} B={args.prompts_per_step} G={args.group_size} "
            f"chunk={args.prompts_per_generate} prompts, max_new_tokens={args.max_new_tokens}"
        )
        print("| overlap | wall s | reward wait s | wait fraction | steps/s | requests |")
        print("| --- | --- | --- | --- | --- | --- |")
        for setting, runs in results.items():
            wall = sum(s["wall_s"] for s in runs)
            wait = sum(s["reward_wait_s"] for s in runs)
            steps = sum(s["steps"] for s in runs)
            print(
                f"| {setting} | {wall:.1f} | {wait:.2f} | {wait / wall:.1%} | {steps / wall:.2f} | {runs[0]['reward_requests']} |"
            )
        print(
            json.dumps(
                {
                    k: [{x: v[x] for x in ("wall_s", "reward_wait_s", "reward_wait_frac")} for v in vs]
                    for k, vs in results.items()
                }
            )
        )


if __name__ == "__main__":
    main()
