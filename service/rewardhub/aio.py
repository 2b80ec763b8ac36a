"""asyncio helpers the standard library lacks."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["cancel_and_wait", "gather_all"]

T = TypeVar("T")


async def gather_all(*aws: Awaitable[T]) -> list[T]:
    """``asyncio.gather`` whose first exception cancels the others, and waits for them, before it propagates.

    Plain ``gather`` leaves the siblings running. A request refused part-way (429 from a full model
    queue) or failed would then keep its other items' calls in the model's queue with nobody to read
    them, holding the places and model time that its retry, and every other caller, needs.
    """
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def cancel_and_wait(task: asyncio.Task[object]) -> None:
    """Cancel a background task and wait until it has stopped (its own exception, if any, dropped): a
    shutdown that only cancels leaves the task running into the resources closed after it."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
