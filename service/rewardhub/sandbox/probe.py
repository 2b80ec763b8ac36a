"""Start-up capability probe: which isolation this host can give, proven by running a real program.

Finding ``bwrap`` on the ``PATH`` proves nothing (user namespaces may be disabled, seccomp profiles of a
container may forbid ``unshare``), so the probe runs one complete sandboxed program through the same
code path as every request and checks its nonce-signed answer. The outcome is one of:

* ``bubblewrap`` — full isolation (namespaces, read-only system, private tmpfs, rlimits);
* ``rlimits_only`` — ``bwrap`` failed and ``REWARDHUB_SANDBOX_ALLOW_UNISOLATED=true`` allows running
  with resource limits and a private uid only (no filesystem or network isolation);
* ``none`` — code execution is refused: every code item is ``invalid: sandbox_error`` with the reason.
"""

from __future__ import annotations

import fcntl
import os
import py_compile
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rewardhub.sandbox import guest

__all__ = ["UID_BLOCK", "ProbeResult", "claim_uid_block", "count_user_tasks", "prepare_guest_dir", "which"]

# Uids per service process: run k of a pool holding block b is uid `base + b * UID_BLOCK + k`.
UID_BLOCK = 256


@dataclass(slots=True)
class ProbeResult:
    ok: bool
    message: str


def which(name: str) -> str | None:
    """An absolute path for a configured executable name or path."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name)


# The execute-only copy of the interpreter in the guest directory (see prepare_guest_dir).
EXEC_ONLY_PYTHON = "python"
# A warm sandbox's entry point (see rh_guest.zygote_main); its argument is the control socket's fd.
WARM_SCRIPT = "zygote.py"


def prepare_guest_dir(python: str) -> Path:
    """A private, world-readable directory holding the guest, byte-compiled by the sandbox's interpreter.

    Copying (instead of binding the installed package) keeps the service's own files out of the sandbox,
    and compiling once with the *sandbox's* Python means every run imports a ready ``.pyc``. The
    directory also holds an execute-only (``0111``) copy of the interpreter, which ``bwrap`` mounts over
    the real one: the kernel makes a process that executes an unreadable binary non-dumpable, which is
    what the guest needs, for free (otherwise it calls ``prctl`` through ``ctypes``, 1.5 ms per run).
    """
    root = Path(tempfile.mkdtemp(prefix="rewardhub-guest-"))
    root.chmod(0o755)
    src = root / "rh_guest.py"
    shutil.copyfile(guest.__file__, src)
    (root / "main.py").write_text("import rh_guest\n\nif __name__ == '__main__':\n    rh_guest.main()\n")
    (root / WARM_SCRIPT).write_text(
        "import sys\n\nimport rh_guest\n\nrh_guest.zygote_main(int(sys.argv[1]))\n"
    )
    code = (
        "import py_compile, sys; "
        "py_compile.compile(sys.argv[1], doraise=True, "
        "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)"
    )
    try:
        subprocess.run(
            [python, "-I", "-S", "-c", code, str(src)], check=True, capture_output=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        # Still usable: the interpreter compiles the source at each start (slower, same behaviour).
        py_compile.compile(str(src), doraise=False)
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    exec_only = root / EXEC_ONLY_PYTHON
    shutil.copyfile(os.path.realpath(python), exec_only)
    exec_only.chmod(0o111)
    return root


def count_user_tasks(uid: int) -> int:
    """Processes and threads owned by ``uid`` (what ``RLIMIT_NPROC`` counts) right now."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                total += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            continue
    return total


def claim_uid_block(base: int, blocks: int = 4096) -> tuple[int, int] | None:
    """Claim a block of private uids for this service process: ``(block, lock fd)``, or None.

    Several service processes on one host (``--workers N``, a test run beside a server) must never share
    a run uid: ``RLIMIT_NPROC`` is counted per uid, and the sweep after a killed run kills *every*
    process of that uid. The claim is an ``flock`` held for the pool's lifetime; the kernel releases it
    when the process dies, so a crashed service frees its block.
    """
    return claim_index(f"rewardhub-sandbox-uids-{base}", blocks)


def claim_index(name: str, count: int = 4096) -> tuple[int, int] | None:
    """The lowest index in ``range(count)`` no other live process holds under ``name``: ``(index, lock
    fd)``, or None. An ``flock`` on a file in the temporary directory, held until the fd is closed or the
    process dies."""
    lock_dir = Path(tempfile.gettempdir()) / name
    try:
        lock_dir.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    for index in range(count):
        try:
            fd = os.open(lock_dir / f"{index}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return index, fd
    return None
