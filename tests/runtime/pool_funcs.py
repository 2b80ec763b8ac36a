"""Worker functions for the process-pool tests (importable by the forkserver's children)."""

from __future__ import annotations

import os
import signal
import time


def double(x: int) -> int:
    return x * 2


def behave(kind: str) -> object:
    if kind == "python_loop":  # pure Python: the soft SIGALRM deadline interrupts it
        while True:
            pass
    if kind == "c_hang":  # simulates C code that never checks for signals: only a SIGKILL ends it
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        while True:
            time.sleep(0.01)
    if kind == "crash":
        os._exit(7)
    if kind == "memory":
        return len(bytearray(8 * 1024**3))
    if kind == "raise":
        raise ValueError("bad item")
    if kind == "pid":
        return os.getpid()
    if kind == "swallowed":  # a C library that eats exceptions raised in its Python callbacks
        import sqlite3

        conn = sqlite3.connect(":memory:")
        conn.set_progress_handler(lambda: 0, 1000)
        try:
            conn.execute(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
            )
        except sqlite3.OperationalError as exc:  # "interrupted": the soft timeout, swallowed by sqlite3
            return f"looks finished: {exc}"
    return kind


def die_at_start() -> None:
    """An initializer after which the worker process cannot run (a broken environment)."""
    os._exit(3)


def slow_start() -> None:
    """An initializer that takes longer than the items' hard deadline (a loaded host's warm-up)."""
    time.sleep(1.5)


def hold(path: str) -> str:
    """Mark ``path + ".started"``, then wait until ``path + ".release"`` exists: an item the test ends."""
    with open(path + ".started", "w"):
        pass
    while not os.path.exists(path + ".release"):
        time.sleep(0.01)
    return path
