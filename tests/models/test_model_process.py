"""In-process models run in their own process: the batch in flight fails if it dies, the next restarts it."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from rewardhub.models import hf_compute
from rewardhub.models.base import StepQuery
from rewardhub.models.batcher import MicroBatcher
from rewardhub.models.errors import BackendError, ForwardCrashed, InputTooLong, MissingExtra
from rewardhub.models.model_process import ModelProcess, _device_lost
from tiny_models import build_tiny_qwen_prm
from waiting import until

QUERY = StepQuery(step_tag="<extra_0>", steps=2, text="1 + 1 = 2<extra_0>so 2<extra_0>")


async def test_model_runs_in_a_child_and_recovers(tmp_path: Path) -> None:
    model = build_tiny_qwen_prm(tmp_path / "prm")
    proc = ModelProcess("t", partial(hf_compute.load, str(model), "token_classification", threads=1))
    info = await proc.start()
    try:
        assert info["task"] == "token_classification" and info["device"] == "cpu"
        assert proc._proc is not None and proc._proc.pid != os.getpid()
        first = await proc.call(hf_compute.step_probs, [QUERY, QUERY])
        assert len(first) == 2 and len(first[0]) == 2 and all(0.0 <= p <= 1.0 for p in first[0])
        assert first[0] == first[1]

        # it dies mid-batch (OOM killer, a segfault...): the message says how (it said "exit code None")
        with pytest.raises(BackendError, match=r"died \(killed by SIGKILL, the out-of-memory killer\?\)"):
            await proc.call(_die, [QUERY])
        again = await proc.call(hf_compute.step_probs, [QUERY])  # a fresh process, the model reloaded
        assert again[0] == pytest.approx(first[0], abs=1e-6) and proc.restarts == 1  # 1 item vs a shared pass
    finally:
        await proc.close()


def _poisoned(loaded: object, items: list[str]) -> list[str]:
    if "poison" in items:
        os.kill(os.getpid(), signal.SIGKILL)
    return [x.upper() for x in items]


def _out_of_memory(loaded: object, items: list[str]) -> list[int]:
    import torch

    if len(items) > 2:
        torch.empty(len(items) << 50, dtype=torch.uint8)  # a real allocator failure, not a raise of ours
    return [len(x) for x in items]


def _imports_torch() -> None:
    import torch  # noqa: F401


def _hangs(loaded: object, items: list[str]) -> list[str]:
    if "hang" in items:  # a GPU kernel that never returns, a deadlock in a native library
        time.sleep(3600)
    return [x.upper() for x in items]


@contextlib.asynccontextmanager
async def _batched(
    fn: Callable[[object, list[str]], list[object]], stall_s: float | None = None
) -> AsyncIterator[tuple[ModelProcess, Any]]:
    """A real model process behind a real batcher, as a backend wires them. Its loader imports torch, as
    a model's does: the child's first call would import it otherwise (every batch runs in torch's
    inference mode), seconds on a loaded host counted against ``stall_s``, and a healthy item after a
    restart was once killed as stalled."""
    proc = ModelProcess("t", _imports_torch, stall_s=stall_s)
    await proc.start()
    b: MicroBatcher[str, object] = MicroBatcher(
        "t", partial(proc.call, fn), max_batch=8, max_wait_ms=20, queue_max=100
    )
    b.start()
    try:
        yield proc, b
    finally:
        await b.close()
        await proc.close()


async def test_an_input_that_kills_the_model_process_fails_alone() -> None:
    """Through the real process boundary: the batch is retried item by item in a fresh process."""
    async with _batched(_poisoned) as (proc, b):
        out = await b.submit_many(["a", "poison", "b"], time.monotonic() + 120)
        assert out[0] == "A" and out[2] == "B"
        assert isinstance(out[1], ForwardCrashed) and "killed by SIGKILL" in str(out[1])
        # one reload for the batch's death, one for the item's own: "b" ran in the process after it
        assert "this item alone" in str(out[1]) and proc.restarts == 2
        assert await b.submit_many(["c"], time.monotonic() + 120) == ["C"] and proc.restarts == 2


async def test_a_hung_model_process_is_killed_and_its_batch_retried() -> None:
    """A batch whose model process never answered was waited for for ever, and every later batch queued
    behind it while /ready said the model was loaded. Past the stall timeout the process is killed, the
    batch retried item by item in a fresh one, and only the input that hangs fails."""
    # The bound is wide enough for a healthy item's round trip in a fresh process on a loaded 2-core CI
    # machine (at 2 s, "b" itself was once cut off there); the test waits it out twice.
    async with _batched(_hangs, stall_s=6.0) as (proc, b):
        out = await b.submit_many(["a", "hang", "b"], time.monotonic() + 90)
        assert out[0] == "A" and out[2] == "B", out
        assert isinstance(out[1], ForwardCrashed) and "did not answer within 6 s" in str(out[1])
        assert await b.submit_many(["c"], time.monotonic() + 60) == ["C"]
        assert proc.restarts == 2  # one for the batch, one for the item's own hang


def test_the_stall_timeout_must_exceed_the_longest_item_deadline() -> None:
    from pydantic import ValidationError

    from conftest import make_settings

    with pytest.raises(ValidationError, match="REWARDHUB_MODEL_STALL_TIMEOUT_S .* must exceed"):
        make_settings(model_stall_timeout_s=30, max_item_timeout_s=60)
    assert make_settings(model_stall_timeout_s=90, max_item_timeout_s=60).model_stall_timeout_s == 90


async def test_a_forward_pass_out_of_memory_is_retried_in_halves() -> None:
    """torch's allocator failure crosses the pipe as a crash (not a plain error) and the process lives."""
    async with _batched(_out_of_memory) as (proc, b):
        words = ["a", "bb", "ccc", "dddd", "eeeee"]
        assert await b.submit_many(words, time.monotonic() + 120) == [1, 2, 3, 4, 5]
        assert b.stats.splits == 2 and proc.restarts == 0
        with pytest.raises(ForwardCrashed, match="out of memory in the forward pass: .*allocate") as exc:
            await proc.call(_out_of_memory, words)
        assert exc.value.died is False


_DEVICE_LOST = False  # in the model process: a CUDA error has left its context unusable


def _device_assert(loaded: object, items: list[str]) -> list[str]:
    """A GPU model after a device-side assert (an index out of range in a kernel): that batch raises,
    and so does every later CUDA call in the same process, whatever its input."""
    global _DEVICE_LOST
    if "poison" in items:
        _DEVICE_LOST = True
    if _DEVICE_LOST:
        raise RuntimeError("CUDA error: device-side assert triggered\nCompile with `TORCH_USE_CUDA_DSA`")
    return [x.upper() for x in items]


async def test_a_cuda_error_that_leaves_the_device_unusable_restarts_the_model_process() -> None:
    """After a device-side assert (or an illegal memory access) every CUDA call of that process fails:
    the model process lived on, so that batch and every later one came back backend_error, with /ready
    ok, until the service was restarted. The process is now replaced, and the batch retried item by
    item, so only the input that does it fails."""
    async with _batched(_device_assert) as (proc, b):
        out = await b.submit_many(["a", "poison", "b"], time.monotonic() + 120)
        assert out[0] == "A" and out[2] == "B"
        assert isinstance(out[1], ForwardCrashed) and "device-side assert" in str(out[1])
        assert "this item alone" in str(out[1])
        assert await b.submit_many(["c", "d"], time.monotonic() + 120) == ["C", "D"]
        assert proc.restarts == 2  # one for the batch's error, one for the item's own
    # CUDA errors that leave the context usable are the batch's failure, not a reason to reload the model
    assert not _device_lost(RuntimeError("CUDA error: out of memory"))
    assert not _device_lost(RuntimeError("CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasGemmEx"))
    assert _device_lost(RuntimeError("CUDA error: an illegal memory access was encountered"))


def _die(loaded: object, items: list[object]) -> list[object]:
    os.kill(os.getpid(), signal.SIGKILL)
    return items


async def test_a_bad_path_fails_at_start(tmp_path: Path) -> None:
    proc = ModelProcess("t", partial(hf_compute.load, str(tmp_path / "missing"), "token_classification"))
    with pytest.raises(BackendError):
        await proc.start()


def _missing_torch() -> str:
    raise MissingExtra("torch", "models")


def _too_long(loaded: object, items: list[str]) -> list[str]:
    raise InputTooLong("the input has 9000 tokens; the model reads 8192")


async def test_errors_keep_their_type_across_the_process_boundary() -> None:
    """They crossed as text: a missing extra (``unsupported``, with its install hint) arrived as a
    plain BackendError (``backend_error``)."""
    proc = ModelProcess("t", _missing_torch)
    with pytest.raises(MissingExtra, match=r"scripts/bootstrap service,models") as exc:
        await proc.start()
    assert exc.value.extra == "models"
    proc = ModelProcess("t", _nothing)
    await proc.start()
    try:
        with pytest.raises(InputTooLong, match="9000 tokens"):
            await proc.call(_too_long, ["x"])
    finally:
        await proc.close()


def _held_echo(loaded: object, items: list[str]) -> list[str]:
    """Mark ``items[0] + ".started"``, wait for ``items[0] + ".release"``, then echo the other items."""
    path = items[0]
    Path(path + ".started").touch()
    while not os.path.exists(path + ".release"):
        time.sleep(0.01)
    return [f"echo {x}" for x in items[1:]]


def _nothing() -> str:
    return "loaded"


async def test_a_cancelled_call_does_not_hand_its_reply_to_the_next(tmp_path: Path) -> None:
    """The child still answers a call whose caller was cancelled; the next call must get its own.
    (The call was cancelled after a fixed 0.1 s, the child sleeping 0.3 s: on a loaded host the cancel
    could land before the child had the call, or after its reply was in, and the test passed without a
    late reply in the pipe. The child now holds the call until the test has cancelled it.)"""
    held = str(tmp_path / "call")
    proc = ModelProcess("t", _nothing)
    await proc.start()
    try:
        first = asyncio.create_task(proc.call(_held_echo, [held, "A"]))
        await until(lambda: os.path.exists(held + ".started"), "the child never took the first call")
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        assert first.cancelled()
        Path(held + ".release").touch()  # its reply, "echo A", comes now: the next call must not take it
        assert await proc.call(_held_echo, [held, "B"]) == ["echo B"]
        assert proc.restarts == 0
    finally:
        await proc.close()


def _large(loaded: object, items: list[int]) -> list[list[float]]:
    return [[0.5] * 20_000 for _ in items]  # ~180 KB per item pickled: several pipe buffers


def _echo(loaded: object, items: list[str]) -> list[int]:
    return [len(x) for x in items]


def _noop() -> None:
    return None


def test_replies_and_batches_larger_than_the_pipe_buffer_under_uvloop() -> None:
    """The service runs on uvloop, whose add_reader leaves the pipe non-blocking: a reply larger than
    the pipe's buffer failed half read (EAGAIN) and was taken for the process's death, so a healthy
    model was killed and reloaded (MiniLM embeddings of 32 texts are ~110 KB)."""
    import uvloop

    async def run() -> None:
        proc = ModelProcess("t", _noop)
        await proc.start()
        try:
            for _ in range(5):
                got = await proc.call(_large, [1, 2, 3])
                assert len(got) == 3 and len(got[0]) == 20_000
                sizes = await proc.call(_echo, ["x" * 300_000, "y"])  # a batch larger than the buffer
                assert sizes == [300_000, 1]
            assert proc.restarts == 0
        finally:
            await proc.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run())


async def test_a_restarted_model_process_takes_the_checkpoint_s_new_identity(tmp_path: Path) -> None:
    """A model process that died and restarted after its checkpoint was saved over (a retrained reward
    model) loaded the new weights under the start-time fingerprint: its scores were cached, and served,
    as the old model's until the server restarted."""
    import time

    from rewardhub.models.base import Message
    from rewardhub.models.transformers_backend import TransformersBackend
    from tiny_models import build_tiny_orm

    path = build_tiny_orm(tmp_path / "orm", seed=0)
    b = TransformersBackend("orm", str(path), "sequence_classification", threads=1)
    await b.start()
    try:
        before = b.identity()
        build_tiny_orm(path, seed=1)  # retrained, saved over the same directory
        assert b.identity() == before  # a running model keeps its identity: it still has the old weights
        assert b._process is not None
        with pytest.raises(BackendError, match="died"):
            await b._process.call(_die, [])
        await b.classify([(Message("user", "hi"),)], time.monotonic() + 30)  # restarts, reloads
        assert b._process.restarts == 1 and b.identity() != before
    finally:
        await b.close()


def _held_or_die(loaded: object, items: list[str]) -> list[str]:
    """As :func:`_held_echo`, but dies at the release when ``items[1]`` is "die"."""
    path = items[0]
    Path(path + ".started").touch()
    while not os.path.exists(path + ".release"):
        time.sleep(0.01)
    if items[1] == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return [f"echo {x}" for x in items[1:]]


async def test_a_batch_sent_while_one_runs_is_answered_in_turn(tmp_path: Path) -> None:
    """Two calls in flight (the batcher's ``in_flight=2``): the second waits in the pipe and each gets
    its own reply; a cancelled one's reply is dropped, not handed to the call after it."""
    a, b, c = (str(tmp_path / k) for k in "abc")
    proc = ModelProcess("t", _nothing)
    await proc.start()
    try:
        first = asyncio.create_task(proc.call(_held_echo, [a, "A"]))
        await until(lambda: os.path.exists(a + ".started"), "the child never took the first call")
        second = asyncio.create_task(proc.call(_held_echo, [b, "B"]))
        cancelled = asyncio.create_task(proc.call(_held_echo, [c, "C"]))
        await until(lambda: len(proc._owed) == 3, "the later calls were never sent")
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        Path(b + ".release").touch()
        Path(c + ".release").touch()
        assert not second.done()  # the child runs them in the order sent: the first still holds it
        Path(a + ".release").touch()
        assert await first == ["echo A"] and await second == ["echo B"]
        assert await proc.call(_echo, ["four"]) == [4]  # not "echo C": that reply was dropped
        assert proc.restarts == 0
    finally:
        await proc.close()


async def test_a_batch_sent_behind_one_that_kills_the_process_runs_in_its_successor(tmp_path: Path) -> None:
    """The batch the child died in fails as a crash (the batcher splits it to find the culprit); the one
    waiting behind it never started, so it is not split or blamed: the fresh process runs it whole."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    proc = ModelProcess("t", _nothing)
    await proc.start()
    try:
        doomed = asyncio.create_task(proc.call(_held_or_die, [a, "die"]))
        await until(lambda: os.path.exists(a + ".started"), "the child never took the first call")
        behind = asyncio.create_task(proc.call(_held_or_die, [b, "B"]))
        await until(lambda: len(proc._owed) == 2, "the second call was never sent")
        Path(b + ".release").touch()
        Path(a + ".release").touch()
        with pytest.raises(ForwardCrashed, match="killed by SIGKILL"):
            await doomed
        assert await behind == ["echo B"] and proc.restarts == 1
    finally:
        await proc.close()


def test_a_batch_larger_than_the_pipe_buffer_sent_while_one_runs_leaves_the_loop_free(tmp_path: Path) -> None:
    """The child reads a batch sent behind a running one only when that one ends; written on the event
    loop, a batch larger than the pipe's buffer would hold the loop (every request of the service) until
    then. Under uvloop, as the service runs."""
    import uvloop

    held = str(tmp_path / "held")

    async def run() -> None:
        proc = ModelProcess("t", _noop)
        await proc.start()
        try:
            first = asyncio.create_task(proc.call(_held_echo, [held, "A"]))
            await until(lambda: os.path.exists(held + ".started"), "the child never took the first call")
            big = asyncio.create_task(proc.call(_echo, ["x" * 2_000_000, "y"]))
            await until(lambda: len(proc._owed) == 2, "the large batch was never sent")
            ticks = 0
            for _ in range(5):  # the loop runs while the large batch waits to be read
                await asyncio.sleep(0.01)
                ticks += 1
            assert ticks == 5 and not big.done()
            Path(held + ".release").touch()
            assert await first == ["echo A"] and await big == [2_000_000, 1]
            assert proc.restarts == 0
        finally:
            await proc.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run())


async def test_a_batch_that_cannot_be_pickled_fails_alone_and_owes_no_reply(tmp_path: Path) -> None:
    """Its error is the caller's; it must not leave a reply owed that the next batch's reply would fill
    (every later caller then got the answer of the batch before its own)."""
    import threading

    held = str(tmp_path / "held")
    proc = ModelProcess("t", _nothing)
    await proc.start()
    try:
        with pytest.raises(TypeError, match="pickle"):
            await proc.call(_echo, [threading.Lock()])
        assert await proc.call(_echo, ["ab"]) == [2]
        first = asyncio.create_task(proc.call(_held_echo, [held, "A"]))
        await until(lambda: os.path.exists(held + ".started"), "the child never took the first call")
        with pytest.raises(TypeError, match="pickle"):  # while a batch runs
            await proc.call(_echo, [threading.Lock()])
        second = asyncio.create_task(proc.call(_echo, ["abc"]))
        await until(lambda: len(proc._owed) == 2, "the second call was never sent")
        Path(held + ".release").touch()
        assert await first == ["echo A"] and await second == [3] and proc.restarts == 0
    finally:
        await proc.close()


@pytest.mark.timeout(90)
def test_close_with_a_hung_batch_and_a_large_one_behind_it_leaves_the_loop_free(tmp_path: Path) -> None:
    """The batcher's close cancels its passes, then the backend closes the process. A large batch still
    being written behind a hung one (the child never reads it) must not make close() write its stop
    message on the event loop: the pipe is full, so that write blocked the loop (every request of the
    service, and the shutdown itself) for as long as the child hung, and its bytes could land inside the
    large batch's. (Hangs on the code before: ended by the timeout mark.)"""
    import uvloop

    held = str(tmp_path / "held")

    async def run() -> None:
        proc = ModelProcess("t", _noop)
        await proc.start()
        try:
            first = asyncio.create_task(proc.call(_held_echo, [held, "A"]))
            await until(lambda: os.path.exists(held + ".started"), "the child never took the first call")
            big = asyncio.create_task(proc.call(_echo, ["x" * 2_000_000, "y"]))
            await until(lambda: len(proc._owed) == 2, "the large batch was never sent")
            for t in (first, big):  # as the batcher's close does
                t.cancel()
            await asyncio.gather(first, big, return_exceptions=True)
            await asyncio.wait_for(proc.close(), 60)
            assert proc._proc is None and proc._conn is None
        finally:
            Path(held + ".release").touch()  # the code before: let the child go, so the run can end
            await proc.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run())


async def test_a_call_cancelled_mid_send_leaves_no_unretrieved_error(tmp_path: Path) -> None:
    """A caller cancelled while its batch is still written on a thread (the batcher's close) leaves its
    reply slot owed, as the batch reaches the child; the slot must be cancelled as a cancelled waiter's
    is, or settling it when the process is dropped (closed, crashed) logs "Future exception was never
    retrieved" at error level for nobody."""
    import gc

    held = str(tmp_path / "held")
    seen: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: seen.append(ctx))
    proc = ModelProcess("t", _noop)
    await proc.start()
    try:
        first = asyncio.create_task(proc.call(_held_or_die, [held, "die"]))
        await until(lambda: os.path.exists(held + ".started"), "the child never took the first call")
        big = asyncio.create_task(proc.call(_echo, ["x" * 2_000_000, "y"]))
        await until(lambda: len(proc._owed) == 2, "the large batch was never sent")
        big.cancel()
        await asyncio.gather(big, return_exceptions=True)
        Path(held + ".release").touch()  # the child dies in the first: the second's slot is settled
        with pytest.raises(ForwardCrashed):
            await first
        assert await proc.call(_echo, ["ab"]) == [2]
    finally:
        await proc.close()
    del first, big
    gc.collect()
    assert not [c for c in seen if "never retrieved" in str(c.get("message"))], seen


async def test_calls_in_flight_when_it_closes_fail_and_start_no_new_process(tmp_path: Path) -> None:
    """close() with a batch running, one being written behind it and a third caller waiting to send:
    each fails as stopped. The batch whose send the kill broke, and the caller that then had the lock,
    took the closed process for a dead one and started a fresh one, which nobody would ever close (a
    model's memory held until the service exits)."""
    held = str(tmp_path / "held")
    proc = ModelProcess("t", _noop)
    await proc.start()
    calls: list[asyncio.Task[list[Any]]] = []
    try:
        calls.append(asyncio.create_task(proc.call(_held_echo, [held, "A"])))
        await until(lambda: os.path.exists(held + ".started"), "the child never took the first call")
        calls.append(asyncio.create_task(proc.call(_echo, ["x" * 2_000_000, "y"])))
        await until(lambda: len(proc._owed) == 2, "the large batch was never sent")
        calls.append(asyncio.create_task(proc.call(_echo, ["z"])))
        await asyncio.sleep(0.05)  # the third waits for the second's send
        await asyncio.wait_for(proc.close(), 60)
        outcomes = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 60)
        assert all(isinstance(o, BackendError) and "stopped" in str(o) for o in outcomes), outcomes
        assert proc.restarts == 0 and proc._proc is None
    finally:
        Path(held + ".release").touch()
        for t in calls:
            t.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        await proc.close()


def _gated_loader(path: str) -> str:
    """A model load that waits for ``path + ".open"`` (a slow ``from_pretrained``)."""
    while not os.path.exists(path + ".open"):
        time.sleep(0.01)
    return "loaded"


async def _restarting(tmp_path: Path) -> tuple[ModelProcess, asyncio.Task[list[Any]]]:
    """A started model process whose child died in a call, and a call restarting it: the successor
    loading the model (its gate stays shut). The caller closes the process and cancels the call."""
    gate = str(tmp_path / "gate")
    Path(gate + ".open").touch()
    proc = ModelProcess("t", partial(_gated_loader, gate))
    await proc.start()
    restarting = None
    try:
        with pytest.raises(ForwardCrashed):
            await proc.call(_die, [])
        os.remove(gate + ".open")  # the successor's load waits
        restarting = asyncio.create_task(proc.call(_echo, ["x"]))
        await until(lambda: proc.restarts == 1 and proc._proc is not None, "the call never restarted it")
    except BaseException:
        if restarting is not None:
            restarting.cancel()
            await asyncio.gather(restarting, return_exceptions=True)
        await proc.close()
        raise
    return proc, restarting


async def test_close_during_a_restart_fails_the_call_that_restarts(tmp_path: Path) -> None:
    """close() while a call restarts the process (the model loading): the call waited for a "loaded"
    from a pipe that close() had closed and stopped watching, for ever."""
    proc, restarting = await _restarting(tmp_path)
    try:
        await asyncio.wait_for(proc.close(), 60)
        with pytest.raises(BackendError):
            await asyncio.wait_for(restarting, 60)
    finally:
        restarting.cancel()
        await asyncio.gather(restarting, return_exceptions=True)
        await proc.close()


async def test_close_kills_at_once_a_child_busy_with_a_batch_nobody_waits_for(tmp_path: Path) -> None:
    """The batcher's close cancels its passes, then the backend closes the process. A child busy with a
    batch reads the stop message only once that batch ends, which a hung child never does: close() gave
    it 5 s to end on its own (10 with a batch still being written behind it) before killing it, for a
    batch whose caller was gone. It is killed at once now, and reaped, its pipes closed. The test lets
    the batch end just after close() begins: on the code before, the child then finished it, read the
    stop message and exited 0 within that grace."""
    held = str(tmp_path / "held")
    proc = ModelProcess("t", _noop)
    await proc.start()
    child, pipes = proc._proc, (proc._conn, proc._requests)
    assert child is not None
    try:
        first = asyncio.create_task(proc.call(_held_echo, [held, "A"]))
        await until(lambda: os.path.exists(held + ".started"), "the child never took the call")
        first.cancel()  # as the batcher's close does
        await asyncio.gather(first, return_exceptions=True)
        closing = asyncio.create_task(proc.close())
        await asyncio.sleep(0)  # close() has begun
        Path(held + ".release").touch()  # the batch could end now, and the stop message be read
        await asyncio.wait_for(closing, 60)
        assert child.exitcode == -signal.SIGKILL  # killed (and reaped: it has an exit status)
        assert all(c is not None and c.closed for c in pipes)
    finally:
        Path(held + ".release").touch()
        await proc.close()


async def test_close_while_the_model_loads_kills_the_child_at_once(tmp_path: Path) -> None:
    """A child loading its model (a start, or a restart after a crash) reads the stop message only once
    the model has loaded, minutes for a large checkpoint: close() waited out its 5 s grace, and a load
    that ended within it made start() succeed on a closed process. The load is killed at once now and
    start() fails as stopped (on the code before, the load ended just after close() began, and the child
    exited 0)."""
    gate = str(tmp_path / "gate")
    proc = ModelProcess("t", partial(_gated_loader, gate))
    starting = asyncio.create_task(proc.start())
    try:
        await until(lambda: proc._proc is not None, "the child was never started")
        child = proc._proc
        assert child is not None
        closing = asyncio.create_task(proc.close())
        await asyncio.sleep(0)  # close() has begun
        Path(gate + ".open").touch()  # the model could load now, and the stop message be read
        await asyncio.wait_for(closing, 60)
        with pytest.raises(BackendError, match="stopped"):
            await asyncio.wait_for(starting, 60)
        assert child.exitcode == -signal.SIGKILL
    finally:
        Path(gate + ".open").touch()
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await proc.close()


async def test_a_cancelled_close_still_stops_the_child(tmp_path: Path) -> None:
    """close() gives a batch that still has a caller a grace to end; a close cancelled meanwhile (a
    shutdown timeout) left the child running, its pipes open and that caller waiting for ever."""
    held = str(tmp_path / "held")
    proc = ModelProcess("t", _noop)
    await proc.start()
    child, pipes = proc._proc, (proc._conn, proc._requests)
    assert child is not None
    call = asyncio.create_task(proc.call(_held_echo, [held, "A"]))
    try:
        await until(lambda: os.path.exists(held + ".started"), "the child never took the call")
        closing = asyncio.create_task(proc.close())
        await asyncio.sleep(0.05)  # close() waits for the batch
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
        assert closing.cancelled()
        await until(lambda: child.exitcode is not None, "the child was left running")
        assert child.exitcode == -signal.SIGKILL and all(c is not None and c.closed for c in pipes)
        with pytest.raises(BackendError, match="stopped"):
            await asyncio.wait_for(call, 60)
    finally:
        Path(held + ".release").touch()
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        await proc.close()


async def _backend_with_a_process(name: str) -> tuple[Any, mp.process.BaseProcess]:
    """A local backend (lazy: its batchers run, no model loads) holding a running model process, as its
    first use would have left it; and that process's child."""
    from rewardhub.models.transformers_backend import TransformersBackend

    b = TransformersBackend(name, "/nonexistent/model", "embedding", lazy=True)
    await b.start()
    proc = ModelProcess(name, _nothing)
    await proc.start()
    b._process = proc
    assert proc._proc is not None and b.batchers
    return b, proc._proc


async def test_a_backend_closed_by_a_cancelled_task_still_stops_its_model_process() -> None:
    """A batcher's close() passes on a cancellation of the task calling it (it dropped it before): the
    backend's close then stopped there, and its model process, with the model's memory, was left running
    for the life of the service. Every part is closed, then the cancellation goes on."""
    b, child = await _backend_with_a_process("embedding")
    closing = asyncio.create_task(b.close())
    try:
        await asyncio.sleep(0)  # it waits for the first batcher's worker to end
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
        assert closing.cancelled()
        assert child.exitcode is not None and b._process is None
        assert all(batcher._task is None for batcher in b.batchers.values())
    finally:
        await b.close()
        if child.is_alive():
            child.kill()


async def test_a_backend_started_again_after_close_runs_its_batchers_again() -> None:
    """A closed batcher fails new items instead of starting a worker nobody would stop; a backend started
    again after its close starts its batchers again (they were started by their first item before)."""
    from rewardhub.models.transformers_backend import TransformersBackend

    b = TransformersBackend("embedding", "/nonexistent/model", "embedding", lazy=True)
    await b.start()
    await b.close()
    assert all(batcher._task is None for batcher in b.batchers.values())
    await b.start()
    try:
        assert b.batchers and all(batcher._task is not None for batcher in b.batchers.values())
    finally:
        await b.close()


async def test_a_hub_closed_by_a_cancelled_task_closes_every_backend() -> None:
    """The service's shutdown closes the model hub: a cancellation reaching one backend's close stopped
    the hub there, and the backends after it were never closed (their model processes left running)."""
    from rewardhub.models.hub import ModelHub

    (first, first_child), (second, second_child) = [await _backend_with_a_process(n) for n in "ab"]
    hub = ModelHub({"a": first, "b": second})  # closed in reverse order: "b" first
    closing = asyncio.create_task(hub.close())
    try:
        await asyncio.sleep(0)
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
        assert closing.cancelled()
        assert second_child.exitcode is not None and first_child.exitcode is not None
    finally:
        for b, child in ((first, first_child), (second, second_child)):
            await b.close()
            if child.is_alive():
                child.kill()


def _zombie(pid: int) -> bool:
    """Whether ``pid`` is a child that ended and was never reaped (without reaping it, as
    ``Process.exitcode`` or ``is_alive`` would)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return False


async def test_a_restart_cancelled_by_close_leaves_no_zombie(tmp_path: Path) -> None:
    """The backend's close cancels the batcher's passes, one of them restarting the process (the model
    loading in the successor), then closes the process. The cancelled start killed the loading child but
    never reaped it, and close() found no process to stop: a zombie was left after close() returned."""
    proc, restarting = await _restarting(tmp_path)
    try:
        child = proc._proc
        assert child is not None and child.pid is not None
        restarting.cancel()  # as the batcher's close does
        await asyncio.gather(restarting, return_exceptions=True)
        await asyncio.wait_for(proc.close(), 60)
        pid = child.pid

        def ended() -> bool:
            return _zombie(pid) or not os.path.exists(f"/proc/{pid}")

        await until(ended, "the killed child never ended")
        assert not _zombie(pid)  # reaped
    finally:
        restarting.cancel()
        await asyncio.gather(restarting, return_exceptions=True)
        await proc.close()


def _reaped(pid: int) -> bool:
    """Whether ``pid`` has ended and had its exit status collected: gone from /proc (checked there, as
    ``Process.exitcode`` or ``is_alive`` would collect it themselves)."""
    return not os.path.exists(f"/proc/{pid}")


async def _until_reaped(pid: int) -> None:
    """Wait, bounded, for ``pid`` to be reaped by the code under test; fail saying how it was left."""
    try:
        await until(lambda: _reaped(pid))
    except AssertionError:
        left = "a zombie" if _zombie(pid) else "running"
        raise AssertionError(f"the dropped child was left {left}") from None


@pytest.mark.parametrize(
    ("fn", "item", "stall_s", "why"),
    [
        (_hangs, "hang", 1.0, "did not answer within 1 s"),
        (_device_assert, "poison", None, "device-side assert"),
    ],
    ids=["stalled", "device-lost"],
)
async def test_a_child_dropped_mid_batch_is_reaped_without_a_later_call(
    fn: Callable[[object, list[str]], list[str]], item: str, stall_s: float | None, why: str
) -> None:
    """A child killed for stalling, or ending after its device was lost, was reaped only by the next
    drop or close(): a service that saw no further call for that model kept a zombie meanwhile. (On the
    code before, the child stays a zombie: the bounded wait below fails.)"""
    proc = ModelProcess("t", _nothing, stall_s=stall_s)
    await proc.start()
    try:
        child = proc._proc
        assert child is not None and child.pid is not None
        with pytest.raises(ForwardCrashed, match=why):
            await proc.call(fn, [item])
        assert proc._proc is None  # dropped, and nothing calls the process again
        pid = child.pid
        await _until_reaped(pid)
    finally:
        await proc.close()


async def test_a_cancelled_first_start_leaves_no_zombie(tmp_path: Path) -> None:
    """A first start() cancelled while the model loads (the caller's timeout, a shutdown) kills the
    loading child; it was reaped only by a later start() or close(), and until then stayed a zombie.
    (On the code before, the bounded wait below fails.)"""
    gate = str(tmp_path / "gate")
    proc = ModelProcess("t", partial(_gated_loader, gate))  # the gate never opens: the load never ends
    starting = asyncio.create_task(proc.start())
    try:
        await until(lambda: proc._proc is not None, "the child was never started")
        child = proc._proc
        assert child is not None and child.pid is not None
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        assert starting.cancelled() and proc._proc is None
        pid = child.pid
        await _until_reaped(pid)
    finally:
        Path(gate + ".open").touch()
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await proc.close()
