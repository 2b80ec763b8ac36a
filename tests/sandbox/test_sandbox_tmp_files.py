"""The cap on the number of files a run may create in its /tmp and /dev/shm (REWARDHUB_SANDBOX_TMP_MAX_FILES),
on the real pool and real bubblewrap, in a fresh sandbox per run and in a warm slot.

An empty file costs a tmpfs no bytes but an inode and a dentry of kernel memory, so the size cap alone let
a program pin hundreds of MB by creating files for its whole time limit. The guest mounts both tmpfs with
``nr_inodes`` (rh_guest._private_tmpfs), which needs two capabilities for a moment: the program must
still start with none, in /tmp as its working directory, on a read-only system.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rewardhub.sandbox import Limits, SandboxPool
from rewardhub.sandbox.languages import available_languages

CAP = 50
ENOSPC = 28

# Creates files in /tmp and /dev/shm until the OS refuses one (or twice the cap, which must not happen);
# reports what it found before and how far it got. Ends normally either way.
FILL = f"""
import os
before = sorted(os.listdir("/tmp")) + sorted(os.listdir("/dev/shm"))
print("before", before)
for d in ("/tmp", "/dev/shm"):
    n, err = 0, None
    try:
        while n < {2 * CAP}:
            open(f"{{d}}/f{{n}}", "w").close()
            n += 1
    except OSError as exc:
        err = exc.errno
    print(d, n, err)
print("done")
"""


@pytest.fixture(params=[0, 1000], ids=["fresh", "warm"])
async def pool(request: pytest.FixtureRequest) -> AsyncIterator[SandboxPool]:
    """One slot, so every run of a warm pool goes to the same sandbox."""
    p = SandboxPool(workers=1, max_queued=16, limits=Limits(), reuse_runs=request.param, tmp_max_files=CAP)
    await p.start()
    if p.level != "bubblewrap":
        pytest.skip(f"needs bubblewrap: {p.message}")
    assert p.tmp_max_files == CAP, p.message  # the host could cap them: no fallback taken
    assert p.reuse_runs == request.param, p.message
    yield p
    await p.close()


async def run(pool: SandboxPool, code: str) -> str:
    report, raw = await pool.run_program(
        language=available_languages()["python"], code=code, stdins=[b""], run_timeout_s=10.0
    )
    result = report.runs.get(0)
    assert result is not None, raw
    assert result.ok, (result, raw)  # the program ended normally, whatever the OS refused it
    return result.stdout.decode()


async def test_past_the_cap_the_os_refuses_the_next_file_and_the_run_ends_normally(
    pool: SandboxPool,
) -> None:
    first = await run(pool, FILL)
    lines = first.splitlines()
    assert len(lines) == 4 and lines[-1] == "done", first
    # /tmp holds the program's own source, one of the run's files; /dev/shm starts empty
    assert lines[0] == "before ['main.py']", first
    assert lines[1] == f"/tmp {CAP - 1} {ENOSPC}", first
    assert lines[2] == f"/dev/shm {CAP} {ENOSPC}", first
    # The next runs (in a warm pool: the same slot, after its reset) start as the first did and get
    # the whole cap again: the wipe gave every inode back.
    for _ in range(2):
        assert await run(pool, FILL) == first


async def test_a_program_under_the_cap_is_unaffected(pool: SandboxPool) -> None:
    code = """
import os
os.makedirs("sub/deeper")  # relative: the working directory is the capped /tmp itself
for i in range(20):
    with open(f"/tmp/sub/deeper/{i}.txt", "w") as f:
        f.write(str(i) * 1000)
    with open(f"/dev/shm/{i}", "w") as f:
        f.write(str(i))
total = sum(len(open(f"/tmp/sub/deeper/{i}.txt").read()) for i in range(20))
print(os.getcwd(), sorted(os.listdir("/tmp")), total, len(os.listdir("/dev/shm")))
"""
    out = await run(pool, code)
    assert out.split(" ", 1)[0] == "/tmp"
    assert "'sub'" in out and out.rstrip().endswith(f" {sum(len(str(i)) * 1000 for i in range(20))} 20"), out


async def test_the_program_starts_with_no_capability_on_a_read_only_system(pool: SandboxPool) -> None:
    """The guest's two lent capabilities are gone (bounding set included) before the program exists, and
    the mount namespace it made changed nothing else: / is read-only, no new namespace can be made."""
    code = """
import ctypes, os
caps = [line.split()[1] for line in open("/proc/self/status") if line.startswith("Cap")]
print("caps", sorted(set(caps)))
try:
    open("/pwned", "w")
except OSError as exc:
    print("root", exc.errno)
libc = ctypes.CDLL(None, use_errno=True)
print("mount", libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"nr_inodes=0"), ctypes.get_errno())
print("unshare", libc.unshare(0x10000000 | 0x00020000), ctypes.get_errno())  # CLONE_NEWUSER | CLONE_NEWNS
"""
    out = await run(pool, code)
    assert "caps ['0000000000000000']" in out, out
    assert "root 30" in out, out  # EROFS
    assert "mount -1 1" in out, out  # EPERM
    assert "unshare -1" in out, out


# Each call's arguments are chosen so that the kernel itself answers something other than EPERM on this
# host (a bad flag, a missing path, the user-namespace limit, a descriptor): EPERM is the filter's answer.
KERNEL_SURFACE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
X86 = os.uname().machine == "x86_64"
L = ctypes.c_long
def call(name, x86, generic, *args):
    ctypes.set_errno(0)
    r = libc.syscall(L(x86 if X86 else generic), *args)
    print(name, r, ctypes.get_errno())
own_userns = os.open("/proc/self/ns/user", os.O_RDONLY)
call("mount", 165, 40, b"none", b"/no/such/dir", b"tmpfs", L(0), None)  # ENOENT
call("umount2", 166, 39, b"/tmp", L(0x100))  # EINVAL: unknown flag
call("pivot_root", 155, 41, b"/tmp", b"/tmp")
call("unshare", 272, 97, L(0x10000000))  # CLONE_NEWUSER: ENOSPC (--disable-userns)
call("setns", 308, 268, L(own_userns), L(0))  # EINVAL: its own user namespace
call("open_tree", 428, 428, L(-100), b"/tmp", L(0x80000))  # a descriptor (no OPEN_TREE_CLONE)
call("move_mount", 429, 429, L(-100), b"/tmp", L(-100), b"/dev/shm", L(0))
call("fsopen", 430, 430, b"tmpfs", L(0))
call("fsconfig", 431, 431, L(-1), L(0), None, None, L(0))  # EBADF
call("fsmount", 432, 432, L(-1), L(0), L(0))
call("fspick", 433, 433, L(-100), b"/tmp", L(0))
call("mount_setattr", 442, 442, L(-100), b"/tmp", L(0), None, L(0))  # EINVAL: size 0
call("open_tree_attr", 467, 467, L(-100), b"/tmp", L(0x80000), None, L(0))
call("bpf", 321, 280, L(0), None, L(0))  # EINVAL
call("perf_event_open", 298, 241, None, L(0), L(-1), L(-1), L(0))  # EFAULT
call("userfaultfd", 323, 282, L(1))  # UFFD_USER_MODE_ONLY: a descriptor where unprivileged use is off
call("keyctl", 250, 219, L(0), L(-3), L(1))
"""


async def test_the_mount_api_and_other_kernel_surface_are_refused_outright(pool: SandboxPool) -> None:
    """The capped /tmp is a mount of a namespace the program's own user namespace owns, over bwrap's
    uncapped one: only the missing CAP_SYS_ADMIN kept ``umount2`` from reaching it, and a kernel bug that
    lent the capability back would have. The program's seccomp filter refuses the mount API and namespace
    calls outright (and ``bpf``, ``perf_event_open``, ``userfaultfd``: kernel attack surface the host's
    sysctls alone decided, user-mode ``userfaultfd`` was open here), whatever the capabilities."""
    if os.uname().machine not in ("x86_64", "aarch64"):
        pytest.skip("the filter's syscall table covers x86_64 and aarch64")
    out = await run(pool, KERNEL_SURFACE)
    lines = out.splitlines()
    assert len(lines) == 17, out
    for line in lines:
        assert line.split()[1:] == ["-1", "1"], out  # EPERM


# bwrap on a host that lends the sandbox no capability: every `--cap-add CAP` pair is dropped.
NO_CAPS_BWRAP = """#!/bin/sh
skip=0
for a in "$@"; do
    shift
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    if [ "$a" = --cap-add ]; then skip=1; continue; fi
    set -- "$@" "$a"
done
exec {bwrap} "$@"
"""


async def test_a_host_that_refuses_the_cap_still_runs_code_and_says_so() -> None:
    """Where the guest cannot mount its own tmpfs, the sandbox keeps every other layer and reports the
    missing cap (in /ready's message and stats, and in the identity: other verdicts, other cache keys)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("needs bubblewrap")
    # Not pytest's tmp_path: the runs' private uids must be able to execute it.
    tmp = Path(tempfile.mkdtemp(prefix="rewardhub-nocaps-"))
    tmp.chmod(0o755)
    wrapper = tmp / "bwrap"
    wrapper.write_text(NO_CAPS_BWRAP.format(bwrap=bwrap))
    wrapper.chmod(0o755)
    pool = SandboxPool(workers=1, max_queued=16, limits=Limits(), bwrap=str(wrapper), tmp_max_files=CAP)
    try:
        await pool.start()
        assert pool.level == "bubblewrap", pool.message
        assert pool.tmp_max_files == 0 and pool.stats()["tmp_max_files"] == 0
        assert "no cap on the files in /tmp" in pool.message and "unshare" in pool.message, pool.message
        assert "|tmp_files=0|" in pool.identity()
        out = await run(pool, FILL)
        assert f"/tmp {2 * CAP} None" in out, out
    finally:
        await pool.close()
        shutil.rmtree(tmp, ignore_errors=True)


def test_the_cap_is_part_of_the_sandbox_identity() -> None:
    """Verdicts depend on it (a program creating many files passes under one cap, fails under another),
    so rewards that run code are cached apart per cap."""

    def identity(cap: int) -> str:
        return SandboxPool(workers=1, max_queued=1, limits=Limits(), tmp_max_files=cap).identity()

    assert identity(100) != identity(10_000)
    assert identity(100) == identity(100)
