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
  ``/home``, ``/root``, ``/work``, ``/etc`` beyond the dynamic-linker cache); a private tmpfs at
  ``/tmp`` capped in bytes and in files (the guest mounts the file-capped one, see
  ``rh_guest._private_tmpfs``); fresh ``/proc`` and ``/dev``; an empty environment (``--clearenv``); a new session
  (no terminal injection); ``--die-with-parent`` so the sandbox dies with the service.
* ``subprocess.Popen`` (``vfork``) plus the loop's pipe transports and a pidfd, instead of
  ``asyncio.create_subprocess_exec``: the same non-blocking, event-loop-driven process, without
  uvloop's full ``fork()`` of the service (measured: ~3 ms of service CPU per run) or a watcher thread
  per process. Output arrives in callbacks and is kept up to a cap; past the cap the pipe is closed,
  so a program printing 500 MB is neither buffered nor drained by the event loop.
* At the deadline the whole process group is ``SIGKILL``ed; ``bwrap``'s death takes the sandbox's PID
  namespace (every daemon, double-forked or not) with it. Without ``bwrap``, the run's private uid is
  swept instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal, cast

__all__ = [
    "GUEST_DIR_IN_SANDBOX",
    "IsolationLevel",
    "RawRun",
    "SandboxCommand",
    "Streams",
    "kill_uid",
    "process_state",
    "run_process",
]

IsolationLevel = Literal["bubblewrap", "rlimits_only", "none"]

# Where the guest's read-only directory appears inside the sandbox.
GUEST_DIR_IN_SANDBOX = "/rh"
_SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# System directories the programs need, bound read-only (or recreated as the symlinks they are).
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The few files under /etc that interpreters and compilers read; nothing with secrets in it.
_ETC_FILES = ("/etc/ld.so.cache", "/etc/alternatives")
_SHM_SIZE_BYTES = 16 << 20  # /dev/shm: POSIX shared memory and semaphores (multiprocessing)


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
    # Most files (and directories) a run may create in /tmp, and again in /dev/shm; 0: no cap (bwrap's
    # own tmpfs, capped in bytes only). See rh_guest._private_tmpfs.
    tmp_max_files: int = 0
    bwrap_flags: list[str] = field(default_factory=list)
    guest_args: list[str] = field(default_factory=list)

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
        self.guest_args = []
        if self.tmp_max_files > 0:
            # Lent to the guest for mounting the inode-capped tmpfs; it drops both before anything else.
            flags += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
            # +1: the tmpfs's root directory is one of its inodes
            for path, size in (("/tmp", self.tmp_size_bytes), ("/dev/shm", _SHM_SIZE_BYTES)):
                self.guest_args.append(f"tmpfs:{path}:{size}:{self.tmp_max_files + 1}")
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
            "--size",
            str(_SHM_SIZE_BYTES),
            "--tmpfs",
            "/dev/shm",
            # bwrap builds the new root and /dev on unbounded tmpfs: make them read-only, or writing to
            # /anything or /dev/anything would fill the host's memory. Only the size-capped /tmp and
            # /dev/shm (POSIX shared memory, semaphores) stay writable.
            "--remount-ro",
            "/dev",
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

    def argv(self, uid: int | None, script: str = "main.py", *args: str) -> list[str]:
        prefix = []
        if uid is not None and self.setpriv is not None:
            prefix = [self.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        # Not `-I`: it would drop the script directory (/rh) from sys.path; the environment is empty anyway.
        guest = [self.python, "-E", "-s", "-S", "-B"]
        if self.level == "bubblewrap":
            assert self.bwrap is not None
            guest[0] = os.path.realpath(self.python)
            return [
                *prefix,
                self.bwrap,
                *self.bwrap_flags,
                "--",
                *guest,
                f"{GUEST_DIR_IN_SANDBOX}/{script}",
                *args,
                *self.guest_args,
            ]
        return [*prefix, *guest, str(self.guest_dir / script), *args]

    @staticmethod
    def program_env(home: str) -> dict[str, str]:
        """The environment programs see: nothing of the service's (its secrets stay outside)."""
        return {"PATH": _SANDBOX_PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}


class _Capture(asyncio.Protocol):
    """One output pipe: keeps at most ``cap`` bytes, then closes the pipe (the writer gets EPIPE)."""

    def __init__(self, cap: int, closed: asyncio.Future[None]):
        self.cap = cap
        self.buf = bytearray()
        self.truncated = False
        self.closed = closed
        self.transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.ReadTransport, transport)

    def data_received(self, data: bytes) -> None:
        room = self.cap - len(self.buf)
        if len(data) <= room:
            self.buf += data
            return
        self.buf += data[:room]
        if not self.truncated:
            self.truncated = True
            if self.transport is not None:
                self.transport.close()  # nothing more is read or kept

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def _spawn(argv: Sequence[str], env: dict[str, str], cwd: str | None) -> subprocess.Popen[bytes]:
    """Start the process with ``subprocess`` (``vfork`` + ``exec``, no ``preexec_fn``).

    Not ``loop.subprocess_exec``: uvloop spawns with a full ``fork()`` of the service process (page
    tables of a 100+ MB process, charged to the service, per run), and asyncio's default child watcher
    starts a thread per process. The pipes are handed to the loop below and the exit is watched through
    a pidfd, so nothing blocks.
    """
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,  # its own process group: one killpg reaches every wrapper
    )


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
    t0 = time.perf_counter()
    try:
        proc = _spawn(argv, env, cwd)
    except OSError as exc:
        return RawRun(None, b"", b"", False, False, 0.0, spawn_error=f"cannot start the sandbox: {exc}")
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    exited: asyncio.Future[None] = loop.create_future()
    streams = Streams(stdout_cap, stderr_cap)
    pidfd = -1
    try:
        await streams.attach(proc.stdin, proc.stdout, proc.stderr, stdin)
        pidfd = _watch_exit(loop, proc, exited)
        deadline_hit = False
        try:
            await asyncio.wait_for(asyncio.shield(exited), deadline_s)
        except TimeoutError:
            deadline_hit = True
        finally:
            # Also on cancellation: no run outlives its request. (After a normal exit the leader is
            # reaped and its pid may be reused, so the group is only signalled while it still runs.)
            if not exited.done():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
            if sweep_uid is not None:
                kill_uid(sweep_uid)
        try:
            await asyncio.wait_for(asyncio.shield(exited), 5.0)
        except TimeoutError:
            pass
        await streams.drained()
    finally:
        streams.close()
        if pidfd >= 0:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return streams.result(proc.returncode, time.perf_counter() - t0, deadline_hit)


class Streams:
    """A run's three pipes on the event loop: stdin written and closed, stdout/stderr kept up to caps."""

    def __init__(self, stdout_cap: int, stderr_cap: int):
        loop = asyncio.get_running_loop()
        self.loop = loop
        self.out_closed: asyncio.Future[None] = loop.create_future()
        self.err_closed: asyncio.Future[None] = loop.create_future()
        self.out = _Capture(stdout_cap, self.out_closed)
        self.err = _Capture(stderr_cap, self.err_closed)
        self.transports: list[asyncio.BaseTransport] = []
        self.pending: list[IO[bytes]] = []  # pipes not handed to the loop yet (see attach)

    async def attach(
        self, stdin_file: IO[bytes], stdout_file: IO[bytes], stderr_file: IO[bytes], data: bytes
    ) -> None:
        """Hand the pipes to the loop (it owns and closes the files from here) and send ``data``.
        Cancelled part way, :meth:`close` closes the files not handed over yet (they stayed open until
        the garbage collector found them)."""
        loop = self.loop
        self.pending = [stdout_file, stderr_file, stdin_file]
        # (each leaves ``pending`` before its await: a connect cancelled part way closes its own pipe)
        self.pending.remove(stdout_file)
        self.transports.append((await loop.connect_read_pipe(lambda: self.out, stdout_file))[0])
        self.pending.remove(stderr_file)
        self.transports.append((await loop.connect_read_pipe(lambda: self.err, stderr_file))[0])
        self.pending.remove(stdin_file)
        writer, _ = await loop.connect_write_pipe(asyncio.Protocol, stdin_file)
        self.transports.append(writer)
        with contextlib.suppress(OSError, RuntimeError):
            writer.write(data)
            writer.write_eof()

    async def drained(self, timeout_s: float = 0.5) -> None:
        """Wait for both outputs to reach EOF; not forever: a straggler may still hold a pipe."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(self.out_closed, self.err_closed), timeout_s)

    def close(self) -> None:
        for transport in self.transports:
            transport.close()
        for f in self.pending:
            f.close()
        self.pending = []

    def result(self, returncode: int | None, wall_s: float, deadline_hit: bool) -> RawRun:
        return RawRun(
            returncode=returncode,
            stdout=bytes(self.out.buf),
            stderr=bytes(self.err.buf),
            stdout_truncated=self.out.truncated,
            stderr_truncated=self.err.truncated,
            wall_s=wall_s,
            deadline_hit=deadline_hit,
        )


def _watch_exit(
    loop: asyncio.AbstractEventLoop, proc: subprocess.Popen[bytes], exited: asyncio.Future[None]
) -> int:
    """Resolve ``exited`` when ``proc`` ends: a pidfd in the loop's selector, else polling."""

    def reap() -> None:
        if not exited.done() and proc.poll() is not None:
            exited.set_result(None)

    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = -1
    if pidfd >= 0:
        loop.add_reader(pidfd, reap)
        reap()  # it may already be gone
        return pidfd

    def poll() -> None:
        reap()
        if not exited.done():
            loop.call_later(0.005, poll)

    poll()
    return -1


def process_state(pid: int) -> bytes | None:
    """The state letter of ``pid`` from ``/proc/PID/stat`` (``b"R"``, ``b"S"``, ``b"Z"``...); None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


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
