"""The shared runtime handed to every reward: settings, metrics and the worker pools.

Rewards reach heavy resources only through this object, which the app's lifespan builds once per
service process and tears down at exit; tests build their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from rewardhub.config import Settings
from rewardhub.metrics import Metrics
from rewardhub.runtime.process_pool import ProcessPool

__all__ = ["Runtime", "build_cpu_pool"]

# Imported once by the forkserver so each new CPU worker starts with SymPy and Math-Verify loaded.
CPU_PRELOAD = ("rewardhub.runtime.cpu_tasks",)


@dataclass(slots=True)
class Runtime:
    settings: Settings
    metrics: Metrics
    cpu_pool: ProcessPool


def build_cpu_pool(settings: Settings, metrics: Metrics) -> ProcessPool:
    from rewardhub.runtime.cpu_tasks import warm_up

    pool = ProcessPool(
        size=settings.cpu_workers,
        name="cpu",
        memory_mb=settings.cpu_worker_memory_mb,
        max_items_per_worker=settings.cpu_worker_max_items,
        max_queued_items=settings.cpu_queue_max_items,
        preload=CPU_PRELOAD,
        initializer=warm_up,
    )
    pool.on_restart = lambda cause: metrics.worker_restarts.labels("cpu", cause).inc()
    return pool
