"""SandboxFusion's /run_code wire format, as verl's and ROLL's code scorers send and read it."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import httpx
import pytest

from conftest import hold_the_service
from rewardhub.admission import Admission
from rewardhub.errors import Overloaded
from rewardhub.security import ANONYMOUS, Caller
from waiting import until

SF_RESULT_KEYS = {"status", "execution_time", "return_code", "stdout", "stderr"}
SF_RESPONSE_KEYS = {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"}


def verl_request(code: str, stdin: str, language: str = "python") -> dict[str, Any]:
    """Exactly what verl's sandbox_fusion utils post for one test case."""
    return {
        "compile_timeout": 10,
        "run_timeout": 10,
        "code": code,
        "stdin": stdin,
        "language": language,
        "files": {},
        "fetch_files": [],
    }


@pytest.mark.parametrize("path", ["/compat/sandboxfusion/run_code", "/run_code"])
async def test_verl_style_python_with_stdin(client: httpx.AsyncClient, path: str) -> None:
    code = "n = int(input())\nprint(sum(range(n + 1)))\n"
    r = await client.post(path, json=verl_request(code, "10\n"))
    assert r.status_code == 200
    body = r.json()
    assert SF_RESPONSE_KEYS <= set(body)
    assert body["status"] == "Success" and body["compile_result"] is None
    run = body["run_result"]
    assert SF_RESULT_KEYS <= set(run)
    assert run["status"] == "Finished" and run["return_code"] == 0 and run["stdout"] == "55\n"
    assert isinstance(run["execution_time"], float)
    # verl's own success test: status Success, run Finished, stdout matches the expected output
    assert str(run["stdout"]).rstrip("\n") == "55"


async def test_failures_map_to_sandboxfusion_statuses(client: httpx.AsyncClient) -> None:
    crash = (await client.post("/run_code", json=verl_request("raise ValueError('x')", ""))).json()
    assert crash["status"] == "Failed" and crash["run_result"]["return_code"] == 1
    assert "ValueError" in crash["run_result"]["stderr"]
    tle = (
        await client.post("/run_code", json={**verl_request("while True: pass", ""), "run_timeout": 1})
    ).json()
    assert tle["status"] == "Failed" and tle["run_result"]["status"] == "TimeLimitExceeded"
    cerr = (await client.post("/run_code", json=verl_request("int main( {", "", "cpp"))).json()
    assert cerr["status"] == "Failed" and cerr["run_result"] is None
    assert cerr["compile_result"]["status"] == "Finished" and cerr["compile_result"]["return_code"] != 0
    ok_cpp = (
        await client.post(
            "/run_code",
            json=verl_request(
                '#include <cstdio>\nint main(){int x;scanf("%d",&x);printf("%d\\n",x*x);}', "7", "cpp"
            ),
        )
    ).json()
    assert ok_cpp["status"] == "Success" and ok_cpp["run_result"]["stdout"] == "49\n"
    assert ok_cpp["compile_result"]["status"] == "Finished"
    node = (await client.post("/run_code", json=verl_request("console.log(6*7)", "", "nodejs"))).json()
    assert node["status"] == "Success" and node["run_result"]["stdout"] == "42\n"
    unknown = (await client.post("/run_code", json=verl_request("x", "", "cobol"))).json()
    assert unknown["status"] == "SandboxError" and "cobol" in unknown["message"]


async def test_files_and_fetch_files(client: httpx.AsyncClient) -> None:
    body = {
        **verl_request("print(open('data/in.txt').read().upper())\nopen('out.txt', 'w').write('done')", ""),
        "files": {"data/in.txt": base64.b64encode(b"hello").decode()},
        "fetch_files": ["out.txt", "missing.txt"],
    }
    r = (await client.post("/run_code", json=body)).json()
    assert r["run_result"]["stdout"] == "HELLO\n"
    assert base64.b64decode(r["files"]["out.txt"]) == b"done"
    assert "missing.txt" not in r["files"]
    # A file name outside the working directory is refused before anything runs. (The program was `x`,
    # and "Failed" was accepted too: its NameError alone answered that, the name refused or not.)
    for name in ("../x", "../../etc/x", "/tmp/x", "data/../../x"):
        bad = (
            await client.post("/run_code", json={**verl_request("print('ran')", ""), "files": {name: "eA=="}})
        ).json()
        assert bad["status"] == "SandboxError" and bad["run_result"] is None, (name, bad)
        assert f"bad file name {name!r}" in bad["message"], (name, bad)


async def test_a_python_program_imports_the_modules_sent_with_it(client: httpx.AsyncClient) -> None:
    """SandboxFusion runs `python main.py` in the directory of the request's files, so a program imports
    a module sent among them. Here `python3 -I` left the script's directory off sys.path and the import
    failed (found in review)."""
    body = {
        **verl_request("from helper import f\nprint(f())", ""),
        "files": {"helper.py": base64.b64encode(b"def f():\n    return 42\n").decode()},
    }
    r = (await client.post("/run_code", json=body)).json()
    assert r["status"] == "Success", r
    assert r["run_result"]["stdout"] == "42\n"


async def test_no_isolation_means_sandbox_error(make_app: Any) -> None:
    async with make_app(sandbox_bwrap="/nonexistent/bwrap") as c:
        health = (await c.get("/health")).json()
        assert health["sandbox"] == "none"
        r = (await c.post("/run_code", json=verl_request("print(1)", ""))).json()
        assert r["status"] == "SandboxError" and "bubblewrap" in r["message"]
        scored = (
            await c.post(
                "/v1/score",
                json={
                    "reward": "code",
                    "items": [
                        {"response": "print(1)", "reference": {"cases": [{"stdin": "", "stdout": "1"}]}}
                    ],
                },
            )
        ).json()
        item = scored["results"][0]
        assert not item["valid"] and item["reason"] == "sandbox_error"
        assert "REWARDHUB_SANDBOX_ALLOW_UNISOLATED" in item["details"]["message"]
        # The catalog says so before any item is sent, so a trainer refuses to start.
        catalog = {r["name"]: r for r in (await c.get("/v1/rewards")).json()["rewards"]}
        for name in ("code", "python_grader"):
            assert "bubblewrap" in catalog[name]["unavailable"], name
        assert catalog["math"]["unavailable"] is None


async def test_a_working_sandbox_leaves_the_code_rewards_available(make_app: Any) -> None:
    async with make_app(sandbox_bwrap="/nonexistent/bwrap", sandbox_allow_unisolated=True) as c:
        catalog = {r["name"]: r for r in (await c.get("/v1/rewards")).json()["rewards"]}
        assert catalog["code"]["unavailable"] is None and catalog["python_grader"]["unavailable"] is None


async def test_rlimits_only_mode_is_explicit_and_reported(make_app: Any) -> None:
    async with make_app(sandbox_bwrap="/nonexistent/bwrap", sandbox_allow_unisolated=True) as c:
        assert (await c.get("/health")).json()["sandbox"] == "rlimits_only"
        ready = (await c.get("/ready")).json()["checks"]["sandbox"]
        assert "UNISOLATED" in ready["message"]
        r = (await c.post("/run_code", json=verl_request("print(input()[::-1])", "abc"))).json()
        assert r["status"] == "Success" and r["run_result"]["stdout"] == "cba\n"
        loop = (
            await c.post("/run_code", json={**verl_request("while True: pass", ""), "run_timeout": 1})
        ).json()
        assert loop["run_result"]["status"] == "TimeLimitExceeded"


async def test_a_full_service_past_the_wait_is_a_504_verl_retries(make_app: Any) -> None:
    """A full service answered 200 ``SandboxError``, which verl takes as final (the test case fails, a
    correct program scores 0); verl retries only a 504. Past the wait for room it is a 504 with
    ``Retry-After`` (never a 429, which verl does not retry), the limit named in the body."""
    async with make_app(
        max_inflight_items=2, sandbox_bwrap="/nonexistent/bwrap", sandboxfusion_room_wait_s=0.2
    ) as c:
        busy = await hold_the_service(c, 2, hold_s=3.0)  # (two waits of 0.2 s for room come next)
        for path in ("/run_code", "/compat/sandboxfusion/run_code"):
            r = await c.post(path, json=verl_request("print(1)", ""))
            assert r.status_code == 504, r.text
            assert int(r.headers["Retry-After"]) >= 1
            body = r.json()
            assert body["status"] == "SandboxError" and "REWARDHUB_MAX_INFLIGHT_ITEMS" in body["message"]
            assert body["run_result"] is None
        await busy


async def test_a_full_sandbox_queue_past_the_wait_is_a_504(make_app: Any) -> None:
    async with make_app(sandbox_workers=1, sandbox_queue_max_items=0, sandboxfusion_room_wait_s=0.2) as c:
        busy = asyncio.create_task(
            c.post("/run_code", json=verl_request("import time\ntime.sleep(3)\nprint(1)", ""))
        )
        sandbox = c.app.state.runtime.sandbox  # type: ignore[attr-defined]
        await until(lambda: sandbox.stats()["running"] == 1)  # the slot is taken (a fixed 1 s: a race)
        r = await c.post("/run_code", json=verl_request("print(2)", ""))
        assert r.status_code == 504, r.text
        assert int(r.headers["Retry-After"]) >= 1
        assert r.json()["status"] == "SandboxError" and "SANDBOX_QUEUE_MAX_ITEMS" in r.json()["message"]
        done = (await busy).json()
        assert done["status"] == "Success", done


async def test_a_call_to_a_full_sandbox_waits_for_a_slot(make_app: Any) -> None:
    """A run that finds every sandbox slot taken waits (REWARDHUB_SANDBOXFUSION_ROOM_WAIT_S, 5 s) for one to free instead
    of failing at once: verl would have scored this correct program's test case as failed."""
    async with make_app(sandbox_workers=1, sandbox_queue_max_items=0) as c:
        busy = asyncio.create_task(
            c.post("/run_code", json=verl_request("import time\ntime.sleep(1)\nprint(1)", ""))
        )
        sandbox = c.app.state.runtime.sandbox  # type: ignore[attr-defined]
        await until(lambda: sandbox.stats()["running"] == 1)  # the slot is taken: this run must wait
        r = await c.post("/run_code", json=verl_request("print(2)", ""))
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "Success" and r.json()["run_result"]["stdout"] == "2\n"
        done = (await busy).json()
        assert done["status"] == "Success", done


@pytest.mark.parametrize(("wait_s", "status"), [(0.0, 504), (60.0, 200)])
async def test_the_wait_for_room_is_the_setting(
    make_app: Any, monkeypatch: pytest.MonkeyPatch, wait_s: float, status: int
) -> None:
    """REWARDHUB_SANDBOXFUSION_ROOM_WAIT_S bounds the wait (it was a module constant of 5 s): at 0 a call
    that finds the service full answers 504 at once, though room frees right after its first refusal; a
    longer wait takes that room and runs the program. The room is freed on that refusal (an event, not a
    clock), so the outcome is the setting's alone."""
    async with make_app(max_inflight_items=1, sandboxfusion_room_wait_s=wait_s) as c:
        admission: Admission = c.app.state.admission  # type: ignore[attr-defined]
        refused = asyncio.Event()
        check = admission.check

        def watched(caller: Caller, n_items: int) -> None:
            try:
                check(caller, n_items)
            except Overloaded:
                refused.set()
                raise

        monkeypatch.setattr(admission, "check", watched)
        async with admission.admit(ANONYMOUS, 1):  # the service is full
            call = asyncio.create_task(c.post("/run_code", json=verl_request("print(3)", "")))
            await refused.wait()
        r = await call
        assert r.status_code == status, r.text
        if status == 504:
            assert int(r.headers["Retry-After"]) >= 1
            assert (
                r.json()["status"] == "SandboxError" and "REWARDHUB_MAX_INFLIGHT_ITEMS" in r.json()["message"]
            )
        else:
            assert r.json()["status"] == "Success" and r.json()["run_result"]["stdout"] == "3\n"


async def test_a_null_file_is_no_file(client: httpx.AsyncClient) -> None:
    """SandboxFusion's ``files`` values are Optional and its restore_files skips a null one; here a
    null became an empty file, so ``os.path.exists('skip.txt')`` printed True."""
    code = "import os\nprint(os.path.exists('skip.txt'), open('keep.txt').read())"
    body = {
        **verl_request(code, ""),
        "files": {"skip.txt": None, "keep.txt": base64.b64encode(b"k").decode()},
    }
    r = (await client.post("/run_code", json=body)).json()
    assert r["status"] == "Success" and r["run_result"]["stdout"] == "False k\n"
