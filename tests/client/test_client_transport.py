"""A caller's ``transport=``: a factory gives each pool (forked child, event loop) a transport of its own.

The transports here answer by themselves (the transport boundary is what is under test): each says
which process made it and which process and event loop it answered in.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
import threading
from typing import Any, ClassVar

import httpx
import pytest

from rewardhub_client import AsyncRewardClient, RewardClient


class _Where(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Answers every request with where it was made and where it answers."""

    made: ClassVar[list[_Where]] = []

    def __init__(self) -> None:
        self.made_in = os.getpid()
        self.loops: set[int] = set()
        _Where.made.append(self)

    def _answer(self) -> httpx.Response:
        return httpx.Response(
            200, json={"made_in": self.made_in, "used_in": os.getpid(), "transport": id(self)}
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._answer()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.loops.add(id(asyncio.get_running_loop()))
        return self._answer()


_FORKED: dict[str, RewardClient] = {}


def _health_in_child(_: int) -> dict[str, Any]:
    return _FORKED["client"].health()


def _in_children(client: RewardClient) -> list[dict[str, Any]]:
    _FORKED["client"] = client
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            return pool.map_async(_health_in_child, range(4)).get(30)
    finally:
        _FORKED.clear()


@pytest.mark.timeout(60)
def test_a_transport_factory_gives_each_forked_child_its_own_transport() -> None:
    """A transport instance (``httpx.HTTPTransport(retries=3)``, ``uds=...``) holds its connections: the
    client opened a pool per forked child, but every pool went through the parent's transport and its
    kept-alive sockets. A factory is called for each pool, so a child's transport is its own."""
    parent = os.getpid()
    with RewardClient("http://rewardhub.test", transport=_Where) as c:
        assert c.health()["made_in"] == parent
        for answer in _in_children(c):
            assert answer["used_in"] != parent
            assert answer["made_in"] == answer["used_in"], answer  # made in the child that used it
        assert c.health()["made_in"] == parent  # the parent's own is untouched


@pytest.mark.timeout(60)
def test_a_transport_instance_is_used_as_is_in_every_process() -> None:
    """An instance is the caller's object, shared as documented (right for a transport without
    connections of its own, as tests pass ``httpx.MockTransport``)."""
    mine = _Where()
    with RewardClient("http://rewardhub.test", transport=mine) as c:
        answers = _in_children(c)
    assert {a["transport"] for a in answers} == {id(mine)}
    assert {a["made_in"] for a in answers} == {os.getpid()}


def test_a_transport_factory_gives_each_event_loop_its_own_transport() -> None:
    """The async client opens a pool per event loop (a connection belongs to its loop); with a factory
    each of those pools has its own transport, used on that loop only."""
    _Where.made.clear()
    client = AsyncRewardClient("http://rewardhub.test", transport=_Where)
    first = asyncio.run(client.health())["transport"]
    second = asyncio.run(client.health())["transport"]
    assert first != second
    used = [t for t in _Where.made if t.loops]
    assert len(used) == 2 and all(len(t.loops) == 1 for t in used)


def test_a_transport_that_is_neither_is_refused_at_once() -> None:
    with pytest.raises(TypeError, match="transport must be"):
        RewardClient("http://rewardhub.test", transport="http://elsewhere")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="transport must be"):
        AsyncRewardClient("http://rewardhub.test", transport=httpx.HTTPTransport())  # type: ignore[arg-type]


@pytest.mark.timeout(120)
def test_one_async_client_serves_event_loops_in_several_threads_at_once() -> None:
    """A reward function's one AsyncRewardClient used by several threads, each on event loops of its own
    (TRL's daemon loop and an evaluation thread, a thread pool of ``asyncio.run`` calls): a thread
    opening its loop's pool looked through the other loops' pools while another thread added one, and
    the call failed with "dictionary changed size during iteration". Every call gets an answer, each
    through a transport made for its own loop."""
    threads, loops_each = 4, 200
    client = AsyncRewardClient("http://rewardhub.test", transport=_Where)
    start = threading.Barrier(threads)
    failures: list[str] = []
    answered: list[int] = []

    def work() -> None:
        loops = [asyncio.new_event_loop() for _ in range(loops_each)]
        start.wait()
        try:
            for loop in loops:  # kept open: every loop keeps its pool, and the next one looks them over
                try:
                    answered.append(loop.run_until_complete(client.health())["transport"])
                except Exception as exc:
                    failures.append(repr(exc))
        finally:
            for loop in loops:
                loop.run_until_complete(loop.shutdown_asyncgens())  # closes the loop's pool
                loop.close()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns between any two bytecodes, as on a busy host
    try:
        workers = [threading.Thread(target=work) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
    assert len(answered) == threads * loops_each
    assert len(set(answered)) == threads * loops_each  # one transport per loop, none shared


@pytest.mark.timeout(60)
def test_aclose_closes_the_pool_of_another_loop_still_running() -> None:
    """A client used on a loop that runs for the life of the process (TRL's daemon loop, verl's and a
    trainer's background loop) and closed from another (``asyncio.run(client.aclose())`` at the end of the
    script): aclose closed only the running loop's pool, and the daemon loop's kept its connections open
    for good, though the closed client would never send through them again. They are closed on their own
    loop now, as ``configure()`` closes a pooled client the adapters no longer use."""
    closed: list[int] = []
    made: list[httpx.AsyncBaseTransport] = []

    class Recorded(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json={"status": "ok"})

        async def aclose(self) -> None:
            closed.append(id(self))

    def transport() -> httpx.AsyncBaseTransport:
        made.append(Recorded())
        return made[-1]

    client = AsyncRewardClient("http://rewardhub.test", transport=transport)
    daemon = asyncio.new_event_loop()
    thread = threading.Thread(target=daemon.run_forever, daemon=True)
    thread.start()
    try:
        assert asyncio.run_coroutine_threadsafe(client.health(), daemon).result(30) == {"status": "ok"}
        asyncio.run(client.aclose())
        # the daemon loop runs what was handed to it in order: the close first, then this
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), daemon).result(30)
        assert len(made) == 1 and closed == [id(made[0])]
    finally:
        daemon.call_soon_threadsafe(daemon.stop)
        thread.join(10)
        daemon.run_until_complete(daemon.shutdown_asyncgens())
        daemon.close()
