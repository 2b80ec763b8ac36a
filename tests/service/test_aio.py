"""gather_all: the first failure cancels the other awaitables before it propagates."""

from __future__ import annotations

import asyncio

import pytest

from rewardhub.aio import gather_all
from rewardhub.errors import Overloaded


async def test_results_in_order() -> None:
    async def after(s: float, v: int) -> int:
        await asyncio.sleep(s)
        return v

    assert await gather_all(after(0.02, 1), after(0.0, 2), after(0.01, 3)) == [1, 2, 3]


async def test_the_first_failure_cancels_the_others_and_propagates() -> None:
    finished: list[str] = []
    cancelled: list[str] = []

    async def slow(name: str) -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        finished.append(name)
        return name

    async def refused() -> str:
        await asyncio.sleep(0.01)
        raise Overloaded("queue full", retry_after_s=1.0)

    with pytest.raises(Overloaded):
        await gather_all(slow("a"), refused(), slow("b"))
    assert sorted(cancelled) == ["a", "b"] and finished == []  # stopped before the error surfaced
