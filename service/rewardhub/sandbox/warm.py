"""Warm sandboxes: one long-lived bubblewrap sandbox per pool slot, one fork of its guest per run.

A fresh sandbox per run pays ~13 ms before the first line of the program runs (``setpriv`` and ``bwrap``
exec, five namespaces, a dozen mounts, an interpreter start-up), more than most HumanEval or MBPP
programs take to run. A warm slot pays that once: its PID 1 is the guest's zygote
(:func:`rh_guest.zygote_main`), which forks a copy of itself for every run. The fork *is* the one-shot
guest (same code, same limits applied before any untrusted code exists, same verdict channel), so the
judge/solution protocol and its tamper resistance are unchanged.

The service passes each run's own stdin/stdout/stderr pipes over a ``SOCK_SEQPACKET`` control socket
(``SCM_RIGHTS``), so output capture, caps and parsing are those of a fresh run (:class:`.runner.Streams`).
The zygote answers with the exit status after it has killed every leftover process, wiped ``/tmp`` and
``/dev/shm`` and checked for IPC objects; anything it cannot reset ends the slot. The service ends a slot itself at a
deadline (the whole sandbox is killed, as a fresh run's would be), after ``REWARDHUB_SANDBOX_REUSE_RUNS``
runs, and on any protocol surprise; the next run on that slot starts a new one.

What differs from a fresh sandbox, and why it is acceptable: the judge is not PID 1, so it does not
ignore signals from inside the namespace; the seccomp filter every untrusted process gets
(``rh_guest._protect``) refuses those aimed at it. Consecutive runs of one slot share
the IPC, user and network namespaces (no process and no System V object survives a run; POSIX message
queues and keys, which could, cannot be created by the untrusted code). ``REWARDHUB_SANDBOX_REUSE_RUNS=0`` restores one fresh sandbox per run.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable

import structlog

from rewardhub.sandbox.probe import WARM_SCRIPT
from rewardhub.sandbox.runner import RawRun, SandboxCommand, Streams, kill_uid, process_state

__all__ = ["WarmSandbox", "WarmStartError"]

log = structlog.get_logger("rewardhub.sandbox")

_START_TIMEOUT_S = 10.0
_END_WAIT_S = 0.5


class WarmStartError(Exception):
    """A warm sandbox did not come up; the pool falls back to fresh sandboxes for the run."""


class WarmSandbox:
    """One slot's long-lived sandbox: start it, run guests in it one at a time, end it."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket, uid: int | None):
        self.proc = proc
        self.sock = sock
        self.uid = uid
        self.runs = 0
        self.alive = True
        self.end_cause: str | None = None
        self.on_end: Callable[[str], None] | None = None  # told the cause once, when the sandbox ends
        self._reaping: asyncio.Future[None] | None = None  # end()'s wait for the processes to go

    @classmethod
    async def start(cls, cmd: SandboxCommand, uid: int | None) -> WarmSandbox:
        """Start the zygote and wait for its ``ready``; raise :class:`WarmStartError` otherwise."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # bwrap and setpriv pass inherited fds through unchanged: the zygote gets the number.
            proc = subprocess.Popen(
                cmd.argv(uid, WARM_SCRIPT, str(theirs.fileno())),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=cmd.program_env("/tmp"),
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise WarmStartError(f"cannot start a warm sandbox: {exc}") from exc
        finally:
            theirs.close()
        ours.setblocking(False)
        box = cls(proc, ours, uid)
        loop = asyncio.get_running_loop()
        try:
            hello = await asyncio.wait_for(loop.sock_recv(ours, 64), _START_TIMEOUT_S)
        except (TimeoutError, OSError) as exc:
            hello = f"{type(exc).__name__}".encode()
        except BaseException:  # cancelled while it starts: it left the zygote running, its pipe open
            box.end("cancelled")
            raise
        if hello != b"ready":
            stderr = b""
            err, proc.stderr = proc.stderr, None  # read here, not closed by the reaping
            box.end()
            await box.ended()
            if err is not None:
                with contextlib.suppress(OSError, ValueError):
                    stderr = await asyncio.to_thread(err.read, 4096)  # at EOF: everything is gone
                err.close()
            raise WarmStartError(
                f"the warm sandbox did not start ({hello[:64]!r}): "
                + stderr.decode("utf-8", "replace").strip()[-300:]
            )
        if proc.stderr is not None:
            proc.stderr.close()  # from here on the zygote reports through the socket only
        return box

    async def run(
        self, stdin: bytes, *, deadline_s: float, stdout_cap: int, stderr_cap: int
    ) -> RawRun | None:
        """One guest run in a fork of the zygote; at the deadline (or on cancellation) the slot ends.

        None: the sandbox was gone before the guest said anything (its zygote died between runs), so
        the run can be repeated elsewhere; scoring is idempotent.
        """
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        streams = Streams(stdout_cap, stderr_cap)
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        try:
            socket.send_fds(self.sock, [b"R"], [in_r, out_w, err_w])
        except OSError:
            for fd in (in_r, in_w, out_r, out_w, err_r, err_w):
                os.close(fd)
            self.end("lost")
            return None
        finally:
            self.runs += 1
        for fd in (in_r, out_w, err_w):
            os.close(fd)  # the fork holds them now; EOF on stdout/stderr means it (and its children) ended
        deadline_hit = False
        returncode: int | None = None
        try:
            await streams.attach(
                os.fdopen(in_w, "wb", 0), os.fdopen(out_r, "rb", 0), os.fdopen(err_r, "rb", 0), stdin
            )
            try:
                reply = await asyncio.wait_for(loop.sock_recv(self.sock, 4096), deadline_s)
            except TimeoutError:
                deadline_hit = True
                reply = b""
            except OSError:  # the zygote is gone (connection reset)
                reply = b""
            returncode = self._parse(reply)
            if returncode is None:  # deadline, a dead zygote or nonsense: the whole sandbox goes
                self.end("deadline" if deadline_hit else "lost")
            await streams.drained()
            if returncode is None and not deadline_hit and not streams.out.buf:
                return None
        except BaseException:
            self.end("cancelled")  # no run outlives its request
            raise
        finally:
            streams.close()
        return streams.result(returncode, time.perf_counter() - t0, deadline_hit)

    def _parse(self, reply: bytes) -> int | None:
        fields = reply.split(b" ", 2)
        try:
            code = int(fields[0])
        except ValueError:
            return None
        if len(fields) > 1 and fields[1] == b"end":
            why = b""
            with contextlib.suppress(ValueError, binascii.Error):
                why = binascii.a2b_base64(fields[2]) if len(fields) > 2 else b""
            log.info("warm_sandbox_ended", why=why.decode("utf-8", "replace"))
            self.end("reset_failed")
        return code

    def pids(self) -> set[int]:
        """The slot's own host processes: bwrap and its child, the zygote (a run's processes are not)."""
        if not self.alive:
            return set()
        pids = {self.proc.pid}
        with contextlib.suppress(OSError, ValueError):
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                pids.update(int(pid) for pid in f.read().split())
        return pids

    def end(self, cause: str = "closed") -> None:
        """Kill the whole sandbox (its PID 1 takes every process of the namespace with it).

        ``cause`` (the first one counts) goes to ``on_end`` and from there to
        ``rewardhub_worker_restarts_total{pool="sandbox"}``: recycled, deadline, reset_failed, lost,
        cancelled, closed.
        """
        if not self.alive:
            return
        self.end_cause = cause
        if self.on_end is not None:
            self.on_end(cause)
        pids = self.pids()
        self.alive = False
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        # The rest waits for the kernel (reaping bwrap, the namespace's teardown: a sandbox of many
        # processes or files takes a while), up to seconds: never on the event loop, where it held every
        # request while it waited. In a thread; :meth:`ended` awaits it.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._reap(pids)
            return
        self._reaping = loop.run_in_executor(None, self._reap, pids)

    def _reap(self, pids: set[int]) -> None:
        if self.uid is not None:
            # Killed mid-setup, bwrap's child may not have its parent-death signal yet.
            kill_uid(self.uid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5.0)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        _wait_gone(pids - {self.proc.pid}, _END_WAIT_S)

    async def ended(self) -> None:
        """Wait until an ended sandbox's processes are gone (its uid then counts no process of it, so a
        new sandbox under the same uid starts with the whole process limit); at once if it was never
        ended or already is gone. Cancelling the caller leaves the reaping to finish on its own."""
        if self._reaping is not None:
            await asyncio.shield(self._reaping)


def _wait_gone(pids: set[int], timeout_s: float) -> None:
    """Wait until the zygote has died of its parent-death signal (it is not our child to reap), so
    that a stopped pool leaves nothing running; a zombie counts as gone."""
    deadline = time.monotonic() + timeout_s
    for pid in pids:
        while time.monotonic() < deadline and process_state(pid) not in (None, b"Z", b"X"):
            time.sleep(0.002)
