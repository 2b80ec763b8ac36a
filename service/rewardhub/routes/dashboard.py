"""``/dashboard``: a live page of throughput, cache hit rate, per-reward latency and invalid reasons.

The page is one self-contained HTML file (no CDN: it works on an air-gapped cluster) that polls
``/dashboard/data`` every second. Like ``/metrics`` it shows counts and timings only — no items, no
keys — and is open to whoever can reach the port. Its figures are one process's: with ``serve --workers
N`` each poll reaches one worker (``worker.one_of_several``, and the page says so), while ``/metrics``
aggregates them all.
"""

from __future__ import annotations

import os
from importlib.resources import files
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from rewardhub import __version__

router = APIRouter(tags=["meta"])

_PAGE = files("rewardhub").joinpath("static/dashboard.html").read_text(encoding="utf-8")


@router.get("/dashboard", response_class=HTMLResponse, summary="Live dashboard (HTML)")
async def dashboard() -> HTMLResponse:
    return HTMLResponse(_PAGE)


@router.get("/dashboard/data", summary="The dashboard's data: the last minute, one-second buckets")
async def dashboard_data(request: Request) -> dict[str, Any]:
    state = request.app.state
    snap: dict[str, Any] = state.stats.snapshot()
    cache = getattr(state, "cache", None)
    snap["cache"] = {"backend": cache.backend, "up": cache.up} if cache is not None else None
    runtime = getattr(state, "runtime", None)
    if runtime is not None:
        pool = runtime.cpu_pool.stats()
        snap["cpu_pool"] = {
            "alive": pool.alive,
            "size": pool.size,
            "busy": pool.busy,
            "queued_items": pool.queued_items,
        }
    snap["inflight_items"] = state.admission.items
    snap["version"] = __version__
    snap["worker"] = {"pid": os.getpid(), "one_of_several": state.metrics.multiprocess}
    return snap
