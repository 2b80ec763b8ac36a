"""Waiting in a test for something another task or process makes true (a worker started, a request
holding an item), without timing assertions: polled, bounded, so a broken build fails instead of hanging.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(
    check: Callable[[], bool], what: str = "the condition never held", timeout_s: float = 30.0
) -> None:
    """Return once ``check()`` holds; raise AssertionError(``what``) after ``timeout_s`` seconds."""
    for _ in range(max(1, round(timeout_s / 0.01))):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)
