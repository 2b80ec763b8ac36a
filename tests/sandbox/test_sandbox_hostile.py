"""Hostile programs against the real bubblewrap sandbox: nothing reaches the host, nothing survives,
nothing takes the service down. Programs run through the SandboxFusion endpoint, whose response shows
their raw output, and through the `code` reward.
"""

from __future__ import annotations

import os
import random
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import ROOT, make_settings, running_app
from rewardhub.sandbox.runner import process_state

SECRET = "rewardhub-test-secret-7f3a9c"


async def run(
    client: httpx.AsyncClient, code: str, *, language: str = "python", timeout: float = 5.0
) -> dict[str, Any]:
    r = await client.post(
        "/compat/sandboxfusion/run_code",
        json={"code": code, "language": language, "run_timeout": timeout, "compile_timeout": 10},
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["status"] in ("Success", "Failed"), body
    return body


@pytest.fixture(scope="module", params=["warm", "fresh"])
async def client(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    """Every hostile program twice: in a warm sandbox (a fork of a long-lived one, the default) and in a
    fresh sandbox per run (REWARDHUB_SANDBOX_REUSE_RUNS=0)."""
    reuse = 1000 if request.param == "warm" else 0
    async with running_app(make_settings(sandbox_reuse_runs=reuse)) as c:
        sandbox = c.app.state.runtime.sandbox  # type: ignore[attr-defined]
        assert sandbox.reuse_runs == reuse, sandbox.message
        yield c


def out(body: dict[str, Any]) -> str:
    rr = body["run_result"] or {}
    return (rr.get("stdout") or "") + (rr.get("stderr") or "")


def stray_processes(client: httpx.AsyncClient, marker: str) -> list[str]:
    """Host processes whose command line contains ``marker`` or that run under one of this service's
    sandbox uids (other test runs on the host have their own uid blocks and markers)."""
    pool = client.app.state.runtime.sandbox  # type: ignore[attr-defined]
    uids = pool.uids
    assert len(uids) > 0
    # A warm slot's bwrap and zygote stay between runs; anything else of a sandbox uid is a leftover.
    idle = pool.warm_pids()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in idle:
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            uid = entry.stat().st_uid
        except OSError:
            continue
        if process_state(int(entry.name)) in (None, b"Z"):
            continue  # gone, or dead and waiting for its (host) parent to reap it: nothing runs
        if marker in cmdline or uid in uids:
            found.append(f"{entry.name} uid={uid} {cmdline[:80]}")
    return found


async def test_isolation_level_is_reported(client: httpx.AsyncClient) -> None:
    assert (await client.get("/health")).json()["sandbox"] == "bubblewrap"
    sandbox = (await client.get("/ready")).json()["checks"]["sandbox"]
    assert sandbox["isolation"] == "bubblewrap" and sandbox["ok"] and "python" in sandbox["languages"]


async def test_no_network(client: httpx.AsyncClient) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.2)
        port = listener.getsockname()[1]
        code = f"""
import socket
for target in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
    try:
        socket.create_connection(target, timeout=1).close()
        print("CONNECTED", target)
    except OSError as exc:
        print("blocked", target, exc.errno)
try:
    socket.getaddrinfo("example.com", 80)
    print("RESOLVED")
except OSError:
    print("no dns")
print(sorted(n for _, n in socket.if_nameindex()))
"""
        body = await run(client, code)
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody reached the host's loopback
    text = out(body)
    assert "CONNECTED" not in text and "RESOLVED" not in text and text.count("blocked") == 3
    assert "['lo']" in text  # a private network namespace with only its own loopback


async def test_service_environment_and_files_are_invisible(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWARDHUB_TEST_SECRET", SECRET)  # in the service process's environment
    code = f"""
import os
print(sorted(os.environ))
found = []
for path in ["/proc/self/environ", "/proc/1/environ", "/proc/1/cmdline"]:
    try:
        found.append(open(path, "rb").read())
    except OSError as exc:
        print("denied", path, exc.errno)
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            found.append(open(f"/proc/{{pid}}/environ", "rb").read())
        except OSError:
            pass
print("LEAK" if any(b"{SECRET}" in f for f in found) else "no secret")
for path in ["{ROOT / "pyproject.toml"}", "/etc/shadow", "/etc/passwd", "/root", "{ROOT}", "/home"]:
    try:
        if os.path.isdir(path):
            print("LISTED", path, os.listdir(path))
        else:
            print("READ", path, open(path).read()[:40])
    except OSError as exc:
        print("denied", path, exc.errno)
print("root:", sorted(os.listdir("/")))
"""
    body = await run(client, code)
    text = out(body)
    assert SECRET not in text and "LEAK" not in text and "no secret" in text
    assert "READ" not in text and "LISTED" not in text and "[project]" not in text
    assert "REWARDHUB" not in text
    assert "root: ['bin', 'dev', 'etc', 'lib', 'lib64', 'proc', 'rh', 'sbin', 'tmp', 'usr']" in text


async def test_writes_outside_tmp_fail_and_tmp_is_capped(client: httpx.AsyncClient) -> None:
    targets = [
        "/usr/pwned",
        "/etc/pwned",
        "/rh/rh_guest.py",
        "/pwned",
        str(ROOT / "pwned"),
        "/proc/sys/kernel/hostname",
    ]
    code = f"""
import os
for path in {targets!r}:
    try:
        with open(path, "w") as f:
            f.write("x")
        print("WROTE", path)
    except OSError as exc:
        print("denied", path, exc.errno)
open("/tmp/ok", "w").write("fine")
print("tmp ok")
try:
    with open("/tmp/big", "wb") as f:
        for _ in range(4096):
            f.write(b"x" * (1 << 20))
    print("WROTE 4 GiB")
except OSError as exc:
    print("capped", exc.errno)
"""
    text = out(await run(client, code, timeout=10))
    assert "WROTE" not in text and "tmp ok" in text and "capped" in text
    assert not (ROOT / "pwned").exists() and not Path("/usr/pwned").exists()


async def test_empty_files_in_tmp_are_capped_in_number(client: httpx.AsyncClient) -> None:
    """An empty file costs a tmpfs no bytes, only kernel memory (an inode and a dentry): a program
    creating them for its whole time limit pinned hundreds of MB. Past REWARDHUB_SANDBOX_TMP_MAX_FILES
    the OS refuses the next one (ENOSPC) and the program goes on."""
    cap = client.app.state.runtime.sandbox.tmp_max_files  # type: ignore[attr-defined]
    assert cap > 0
    code = f"""
n, err = 0, None
try:
    while n < {2 * cap}:
        open(f"/tmp/empty-{{n}}", "w").close()
        n += 1
except OSError as exc:
    err = exc.errno
print("created", n, "errno", err)
"""
    body = await run(client, code, timeout=20)
    assert body["status"] == "Success", body
    assert f"created {cap - 1} errno 28" in out(body)  # the program's own source is the other one


async def test_fork_bomb_is_contained(client: httpx.AsyncClient) -> None:
    code = """
import os
n = 0
try:
    while n < 100000:
        if os.fork() == 0:
            while True:
                pass
        n += 1
except OSError as exc:
    print("fork refused after", n, exc.errno)
"""
    body = await run(client, code, timeout=3)
    # it ends with its program: "Finished", not cut at its 3 s limit waiting on the spinning children
    # that hold its output pipes (the sandbox's own verdict, where a 60 s wall-clock bound on the request
    # was at a loaded host's mercy and never saw a run held to its limit); every child is killed below
    assert body["run_result"]["status"] == "Finished", body["run_result"]
    assert "fork refused after" in out(body)
    n = int(out(body).split("after")[1].split()[0])
    assert n <= 64 + 4  # REWARDHUB_SANDBOX_MAX_PROCESSES (+ the guest and bwrap)
    assert not stray_processes(client, "fork refused")


async def test_memory_bomb_is_reported(client: httpx.AsyncClient) -> None:
    body = await run(client, "x = bytearray(8 * 1024**3)\nprint('allocated')")
    assert body["status"] == "Failed" and "allocated" not in out(body)
    assert body["run_result"]["memory_limit_exceeded"] is True


async def test_infinite_loop_hits_the_time_limit(client: httpx.AsyncClient) -> None:
    code = (
        "import resource\nprint(resource.getrlimit(resource.RLIMIT_CPU), flush=True)\nwhile True:\n    pass\n"
    )
    body = await run(client, code, timeout=1)
    rr = body["run_result"]
    assert body["status"] == "Failed" and rr["status"] == "TimeLimitExceeded", rr
    # Held to its 1 s, not the default 10 s: the limits the sandbox gave the program, as the program read
    # them (its CPU seconds, soft and hard, from the same run_timeout as its wall-clock deadline), and
    # its CPU time, which the kernel stops at the hard one whatever the load (the sandbox's wall-clock
    # measure of the run, bounded at 6 s, was at a loaded host's mercy).
    assert rr["stdout"] == "(1, 2)\n", rr
    assert rr["cpu_time"] <= 2 + 0.1, rr


async def test_500mb_of_output_is_cut_at_the_cap(client: httpx.AsyncClient) -> None:
    body = await run(
        client, "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(500):\n    sys.stdout.write(chunk)\n"
    )
    rr = body["run_result"]
    assert rr["output_truncated"] is True
    # Killed at the cap (SIGKILL), not left to write its 500 MB (it would exit 0) nor stopped by its
    # time limit: what a 10 s bound on the whole request checked, with no clock a loaded host can fail.
    assert rr["return_code"] == -9 and rr["status"] != "TimeLimitExceeded", rr | {"stdout": "..."}
    assert len(rr["stdout"]) <= 1 << 20  # REWARDHUB_SANDBOX_OUTPUT_LIMIT_BYTES


async def test_killing_the_parent_and_everyone_changes_nothing(client: httpx.AsyncClient) -> None:
    code = """
import os, signal
for target in (os.getppid(), 1):
    try:
        os.kill(target, signal.SIGKILL)
    except OSError as exc:
        print("kill", target, "failed", exc.errno)
try:
    os.kill(-1, signal.SIGKILL)
except OSError as exc:
    print("kill -1 failed", exc.errno)
print("still here")
"""
    body = await run(client, code)
    # every kill refused (EPERM), and the program went on
    assert body["status"] == "Success", body
    lines = body["run_result"]["stdout"].splitlines()
    assert lines[1:] == ["kill 1 failed 1", "kill -1 failed 1", "still here"], lines
    assert lines[0].startswith("kill ") and lines[0].endswith(" failed 1"), lines
    bash = await run(client, "kill -9 $PPID; kill -9 -1; echo survived", language="bash")
    # (the run's status was all that was checked, Success or Failed, which the run helper asserts already)
    rr = bash["run_result"]
    assert bash["status"] == "Success" and rr["stdout"] == "survived\n", bash
    assert rr["stderr"].count("Operation not permitted") == 2, rr


async def test_no_daemon_survives_a_run(client: httpx.AsyncClient) -> None:
    marker = f"1234.{random.randrange(10**6):06d}"  # unique: other test runs may share this host
    code = f"""
import os, subprocess, time
subprocess.Popen(["nohup", "sleep", "{marker}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "{marker}"])
    os._exit(0)
time.sleep(0.2)
print("detached")
"""
    body = await run(client, code)
    assert "detached" in out(body)
    bash = await run(
        client,
        f"(setsid sleep {marker} &) ; nohup sleep {marker} >/dev/null 2>&1 & disown; echo ok",
        language="bash",
    )
    assert "ok" in out(bash)
    time.sleep(0.2)
    assert not stray_processes(client, marker)


async def test_service_is_still_up_after_the_hostile_suite(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/v1/score",
        json={
            "reward": "code",
            "items": [
                {
                    "response": "print(sum(map(int, input().split())))",
                    "reference": {"cases": [{"stdin": "2 3", "stdout": "5"}]},
                }
            ],
        },
    )
    assert r.status_code == 200 and r.json()["results"][0]["score"] == 1.0
    assert (await client.get("/ready")).status_code == 200


async def test_a_program_cannot_signal_its_judge(client: httpx.AsyncClient) -> None:
    """Kill, stop, prlimit, a pidfd or a file owner's SIGIO aimed at the judge, its group, PID 1 or
    everyone must fail (a warm run's judge is not PID 1; a CPU limit set with prlimit kills even PID 1),
    and the tests still run to a verdict."""
    attack = """
import os, resource, signal
judge = os.getppid()
refused = []
for target in (judge, 1, -1, -os.getpgid(judge)):
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(target, sig)
        except OSError as exc:
            refused.append(exc.errno)
try:
    resource.prlimit(judge, resource.RLIMIT_CPU, (0, 0))
except OSError as exc:
    refused.append(exc.errno)
try:
    signal.pidfd_send_signal(os.pidfd_open(judge), signal.SIGKILL)
except OSError as exc:
    refused.append(exc.errno)
import fcntl, struct
r, w = os.pipe()
try:  # make the pipe signal its "owner", the judge, with SIGKILL when data arrives
    fcntl.fcntl(r, fcntl.F_SETOWN, judge)
    fcntl.fcntl(r, 10, signal.SIGKILL)  # F_SETSIG
    fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)
    os.write(w, b"x")
except OSError as exc:
    refused.append(exc.errno)
try:
    fcntl.ioctl(r, 0x8901, struct.pack("i", judge))  # FIOSETOWN
except OSError as exc:
    refused.append(exc.errno)
"""
    body = await run(client, attack + "print(len(refused))\n")
    assert out(body).strip().splitlines()[-1] == "12", out(body)  # all refused by the seccomp filter
    solution = attack + "\ndef add(a, b):\n    return a + b\n"
    r = await client.post(
        "/v1/score",
        json={
            "reward": "code",
            "items": [
                {"response": solution, "reference": {"tests": "assert add(1, 2) == 3\nassert add(2, 2) == 5"}}
            ],
        },
    )
    result = r.json()["results"][0]
    assert result["valid"] is True, result
    assert result["score"] == 0.5  # the judge lived to record one pass and one failure


async def test_nothing_a_run_leaves_reaches_the_next_one(client: httpx.AsyncClient) -> None:
    """Files in /tmp (one in an unreadable directory) and /dev/shm are gone for every later run (a warm
    slot wipes them; each slot is visited), and the rest of /dev cannot be written at all."""
    leave = """
import os
os.makedirs("/tmp/left/deep")
open("/tmp/left/deep/f", "w").write("x")
os.chmod("/tmp/left", 0)
open("/tmp/left-file", "w").write("x")
open("/dev/shm/left-shm", "w").write("x")
try:
    open("/dev/left-dev", "w")
except OSError as exc:
    print("dev refused", exc.errno)
"""
    body = await run(client, leave)
    assert "dev refused 30" in out(body)  # EROFS
    workers = client.app.state.runtime.sandbox.workers  # type: ignore[attr-defined]
    for _ in range(workers + 1):
        seen = await run(client, "import os\nprint(sorted(os.listdir('/tmp') + os.listdir('/dev/shm')))")
        assert "left" not in out(seen), out(seen)


async def test_ipc_objects_do_not_outlive_a_run(client: httpx.AsyncClient) -> None:
    """No System V shared-memory segment outlives a run (the filter refuses creating one; one left behind
    would end the warm slot); later runs see none."""
    body = await run(client, "import ctypes\nprint('shmid', ctypes.CDLL(None).shmget(0, 4096, 0o1600))")
    assert "shmid" in out(body)
    workers = client.app.state.runtime.sandbox.workers  # type: ignore[attr-defined]
    for _ in range(workers + 1):
        seen = await run(client, "print(len(open('/proc/sysvipc/shm').read().splitlines()))")
        assert out(seen).strip() == "1", out(seen)  # the header line only


async def test_no_message_queue_or_key_carries_bytes_to_a_later_run(client: httpx.AsyncClient) -> None:
    """A warm slot's runs share its IPC and user namespaces: a POSIX message queue or a key in the user
    keyring (neither a file nor a System V object) carried one run's bytes (its hidden stdin, say) to the
    next program of the slot. The untrusted process cannot create either."""
    leave = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
rt = ctypes.CDLL("librt.so.1", use_errno=True)
mq = rt.mq_open(b"/left-mq", os.O_CREAT | os.O_RDWR, 0o600, None)
print("mq", mq, ctypes.get_errno(), flush=True)
if mq >= 0:
    rt.mq_send(mq, b"left-bytes", L(10), 0)
for ring in (-4, -5):  # the user and user-session keyrings
    key = libc.syscall(L(248), b"user", b"left-key", b"left-bytes", L(10), L(ring))  # add_key
    print("key", key, ctypes.get_errno(), flush=True)
"""
    body = await run(client, leave)
    assert "mq -1 1" in out(body), out(body)  # EPERM
    assert out(body).count("key -1 1") == 2, out(body)
    read = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
rt = ctypes.CDLL("librt.so.1", use_errno=True)
mq = rt.mq_open(b"/left-mq", os.O_RDWR, 0o600, None)
if mq >= 0:
    buf = ctypes.create_string_buffer(8192)
    print("got", buf.raw[: max(rt.mq_receive(mq, buf, L(8192), None), 0)], flush=True)
for ring in (-4, -5):
    key = libc.syscall(L(250), L(10), L(ring), b"user", b"left-key", L(0))  # keyctl(KEYCTL_SEARCH)
    buf = ctypes.create_string_buffer(100)
    if key > 0:
        print("got", buf.raw[: libc.syscall(L(250), L(11), L(key), buf, L(100))], flush=True)
print("read")
"""
    workers = client.app.state.runtime.sandbox.workers  # type: ignore[attr-defined]
    for _ in range(workers + 1):
        seen = await run(client, read)
        assert "read" in out(seen), out(seen)
        assert "left-bytes" not in out(seen), out(seen)


async def test_processes_left_by_a_case_cannot_turn_the_next_case_into_a_sandbox_error(
    client: httpx.AsyncClient,
) -> None:
    """Children that keep forking while their program exits filled the run's process limit with zombies
    (killed between cases, never reaped): the runner's fork for the next case failed, and a wrong program
    made its item `invalid: sandbox_error` (dropped from training) instead of scoring 0.0."""
    # The children start forking only once the program has made all eight: racing it for the process
    # limit, they once left its own os.fork() a BlockingIOError (its case failed by chance, not by the
    # sandbox), mostly when it lost the core right after a fork on a loaded machine.
    spawn = """
import os, time
r, w = os.pipe()
for _ in range(8):
    if os.fork() == 0:
        os.close(w)
        os.read(r, 1)  # end of file once the program has closed its end: every child made
        while True:
            try:
                if os.fork() == 0:
                    time.sleep(60)
            except OSError:
                pass
os.close(w)
time.sleep(0.3)
"""
    echo = {"cases": [{"stdin": str(k), "stdout": str(k)} for k in range(3)]}
    for tail, mask in (("print(0)\n", "100"), ("print(input())\n", "111")):
        r = await client.post(
            "/v1/score",
            json={
                "reward": {"name": "code"},
                "items": [{"response": spawn + tail, "reference": echo}],
                "options": {"use_cache": False},
            },
        )
        result = r.json()["results"][0]
        assert result["valid"] and result["details"]["pass_mask"] == mask, result


async def test_nothing_set_on_tmp_itself_reaches_the_next_run(client: httpx.AsyncClient) -> None:
    """A warm slot wiped what /tmp and /dev/shm hold, not the directories themselves: extended attributes
    set on them (64 KiB a value, tmpfs keeps user.* ones), their mode and their times (and those of
    /dev/pts, also the sandbox's) carried one run's bytes to the next program of the slot."""
    leave = """
import os
for f in os.listdir("/tmp"):
    os.unlink("/tmp/" + f)  # the wipe then changes nothing of /tmp's times
for d in ("/tmp", "/dev/shm", "/dev/pts", "/dev/pts/ptmx"):
    try:  # /dev/pts is the sandbox's on this host's bubblewrap; where it is not, it cannot be changed
        if d.startswith("/dev/pts"):
            os.chmod(d, 0o700)
        else:
            os.setxattr(d, "user.left", b"left-bytes")
            os.chmod(d, 0o1777)
        os.utime(d, (4102444800, 1234567))
    except PermissionError:
        assert d.startswith("/dev/pts")
print("left")
"""
    assert "left" in out(await run(client, leave))
    read = """
import os
for d in ("/tmp", "/dev/shm", "/dev/pts", "/dev/pts/ptmx"):
    st = os.stat(d)
    print(d, oct(st.st_mode & 0o7777), st.st_atime, st.st_mtime, os.listxattr(d) if d[5:8] != "pts" else [])
"""
    workers = client.app.state.runtime.sandbox.workers  # type: ignore[attr-defined]
    for _ in range(workers + 1):
        seen = out(await run(client, read))
        for line in seen.splitlines():
            # the times the run set, not their digits anywhere (a directory's own time may hold them)
            assert not {float(t) for t in line.split()[2:4]} & {1234567.0, 4102444800.0}, seen
            assert line.split()[1] in ("0o755", "0o666") and line.endswith("[]"), seen


async def test_no_inode_flag_set_on_tmp_reaches_the_next_run(client: httpx.AsyncClient) -> None:
    """chattr flags are the directory's too: its owner may set nodump and noatime on a tmpfs directory
    (FS_IOC_SETFLAGS, no capability needed), and a warm slot left them on /tmp and /dev/shm, two bits
    each from one run to the next program of the slot."""
    flags = """
import array, fcntl, os
def flags(d, value=None):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        buf = array.array("i", [value or 0])
        fcntl.ioctl(fd, 0x40086602 if value is not None else 0x80086601, buf, True)  # FS_IOC_{SET,GET}FLAGS
        return buf[0]
    finally:
        os.close(fd)
"""
    leave = """
for d in ("/tmp", "/dev/shm"):
    flags(d, 0x40 | 0x80)  # FS_NODUMP_FL | FS_NOATIME_FL
    print(d, flags(d))
"""
    assert out(await run(client, flags + leave)).split() == ["/tmp", "192", "/dev/shm", "192"]
    workers = client.app.state.runtime.sandbox.workers  # type: ignore[attr-defined]
    for _ in range(workers + 1):
        seen = out(await run(client, flags + "print(flags('/tmp'), flags('/dev/shm'))"))
        assert seen.split() == ["0", "0"], seen


async def test_memory_outside_the_address_space_limit_is_refused(client: httpx.AsyncClient) -> None:
    """RLIMIT_AS bounds what a process maps, not what it holds in a memfd or a System V IPC object: under
    a 256 MiB limit one process held 512 MiB in memfds (64 MiB each, one per open file) and 512 MiB in
    shared-memory segments attached, filled and detached one at a time, without end."""
    code = r"""
import ctypes, os
try:
    fd = os.memfd_create("m")
    for _ in range(300):
        os.write(fd, b"x" * (1 << 20))
    print("memfd held", os.fstat(fd).st_size >> 20, flush=True)
except OSError as exc:
    print("memfd refused", exc.errno, flush=True)
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for get, args in ((libc.shmget, (0, 128 << 20, 0o1600)), (libc.semget, (0, 100, 0o1600)),
                  (libc.msgget, (0, 0o1600))):
    print(get.__name__, get(*args), ctypes.get_errno(), flush=True)
"""
    r = await client.post(
        "/compat/sandboxfusion/run_code",
        json={"code": code, "language": "python", "run_timeout": 10, "memory_limit_MB": 256},
    )
    text = out(r.json())
    assert "memfd refused 1" in text, text  # EPERM
    for name in ("shmget", "semget", "msgget"):
        assert f"{name} -1 1" in text, text


async def test_secret_memory_outside_the_address_space_limit_is_refused(client: httpx.AsyncClient) -> None:
    """``memfd_secret`` is a memfd by another name: its pages belong to the file, not to a mapping, so
    under a 256 MiB limit one process held 512 MiB in them (one file per open file, each as large as
    RLIMIT_FSIZE, filled through windows mapped and unmapped one at a time). It is refused as
    ``memfd_create`` is, whether or not the host enables secret memory."""
    if os.uname().machine not in ("x86_64", "aarch64"):
        pytest.skip("the filter's syscall table covers x86_64 and aarch64")
    code = r"""
import ctypes, mmap, os, resource
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
size, window, held = resource.getrlimit(resource.RLIMIT_FSIZE)[0], 4 << 20, 0
while held < (512 << 20):
    fd = libc.syscall(ctypes.c_long(447), ctypes.c_long(0))  # memfd_secret, both ABIs
    if fd < 0:
        print("memfd_secret refused", ctypes.get_errno(), flush=True)
        break
    os.ftruncate(fd, size)
    for offset in range(0, size, window):
        m = mmap.mmap(fd, window, offset=offset)
        m.write(b"x" * window)
        m.close()
        held += window
print("held", held >> 20, flush=True)
"""
    r = await client.post(
        "/compat/sandboxfusion/run_code",
        json={"code": code, "language": "python", "run_timeout": 10, "memory_limit_MB": 256},
    )
    text = out(r.json())
    assert "memfd_secret refused 1" in text and "held 0" in text, text  # EPERM, before any memory


async def test_a_run_stays_on_its_own_core(client: httpx.AsyncClient) -> None:
    """Each slot's runs are pinned to a core of their own, but a program could widen its affinity to
    every core and there, with a session per busy child (a scheduling group each), starve the program
    of a concurrent item into wall-clock timeouts: a correct program scored 0.0 (found in review, on 2
    cores). The untrusted process cannot change an affinity."""
    pool = client.app.state.runtime.sandbox  # type: ignore[attr-defined]
    if not pool._cpus:
        pytest.skip("runs are not pinned on this host")
    code = """
import os
before = sorted(os.sched_getaffinity(0))
try:
    os.sched_setaffinity(0, range(os.cpu_count()))
except OSError as exc:
    print("refused", exc.errno)
print(before, sorted(os.sched_getaffinity(0)))
"""
    text = out(await run(client, code))
    assert "refused 1" in text, text
    before, after = text.strip().splitlines()[-1].split("] [")
    assert before + "]" == "[" + after and after.count(",") == 0, text


async def test_no_kernel_thread_of_a_run_leaves_its_core(client: httpx.AsyncClient) -> None:
    """io_uring's SQPOLL thread is a thread of the run that the kernel places where the ring's creator
    asks (IORING_SETUP_SQ_AFF), not on the run's pinned core: a run pinned to core 0 used 656 ms of core 1
    in 2 s reading /dev/zero through its ring, the starvation the refused ``sched_setaffinity`` prevents
    (found in review, on 2 cores). The untrusted process cannot set up a ring at all."""
    code = """
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = bytearray(120)
others = sorted(set(range(os.cpu_count())) - os.sched_getaffinity(0))
# IORING_SETUP_SQPOLL, and IORING_SETUP_SQ_AFF on a core the run is not pinned to where there is one
struct.pack_into("III", params, 8, 2 | (4 if others else 0), others[0] if others else 0, 1000)
ring = (ctypes.c_char * 120).from_buffer(params)
fd = libc.syscall(ctypes.c_long(425), ctypes.c_long(8), ring)  # io_uring_setup, on both ABIs
if fd < 0:
    print("refused", ctypes.get_errno())
for t in os.listdir("/proc/self/task"):
    comm = open(f"/proc/self/task/{t}/comm").read().strip()
    cpus = [line.split()[1] for line in open(f"/proc/self/task/{t}/status") if line.startswith("Cpus_allowed_list")]
    print(comm, cpus)
"""
    text = out(await run(client, code))
    assert "refused 1" in text, text  # EPERM
    assert "iou-sqp" not in text, text
