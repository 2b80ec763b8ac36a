"""``rewardhub-train plot RUN_DIR``: training curves from ``metrics.jsonl`` as one PNG (matplotlib, Agg).

Panels: reward (mean over valid items), accuracy, completion length, KL to
the reference (when the run had one) and the reward-wait fraction (per step and cumulative). Noisy
per-step series get a trailing moving average so a trend is visible on a few dozen steps.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rewardhub_trainer.metrics import read_metrics

__all__ = ["plot_run"]


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in rows:
        v = r.get(key)
        if isinstance(v, int | float) and not math.isnan(v):
            xs.append(int(r["step"]))
            ys.append(float(v))
    return xs, ys


def _smooth(ys: list[float], window: int) -> list[float]:
    out = []
    for i in range(len(ys)):
        part = ys[max(0, i - window + 1) : i + 1]
        out.append(sum(part) / len(part))
    return out


def plot_run(run_dir: Path, out: Path | None = None, *, window: int = 5, title: str | None = None) -> Path:
    """Write the curves of ``run_dir`` to ``out`` (default ``RUN_DIR/curves.png``); returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if window < 1:
        raise ValueError(f"window must be at least 1 step (got {window})")
    rows = read_metrics(run_dir)
    if not rows:
        raise ValueError(f"{run_dir}/metrics.jsonl has no rows")
    out = out or Path(run_dir) / "curves.png"
    panels = [
        ("reward", "reward (valid items)"),
        ("accuracy", "accuracy"),
        ("completion_len", "completion length (tokens)"),
        ("kl", "KL to reference"),
        ("reward_wait_frac_step", "reward-wait fraction of wall time"),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
    for ax, (key, label) in zip(axes, panels, strict=True):
        xs, ys = _series(rows, key)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if not ys:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="gray")
            continue
        ax.plot(xs, ys, color="tab:blue", alpha=0.35, lw=1, label="per step")
        ax.plot(xs, _smooth(ys, window), color="tab:blue", lw=2, label=f"mean of last {window}")
        if key == "reward_wait_frac_step":
            cx, cy = _series(rows, "reward_wait_frac")
            ax.plot(cx, cy, color="tab:red", lw=2, label="cumulative")
            ax.set_ylim(0, max(0.05, max(ys + cy) * 1.2))
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(title or str(run_dir), fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
