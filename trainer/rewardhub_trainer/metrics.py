"""Per-step metrics: JSON lines (``RUN_DIR/metrics.jsonl``), TensorBoard scalars and sample completions.

The JSONL file is the source of truth (``rewardhub-train plot`` reads it); on resume it is cut back to
the checkpoint's step so that a resumed run's file reads as if the run had never stopped.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["MetricsWriter", "read_metrics"]

TB_HINT = (
    "TensorBoard logging needs the `tensorboard` package: scripts/bootstrap service,trainer in the clone "
    "(or, in its venv, pip install -c constraints.txt -e '.[service,trainer]'), or set output.tensorboard: false"
)


class MetricsWriter:
    def __init__(self, run_dir: Path, *, tensorboard: bool, resume_step: int = 0):
        self.path = run_dir / "metrics.jsonl"
        self.samples_path = run_dir / "samples.jsonl"
        run_dir.mkdir(parents=True, exist_ok=True)
        for p in (self.path, self.samples_path):
            _truncate_after(p, resume_step)
        self._tb: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise ImportError(TB_HINT) from exc
            self._tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=resume_step + 1)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        row = {
            "step": step,
            **{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()},
        }
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for k, v in metrics.items():
                if isinstance(v, int | float) and not (isinstance(v, float) and math.isnan(v)):
                    self._tb.add_scalar(k, v, step)

    def samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        with self.samples_path.open("a") as f:
            for r in rows:
                f.write(json.dumps({"step": step, **r}) + "\n")

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def _truncate_after(path: Path, step: int) -> None:
    """Keep the rows up to ``step`` (the checkpoint's). A line that is not a row is the torn tail of a
    write the stopped run did not finish (killed, preempted, disk full: resuming is what follows those),
    not a row: dropped with the rows past the checkpoint, not an error that keeps the run from resuming."""
    if not path.exists():
        return
    keep = [line for line in path.read_text().splitlines() if _step(line) <= step]
    path.write_text("".join(line + "\n" for line in keep))


def _step(line: str) -> float:
    """A row's step; infinity (never kept) for a line that is not a whole row."""
    try:
        row = json.loads(line)
    except ValueError:
        return math.inf
    step = row.get("step") if isinstance(row, dict) else None
    return float(step) if isinstance(step, int) else math.inf


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
