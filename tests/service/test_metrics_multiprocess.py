"""Queue-depth gauges under several workers (prometheus-client's multiprocess mode, which never calls a
gauge's function: every queue depth read 0). Run in a subprocess: the mode is fixed at import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
from rewardhub.metrics import Metrics

m = Metrics()
assert m.multiprocess
depth = {"n": 0}
m.watch(m.queue_depth.labels("batcher:prm:steps"), lambda: depth["n"])
depth["n"] = 37
print([line for line in m.render().decode().splitlines() if "queue_depth{" in line])
depth["n"] = 5
m.refresh()  # what each worker's refresher task does every second
print([line for line in m.render().decode().splitlines() if "queue_depth{" in line])
"""


def test_queue_depth_is_reported_with_several_workers(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    first, second = out.stdout.strip().splitlines()
    assert 'rewardhub_queue_depth{pool="batcher:prm:steps"} 37.0' in first
    assert 'rewardhub_queue_depth{pool="batcher:prm:steps"} 5.0' in second
