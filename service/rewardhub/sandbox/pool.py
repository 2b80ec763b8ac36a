"""The sandbox pool: bounded concurrency, a bounded queue, private uids, and the two kinds of job.

Concurrency defaults to the number of cores: a sandboxed run is one busy process, and more of them than
cores only turns CPU limits into wall-clock timeouts. Requests beyond the running ones wait in an
asyncio queue (a semaphore); past ``REWARDHUB_SANDBOX_QUEUE_MAX_ITEMS`` waiting runs a request is
refused as a whole with 429 before any of its items starts (an idle pool takes a request of any size).

Every run is an asyncio subprocess (:func:`.runner.run_process`), so thousands of waiting runs cost the
event loop nothing but a future each.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import os
import shutil
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from rewardhub.config import Settings
from rewardhub.errors import Overloaded, queue_retry_after
from rewardhub.sandbox.harness import (
    ExecReport,
    PytestReport,
    encode_frames,
    new_nonce,
    node_classes,
    parse_exec,
    parse_pytests,
    prelude_imports,
    pytest_style_tests,
    rewrite_asserts,
    uncalled_check,
)
from rewardhub.sandbox.languages import (
    COMPILER_MEMORY_MB,
    PYTHON_SYNTAX_CHECK,
    Language,
    available_languages,
)
from rewardhub.sandbox.probe import (
    UID_BLOCK,
    claim_index,
    claim_uid_block,
    count_user_tasks,
    prepare_guest_dir,
    which,
)
from rewardhub.sandbox.runner import IsolationLevel, RawRun, SandboxCommand, kill_uid, run_process
from rewardhub.sandbox.warm import WarmSandbox, WarmStartError

__all__ = ["Limits", "SandboxPool", "SandboxUnavailable"]

log = structlog.get_logger("rewardhub.sandbox")

_STDERR_CAP = 64 << 10
_START_SLACK_S = 2.0  # sandbox start-up and teardown on top of a job's own time limits
_WARM_START_FAILURES_MAX = 3  # consecutive failed warm starts before the pool stops trying


class SandboxUnavailable(Exception):
    """Code execution is refused on this host (see the probe); the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-run resource limits (the guest applies them before any untrusted code exists)."""

    memory_mb: int = 1024
    max_processes: int = 64
    file_size_mb: int = 64
    open_files: int = 256
    output_bytes: int = 1 << 20


class SandboxPool:
    def __init__(
        self,
        *,
        workers: int,
        max_queued: int,
        limits: Limits,
        python: str = "/usr/bin/python3",
        bwrap: str = "bwrap",
        allow_unisolated: bool = False,
        uid_base: int = 1_000_000_000,
        tmp_size_mb: int = 128,
        tmp_max_files: int = 10_000,
        max_timeout_s: float = 60.0,
        max_memory_mb: int = 8192,
        pin_cpus: bool = True,
        reuse_runs: int = 1000,
    ):
        self.workers = workers
        self.max_queued = max_queued
        self.limits = limits
        self.python_name = python
        self.bwrap_name = bwrap
        self.allow_unisolated = allow_unisolated
        self.uid_base = uid_base
        self.tmp_size_mb = tmp_size_mb
        self.tmp_max_files = tmp_max_files  # 0 once the probe found the host cannot cap them
        self.max_timeout_s = max_timeout_s
        # a request's memory_mb is capped as its time limits are: 64 processes of a run, each allowed
        # the 64 GiB a config may ask for, could take the host's memory from every other run
        self.max_memory_mb = max_memory_mb
        self.pin_cpus = pin_cpus
        self.reuse_runs = reuse_runs
        self._warm: dict[int, WarmSandbox] = {}
        self._warm_start_failures = 0
        self._warm_only = False
        self._closing = False  # close() has begun: a run gets a fresh sandbox, no warm one to leave behind
        self.slot_ends: Counter[str] = Counter()  # warm sandboxes ended, by cause
        self.on_slot_end: Callable[[str], None] | None = None
        self.level: IsolationLevel = "none"
        self._python_path = python  # the interpreter's real path once started
        self.message = "the sandbox has not been started"
        self.languages: dict[str, Language] = {}
        self.command: SandboxCommand | None = None
        self.guest_dir: Path | None = None
        self._sem = asyncio.Semaphore(workers)
        # A slot is one of `workers` concurrent runs; it owns a uid (when per-run uids are possible)
        # and a core (when pinning).
        self._slots: deque[int] = deque(range(workers))
        self._uid_first: int | None = None  # first uid of this process's claimed block
        self._uid_lock: int | None = None
        self._cpu_lock: int | None = None  # this process's claim of a share of the cores (pinning)
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self._all_cpus = self._cpus = cpus if pin_cpus else []
        self._nproc_shared: int | None = None
        self._pending = 0  # admitted and not finished (waiting or running)
        self._running = 0
        self.runs = 0
        self.failures = 0
        self.run_seconds = 0.0

    def identity(self) -> str:
        """What a program's verdict depends on besides its code, its tests and the reward's config: the
        isolation, the interpreter and the server's limits (a memory, output or process limit the
        config leaves to the server, the cap on every time limit). Part of the version of the rewards
        that run code, and with it their cache key: a replica or a restart with other limits sharing
        the Redis served the verdicts of the old limits."""
        lim = self.limits
        return (
            f"{self.level}|{self._python_path}|mem={lim.memory_mb}|procs={lim.max_processes}"
            f"|fsize={lim.file_size_mb}|files={lim.open_files}|out={lim.output_bytes}"
            f"|tmp={self.tmp_size_mb}|tmp_files={self.tmp_max_files}"
            f"|max_timeout={self.max_timeout_s!r}|max_mem={self.max_memory_mb}"
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxPool:
        return cls(
            workers=settings.sandbox_workers,
            max_queued=settings.sandbox_queue_max_items,
            limits=Limits(
                memory_mb=settings.sandbox_memory_mb,
                max_processes=settings.sandbox_max_processes,
                file_size_mb=settings.sandbox_file_size_mb,
                output_bytes=settings.sandbox_output_limit_bytes,
            ),
            python=settings.sandbox_python,
            bwrap=settings.sandbox_bwrap,
            allow_unisolated=settings.sandbox_allow_unisolated,
            uid_base=settings.sandbox_uid_base,
            tmp_size_mb=settings.sandbox_tmp_size_mb,
            tmp_max_files=settings.sandbox_tmp_max_files,
            max_timeout_s=settings.sandbox_max_timeout_s,
            max_memory_mb=settings.sandbox_max_memory_mb,
            pin_cpus=settings.sandbox_pin_cpus,
            reuse_runs=settings.sandbox_reuse_runs,
        )

    # --- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Probe the host and settle the isolation level (never raises: a failure is level ``none``)."""
        self._closing = False
        python = which(self.python_name)
        if python is None:
            self.message = (
                f"the sandbox interpreter {self.python_name!r} was not found (REWARDHUB_SANDBOX_PYTHON)"
            )
            log.error("sandbox_unavailable", reason=self.message)
            return
        self._python_path = os.path.realpath(python)
        self.guest_dir = await asyncio.to_thread(prepare_guest_dir, python)
        self.languages = available_languages()
        if len(self._all_cpus) > self.workers:
            # Several service processes on one host (`serve --workers N`, its slots shared out between
            # them) each pinned their slots to the same first cores: N programs per core there and the
            # other cores idle. Each process takes its own share, by the index it claims.
            claim_cpus = claim_index(f"rewardhub-sandbox-cpus-{os.getuid()}")
            if claim_cpus is not None:
                index, self._cpu_lock = claim_cpus
                shift = index * self.workers % len(self._cpus)
                self._cpus = self._all_cpus[shift:] + self._all_cpus[:shift]
        setpriv = which("setpriv") if os.geteuid() == 0 and self.uid_base > 0 else None
        claim = claim_uid_block(self.uid_base) if setpriv is not None and self.workers <= UID_BLOCK else None
        if claim is not None:
            block, self._uid_lock = claim
            self._uid_first = self.uid_base + block * UID_BLOCK
            for uid in self.uids:  # whatever a crashed predecessor with this block left behind
                kill_uid(uid)
        else:
            setpriv = None
            # One uid for every run: RLIMIT_NPROC is shared, so bound the total instead of each run.
            self._nproc_shared = (
                count_user_tasks(os.geteuid()) + 512 + self.workers * self.limits.max_processes
            )
        problems: list[str] = []
        bwrap = which(self.bwrap_name)
        if bwrap is not None:
            cmd = SandboxCommand(
                "bubblewrap",
                python,
                self.guest_dir,
                bwrap,
                setpriv,
                tmp_size_bytes=self.tmp_size_mb << 20,
                tmp_max_files=self.tmp_max_files,
            )
            cmd.build_flags()
            reuse, self.reuse_runs = self.reuse_runs, 0
            problem = await self._probe(cmd)
            files_problem = None
            if problem is not None and cmd.tmp_max_files > 0:
                # The file cap needs the guest to mount its own tmpfs (capabilities in the sandbox's
                # user namespace, a mount namespace of its own); a host that refuses that still gets
                # every other layer, and says so.
                files_problem, self.tmp_max_files = problem, 0
                cmd.tmp_max_files = 0
                cmd.build_flags()
                problem = await self._probe(cmd)
            if problem is None:
                self.command, self.level = cmd, "bubblewrap"
                self.message = "bubblewrap: namespaces, read-only system, private tmpfs, rlimits"
                if files_problem is not None:
                    self.message += f" (no cap on the files in /tmp: {files_problem})"
                    log.warning("sandbox_tmp_files_uncapped", reason=files_problem)
                if setpriv is None:
                    self.message += " (no per-run uids: the process limit is shared by all runs)"
                if reuse:
                    self.reuse_runs = reuse
                    warm_problem = await self._probe(cmd, warm_only=True)
                    if warm_problem is not None:
                        self.reuse_runs = 0
                        self.message += f" (warm sandboxes off: {warm_problem})"
                        log.warning("sandbox_warm_unavailable", reason=warm_problem)
                    self.command = cmd  # the probe unset it
                log.info(
                    "sandbox_ready",
                    isolation=self.level,
                    workers=self.workers,
                    languages=list(self.languages),
                )
                return
            problems.append(f"bwrap failed: {problem}")
        else:
            problems.append(f"bwrap ({self.bwrap_name!r}) is not installed (apt-get install bubblewrap)")
        if self.allow_unisolated:
            cmd = SandboxCommand("rlimits_only", python, self.guest_dir, None, setpriv)
            problem = await self._probe(cmd)
            if problem is None:
                self.command, self.level = cmd, "rlimits_only"
                self.message = (
                    "UNISOLATED: resource limits and a private uid only, no filesystem or network isolation "
                    f"(REWARDHUB_SANDBOX_ALLOW_UNISOLATED=true); {'; '.join(problems)}"
                )
                log.warning("sandbox_unisolated", message=self.message)
                return
            problems.append(f"rlimits-only runs failed too: {problem}")
        self.level = "none"
        self.message = (
            "code execution is disabled: "
            + "; ".join(problems)
            + ". Install bubblewrap, or set REWARDHUB_SANDBOX_ALLOW_UNISOLATED=true to accept rlimits-only runs."
        )
        log.error("sandbox_unavailable", reason=self.message)

    async def _probe(self, cmd: SandboxCommand, *, warm_only: bool = False) -> str | None:
        """Run one real program through ``cmd``; None when it answered correctly, else what went wrong.

        ``warm_only``: through a warm sandbox, with no fallback to a fresh one.
        """
        self.command = cmd
        self._warm_only = warm_only
        try:
            report, raw = await self.run_program(
                language=self.languages.get("python") or _PROBE_LANGUAGE,
                code="print(6 * 7)",
                stdins=[b""],
                run_timeout_s=10.0,
                total_timeout_s=20.0,
            )
        except Exception as exc:  # the probe's failure is the answer
            return f"{type(exc).__name__}: {exc}"
        finally:
            self.command = None
            self._warm_only = False
        run = report.runs.get(0)
        if report.done and run is not None and run.ok and run.stdout.strip() == b"42":
            return None
        tail = raw.stderr.decode("utf-8", "replace").strip()[-300:]
        return raw.spawn_error or report.error or f"exit status {raw.returncode}: {tail or 'no output'}"

    @property
    def uids(self) -> range:
        """The host uids this pool's runs use (empty without per-run uids)."""
        if self._uid_first is None:
            return range(0)
        return range(self._uid_first, self._uid_first + self.workers)

    def _slot_ended(self, cause: str) -> None:
        """A warm sandbox of this pool ended: count it by cause (stats and the worker-restarts metric)."""
        self.slot_ends[cause] += 1
        if self.on_slot_end is not None:
            self.on_slot_end(cause)

    def warm_pids(self) -> set[int]:
        """Host pids of the warm sandboxes themselves (bwrap and zygote), idle between runs."""
        return set().union(*(box.pids() for box in self._warm.values()))

    async def close(self) -> None:
        self._closing = True  # (a run while this awaits the reaping below starts no warm sandbox)
        boxes = list(self._warm.values())
        for box in boxes:
            box.on_end = None  # shutting down is not a replacement
            box.end()
        for box in boxes:
            await box.ended()  # a stopped pool leaves nothing running
        self._warm.clear()
        if self._uid_lock is not None:
            os.close(self._uid_lock)
            self._uid_lock = None
        if self._cpu_lock is not None:
            os.close(self._cpu_lock)
            self._cpu_lock = None
        if self.guest_dir is not None:
            await asyncio.to_thread(shutil.rmtree, self.guest_dir, True)
            self.guest_dir = None
        self.level, self.command = "none", None
        self.message = "the sandbox is stopped"

    # --- admission ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def admit(self, n: int) -> Iterator[None]:
        """Reserve room for ``n`` runs or refuse the whole request with :class:`Overloaded` (429).

        An idle pool takes a request of any size (its runs wait their turn), as the in-flight bound and
        the batchers do: otherwise a request or job with more runs than the bound was refused on every
        retry, and a job waiting for room stayed ``running`` for ever."""
        bound = self.max_queued + self.workers
        if self._pending and self._pending + n > bound:
            # Retry-After: about when it fits, i.e. when as many runs as it is over the bound have ended
            # (all of them for one larger than the bound), at ~50 ms a run per slot
            ahead = min(self._pending, self._pending + n - bound)
            raise Overloaded(
                f"{self._pending} sandbox runs are already admitted (limit {self.max_queued} waiting + "
                f"{self.workers} running, REWARDHUB_SANDBOX_QUEUE_MAX_ITEMS)",
                retry_after_s=queue_retry_after(ahead / max(1, self.workers) * 0.05),
            )
        self._pending += n
        try:
            yield
        finally:
            self._pending -= n

    def stats(self) -> dict[str, Any]:
        return {
            "isolation": self.level,
            "message": self.message,
            "workers": self.workers,
            "running": self._running,
            "waiting": max(0, self._pending - self._running),
            "runs": self.runs,
            "failures": self.failures,
            "run_seconds": round(self.run_seconds, 3),
            "per_run_uids": self._uid_first is not None,
            "pinned_cpus": bool(self._cpus),
            "tmp_max_files": self.tmp_max_files,  # 0: not capped (unset, or the host refused the cap)
            "warm_sandboxes": sum(1 for box in self._warm.values() if box.alive),
            "reuse_runs": self.reuse_runs,
            "warm_sandbox_ends": dict(self.slot_ends),
            "languages": sorted(self.languages),
        }

    # --- one run --------------------------------------------------------------------------------
    def _memory_mb(self, asked: int | None) -> int:
        """A run's address-space limit per process: what the request asked for, or the server's default,
        never past REWARDHUB_SANDBOX_MAX_MEMORY_MB."""
        return min(asked or self.limits.memory_mb, self.max_memory_mb)

    def _guest_limits(self, cpu_s: float, memory_mb: int) -> dict[str, int]:
        lim = self.limits
        nproc = self._nproc_shared if self._nproc_shared is not None else lim.max_processes + 4
        return {
            "as_bytes": memory_mb << 20,
            "nproc": nproc,
            "fsize_bytes": lim.file_size_mb << 20,
            "nofile": lim.open_files,
            "cpu_s": math.ceil(cpu_s) + 1,
        }

    async def run_guest(
        self, public: dict[str, Any], private: dict[str, Any], *, deadline_s: float, stdout_cap: int
    ) -> RawRun:
        """Run the guest once under the concurrency limit; the caller has admitted it."""
        cmd = self.command
        if cmd is None:
            raise SandboxUnavailable(self.message)
        t_queue = time.perf_counter()
        async with self._sem:
            queue_s = time.perf_counter() - t_queue
            slot = self._slots.popleft()
            uid = self._uid_first + slot if self._uid_first is not None else None
            if self._cpus:
                public = {**public, "cpu": self._cpus[slot % len(self._cpus)]}
            stdin = encode_frames(public, private)
            workdir: str | None = None
            self._running += 1
            raw: RawRun | None = None
            try:
                if cmd.level != "bubblewrap":
                    workdir = tempfile.mkdtemp(prefix="rewardhub-run-")
                    if uid is not None:
                        os.chown(workdir, uid, uid)
                if self.reuse_runs and cmd.level == "bubblewrap":
                    raw = await self._run_warm(cmd, slot, uid, stdin, deadline_s, stdout_cap)
                if raw is None:
                    raw = await run_process(
                        cmd.argv(uid),
                        stdin,
                        deadline_s=deadline_s,
                        stdout_cap=stdout_cap,
                        stderr_cap=_STDERR_CAP,
                        env=cmd.program_env(workdir or "/tmp"),
                        cwd=workdir,
                        sweep_uid=uid if cmd.level != "bubblewrap" else None,
                    )
            finally:
                if uid is not None and (raw is None or raw.deadline_hit):
                    # Killed (deadline, cancellation): bwrap may have been caught mid-setup, before its
                    # child had its parent-death signal, so sweep the run's private uid.
                    kill_uid(uid)
                self._running -= 1
                self._slots.append(slot)
                if workdir is not None:
                    shutil.rmtree(workdir, ignore_errors=True)
        raw.queue_s = queue_s
        self.runs += 1
        self.run_seconds += raw.wall_s
        if raw.spawn_error is not None or raw.returncode not in (0, None) and not raw.deadline_hit:
            self.failures += 1
        return raw

    async def _run_warm(
        self,
        cmd: SandboxCommand,
        slot: int,
        uid: int | None,
        stdin: bytes,
        deadline_s: float,
        stdout_cap: int,
    ) -> RawRun | None:
        """The run in the slot's warm sandbox (started or replaced as needed); None: run it fresh.

        A slot found dead before its run began (its zygote died between runs) is replaced and the run
        repeated once in the new one.
        """
        for _ in range(2):
            box = self._warm.get(slot)
            if box is not None and (
                not box.alive or box.runs >= self.reuse_runs or box.proc.poll() is not None
            ):
                box.end("recycled" if box.alive and box.runs >= self.reuse_runs else "lost")
                await box.ended()  # its uid's processes gone before the next sandbox runs under it
                box = None
            if box is None:
                if self._closing:
                    return None
                try:
                    box = await WarmSandbox.start(cmd, uid)
                except WarmStartError as exc:
                    self._warm_start_failures += 1
                    log.warning(
                        "sandbox_warm_start_failed", error=str(exc), failures=self._warm_start_failures
                    )
                    if self._warm_only:
                        return RawRun(None, b"", b"", False, False, 0.0, spawn_error=str(exc))
                    if self._warm_start_failures >= _WARM_START_FAILURES_MAX:
                        self.reuse_runs = 0
                        self.message += (
                            f" (warm sandboxes off after {self._warm_start_failures} failed starts)"
                        )
                    return None
                self._warm_start_failures = 0
                if self._closing:  # (close() began while it started)
                    box.end("closed")
                    await box.ended()
                    return None
                box.on_end = self._slot_ended
                self._warm[slot] = box
            raw = await box.run(stdin, deadline_s=deadline_s, stdout_cap=stdout_cap, stderr_cap=_STDERR_CAP)
            if raw is not None:
                return raw
            log.info("sandbox_warm_slot_lost", slot=slot)
        if box is not None:  # lost twice: the fresh run that follows runs under the same uid
            await box.ended()
        return None

    # --- the two kinds of job -------------------------------------------------------------------
    async def run_tests(
        self,
        *,
        solution: str,
        tests: str | list[str],
        entry_point: str | None = None,
        setup: str | None = None,
        prelude: str | None = None,
        test_timeout_s: float = 5.0,
        total_timeout_s: float = 30.0,
        memory_mb: int | None = None,
        calls_from: int = 0,
    ) -> tuple[PytestReport, RawRun]:
        """Python assert-style tests, judged outside the solution's process (see :mod:`.guest`).
        ``prelude``: the reference's code run in the judge before the tests, its import statements in the
        solution's namespace before the solution (:func:`.harness.prelude_imports`).
        ``calls_from``: the pytest-style test functions the judge calls start at this one (the ones
        before it ran in an earlier run, which one of them ended by losing the solution)."""
        total = min(total_timeout_s, self.max_timeout_s)
        imports = ""
        if prelude:
            try:
                imports = prelude_imports(prelude)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                why = f"the reference prelude does not compile: {type(exc).__name__}: {exc}"
                return PytestReport(ready=True, done=True, reference_error=why), RawRun(
                    0, b"", b"", False, False, 0.0
                )
        judged: list[str] | dict[str, Any] = tests if isinstance(tests, list) else {}
        labels: tuple[str, ...] = ()
        calls: list[
            list[Any]
        ] = []  # pytest-style test functions the judge calls (harness.pytest_style_tests)
        if isinstance(tests, str):
            try:
                source, labels = rewrite_asserts(tests)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                why = f"the reference tests do not compile: {type(exc).__name__}: {exc}"
                return PytestReport(ready=True, done=True, reference_error=why), RawRun(
                    0, b"", b"", False, False, 0.0
                )
            if not entry_point and uncalled_check(tests):
                why = "the reference tests define check(candidate) but nothing calls it: name the entry_point"
                return PytestReport(ready=True, done=True, reference_error=why), RawRun(
                    0, b"", b"", False, False, 0.0
                )
            judged = {"source": source, "labels": list(labels)}
            calls = [[cls, name, first, end] for cls, name, first, end, _ in pytest_style_tests(tests)]
            calls = calls[calls_from:]
        nonce = new_nonce()
        public = {
            "mode": "pytests",
            "solution": solution,
            "setup": setup or "",
            "limits": self._guest_limits(total, self._memory_mb(memory_mb)),
            # (the names only: LeetCode's judge tells its solutions it defines them)
            "nodes": sorted(
                {
                    n
                    for t in ([tests] if isinstance(tests, str) else tests) + ([prelude] if prelude else [])
                    for n in node_classes(t)
                }
            ),
            "prelude_imports": imports,
        }
        private = {
            "nonce": nonce,
            "tests": judged,
            "prelude": prelude or "",
            "entry_point": entry_point or "",
            "calls": calls,
            "test_timeout_s": min(test_timeout_s, total),
            "total_timeout_s": total,
        }
        # The verdict channel's worst case: the plan (every label, 300 characters at most, base64) and per
        # test a verdict whose message is up to ~340 characters, base64 of up to 4 bytes each.
        labels_sent = tests if isinstance(tests, list) else list(labels) or ["-"]
        plan = sum(len(label[:300].encode("utf-8", "surrogatepass")) * 4 // 3 + 8 for label in labels_sent)
        cap = (64 << 10) + plan + len(labels_sent) * 2048
        raw = await self.run_guest(public, private, deadline_s=total + _START_SLACK_S, stdout_cap=cap)
        return parse_pytests(raw.stdout, nonce), raw

    async def run_program(
        self,
        *,
        language: Language,
        code: str | bytes,
        stdins: Sequence[bytes],
        compile_timeout_s: float = 10.0,
        run_timeout_s: float = 5.0,
        total_timeout_s: float | None = None,
        memory_mb: int | None = None,
        files: dict[str, bytes] | None = None,
        fetch: Sequence[str] = (),
        syntax_check: bool = False,
        reference_check: str | None = None,
        modules_check: Sequence[str] | None = None,
        stdout_caps: Sequence[int] | None = None,
        stderr_keep: int | None = None,
        wall_clock: bool = False,
    ) -> tuple[ExecReport, RawRun]:
        """Compile ``code`` once (compiled languages), then run it once per stdin.

        Time limits are CPU time (a step's own and its waited-for children's), the wall clock capping
        each step at 3x its limit within the total: a loaded host does not make a correct program a
        timeout. ``wall_clock``: they are wall-clock limits instead (SandboxFusion's ``run_timeout``).

        ``stdout_caps``: per stdin, a smaller stdout cap than the server's output limit (past it the run
        is ``output_limit``); ``stderr_keep``: only the last this many bytes of each step's stderr come
        back. The service holds every run's output until the item is scored: without them, a program
        flooding both streams in each of many cases cost it the output limit times two per case.

        ``syntax_check``: interpreted languages too get a compile step (their parse-only check), so
        that a syntax error is reported as a failed compile rather than as the same crash in every run.
        For Python the guest compiles the source itself first (no process to start); only when that
        fails does the program's own interpreter (which may not be the guest's) get the final word.

        ``reference_check`` (with ``syntax_check``, a language whose check is parse-only): the program's
        part that is the reference's (tests and setup, wrapped as in ``code``, the solution left out).
        When ``code`` does not parse, it is checked the same way on its own, in the same run, and the
        report's ``reference_check`` says whether it parses: a syntax error there is the reference's,
        not the solution's. Not checked when ``code`` parses (it costs a process start per item).

        ``modules_check``: a command run first, before the program is compiled or run (``code``
        resolving the modules its reference requires); when it fails, nothing else runs, and the
        report's ``modules_check`` says how it failed.
        """
        compile_argv = language.compile
        precheck: str | None = None
        if syntax_check and compile_argv is None and language.name == "python":
            compile_argv, precheck = PYTHON_SYNTAX_CHECK, language.source
        elif syntax_check and compile_argv is None:
            compile_argv = language.syntax_check
        ref_check: dict[str, Any] | None = None
        if reference_check is not None:
            if not syntax_check or language.syntax_check is None:
                raise ValueError(f"{language.name} has no parse-only check to check the reference with")
            name = "reference" + language.source[language.source.rfind(".") :]
            ref_check = {
                "file": name,
                "source": reference_check.encode("utf-8", "surrogatepass"),
                "argv": [name if a == language.source else a for a in language.syntax_check],
            }
        compile_s = min(compile_timeout_s, self.max_timeout_s) if compile_argv is not None else 0.0
        run_s = min(run_timeout_s, self.max_timeout_s)
        total = min(total_timeout_s or run_s * max(1, len(stdins)), self.max_timeout_s)
        out_cap = self.limits.output_bytes
        source = code.encode("utf-8", "surrogatepass") if isinstance(code, str) else code
        # The memory limit is the program's; its compiler and its runtime's own reservations are not
        # (see Language.reserved_address_space_mb): each step gets its own address-space limit.
        program_mb = self._memory_mb(memory_mb)
        run_argv = list(language.run)
        run_mb = program_mb + language.reserved_address_space_mb
        if language.heap_flag is not None:
            run_argv.insert(1, language.heap_flag.format(mb=program_mb))
        compile_mb = max(program_mb, COMPILER_MEMORY_MB) + language.reserved_address_space_mb
        if compile_argv is None:
            compile_mb = 0
        nonce = new_nonce()
        public = {
            "mode": "exec",
            "files": {**(files or {}), language.source: source},
            "compile": list(compile_argv) if compile_argv else None,
            "syntax_check": precheck,
            "reference_check": ref_check,
            "modules_check": list(modules_check) if modules_check else None,
            "compile_timeout_s": compile_s,
            "compile_as_bytes": compile_mb << 20,
            "run": run_argv,
            "run_timeout_s": run_s,
            "run_as_bytes": run_mb << 20,
            "total_timeout_s": total,
            "env": SandboxCommand.program_env("/tmp"),
            "out_cap": out_cap,
            "stderr_keep": stderr_keep or 0,
            "wall_clock": wall_clock,
            "limits": self._guest_limits(compile_s + total + 1, max(run_mb, compile_mb)),
        }
        run_caps = [out_cap] * len(stdins)
        if stdout_caps is not None:
            run_caps = [min(out_cap, max(1, int(c))) for c in stdout_caps]
        private = {"nonce": nonce, "stdins": list(stdins), "fetch": list(fetch), "stdout_caps": run_caps}
        # Every run's two streams, base64-encoded, the compile step's (and the reference's checks') and
        # fetched files: the verdict channel's worst case.
        err = min(stderr_keep, out_cap) if stderr_keep else out_cap
        runs = sum((c + err) * 3 // 2 + 4096 for c in run_caps)
        steps = 2 + len(fetch) + (ref_check is not None) + bool(modules_check)
        cap = runs + steps * (out_cap * 3 + 4096) + (64 << 10)
        raw = await self.run_guest(
            public, private, deadline_s=compile_s + total + _START_SLACK_S, stdout_cap=cap
        )
        return parse_exec(raw.stdout, nonce), raw


_PROBE_LANGUAGE = Language("python", "main.py", ("python3", "-I", "main.py"))


def sandbox_version(version: str, pool: SandboxPool | None) -> str:
    """A code-running reward's version on this server: ``version`` plus a short hash of the sandbox's
    :meth:`~SandboxPool.identity` (just ``version`` where no code can run: nothing is scored)."""
    if pool is None or refusal(pool) is not None:
        return version
    return f"{version}+{hashlib.sha256(pool.identity().encode()).hexdigest()[:10]}"


def refusal(pool: SandboxPool | None) -> str | None:
    """Why no code can run here (no pool, or its settled level is ``none``), else None: the rewards that
    run code answer every item ``sandbox_error`` with it, and the catalog shows it as their
    ``unavailable``, so a trainer refuses to start instead of training on no reward signal."""
    if pool is None:
        return "no code sandbox is configured"
    return pool.message if pool.level == "none" else None
