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


DEAD_WORKER = """
import os, sys
from rewardhub.metrics import Metrics

m = Metrics()
m.watch(m.queue_depth.labels("cpu"), lambda: 30)
m.cache_up.set(0)
sys.stdout.flush()
os._exit(0)  # a worker that dies (uvicorn starts another in its place)
"""

LIVE_WORKER = """
from rewardhub.metrics import Metrics

m = Metrics()
m.watch(m.queue_depth.labels("cpu"), lambda: 4)
m.cache_up.set(1)
print([line for line in m.render().decode().splitlines() if line.startswith(("rewardhub_queue_depth{", "rewardhub_cache_up"))])
"""


def test_a_dead_worker_s_gauges_leave_the_aggregate(tmp_path: Path) -> None:
    """Nothing told prometheus-client that a worker died, so its last queue depth stayed in the sum and
    its last cache_up (0) in the minimum for good: the autoscaler saw a queue that was not there and
    the cache read as down. A scrape now drops the gauges of workers that no longer exist."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", DEAD_WORKER], env=env, check=True)
    assert list(tmp_path.glob("gauge_live*"))  # what the dead worker left behind
    out = subprocess.run(
        [sys.executable, "-c", LIVE_WORKER], env=env, capture_output=True, text=True, check=True
    )
    assert 'rewardhub_queue_depth{pool="cpu"} 4.0' in out.stdout, out.stdout
    assert "rewardhub_cache_up 1.0" in out.stdout, out.stdout
