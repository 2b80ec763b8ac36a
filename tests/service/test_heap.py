"""The service and model processes take their start-up heap out of the garbage collector's walks.

Without it, under 64 one-item clients the service spent 12% of its event loop's time (42% on a free
reward) in full collections that walked the whole start-up heap to free nothing, every request stalled
~100 ms at a time (rewardhub.runtime.heap, BENCHMARKS.md section 5). Each check runs in a fresh
interpreter: the settling is once per process, and this one has settled already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rewardhub.models.model_process import ModelProcess
from rewardhub.runtime.heap import GEN0_THRESHOLD

ROOT = Path(__file__).resolve().parents[2]

_SERVICE = """
import asyncio, gc, json, sys
from conftest import make_settings, running_app

async def main():
    before = gc.get_threshold()[0]
    async with running_app(make_settings(cpu_workers=1)) as client:
        assert (await client.get("/health")).status_code == 200
        frozen = gc.get_freeze_count()
    async with running_app(make_settings(cpu_workers=1)):
        again = gc.get_freeze_count()
    print(json.dumps({"before": before, "frozen": frozen, "again": again, "after": gc.get_threshold()[0]}))

asyncio.run(main())
"""


def test_the_service_freezes_its_start_up_heap_once_per_process() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("service", "clients", "tests")),
    }
    out = subprocess.run(
        [sys.executable, "-c", _SERVICE], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["before"] == 700 and got["after"] == GEN0_THRESHOLD
    assert got["frozen"] > 10_000  # FastAPI, pydantic, the rewards' modules...
    # a second start in the same process froze nothing more (the first app's objects were freed since)
    assert got["again"] <= got["frozen"]


def _gc_state(loaded: object, items: list[object]) -> list[int]:
    import gc

    return [gc.get_freeze_count(), gc.get_threshold()[0]]


def _torch_loaded() -> str:
    import torch  # noqa: F401  (a model's libraries: a heap worth freezing)

    return "loaded"


async def test_a_model_process_freezes_its_heap_once_the_model_is_loaded() -> None:
    proc = ModelProcess("t", _torch_loaded)
    await proc.start()
    try:
        frozen, threshold = await proc.call(_gc_state, [])
        assert frozen > 10_000 and threshold == GEN0_THRESHOLD
    finally:
        await proc.close()


_WORKERS = """
import asyncio, gc, json
from rewardhub.runtime.context import CPU_PRELOAD
from rewardhub.runtime.process_pool import ProcessPool

def gc_state(_):
    import gc
    return gc.get_freeze_count(), gc.get_threshold()[0]

async def main():
    pool = ProcessPool(size=1, name="frozen", preload=CPU_PRELOAD)
    await asyncio.to_thread(pool.start)
    try:
        (res,) = await pool.run(gc_state, [None], deadline_s=60)
        print(json.dumps({"worker": res.value, "here": [gc.get_freeze_count(), gc.get_threshold()[0]]}))
    finally:
        await asyncio.to_thread(pool.close)

if __name__ == "__main__":
    asyncio.run(main())
"""


def test_cpu_workers_fork_from_a_frozen_warmed_heap(tmp_path: Path) -> None:
    """The forkserver freezes what its preload built (SymPy and Math-Verify, warmed) before it forks the
    workers (gc.freeze's documented use): their collections never walk it. A fresh interpreter: the
    forkserver is one per process, and this one's may have started without the preload."""
    script = tmp_path / "workers.py"
    script.write_text(_WORKERS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("service", "clients"))}
    out = subprocess.run(
        [sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    frozen, threshold = got["worker"]
    assert frozen > 50_000 and threshold == GEN0_THRESHOLD  # SymPy's heap is ~10^5 objects
    assert got["here"] == [0, 700]  # the parent process itself is untouched by the pool
