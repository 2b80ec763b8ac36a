"""Prometheus metrics of one service process.

Each app gets its own ``CollectorRegistry`` (tests build several apps in one process). With
``rewardhub serve --workers N`` ``/metrics`` aggregates all workers (prometheus-client's multiprocess
mode): ``serve`` points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory of its own, removed when the
workers have stopped, unless the variable is already set.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    def __init__(self) -> None:
        #: The workers' shared directory under ``serve --workers N`` (also where they elect a canary runner).
        self.multiprocess_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None
        self.multiprocess = self.multiprocess_dir is not None
        self._watched: list[tuple[Any, Callable[[], float]]] = []
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "rewardhub_requests_total", "HTTP requests by route and status.", ["route", "status"], registry=r
        )
        self.request_latency = Histogram(
            "rewardhub_request_latency_seconds",
            "HTTP request latency by route.",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.items = Counter("rewardhub_items_total", "Items scored, by reward.", ["reward"], registry=r)
        self.reward_latency = Histogram(
            "rewardhub_reward_batch_latency_seconds",
            "Wall time of one reward's batch within a request (cache misses only), by reward.",
            ["reward"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.cache_hits = Counter(
            "rewardhub_cache_hits_total", "Cache hits, by reward.", ["reward"], registry=r
        )
        self.cache_misses = Counter(
            "rewardhub_cache_misses_total", "Cache misses, by reward.", ["reward"], registry=r
        )
        self.cache_errors = Counter(
            "rewardhub_cache_errors_total",
            "Cache backend failures (lookups served as misses).",
            ["op"],
            registry=r,
        )
        self.cache_up = Gauge(
            "rewardhub_cache_up",
            "1 when the cache backend answers.",
            registry=r,
            multiprocess_mode="livemin",
        )
        self.shadow_items = Counter(
            "rewardhub_shadow_items_total",
            "Items scored with a shadow reward, by primary reward, shadow reward and outcome (agree_pass, "
            "agree_fail, primary_only, shadow_only, primary_invalid, shadow_invalid).",
            ["reward", "shadow", "outcome"],
            registry=r,
        )
        self.canary_false_positive_rate = Gauge(
            "rewardhub_canary_false_positive_rate",
            "Share of the scored master-key canaries that passed, at the last canary run, by reward.",
            ["reward"],
            registry=r,
            multiprocess_mode="livemax",
        )
        self.canary_runs = Counter(
            "rewardhub_canary_runs_total",
            "Periodic canary runs, by reward and outcome (ok, alarm: over 1% passed, unscored, failed).",
            ["reward", "outcome"],
            registry=r,
        )
        self.invalid = Counter(
            "rewardhub_invalid_total",
            "Invalid items, by reward and reason.",
            ["reward", "reason"],
            registry=r,
        )
        self.single_flight_remote_waits = Counter(
            "rewardhub_single_flight_remote_waits_total",
            "Items that waited for another service process scoring them (single flight through Redis), by "
            "reward and how the wait ended (cached: its result; taken_over: its claim went without a "
            "result and this process scored it; deadline: its deadline came first).",
            ["reward", "outcome"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "rewardhub_queue_depth",
            "Items waiting in a worker pool or batcher.",
            ["pool"],
            registry=r,
            multiprocess_mode="livesum",
        )
        self.batch_size = Histogram(
            "rewardhub_batch_size",
            "Items per forward pass of an in-process model, by batcher (backend:capability).",
            ["batcher"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.prefix_cache_lookups = Counter(
            "rewardhub_prefix_cache_lookups_total",
            "Shared prompts of an in-process model's batches looked up among the prompts kept from "
            "earlier batches (REWARDHUB_BATCH_PREFIX_CACHE_MB), by backend and outcome: hit (its keys "
            "and values reused, no prefill) or miss (prefilled).",
            ["backend", "outcome"],
            registry=r,
        )
        self.prefix_cache_bytes = Gauge(
            "rewardhub_prefix_cache_bytes",
            "Keys and values an in-process model's prefix cache holds, by backend.",
            ["backend"],
            registry=r,
            multiprocess_mode="livesum",
        )
        self.worker_restarts = Counter(
            "rewardhub_worker_restarts_total",
            "Worker processes replaced, by pool and cause.",
            ["pool", "cause"],
            registry=r,
        )

    def model_counters(self, backend: str) -> Callable[[dict[str, int]], None]:
        """An exporter of one in-process model's counters (``hf_compute.Loaded.counters``, sent with
        each batch's reply): they count from the model process's start, so each call adds what grew
        since the last; a lower count is a restarted process's, counted from 0."""
        last: dict[str, int] = {}
        lookups = {
            "prefix_cache_hits": self.prefix_cache_lookups.labels(backend, "hit"),
            "prefix_cache_misses": self.prefix_cache_lookups.labels(backend, "miss"),
        }
        size = self.prefix_cache_bytes.labels(backend)

        def export(counters: dict[str, int]) -> None:
            for key, child in lookups.items():
                now = counters.get(key)
                if now is None:
                    continue
                before = last.get(key, 0)
                grew = now - before if now >= before else now
                if grew:
                    child.inc(grew)
                last[key] = now
            if "prefix_cache_bytes" in counters:
                size.set(counters["prefix_cache_bytes"])

        return export

    def watch(self, gauge: Any, read: Callable[[], float]) -> None:
        """Report ``read()`` as the gauge (a labelled child) at every scrape.

        One process: ``set_function``. Several workers: prometheus-client's multiprocess mode never
        calls a gauge's function (it reads the values each worker wrote to its files), so the values
        are written by :meth:`refresh`, which a scrape and each worker's refresher task call.
        """
        if self.multiprocess:
            self._watched.append((gauge, read))
            gauge.set(read())
        else:
            gauge.set_function(read)

    def refresh(self) -> None:
        """Write the watched gauges' current values (several workers only; see :meth:`watch`)."""
        for gauge, read in self._watched:
            gauge.set(read())

    def render(self) -> bytes:
        if self.multiprocess:
            self.refresh()
            _forget_dead_workers()
            agg = CollectorRegistry()
            multiprocess.MultiProcessCollector(agg)  # type: ignore[no-untyped-call]
            return generate_latest(agg)
        return generate_latest(self.registry)


def _forget_dead_workers() -> None:
    """Drop the live gauges of worker processes that are gone.

    uvicorn replaces a dead worker but has no hook to tell prometheus-client (gunicorn's ``child_exit``
    is where its docs call ``mark_process_dead``), so a dead worker's last queue depth stayed in the
    ``livesum`` for good and its last ``cache_up`` in the ``livemin``. Gauge files are named by pid; the
    scrape clears those whose process no longer exists.
    """
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        return
    for path in Path(directory).glob("gauge_live*_*.db"):
        pid = path.stem.rsplit("_", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            multiprocess.mark_process_dead(int(pid), directory)  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
