"""One sandboxed run: build the command line, start it from asyncio, feed it, capture it, kill it.

The run is ``[setpriv --reuid U --regid U --clear-groups --] bwrap <flags> -- python3 -E -s -S /rh/main.py``
(or, in ``rlimits_only`` mode, the guest without ``bwrap``). Why these pieces:

* ``setpriv`` (when the service runs as root): each concurrent run gets its own unused uid, because
  ``RLIMIT_NPROC`` counts processes *per uid* and is not enforced for root at all; with one uid per run a
  fork bomb hits its own limit and nobody else's. An ``exec`` wrapper instead of ``preexec_fn`` keeps
  Python's ``vfork`` fast path: ``preexec_fn`` forces a full ``fork()`` of the (large, threaded)
  service process, measured at 2-3 ms of event-loop CPU per run. The rlimits themselves are set by the
  guest as the first thing it does, before any untrusted code exists (see :mod:`.guest`).
* ``bwrap``: new user, PID, network, IPC, UTS and cgroup namespaces (``--unshare-all``) with no way to
  nest more (``--disable-userns``); read-only system directories and nothing else of the host (no
  ``/home``, ``/root``, ``/work``, ``/etc`` beyond the dynamic-linker cache); a size-capped private
  tmpfs at ``/tmp``; fresh ``/proc`` and ``/dev``; an empty environment (``--clearenv``); a new session
  (no terminal injection); ``--die-with-parent`` so the sandbox dies with the service.
* ``loop.subprocess_exec`` with a protocol (what ``asyncio.create_subprocess_exec`` is built on):
  output arrives in callbacks and is kept up to a cap; past the cap the pipe is closed, so a program
  printing 500 MB is neither buffered nor drained by the event loop.
* At the deadline the whole process group is ``SIGKILL``ed; ``bwrap``'s death takes the sandbox's PID
  namespace (every daemon, double-forked or not) with it. Without ``bwrap``, the run's private uid is
  swept instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

__all__ = ["GUEST_DIR_IN_SANDBOX", "IsolationLevel", "RawRun", "SandboxCommand", "kill_uid", "run_process"]

IsolationLevel = Literal["bubblewrap", "rlimits_only", "none"]

# Where the guest's read-only directory appears inside the sandbox.
GUEST_DIR_IN_SANDBOX = "/rh"
_SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# System directories the programs need, bound read-only (or recreated as the symlinks they are).
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The few files under /etc that interpreters and compilers read; nothing with secrets in it.
_ETC_FILES = ("/etc/ld.so.cache", "/etc/alternatives")


@dataclass(slots=True)
class RawRun:
    """What came out of one run, before the guest's lines are interpreted."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    wall_s: float
    deadline_hit: bool = False
    spawn_error: str | None = None
    queue_s: float = 0.0


@dataclass(slots=True)
class SandboxCommand:
    """How to start the guest, fixed once by the capability probe."""

    level: IsolationLevel
    python: str
    guest_dir: Path
    bwrap: str | None = None
    setpriv: str | None = None
    tmp_size_bytes: int = 128 << 20
    bwrap_flags: list[str] = field(default_factory=list)

    def build_flags(self) -> None:
        """The ``bwrap`` flags for this host's filesystem layout (merged ``/usr`` or not)."""
        flags = [
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--as-pid-1",
            "--cap-drop",
            "ALL",
            "--hostname",
            "sandbox",
        ]
        if os.geteuid() == 0 and self.setpriv is None:
            # Root without per-run uids: at least do not be uid 0 inside.
            flags += ["--uid", "65534", "--gid", "65534"]
        for path in _SYSTEM_DIRS:
            p = Path(path)
            if p.is_symlink():
                flags += ["--symlink", os.readlink(p), path]
            elif p.is_dir():
                flags += ["--ro-bind", path, path]
        for path in _ETC_FILES:
            if Path(path).exists():
                flags += ["--ro-bind", path, path]
        exec_only = self.guest_dir / "python"
        if exec_only.exists():
            # Over the real interpreter: the same program, but unreadable, so it starts non-dumpable.
            flags += ["--ro-bind", str(exec_only), os.path.realpath(self.python)]
        flags += [
            "--ro-bind",
            str(self.guest_dir),
            GUEST_DIR_IN_SANDBOX,
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(self.tmp_size_bytes),
            "--tmpfs",
            "/tmp",
            # bwrap builds the new root on an unbounded tmpfs: make it read-only, or writing to
            # /anything would fill the host's memory. Only the size-capped /tmp stays writable.
            "--remount-ro",
            "/",
            "--chdir",
            "/tmp",
            "--clearenv",
            "--setenv",
            "PATH",
            _SANDBOX_PATH,
            "--setenv",
            "HOME",
            "/tmp",
            "--setenv",
            "TMPDIR",
            "/tmp",
            "--setenv",
            "LANG",
            "C.UTF-8",
        ]
        self.bwrap_flags = flags

    def argv(self, uid: int | None) -> list[str]:
        prefix = []
        if uid is not None and self.setpriv is not None:
            prefix = [self.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        # Not `-I`: it would drop the script directory (/rh) from sys.path; the environment is empty anyway.
        guest = [self.python, "-E", "-s", "-S", "-B"]
        if self.level == "bubblewrap":
            assert self.bwrap is not None
            guest[0] = os.path.realpath(self.python)
            return [*prefix, self.bwrap, *self.bwrap_flags, "--", *guest, f"{GUEST_DIR_IN_SANDBOX}/main.py"]
        return [*prefix, *guest, str(self.guest_dir / "main.py")]

    @staticmethod
    def program_env(home: str) -> dict[str, str]:
        """The environment programs see: nothing of the service's (its secrets stay outside)."""
        return {"PATH": _SANDBOX_PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}


class _Capture(asyncio.SubprocessProtocol):
    """Keeps at most ``caps[fd]`` bytes of each output pipe; closes a pipe that goes past its cap."""

    def __init__(self, caps: dict[int, int], exited: asyncio.Future[None], closed: asyncio.Future[None]):
        self.caps = caps
        self.bufs: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}
        self.truncated: dict[int, bool] = {1: False, 2: False}
        self.exited = exited
        self.closed = closed
        self.open_pipes = {1, 2}
        self.transport: asyncio.SubprocessTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio's classes.
        self.transport = cast(asyncio.SubprocessTransport, transport)

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        buf, cap = self.bufs[fd], self.caps[fd]
        room = cap - len(buf)
        if len(data) <= room:
            buf += data
            return
        buf += data[:room]
        if not self.truncated[fd]:
            self.truncated[fd] = True
            if self.transport is not None:
                pipe = self.transport.get_pipe_transport(fd)
                if pipe is not None:
                    pipe.close()  # the writer gets EPIPE; nothing more is read or kept

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.open_pipes.discard(fd)
        if not self.open_pipes and not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def run_process(
    argv: Sequence[str],
    stdin: bytes,
    *,
    deadline_s: float,
    stdout_cap: int,
    stderr_cap: int,
    env: dict[str, str],
    cwd: str | None = None,
    sweep_uid: int | None = None,
) -> RawRun:
    """Run ``argv`` with ``stdin``, kill its process group at ``deadline_s``, return what it wrote."""
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()
    closed: asyncio.Future[None] = loop.create_future()
    capture = _Capture({1: stdout_cap, 2: stderr_cap}, exited, closed)
    t0 = time.perf_counter()
    try:
        transport, _ = await loop.subprocess_exec(
            lambda: capture,
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,  # its own process group: one killpg reaches every wrapper
        )
    except OSError as exc:
        return RawRun(None, b"", b"", False, False, 0.0, spawn_error=f"cannot start the sandbox: {exc}")
    pid = transport.get_pid()
    stdin_pipe = transport.get_pipe_transport(0)
    if stdin_pipe is not None:
        writer = cast(asyncio.WriteTransport, stdin_pipe)
        with contextlib.suppress(OSError, RuntimeError):
            writer.write(stdin)
            writer.write_eof()
    deadline_hit = False
    try:
        await asyncio.wait_for(asyncio.shield(exited), deadline_s)
    except TimeoutError:
        deadline_hit = True
    finally:
        # Also on cancellation: no run outlives its request. (After a normal exit the group leader is
        # reaped and its pid may be reused, so the group is only signalled while it still runs.)
        if not exited.done():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        if sweep_uid is not None:
            kill_uid(sweep_uid)
    try:
        await asyncio.wait_for(asyncio.shield(exited), 5.0)
        # The pipes close with the last process holding them; do not wait for a straggler forever.
        await asyncio.wait_for(asyncio.shield(closed), 0.5)
    except TimeoutError:
        pass
    wall = time.perf_counter() - t0
    returncode = transport.get_returncode()
    transport.close()
    return RawRun(
        returncode=returncode,
        stdout=bytes(capture.bufs[1]),
        stderr=bytes(capture.bufs[2]),
        stdout_truncated=capture.truncated[1],
        stderr_truncated=capture.truncated[2],
        wall_s=wall,
        deadline_hit=deadline_hit,
    )


def kill_uid(uid: int) -> int:
    """SIGKILL every process owned by ``uid`` (a run's private uid); returns how many were found.

    Only used where there is no PID namespace to tear down (``rlimits_only``) and in tests, to prove
    that nothing survived a run.
    """
    found = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            found += 1
            os.kill(int(entry.name), signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found
