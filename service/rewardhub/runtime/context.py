"""The shared runtime handed to every reward: settings, metrics and the worker pools.

Rewards reach heavy resources only through this object, which the app's lifespan builds once per
service process and tears down at exit; tests build their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rewardhub.config import Settings
from rewardhub.metrics import Metrics
from rewardhub.runtime.process_pool import ProcessPool

if TYPE_CHECKING:
    from rewardhub.models.hub import ModelHub
    from rewardhub.rewards.base import RewardRegistry
    from rewardhub.sandbox.pool import SandboxPool

__all__ = ["Runtime", "build_cpu_pool"]

# Imported once by the forkserver so each new CPU worker starts with SymPy and Math-Verify loaded and warm.
CPU_PRELOAD = ("rewardhub.runtime.cpu_preload",)


@dataclass(slots=True)
class Runtime:
    settings: Settings
    metrics: Metrics
    cpu_pool: ProcessPool
    # Set once the registry exists; rewards that compose others (composite, wrappers) look them up here.
    registry: RewardRegistry | None = None
    # The code sandbox (None in runtimes built without one, e.g. by tests of other rewards).
    sandbox: SandboxPool | None = None
    # Named model backends (judge, prm, orm, embedding); None in runtimes built without them.
    models: ModelHub | None = None

    def reward_registry(self) -> RewardRegistry:
        if self.registry is None:
            raise RuntimeError("the reward registry is not built yet")
        return self.registry


def build_cpu_pool(settings: Settings, metrics: Metrics) -> ProcessPool:
    pool = ProcessPool(
        size=settings.cpu_workers,
        name="cpu",
        memory_mb=settings.cpu_worker_memory_mb,
        max_items_per_worker=settings.cpu_worker_max_items,
        max_queued_items=settings.cpu_queue_max_items,
        preload=CPU_PRELOAD,
    )
    pool.on_restart = lambda cause: metrics.worker_restarts.labels("cpu", cause).inc()
    return pool
