"""The `code` reward's contract: languages, cases, scoring modes, valid vs invalid, extraction."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import httpx
import pytest

from conftest import score_results
from rewardhub.rewards.code import outputs_match
from rewardhub.rewards.code_extract import extract_code
from rewardhub.sandbox import LANGUAGES


async def _one(client: httpx.AsyncClient, response: str, reference: Any, **config: Any) -> dict[str, Any]:
    r = await client.post(
        "/v1/score",
        json={
            "reward": {"name": "code", "config": config},
            "items": [{"response": response, "reference": reference}],
            "options": {"use_cache": False},
        },
    )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()["results"][0]
    return result


ADD_CASES = {
    "cases": [
        {"stdin": "1 2\n", "stdout": "3\n"},
        {"stdin": "40 2", "stdout": "42"},
        {"stdin": "-1 1", "stdout": "0"},
    ]
}

PROGRAMS = {
    "python": "a, b = map(int, input().split())\nprint(a + b)\n",
    "c": '#include <stdio.h>\nint main(void){long a,b; if(scanf("%ld %ld",&a,&b)!=2) return 1; printf("%ld\\n",a+b); return 0;}\n',
    "cpp": "#include <iostream>\nint main(){long a,b; std::cin>>a>>b; std::cout<<a+b<<std::endl;}\n",
    "javascript": "const [a,b]=require('fs').readFileSync(0,'utf8').trim().split(/\\s+/).map(Number);\nconsole.log(a+b);\n",
    "bash": "read a b\necho $((a + b))\n",
}


@pytest.mark.parametrize("language", sorted(PROGRAMS))
async def test_stdin_stdout_cases_in_every_language(client: httpx.AsyncClient, language: str) -> None:
    tag = {"cpp": "cpp", "javascript": "js"}.get(language, language)
    good = await _one(client, f"```{tag}\n{PROGRAMS[language]}```", {"language": language, **ADD_CASES})
    assert good["score"] == 1.0, good
    assert good["details"]["language"] == LANGUAGES[language].name
    # An off-by-one program fails every case, validly, with the reason per case.
    wrong = PROGRAMS[language].replace("a+b", "a+b+1").replace("a + b", "a + b + 1")
    bad = await _one(client, f"```{tag}\n{wrong}```", {"language": language, **ADD_CASES})
    assert bad["valid"] and bad["score"] == 0.0
    assert "wrong answer" in bad["details"]["tests"][0]["message"]


async def test_compile_errors_stop_early_with_reason_format(client: httpx.AsyncClient) -> None:
    c = await _one(client, "```c\nint main( { return 0; }\n```", {"language": "c", **ADD_CASES})
    assert c["valid"] and c["score"] == 0.0 and c["reason"] == "format"
    assert "error" in c["details"]["compile_error"]
    py = await _one(client, "def f(:\n  pass", {"tests": "assert f(1) == 1"})
    assert py["score"] == 0.0 and py["reason"] == "format" and "SyntaxError" in py["details"]["compile_error"]
    # The same for a Python program scored by stdin/stdout cases (it used to crash in every case instead).
    cases = await _one(client, "print(int(input()) * 2\n", {"language": "python", **ADD_CASES})
    assert cases["valid"] and cases["score"] == 0.0 and cases["reason"] == "format", cases
    assert "SyntaxError" in cases["details"]["compile_error"] and "tests" not in cases["details"]
    # A program that compiles (with a SyntaxWarning, even) is run as before.
    warned = "a, b = map(int, input().split())\nprint(a + b if a is not 1 or True else 0)\n"
    assert (await _one(client, warned, {"language": "python", **ADD_CASES}))["score"] == 1.0
    # JavaScript and bash too: a syntax error was a crash in every case (reason none), not reason format
    # as the docstring says of "a program that does not compile" (found in review).
    for language, broken in (("javascript", "console.log((1 + 2);\n"), ("bash", "if then fi\n")):
        bad = await _one(client, f"```{language}\n{broken}```", {"language": language, **ADD_CASES})
        assert bad["valid"] and bad["score"] == 0.0 and bad["reason"] == "format", bad
        assert "tests" not in bad["details"], bad
        good = await _one(
            client, f"```{language}\n{PROGRAMS[language]}```", {"language": language, **ADD_CASES}
        )
        assert good["score"] == 1.0, good


async def test_partial_credit_weights_and_all_or_nothing(client: httpx.AsyncClient) -> None:
    solution = "def sq(x):\n    return x * x if x < 3 else 0\n"
    tests = ["assert sq(1) == 1", "assert sq(2) == 4", "assert sq(3) == 9", "assert sq(4) == 16"]
    plain = await _one(client, solution, {"tests": tests})
    assert plain["score"] == 0.5 and plain["details"]["passed"] == 2
    weighted = await _one(client, solution, {"tests": tests, "weights": [1, 1, 2, 0]})
    assert weighted["score"] == pytest.approx(0.5)
    weighted = await _one(client, solution, {"tests": tests, "weights": [3, 1, 0, 0]})
    assert weighted["score"] == 1.0
    strict = await _one(client, solution, {"tests": tests}, all_or_nothing=True)
    assert strict["score"] == 0.0 and strict["components"]["pass_rate"] == 0.5
    bad_weights = await _one(client, solution, {"tests": tests, "weights": [1, 1]})
    assert not bad_weights["valid"] and bad_weights["reason"] == "parse_error"


async def test_crashes_timeouts_and_memory_are_the_models_fault(client: httpx.AsyncClient) -> None:
    loop = await _one(
        client,
        "def f(x):\n    while x:\n        pass\n    return 1\n",
        {"tests": "assert f(0) == 1\nassert f(1) == 1\nassert f(0) == 1\n"},
        timeout_s=1.0,
    )
    # the infinite loop fails its test by timeout; the ones before it passed; the rest did not run
    assert loop["valid"] and loop["score"] == pytest.approx(1 / 3)
    assert loop["details"]["tests"][1]["message"].startswith("timeout")
    assert loop["details"]["tests"][2]["message"].startswith("not run")
    # The limit is the solution's CPU time, the wall clock capped at 3x it: a test that waits 1.5 s with
    # no CPU passes a 1 s limit (as one slowed by a loaded host does: its 0 was cached as a "real"
    # timeout; found in review), one that waits 30 s is still a timeout.
    sleepy = await _one(
        client,
        "import time\ndef f(x):\n    time.sleep(1.5 if x else 30)\n    return 1\n",
        {"tests": "assert f(1) == 1\nassert f(0) == 1\n"},
        timeout_s=1.0,
    )
    assert sleepy["valid"] and sleepy["score"] == 0.5, sleepy
    assert sleepy["details"]["tests"][1].get("message") == "timeout (wall clock)", sleepy["details"]
    boom = await _one(client, "def f(x):\n    return [0] * (10 ** 10)\n", {"tests": ["assert f(1) == 1"]})
    assert boom["valid"] and boom["score"] == 0.0 and "MemoryError" in boom["details"]["tests"][0]["message"]
    crash = await _one(client, "import os\ndef f(x):\n    os.abort()\n", {"tests": ["assert f(1) == 1"]})
    assert crash["valid"] and crash["score"] == 0.0
    loop_case = await _one(
        client, "while True:\n    pass\n", {"cases": [{"stdin": "", "stdout": "1"}]}, timeout_s=1.0
    )
    assert loop_case["valid"] and loop_case["details"]["tests"][0]["message"].startswith("timeout")
    # Cases the item's total time left no room for were not run: they did not exit with status 0.
    spent = await _one(
        client,
        "while True:\n    pass\n",
        {"cases": [{"stdin": str(k), "stdout": "1"} for k in range(3)]},
        timeout_s=1.0,
        total_timeout_s=1.5,
    )
    messages = [t["message"] for t in spent["details"]["tests"]]
    assert spent["valid"] and messages[-1] == "not run: total time limit", messages
    assert not any(m.startswith("exit status") for m in messages), messages


# A correct program whose wall time is past its limit while its CPU time is not, as a loaded host makes
# one that waits for a core: it sleeps 2.5 s (no CPU) against a 2 s limit. Judged by the wall clock it is
# a timeout on any host (the sleep alone is past the limit); judged by its CPU time it passes unless the
# host delays its start and exit by more than 3.5 s (the 6 s wall cap). (It used to get there by forking
# spinning processes onto its core, which a loaded host could push past the cap: a chance failure.)
SLEEPY_CASE = """import time
n = int(input())
time.sleep(2.5)
print(n * 2)
"""


@pytest.mark.parametrize("reuse_runs", [1000, 0], ids=["warm", "fresh"])
async def test_a_case_s_time_limit_is_the_program_s_cpu_time(make_app: Any, reuse_runs: int) -> None:
    """A case's limit is the program's CPU time, as an assert test's is: on a loaded host a correct
    program was a wall-clock timeout, cached as its own 0.0 (found in review)."""
    async with make_app(sandbox_reuse_runs=reuse_runs) as c:
        slow = await _one(c, SLEEPY_CASE, {"cases": [{"stdin": "21", "stdout": "42"}]}, timeout_s=2.0)
    assert slow["valid"] and slow["score"] == 1.0, slow["details"]


# One program, four behaviours by its stdin: spin forever, sleep forever, use more CPU time than the limit
# (in a child it waits for: the CPU time is counted when it is reaped) and still finish with the right
# answer, or answer at once.
LIMITS = """import os, sys, time
what = input().strip()
if what == "spin":
    while True:
        pass
if what == "sleep":
    time.sleep(1000)
if what == "over":
    pid = os.fork()
    if pid == 0:
        start = time.process_time()
        while time.process_time() - start < 0.8:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
print(1)
"""


@pytest.mark.parametrize("reuse_runs", [1000, 0], ids=["warm", "fresh"])
async def test_a_case_past_its_cpu_time_or_its_wall_cap_is_a_timeout(make_app: Any, reuse_runs: int) -> None:
    """Judged by CPU time, a case still ends: a busy loop at its CPU limit, a sleep at the wall cap (3x
    the limit: the case after it still runs within the item's 30 s), and a program that finished with
    more CPU time than its limit is a timeout, as judges count it."""
    cases = [{"stdin": what, "stdout": "1"} for what in ("spin", "sleep", "over", "ok")]
    async with make_app(sandbox_reuse_runs=reuse_runs) as c:
        result = await _one(c, LIMITS, {"cases": cases}, timeout_s=0.5, total_timeout_s=30)
    messages = [t.get("message", "") for t in result["details"]["tests"]]
    assert result["valid"] and messages == ["timeout (0.5s)"] * 3 + [""], result["details"]


async def test_a_solution_printing_past_the_output_cap_still_passes(client: httpx.AsyncClient) -> None:
    """The solution's prints are not its answer: past the service's stderr cap (64 KiB) they are dropped.
    They made every later print raise BrokenPipeError inside the function under test, so a correct
    solution with a debug print in a loop failed all tests after the cap (found in review)."""
    chatty = (
        "def add(a, b):\n    for i in range(3000):\n        print('debug', i, 'x' * 40)\n    return a + b\n"
    )
    tests = "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(0, 0) == 0\n"
    result = await _one(client, chatty, {"tests": tests})
    assert result["valid"] and result["score"] == 1.0, result["details"]["tests"]
    wrong = await _one(client, chatty.replace("a + b", "a - b"), {"tests": tests})
    assert wrong["valid"] and wrong["details"]["pass_mask"] == "001"
    assert "debug 1" in wrong["details"]["stderr"]  # what was kept is still reported


def _installed_package(python: str) -> str | None:
    """A package installed for the sandbox's interpreter (site-packages, not the standard library)."""
    find = (
        "import pkgutil, site, sys\n"
        "for m in pkgutil.iter_modules(site.getsitepackages()):\n"
        "    if m.ispkg and m.name.isidentifier() and not m.name.startswith('_')"
        " and m.name not in sys.stdlib_module_names:\n"
        "        print(m.name)\n"
    )
    names = subprocess.run([python, "-I", "-c", find], capture_output=True, text=True, timeout=60).stdout
    for name in names.split()[:20]:
        if (
            subprocess.run([python, "-I", "-c", f"import {name}"], capture_output=True, timeout=60).returncode
            == 0
        ):
            return name
    return None


async def test_assert_style_tests_import_what_stdin_stdout_programs_can(client: httpx.AsyncClient) -> None:
    """A solution importing a package installed for the sandbox's interpreter (numpy, say) failed every
    assert-style test with ModuleNotFoundError (the judge's interpreter starts without `site`) while the
    same program passed as a stdin/stdout case (found in review)."""
    package = _installed_package(client.app.state.runtime.sandbox.python_name)  # type: ignore[attr-defined]
    if package is None:
        pytest.skip("no third-party package is installed for the sandbox's interpreter")
    solution = f"import {package}\ndef f():\n    return {package}.__name__\n"
    as_case = await _one(client, solution + "print(f())\n", {"cases": [{"stdin": "", "stdout": package}]})
    assert as_case["score"] == 1.0, as_case["details"]
    as_tests = await _one(client, solution, {"tests": f"assert f() == {package!r}\n"})
    assert as_tests["score"] == 1.0, as_tests["details"]
    missing = await _one(
        client, "import no_such_module_rh\ndef f():\n    return 1\n", {"tests": "assert f() == 1"}
    )
    assert missing["valid"] and missing["score"] == 0.0
    assert "ModuleNotFoundError" in missing["details"]["load_error"]


async def test_a_request_cannot_raise_the_memory_limit_past_the_server_s_cap(make_app: Any) -> None:
    """A request's memory_mb (up to 64 GiB) replaced the server's limit outright: a batch asking 64 GiB
    for each of a run's 64 processes could take the host's memory from every other run. It is capped
    by REWARDHUB_SANDBOX_MAX_MEMORY_MB, as time limits are by REWARDHUB_SANDBOX_MAX_TIMEOUT_S."""
    hog = "```python\nb = bytearray(600 << 20)\nprint(len(b) > 0)\n```"
    case = {"cases": [{"stdin": "", "stdout": "True"}]}
    async with make_app(sandbox_memory_mb=256, sandbox_max_memory_mb=384) as c:
        capped = await _one(c, hog, case, memory_mb=4096)
        assert capped["valid"] and capped["score"] == 0.0, capped["details"]
        assert "MemoryError" in str(capped["details"]), capped["details"]
    async with make_app(sandbox_memory_mb=256) as c:  # the default cap, 8 GiB, lets it ask for 4
        allowed = await _one(c, hog, case, memory_mb=4096)
        assert allowed["score"] == 1.0, allowed["details"]


async def test_a_memory_limit_judges_the_program_not_its_compiler_or_runtime(
    client: httpx.AsyncClient,
) -> None:
    """`memory_mb` is the program's address-space limit. It also applied to g++, which needs about 256
    MiB for <bits/stdc++.h> (every C++ program a compile error, 0.0 with reason format, below that), and
    to node, whose V8 reserves about 750 MiB of address space for itself (every JavaScript program killed
    at start, 0.0, under a 512 MiB limit; one holding 150 MB of objects under the default 1 GiB; found in
    review). Compilers now get their own allowance, and node the address space V8 reserves, its heap
    capped at the limit."""
    cpp = "#include <bits/stdc++.h>\nusing namespace std;\nint main(){long a,b;cin>>a>>b;cout<<a+b<<endl;}\n"
    compiled = await _one(client, f"```cpp\n{cpp}```", {"language": "cpp", **ADD_CASES}, memory_mb=128)
    assert compiled["score"] == 1.0, compiled["details"]
    js = PROGRAMS["javascript"]
    small = await _one(client, f"```js\n{js}```", {"language": "javascript", **ADD_CASES}, memory_mb=256)
    assert small["score"] == 1.0, small["details"]

    def objects(n: str) -> str:
        return f"```js\nconst a = []; for (let i = 0; i < {n}; i++) a.push({{i, s: 'x' + i}}); console.log(3);\n```"

    three = {"language": "javascript", "cases": [{"stdin": "", "stdout": "3"}]}
    fits = await _one(client, objects("2e6"), three, timeout_s=20)  # the default limit, 1 GiB
    assert fits["score"] == 1.0, fits["details"]
    # ... and the limit still holds for the program: its heap past 256 MiB, a C++ vector of 800 MB
    js_hog = await _one(client, objects("5e6"), three, memory_mb=256, timeout_s=20)
    assert js_hog["valid"] and js_hog["score"] == 0.0, js_hog["details"]
    assert "killed by signal" in js_hog["details"]["tests"][0]["message"], js_hog["details"]
    hog_cpp = '#include <vector>\n#include <cstdio>\nint main(){std::vector<long> v(100000000, 1); printf("%ld\\n", v[5] + 2);}\n'
    cpp_hog = await _one(
        client,
        f"```cpp\n{hog_cpp}```",
        {"language": "cpp", "cases": [{"stdin": "", "stdout": "3"}]},
        memory_mb=256,
    )
    assert cpp_hog["valid"] and cpp_hog["score"] == 0.0, cpp_hog["details"]
    assert "signal" in cpp_hog["details"]["tests"][0]["message"], cpp_hog["details"]


async def test_a_program_cannot_turn_its_cases_into_a_sandbox_error(client: httpx.AsyncClient) -> None:
    """Each case's stdin was written to a file in /tmp, where the previous case's program could put a
    directory or a dangling symlink first: the runner failed, and the item was `invalid: sandbox_error`
    (dropped from training) instead of the program's score (found in review)."""
    echo = {"cases": [{"stdin": str(k), "stdout": str(k)} for k in range(3)]}
    for mess in (
        "os.makedirs('.rh_stdin', exist_ok=True)",
        "os.path.lexists('.rh_stdin') or os.symlink('/no/such', '.rh_stdin')",
    ):
        right = await _one(client, f"import os\n{mess}\nprint(input())\n", echo)
        assert right["valid"] and right["score"] == 1.0, right
        wrong = await _one(client, f"import os\n{mess}\nprint(0)\n", echo)
        assert wrong["valid"] and wrong["details"]["pass_mask"] == "100", wrong


async def test_a_flood_of_output_in_every_case_is_not_kept_by_the_service(client: httpx.AsyncClient) -> None:
    """Every case's stdout and stderr came back whole, up to the 1 MiB output cap each: a program printing
    1 MiB to both in each of 150 cases made the service hold ~400 MB for one item (its RSS grew by 1.3
    GB), the cores' worth of such items at once exhausting its memory (found in review). A case's stdout
    is now kept up to what its comparison can need (a multiple of the expected output, 64 KiB at least)
    and its stderr only as the tail the messages show."""
    pool = client.app.state.runtime.sandbox  # type: ignore[attr-defined]
    received: list[int] = []
    run_guest = pool.run_guest

    async def observed(*args: Any, **kwargs: Any) -> Any:
        raw = await run_guest(*args, **kwargs)
        received.append(len(raw.stdout))
        return raw

    pool.run_guest = observed
    try:
        flood = "import sys\nsys.stdout.write('x' * (1 << 20))\nsys.stderr.write('y' * (1 << 20))\n"
        cases = {"cases": [{"stdin": "", "stdout": "1"}] * 150}
        flooded = await _one(client, flood, cases, total_timeout_s=120)
        big = "print('7' * 200_000)\nimport sys\nsys.stderr.write('debug ' * 50_000 + 'end')\n"
        right = await _one(client, big, {"cases": [{"stdin": "", "stdout": "7" * 200_000}] * 3})
    finally:
        pool.run_guest = run_guest
    assert flooded["valid"] and flooded["score"] == 0.0
    assert flooded["details"]["tests"][0]["message"] == "output limit exceeded", flooded["details"]["tests"][
        0
    ]
    assert received[0] < 32 << 20, received  # 13 MB here; ~400 MB before
    # An output as long as the expected one is compared whole; a failing case still shows stderr's tail.
    assert right["score"] == 1.0, right["details"]


async def test_assert_style_tests_in_javascript_and_bash(client: httpx.AsyncClient) -> None:
    """They run in the program's own process; each failure says what happened to it."""
    js_tests = "const assert = require('assert');\nassert.strictEqual(f(2), 4);\n"
    ok = await _one(
        client, "```js\nfunction f(x) { return 2 * x; }\n```", {"language": "js", "tests": js_tests}
    )
    assert ok["score"] == 1.0, ok
    wrong = await _one(
        client, "```js\nfunction f(x) { return x; }\n```", {"language": "js", "tests": js_tests}
    )
    assert (
        wrong["valid"]
        and wrong["score"] == 0.0
        and wrong["details"]["tests"][0]["message"].startswith("exit")
    )
    early = await _one(
        client,
        "```js\nfunction f(x) { return x; }\nprocess.exit(0);\n```",
        {"language": "js", "tests": js_tests},
    )
    assert (
        early["score"] == 0.0
        and "exited before the tests finished" in early["details"]["tests"][0]["message"]
    )
    # console.assert only prints in Node: a failed one must fail the tests, a solution must not disarm it
    console_tests = "console.assert(f(2) === 4, 'f(2)');\n"
    for program, want in [
        ("function f(x) { return 2 * x; }", 1.0),
        ("function f(x) { return x; }", 0.0),
        ("function f(x) { return x; }\nconsole.assert = () => {};", 0.0),
        (
            "function f(x) { return x; }\n"
            "Object.defineProperty(console, 'assert', {value: () => {}, writable: false, configurable: false});",
            0.0,
        ),
    ]:
        res = await _one(client, f"```js\n{program}\n```", {"language": "js", "tests": console_tests})
        assert res["valid"] and res["score"] == want, (program, res)
    bash_tests = '[ "$(f 2)" = 4 ] || exit 1\n'
    f = "f() { echo $(($1 * 2)); }\n"
    runs = {
        "killed": f + "kill -9 $$\n",
        "flood": f + "yes\n",
        "ok": f,
    }
    messages = {}
    for name, program in runs.items():
        result = await _one(client, f"```bash\n{program}```", {"language": "bash", "tests": bash_tests})
        assert result["valid"], result
        messages[name] = (result["score"], result["details"]["tests"][0].get("message", ""))
    assert messages["ok"] == (1.0, "")
    assert messages["killed"][0] == 0.0 and messages["killed"][1].startswith("killed by signal 9"), messages
    assert messages["flood"] == (0.0, "output limit exceeded"), messages


async def test_bash_tests_that_end_in_exit_0_pass_a_correct_solution(client: httpx.AsyncClient) -> None:
    """Bash test files often end in `exit 0`, their own word that the tests passed: the completion marker
    after them was never reached, and every solution, a correct one too, failed them (found in review).
    Their `exit 0` prints it now; the solution's own `exit 0` still does not."""
    checks = '[ "$(add 1 2)" = 3 ] || { echo "add 1 2 failed"; exit 1; }\n'
    references: list[dict[str, Any]] = [
        {"tests": checks + "echo 'all passed'\nexit 0\n"},
        {"tests": checks + "exit 0  # done\n"},
        {"tests": 'if [ "$(add 2 2)" = 4 ]; then exit 0; else exit 1; fi\n'},
        {"tests": 'check() { [ "$(add 2 2)" = 4 ] && exit 0; exit 1; }\ncheck\n'},
        {"tests": [checks + "exit 0", '[ "$(add 40 2)" = 42 ] || exit 1\nexit 0;']},
    ]
    programs = {
        "add() { echo $(($1 + $2)); }\n": 1.0,
        "add() { echo 0; }\n": 0.0,
        "add() { echo $(($1 + $2)); }\nexit 0\n": 0.0,  # the tests never run
        "add() { exit 0; }\n": 0.0,
    }
    items = [
        {"response": f"```bash\n{program}```", "reference": {"language": "bash", **reference}}
        for reference in references
        for program in programs
    ]
    results = await score_results(client, "code", items)
    got = [
        (item["reference"]["tests"], item["response"], r["score"])
        for item, r in zip(items, results, strict=True)
    ]
    want = [
        (reference["tests"], f"```bash\n{p}```", score)
        for reference in references
        for p, score in programs.items()
    ]
    assert got == want


async def test_javascript_and_bash_test_lists_are_one_test_a_string(client: httpx.AsyncClient) -> None:
    """A list of JavaScript or bash tests ran as one program, one verdict for all of them (any failure
    failed every test), with `weights` ignored, while Python's list is one test a string. Each string
    is now a test of its own, in a run of its own after the solution and the setup: a failure, a crash,
    an early exit or a loop fails that test only, and the weights weigh them (found in review)."""
    js = (
        "```js\nfunction f(x) { if (x === 3) for (;;) {} if (x === 4) process.exit(0); "
        "return x === 5 ? 0 : 2 * x; }\n```"
    )
    reference = {
        "language": "javascript",
        "setup": "const assert = require('assert');",  # its declarations are seen by every test
        "tests": [
            "assert.strictEqual(f(1), 2);",
            "assert.strictEqual(f(2), 4);",
            "assert.strictEqual(f(3), 6);",
            "assert.strictEqual(f(4), 8);",
            "assert.strictEqual(f(5), 10);",
            "// a test of only a comment passes",
        ],
        "weights": [1, 3, 1, 1, 1, 1],
    }
    result = await _one(client, js, reference, timeout_s=0.5)
    assert result["valid"] and result["reason"] is None, result
    details = result["details"]
    assert details["pass_mask"] == "110001", details
    assert result["score"] == pytest.approx(5 / 8), result
    messages = [t.get("message", "") for t in details["tests"]]
    assert messages[2].startswith("timeout"), messages
    assert messages[3] == "the program exited before the tests finished", messages
    assert messages[4].startswith("exit status 1") and "ERR_ASSERTION" in messages[4], messages
    assert details["tests"][0]["test"] == "assert.strictEqual(f(1), 2);"

    bash = '```bash\nf() { [ "$1" = 3 ] && kill -9 $$; echo $(($1 * 2)); }\n```'
    reference = {
        "language": "bash",
        "tests": [
            '[ "$(f 1)" = 2 ] || exit 1',
            "f 3 >/dev/null",
            '[ "$(f 2)" = 5 ] || exit 1',
            "# only a comment",
        ],
        "weights": [2, 1, 1, 1],
    }
    result = await _one(client, bash, reference)
    assert result["valid"] and result["details"]["pass_mask"] == "1001", result
    assert result["score"] == pytest.approx(3 / 5), result
    messages = [t.get("message", "") for t in result["details"]["tests"]]
    assert messages[1].startswith("killed by signal 9") and messages[2].startswith("exit status 1"), messages
    # a solution that reads the standard input itself leaves no test to select: it fails, never runs another
    reader = "```bash\nread -r n\nf() { echo $(($1 * 2)); }\n```"
    result = await _one(
        client, reader, {"language": "bash", "tests": ['[ "$(f 1)" = 2 ]', '[ "$(f 2)" = 4 ]']}
    )
    assert result["valid"] and result["details"]["pass_mask"] == "00", result
    assert "no test selected" in result["details"]["tests"][0]["message"], result


async def test_weights_for_a_string_of_javascript_or_bash_tests_are_a_parse_error(
    client: httpx.AsyncClient,
) -> None:
    """A string of JavaScript or bash tests is one test: weights for several were silently ignored. They
    are a parse_error that says to give a list; one weight for the one test is fine (found in review)."""
    js = "```js\nfunction f(x) { return 2 * x; }\n```"
    tests = "if (f(2) !== 4) throw 1;\nif (f(3) !== 6) throw 1;\n"
    bad = await _one(client, js, {"language": "js", "tests": tests, "weights": [1, 2]})
    assert not bad["valid"] and bad["reason"] == "parse_error", bad
    assert "as a list" in bad["details"]["message"], bad
    one = await _one(client, js, {"language": "js", "tests": tests, "weights": [2]})
    assert one["valid"] and one["score"] == 1.0, one


async def test_a_null_language_is_the_configs(client: httpx.AsyncClient) -> None:
    """A reference whose language is null (a dataset exported with the column, empty for some rows) was
    the language "None", an unsupported item; it is the config's, as an absent one is (found in review)."""
    result = await _one(client, PROGRAMS["python"], {"language": None, **ADD_CASES})
    assert result["valid"] and result["score"] == 1.0, result
    assert result["details"]["language"] == "python"


async def test_a_null_stdin_is_no_input(client: httpx.AsyncClient) -> None:
    """A case whose stdin is null (a dataset exported with the column, empty for problems that read no
    input) made the whole item parse_error, "cases.0.stdin must be a string"; it is no input, as an
    absent stdin is."""
    cases = {"cases": [{"stdin": None, "stdout": "42\n"}, {"stdout": "42"}]}
    result = await _one(client, "print(42)\n", {"language": "python", **cases})
    assert result["valid"] and result["score"] == 1.0, result
    apps = await _one(client, "print(42)\n", {"inputs": [None], "outputs": ["42"]})
    assert apps["valid"] and apps["score"] == 1.0, apps


async def test_a_solution_that_dies_while_loading_says_why(client: httpx.AsyncClient) -> None:
    """The judge's own record of a load that ended (the solution exited, was killed, ran out of time)
    failed the check meant for the solution's words and read "protocol error" (found in review)."""
    for program, why in (
        ("import os\nos._exit(3)\ndef f():\n    return 1\n", "exited with status 3"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "killed by signal 9"),
        ("while True:\n    pass\n", "timeout"),
    ):
        result = await _one(client, program, {"tests": "assert f() == 1\n"}, timeout_s=0.5)
        assert result["valid"] and result["score"] == 0.0, result
        assert why in result["details"]["load_error"], result["details"]


async def test_javascript_tests_may_declare_what_the_solution_declares(client: httpx.AsyncClient) -> None:
    """Solution and tests are one script: the tests' `const assert = require('assert')` beside the same
    line in the solution (or any let/const both declare) was a redeclaration, a SyntaxError that failed
    a correct solution (found in review). The tests run in a block of their own."""
    solution = "const assert = require('assert');\nlet n = 2;\nfunction f(x) { return n * x; }\n"
    tests = "const assert = require('assert');\nlet n = 3;\nassert.strictEqual(f(n), 6);\n"
    result = await _one(client, f"```js\n{solution}```", {"language": "js", "tests": tests})
    assert result["valid"] and result["score"] == 1.0, result
    wrong = await _one(
        client,
        "```js\nconst assert = 1;\nfunction f(x) { return x; }\n```",
        {"language": "js", "tests": tests},
    )
    assert wrong["valid"] and wrong["score"] == 0.0 and wrong["reason"] is None, wrong


async def test_javascript_and_bash_syntax_errors_in_assert_tests_are_reason_format(
    client: httpx.AsyncClient,
) -> None:
    """A solution that does not parse was its tests' crash (reason none) with assert-style tests, while
    the same solution scored by cases, or a Python one, is reason format (found in review)."""
    for language, broken, tests in (
        ("javascript", "function f(x) { return 2 * x;\n", "if (f(2) !== 4) throw 1;\n"),
        ("bash", "f() { if then fi; }\n", '[ "$(f 2)" = 4 ] || exit 1\n'),
    ):
        result = await _one(client, f"```{language}\n{broken}```", {"language": language, "tests": tests})
        assert result["valid"] and result["score"] == 0.0 and result["reason"] == "format", result
        assert result["details"]["compile_error"], result["details"]


async def test_javascript_and_bash_reference_tests_that_do_not_parse_are_a_parse_error(
    client: httpx.AsyncClient,
) -> None:
    """The syntax check covered the solution and the tests together, so reference tests (or a setup)
    that do not parse were the model's fault, a valid 0.0 with reason format, while Python's are the
    dataset's parse_error (found in review). The reference's part of the program is checked on its own
    when the whole does not parse: broken there, parse_error, whatever the solution; a solution that
    does not parse beside good tests stays format."""
    js = "```js\nfunction f(x) { return 2 * x; }\n```"
    bash = "```bash\nf() { echo $(($1 * 2)); }\n```"
    for language, solution, reference in (
        ("javascript", js, {"tests": "if (f(2) !== 4) throw 1;\nif (f(3) !== 6 {\n"}),
        ("javascript", js, {"tests": ["if (f(2) !== 4) throw 1;", "assert.strictEqual(f(3), 6"]}),
        ("javascript", js, {"setup": "const assert = require('assert'", "tests": ["assert.ok(f(1))"]}),
        ("bash", bash, {"tests": '[ "$(f 2)" = 4 ] || exit 1\nif then fi\n'}),
        ("bash", bash, {"tests": ['[ "$(f 2)" = 4 ] || exit 1', "case $x in"]}),
    ):
        result = await _one(client, solution, {"language": language, **reference})
        assert not result["valid"] and result["reason"] == "parse_error", (reference, result)
        assert "reference" in result["details"]["message"], result
        # a solution that does not parse is still the reference's parse_error beside broken tests
        broken = solution.replace("}", "", 1) if language == "javascript" else "```bash\nf() { if; }\n```"
        result = await _one(client, broken, {"language": language, **reference})
        assert not result["valid"] and result["reason"] == "parse_error", (reference, result)
    # beside tests that parse, the solution's syntax error is its own (format), and the tests still run
    good = {"language": "javascript", "tests": ["if (f(2) !== 4) throw 1;", "if (f(3) !== 6) throw 1;"]}
    result = await _one(client, "```js\nfunction f(x) { return 2 * x;\n```", good)
    assert result["valid"] and result["reason"] == "format", result
    result = await _one(client, js, good)
    assert result["valid"] and result["score"] == 1.0, result


async def test_javascript_tests_requiring_a_module_the_sandbox_lacks_are_unsupported(
    client: httpx.AsyncClient,
) -> None:
    """JavaScript tests (or a setup) that require a package this server's node cannot load (chai, a
    file of the dataset's) failed in every run, a valid 0.0 as if the solution were wrong, while Python
    tests importing a module the sandbox lacks are unsupported (found in review). The modules the
    reference requires are resolved before the solution runs; one that is not found makes the item
    unsupported, a builtin or an installed one runs as before."""
    js = "```js\nfunction f(x) { return 2 * x; }\n```"
    for reference in (
        {"tests": "const { expect } = require('chai');\nexpect(f(2)).to.equal(4);\n"},
        {"setup": 'const h = require("./helpers");', "tests": ["if (f(2) !== 4) throw 1;"]},
    ):
        result = await _one(client, js, {"language": "javascript", **reference})
        assert not result["valid"] and result["reason"] == "unsupported", (reference, result)
        assert "require" in result["details"]["message"], result
    # builtins, with or without node:, and ones no short list names (querystring), still run, as do
    # requires in comments
    tests = (
        "// const { expect } = require('chai');\n/* require('sinon') */\n"
        "const qs = require('querystring');\nconst assert = require('node:assert');\n"
        "assert.strictEqual(qs.parse('a=' + f(2)).a, '4');\n"
    )
    result = await _one(client, js, {"language": "javascript", "tests": tests})
    assert result["valid"] and result["score"] == 1.0, result
    wrong = await _one(client, js.replace("2 * x", "x"), {"language": "javascript", "tests": tests})
    assert wrong["valid"] and wrong["score"] == 0.0, wrong


ESM_TESTS = {
    "default": "import assert from 'node:assert';\nassert.strictEqual(f(2), 4);\n",
    "named, aliased": "import {strict as assert} from 'assert';\nassert.equal(f(2), 4);\n",
    "namespace": "import * as assert from 'node:assert/strict';\nassert.equal(f(2), 4);\n",
    "default and named, over lines": (
        "import assert, {\n  deepStrictEqual as same,\n  strictEqual,\n} from 'assert';\n"
        "import { readFileSync } from 'node:fs';\nimport 'node:path';\n"
        "same([f(2)], [4]);\nstrictEqual(f(3), 6);\nassert.ok(readFileSync);\n"
    ),
}


@pytest.mark.parametrize("tests", list(ESM_TESTS.values()), ids=list(ESM_TESTS))
async def test_javascript_tests_importing_node_modules_as_an_es_module_run(
    client: httpx.AsyncClient, tests: str
) -> None:
    """Tests written as an ES module (`import assert from 'node:assert'`) were a SyntaxError in the
    function the harness runs them in, every item parse_error. Their static imports are require()
    calls of the harness's now, with the frozen assert: a correct solution passes, a wrong one fails."""
    js = "```js\nfunction f(x) { return 2 * x; }\n```"
    for t in (tests, [tests]):
        result = await _one(client, js, {"language": "javascript", "tests": t})
        assert result["valid"] and result["score"] == 1.0, result
        wrong = await _one(client, js.replace("2 * x", "x"), {"language": "javascript", "tests": t})
        assert wrong["valid"] and wrong["score"] == 0.0, wrong


async def test_javascript_tests_with_other_es_module_syntax_are_unsupported(
    client: httpx.AsyncClient,
) -> None:
    """ES module syntax the harness does not rewrite (exports, import attributes, import.meta) is the
    tests' valid syntax for a module that this harness cannot run: unsupported, saying which, not
    parse_error (the reference broken) nor the solution's format."""
    js = "```js\nfunction f(x) { return 2 * x; }\n```"
    for tests, what in (
        ("import assert from 'node:assert';\nexport const t = 1;\nassert.strictEqual(f(2), 4);\n", "export"),
        ("import data from './data.json' with { type: 'json' };\nif (f(2) !== 4) throw 1;\n", "with"),
        ("if (f(2) !== 4) throw new Error(import.meta.url);\n", "import.meta"),
    ):
        result = await _one(client, js, {"language": "javascript", "tests": tests})
        assert not result["valid"] and result["reason"] == "unsupported", result
        assert "ES module" in result["details"]["message"] and what in result["details"]["message"], result


async def test_bash_tests_calling_a_program_the_sandbox_lacks_are_unsupported(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bash tests that call a program this server lacks (jq, bc, python2) failed at `command not found` in
    every run, a valid 0.0 as if the solution were wrong (found in review), where JavaScript tests
    requiring a module node cannot load are unsupported. Such a program (one of the common ones a host
    may lack: here a name no host has, added to that list) is looked up before the solution runs; a
    test that failed with bash saying it was not found makes the item unsupported (transient)."""
    from rewardhub.rewards import code as code_reward

    tool = "rh-no-such-program"
    monkeypatch.setattr(code_reward, "_HOST_PROGRAMS", code_reward._HOST_PROGRAMS | {tool})
    double = "```bash\ndouble() { echo $(($1 * 2)); }\n```"
    for reference in (
        # the empty output left fails the test's own check (exit status 1), or the call exits 127
        {"tests": f'[ "$(double 2 | {tool})" = 4 ] || exit 1\n'},
        {"setup": f"set -e\n{tool} --init", "tests": ['[ "$(double 2)" = 4 ]']},
        {"tests": ['[ "$(double 2)" = 4 ]', f"{tool} 3 || exit 127"]},
    ):
        result = await _one(client, double, {"language": "bash", **reference})
        assert not result["valid"] and result["reason"] == "unsupported", (reference, result)
        assert tool in result["details"]["message"], result
    # a test that carried on past the missing program and passed is scored
    survived = await _one(
        client,
        double,
        {
            "language": "bash",
            "tests": [f'{tool} 2; [ "$(double 2)" = 4 ]', '[ "$(double 3)" = 5 ] || exit 1'],
        },
    )
    assert survived["valid"] and survived["score"] == 0.5, survived
    # the solution's fault stays a 0.0: it calls the missing program itself, or it lacks the function
    # the tests call (add: command not found, a name no list of host programs holds)
    own = "```bash\ndouble() { " + tool + " $1; }\n```"
    for response, tests in (
        (own, f'[ "$(double 2)" = 4 ] && {tool} --check || exit 1'),
        (own, '[ "$(double 2)" = 4 ] || exit 1'),
        (double, '[ "$(add 1 2)" = 3 ] || exit 1'),
    ):
        result = await _one(client, response, {"language": "bash", "tests": tests})
        assert result["valid"] and result["score"] == 0.0, (response, tests, result)
    # a solution cannot pass off its failure as the server's: a program the sandbox has, whose
    # `command not found` it printed, or made true by emptying PATH, is its own 0.0
    for forged in (
        "printf 'main.sh: line 3: %s: command not found\\n' so\"\"rt >&2; exit 127",
        "PATH=/nonexistent",
    ):
        response = "```bash\n" + forged + "\ndouble() { echo $(($1 * 2)); }\n```"
        result = await _one(
            client,
            response,
            {"language": "bash", "tests": '[ "$(printf 2 | sort)" = "$(double 1)" ] || exit 1'},
        )
        assert result["valid"] and result["score"] == 0.0, (forged, result)


async def test_a_bash_program_with_extglob_patterns_is_not_a_syntax_error(client: httpx.AsyncClient) -> None:
    """`bash -n` parses without running `shopt -s extglob`, so a program that turns it on before its
    @(a|b) pattern was a syntax error, reason format, though it runs and is right (found in review)."""
    program = "shopt -s extglob\nread x\ncase $x in @(1|2)) echo small;; *) echo big;; esac\n"
    cases = {
        "language": "bash",
        "cases": [{"stdin": "1", "stdout": "small"}, {"stdin": "7", "stdout": "big"}],
    }
    result = await _one(client, f"```bash\n{program}```", cases)
    assert result["valid"] and result["score"] == 1.0 and result["reason"] is None, result


async def test_weights_that_are_not_finite_numbers_are_a_parse_error(client: httpx.AsyncClient) -> None:
    """A weight of 1e400 (JSON's infinity) made the score inf/inf, NaN, and one of 10**400 (an integer
    no float holds) an OverflowError: both were the server's internal_error, not the reference's
    parse_error (found in review)."""
    solution = "def f(x):\n    return x\n"
    tests = ["assert f(1) == 1", "assert f(2) == 3"]
    for weights in ("[1e400, 1]", "[1" + "0" * 400 + ", 1]"):
        body = (
            '{"reward": "code", "options": {"use_cache": false}, "items": [{"response": '
            + json.dumps(solution)
            + ', "reference": {"tests": '
            + json.dumps(tests)
            + ', "weights": '
            + weights
            + "}}]}"
        )
        r = await client.post("/v1/score", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        result = r.json()["results"][0]
        assert not result["valid"] and result["reason"] == "parse_error", result


async def test_invalid_references_and_missing_code(client: httpx.AsyncClient) -> None:
    assert (await _one(client, "print(1)", None))["reason"] == "missing_reference"
    assert (await _one(client, "print(1)", "just a string"))["reason"] == "parse_error"
    assert (await _one(client, "print(1)", {"language": "cobol", **ADD_CASES}))["reason"] == "unsupported"
    assert (await _one(client, "print(1)", {"tests": "assert (", "entry_point": "f"}))[
        "reason"
    ] == "parse_error"
    # A setup (MBPP's test_setup_code) that does not compile is the reference's fault too: it was the
    # solution's load error, a valid 0.0 (found in review). One that runs and fails still is.
    for tests in ("assert f() == 1", ["assert f() == 1"]):
        bad_setup = await _one(client, "def f():\n    return 1\n", {"tests": tests, "setup": "x = ("})
        assert not bad_setup["valid"] and bad_setup["reason"] == "parse_error", bad_setup
        assert "setup" in bad_setup["details"]["message"]
    raising = await _one(client, "def f():\n    return 1\n", {"tests": ["assert f() == 1"], "setup": "g()"})
    assert raising["valid"] and raising["score"] == 0.0 and "NameError" in raising["details"]["load_error"]
    # HumanEval-style tests without their entry_point: nothing calls check(), so no assert would run
    # and any program at all would pass. That is the reference's fault.
    humaneval = "def check(candidate):\n    assert candidate(1) == 2\n"
    for program in ("def double(x):\n    return 0\n", "x = 1\n"):
        unnamed = await _one(client, program, {"tests": humaneval})
        assert not unnamed["valid"] and unnamed["reason"] == "parse_error", unnamed
    # Tests that call their own check() need no entry_point, under a main guard too (the tests are the
    # program): a wrong solution fails them, it does not skip them.
    for call in ("check(double)\n", "if __name__ == '__main__':\n    check(double)\n"):
        right = await _one(client, "def double(x):\n    return 2 * x\n", {"tests": humaneval + call})
        wrong = await _one(client, "def double(x):\n    return 0\n", {"tests": humaneval + call})
        assert (right["score"], wrong["score"]) == (1.0, 0.0), (call, right, wrong)
    # unittest.TestCase classes are not run by the judge (it runs assert statements): without this
    # they checked nothing and any program passed.
    unit = (
        "import unittest\nclass T(unittest.TestCase):\n    def test_it(self):\n"
        "        self.assertEqual(double(1), 2)\nif __name__ == '__main__':\n    unittest.main()\n"
    )
    unittest_style = await _one(client, "def double(x):\n    return 0\n", {"tests": unit})
    assert not unittest_style["valid"] and unittest_style["reason"] == "unsupported", unittest_style
    empty = await _one(client, "   ", {"tests": "assert True"})
    assert empty["valid"] and empty["score"] == 0.0 and empty["reason"] == "no_answer"
    fenced_only = await _one(client, "no code here", {"tests": "assert True"}, extract="fenced")
    assert fenced_only["reason"] == "no_answer"


async def test_asserts_in_a_class_of_the_tests_are_recorded(client: httpx.AsyncClient) -> None:
    """An assert in a method of a class the tests define became `__rh_t(i)`, which Python's private-name
    mangling turned into `_Checker__rh_t` inside the class: a NameError, and every solution failed all
    such tests (found in review)."""
    tests = (
        "class Checker:\n    def run(self, f):\n        assert f(1) == 2\n        assert f(2) == 4\n"
        "Checker().run(double)\nassert double(0) == 0\n"
    )
    right = await _one(client, "def double(x):\n    return 2 * x\n", {"tests": tests})
    assert right["score"] == 1.0, right["details"]
    wrong = await _one(client, "def double(x):\n    return x + 1\n", {"tests": tests})
    assert wrong["valid"] and wrong["details"]["pass_mask"] == "100", wrong["details"]


async def test_pytest_style_test_functions_are_run(client: httpx.AsyncClient) -> None:
    """Tests written as pytest functions (KodCode, AceCoder: `from solution import f`, `def test_...():`)
    were never called: their asserts sat in untaken code, and every program scored 1.0, a function
    returning 0 included; with `from solution import f` every program scored 0.0 (no module `solution`).
    Found in review. The judge now calls the test functions nothing calls, each on its own (an exception
    in one fails that one's asserts), and `solution` is the solution's namespace."""
    tests = (
        "from solution import add\n\n"
        "def test_add():\n    assert add(1, 2) == 3\n    assert add(2, 2) == 4\n\n"
        "def test_negative():\n    result = add(-1, 1)\n    assert result == 0\n\n"
        "def test_zero():\n    assert add(0, 0) == 0\n"
    )
    right = await _one(client, "def add(a, b):\n    return a + b\n", {"tests": tests})
    assert right["score"] == 1.0, right["details"]
    zero = await _one(client, "def add(a, b):\n    return 0\n", {"tests": tests})
    assert zero["valid"] and zero["details"]["pass_mask"] == "0011", zero["details"]
    # an exception outside an assert fails that function's asserts, not the next function's
    raises = "def add(a, b):\n    if a < 0:\n        raise ValueError(a)\n    return a + b\n"
    partial = await _one(client, raises, {"tests": tests})
    assert partial["details"]["pass_mask"] == "1101", partial["details"]
    assert "ValueError" in partial["details"]["tests"][2]["message"]
    # test methods of a plain class, too
    in_class = "class TestAdd:\n    def test_one(self):\n        assert add(1, 2) == 3\n"
    for program, score in (
        ("def add(a, b):\n    return a + b\n", 1.0),
        ("def add(a, b):\n    return 0\n", 0.0),
    ):
        assert (await _one(client, program, {"tests": in_class}))["score"] == score
    # pytest fixtures and set-up methods are not provided: such tests cannot be run here
    for unrunnable in (
        "def test_file(tmp_path):\n    assert add(1, 1) == 2\n",
        "class TestAdd:\n    def setup_method(self):\n        self.x = 1\n    def test_one(self):\n"
        "        assert add(self.x, 1) == 2\n",
    ):
        unsupported = await _one(client, "def add(a, b):\n    return a + b\n", {"tests": unrunnable})
        assert not unsupported["valid"] and unsupported["reason"] == "unsupported", unsupported


async def test_tests_importing_what_the_sandbox_lacks_are_unsupported(client: httpx.AsyncClient) -> None:
    """Tests that import a module the sandbox's Python does not have (`import pytest` for pytest.raises,
    numpy) stopped at their import, and every solution scored a valid 0.0 for the server's lack (found in
    review); ones importing a package installed for that Python failed the same way, the judge starting
    without site-packages. The first are now `unsupported`, the second run."""
    add = "def add(a, b):\n    return a + b\n"
    for tests in (
        "import no_such_module_rh\nassert add(1, 2) == 3\n",
        "def test_add():\n    import no_such_module_rh\n    assert add(1, 2) == 3\n",
    ):
        result = await _one(client, add, {"tests": tests})
        assert not result["valid"] and result["reason"] == "unsupported", result
        assert "no_such_module_rh" in result["details"]["message"]
    # the solution's own failing import is its failure, however it is raised
    own = await _one(
        client, "def add(a, b):\n    raise ModuleNotFoundError('x')\n", {"tests": "assert add(1, 2) == 3"}
    )
    assert own["valid"] and own["score"] == 0.0, own
    package = _installed_package(client.app.state.runtime.sandbox.python_name)  # type: ignore[attr-defined]
    if package is not None:
        uses = await _one(client, add, {"tests": f"import {package}\nassert add(1, 2) == 3\n"})
        assert uses["score"] == 1.0, uses


async def test_every_verdict_of_many_long_tests_comes_back(client: httpx.AsyncClient) -> None:
    """The judge's verdict channel was capped at 600 bytes a test (plus 64 KiB), while a test's label and
    failure message are up to 300 characters each, base64-encoded, up to 4 bytes a character: with 150
    asserts on Chinese text the list of labels alone passed the cap, was cut, and a correct solution
    scored 0.0 (found in review)."""
    word = "测试" * 140  # 280 characters, 840 bytes of UTF-8
    tests = "".join(f"assert f({word + str(k)!r}) == {len(word) + len(str(k))}\n" for k in range(150))
    right = await _one(client, "def f(s):\n    return len(s)\n", {"tests": tests})
    assert right["score"] == 1.0 and right["details"]["total"] == 150, right["details"]["pass_mask"]
    # failures with long messages, then passes: the passes at the end are not lost either
    half = "def f(s):\n    if s.endswith(('0', '2', '4', '6', '8')):\n        raise ValueError(s)\n    return len(s)\n"
    mixed = await _one(client, half, {"tests": tests})
    assert mixed["details"]["pass_mask"] == "01" * 75, mixed["details"]["pass_mask"]


async def test_code_in_an_unclosed_think_block_is_not_the_answer(client: httpx.AsyncClient) -> None:
    # A response cut off in its reasoning: the draft there is not the model's answer.
    draft = f"<think>\nA first try:\n```python\n{PROGRAMS['python']}```\nBut what about"
    cut = await _one(client, draft, {"language": "python", **ADD_CASES})
    assert cut["valid"] and cut["score"] == 0.0 and cut["reason"] == "no_answer"
    # After the answer, a new reasoning block that never closes does not replace it.
    wrong = PROGRAMS["python"].replace("a + b", "a - b")
    answered = f"<think>ok</think>\n```python\n{PROGRAMS['python']}```\n<think>\n```python\n{wrong}```"
    assert (await _one(client, answered, {"language": "python", **ADD_CASES}))["score"] == 1.0


async def test_humaneval_style_check_candidate_and_exceptions(client: httpx.AsyncClient) -> None:
    tests = (
        "def check(candidate):\n"
        "    assert candidate([3, 1, 2]) == [1, 2, 3]\n"
        "    assert candidate(()) == []\n"
        "    try:\n"
        "        candidate(None)\n"
        "    except TypeError:\n"
        "        pass\n"
        "    else:\n"
        "        assert False, 'expected TypeError'\n"
    )
    ok = await _one(client, "def srt(xs):\n    return sorted(xs)\n", {"tests": tests, "entry_point": "srt"})
    assert ok["score"] == 1.0 and ok["details"]["total"] == 3
    missing = await _one(
        client, "def other(xs):\n    return sorted(xs)\n", {"tests": tests, "entry_point": "srt"}
    )
    assert missing["valid"] and missing["score"] == 0.0


async def test_a_result_the_wall_clock_decided_is_not_cached(client: httpx.AsyncClient) -> None:
    """Cases cut off by the item's total time (a wall-clock budget, spent faster on a loaded host) were
    cached as the program's own failures; a case's timeout at its CPU limit still is (the program's)."""

    async def twice(response: str, reference: Any, **config: Any) -> list[dict[str, Any]]:
        body = {
            "reward": {"name": "code", "config": config},
            "items": [{"response": response, "reference": reference}],
        }
        return [(await client.post("/v1/score", json=body)).json()["results"][0] for _ in range(2)]

    slow = "import time\nx = input()\ntime.sleep(5)  # cut off by total time: 1 s\nprint(x)\n"
    cases = {"cases": [{"stdin": str(k), "stdout": str(k)} for k in range(3)]}
    first, second = await twice(slow, cases, timeout_s=5, total_timeout_s=1)
    assert first["valid"] and first["score"] == 0.0, first
    assert "total time limit" in str(first["details"]["tests"]), first["details"]
    assert not second["cached"] and second["score"] == 0.0, second

    tests = "assert f() == 1\nassert f() == 1\n"
    sleepy = "import time\ndef f():\n    time.sleep(5)  # assert tests, total time 1 s\n    return 1\n"
    first, second = await twice(sleepy, {"tests": tests, "entry_point": "f"}, timeout_s=5, total_timeout_s=1)
    assert first["valid"] and first["score"] == 0.0, first
    assert not second["cached"], second

    # A timeout at the CPU limit is the program's own, cached. (A host loaded enough to give the loop
    # under a third of a core makes it the wall clock's, not cached: a few tries are allowed for that.)
    spin = "x = input()\nwhile True:  # a timeout at the CPU limit: the program's own\n    pass\n"
    for _ in range(3):
        first, second = await twice(spin, {"cases": [{"stdin": "1", "stdout": "1"}]}, timeout_s=0.5)
        assert first["valid"] and first["score"] == 0.0, first
        assert second["score"] == 0.0, second
        if first["cached"] or second["cached"]:
            break
    assert first["cached"] or second["cached"], (first, second)


async def test_a_compile_cut_off_by_the_wall_clock_is_not_cached(client: httpx.AsyncClient) -> None:
    """A compile step is timed by its CPU time, its waited-for children's included; g++'s compiler
    proper is a child it has not waited for while it runs, so a long compile is stopped by the wall
    clock's cap (3x the limit), as one slowed by a loaded host is. That "compile timeout" was cached as
    the program's own format failure (found in review); it is returned but not cached."""
    body = {
        "reward": {"name": "code", "config": {"compile_timeout_s": 0.1}},
        "items": [
            {
                "response": "```cpp\n#include <bits/stdc++.h>\nint main() { std::cout << 3; }\n```",
                "reference": {"language": "cpp", "cases": [{"stdin": "", "stdout": "3"}]},
            }
        ],
    }
    first, second = [(await client.post("/v1/score", json=body)).json()["results"][0] for _ in range(2)]
    assert first["valid"] and first["score"] == 0.0 and first["reason"] == "format", first
    assert first["details"]["compile_error"] == "compile timeout", first["details"]
    assert not second["cached"] and second["reason"] == "format", second


async def test_python_tests_cut_off_by_their_wall_clock_cap_are_not_cached(client: httpx.AsyncClient) -> None:
    """A Python test (or the solution's load, timed as one) stopped at its wall-clock cap, 3x its CPU
    limit, with CPU time to spare was the judge's plain "timeout", cached as the program's own; on a
    loaded host that is a solution kept off the cores, which an idle one would pass (found in review).
    The judge says "timeout (wall clock)" for it, and the result is not cached."""

    async def twice(response: str, tests: str) -> list[dict[str, Any]]:
        body = {
            "reward": {"name": "code", "config": {"timeout_s": 0.5}},
            "items": [{"response": response, "reference": {"tests": tests}}],
        }
        return [(await client.post("/v1/score", json=body)).json()["results"][0] for _ in range(2)]

    sleepy = "import time\ndef f():\n    time.sleep(30)\n    return 1\n"
    first, second = await twice(sleepy, "assert f() == 1\n")
    assert first["valid"] and first["score"] == 0.0, first
    assert first["details"]["tests"][0]["message"] == "timeout (wall clock)", first["details"]
    assert not second["cached"] and second["score"] == 0.0, second
    loading = "import time\ntime.sleep(30)\ndef f():\n    return 1\n"
    first, second = await twice(loading, "assert f() == 1\n")
    assert first["valid"] and first["score"] == 0.0, first
    assert first["details"]["load_error"] == "timeout (wall clock)", first["details"]
    assert not second["cached"] and second["score"] == 0.0, second
    # A test that spends its CPU time is still the solution's own timeout, cached. (A host loaded enough
    # to give it under a third of a core makes it the wall clock's: a few tries are allowed for that.)
    spin = "def f():\n    while True:\n        pass\n"
    for _ in range(3):
        first, second = await twice(spin, "assert f() == 1\n")
        assert first["valid"] and first["score"] == 0.0, first
        if first["cached"] or second["cached"]:
            break
    assert first["cached"] or second["cached"], (first["details"], second["details"])
    assert second["details"]["tests"][0]["message"] == "timeout", second["details"]


async def test_javascript_and_bash_tests_cut_off_by_the_wall_clock_are_not_cached(
    client: httpx.AsyncClient,
) -> None:
    """JavaScript/bash tests run as one program limited by the item's total time; one the wall clock cut
    off with its CPU time to spare (it slept here; on a loaded host, it waited for a core) was cached as
    the program's own timeout (found in review)."""

    async def twice(response: str, reference: Any) -> list[dict[str, Any]]:
        body = {
            "reward": {"name": "code", "config": {"total_timeout_s": 1}},
            "items": [{"response": response, "reference": reference}],
        }
        return [(await client.post("/v1/score", json=body)).json()["results"][0] for _ in range(2)]

    bash = "```bash\nf() { sleep 5; echo $(($1 * 2)); }\n```"
    first, second = await twice(bash, {"language": "bash", "tests": '[ "$(f 2)" = 4 ] || exit 1\n'})
    assert first["valid"] and first["score"] == 0.0, first
    assert first["details"]["tests"][0]["message"].startswith("timeout"), first["details"]
    assert not second["cached"] and second["score"] == 0.0, second
    js = "```js\nfunction f(x) { Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5000); return 2 * x; }\n```"
    first, second = await twice(js, {"language": "javascript", "tests": "if (f(2) !== 4) throw 1;\n"})
    assert first["valid"] and first["score"] == 0.0, first
    assert not second["cached"] and second["score"] == 0.0, second


async def test_javascript_and_bash_tests_in_an_infinite_loop_are_a_cached_timeout(
    client: httpx.AsyncClient,
) -> None:
    """The one run's CPU limit was the item's total time, which the wall clock also caps: the wall clock
    always came first, so a loop was never a timeout at its CPU limit and never cached (found in review).
    The CPU limit is now a third of the total, the wall clock's cap 3x that, as a test's or a case's.
    (A host loaded enough to give the loop under a third of a core makes it the wall clock's, not
    cached: a few tries are allowed for that.)"""
    for language, program, tests in (
        ("bash", "f() { while :; do :; done; }", "f\n"),
        ("js", "function f() { for (;;) {} }", "f();\n"),
    ):
        body = {
            "reward": {"name": "code", "config": {"total_timeout_s": 3}},
            "items": [
                {
                    "response": f"```{language}\n{program}\n```",
                    "reference": {"language": language, "tests": tests},
                }
            ],
        }
        results = []
        for _ in range(6):
            result = (await client.post("/v1/score", json=body)).json()["results"][0]
            results.append(result)
            assert result["valid"] and result["score"] == 0.0, result
            assert result["details"]["tests"][0]["message"].startswith("timeout"), result
            if result["cached"]:
                break
        assert results[-1]["cached"], [r["details"] for r in results]


async def test_results_are_cached_with_limits_in_the_key(client: httpx.AsyncClient) -> None:
    item = {"response": "print(int(input()) * 2)", "reference": {"cases": [{"stdin": "21", "stdout": "42"}]}}
    body: dict[str, Any] = {"reward": "code", "items": [item]}
    first = (await client.post("/v1/score", json=body)).json()["results"][0]
    second = (await client.post("/v1/score", json=body)).json()["results"][0]
    assert second["cached"] and second["score"] == first["score"] == 1.0
    other_limits = {"reward": {"name": "code", "config": {"timeout_s": 2.0}}, "items": [item]}
    assert not (await client.post("/v1/score", json=other_limits)).json()["results"][0]["cached"]


async def test_an_idle_pool_takes_a_request_larger_than_its_queue(make_app: Any) -> None:
    """More runs than REWARDHUB_SANDBOX_QUEUE_MAX_ITEMS + workers were refused even by an idle pool,
    on every retry: /v1/score answered 429 for ever and a job (which waits for room) stayed running."""
    items = [
        {
            "response": f"```python\nprint({i})\n```",
            "reference": {"language": "python", "cases": [{"stdin": "", "stdout": str(i)}]},
        }
        for i in range(4)
    ]
    body = {"reward": "code", "items": items, "options": {"use_cache": False}}
    async with make_app(sandbox_workers=1, sandbox_queue_max_items=1) as c:
        scored = await c.post("/v1/score", json=body)
        assert scored.status_code == 200, scored.text
        assert [r["score"] for r in scored.json()["results"]] == [1.0] * 4
        job_id = (await c.post("/v1/jobs", json=body)).json()["job_id"]
        for _ in range(600):
            job = (await c.get(f"/v1/jobs/{job_id}")).json()
            if job["status"] in ("succeeded", "failed"):
                break
            await asyncio.sleep(0.05)
        assert job["status"] == "succeeded", job
        assert [r["score"] for r in job["result"]["results"]] == [1.0] * 4


def test_extraction_rules() -> None:
    py = LANGUAGES["python"]
    text = "Example:\n```python\nprint(1)\n```\nFinal:\n```py\nprint(2)\n```\nDone."
    found = extract_code(text, py)
    assert found is not None and found.code == "print(2)\n" and found.source == "fenced"
    assert extract_code("```\nx = 1\n```", py).code == "x = 1\n"  # type: ignore[union-attr]
    assert extract_code("<think>```python\nbad\n```</think>\nprint(3)", py).code.strip() == "print(3)"  # type: ignore[union-attr]
    assert extract_code("```python\nprint(4)\n", py).code == "print(4)\n"  # type: ignore[union-attr]  # cut-off fence
    # a <think> that never closes (a response cut off in its reasoning) is reasoning too
    assert extract_code("<think>\n```python\nprint(5)\n```\nhmm", py) is None
    after = extract_code("<think>a</think>\n```python\nprint(6)\n```\n<think>\n```python\nprint(7)\n```", py)
    assert after is not None and after.code == "print(6)\n"
    assert extract_code("```cpp\nint main(){}\n```", LANGUAGES["cpp"]).source == "fenced"  # type: ignore[union-attr]
    assert extract_code("just prose", py, "fenced") is None
    assert extract_code("", py) is None


def test_output_comparison_modes() -> None:
    assert outputs_match(b"1  2\n3\n\n", "1 2 3", "whitespace")
    assert outputs_match(b"1 2  \n3\n\n", "1 2\n3", "lines")
    assert not outputs_match(b"1  2\n3\n", "1 2\n3", "lines")
    assert outputs_match(b"a\n", "a\n", "exact") and not outputs_match(b"a", "a\n", "exact")


def test_numeric_output_comparison() -> None:
    """``numeric``: real-number answers within the tolerance, absolute below 1 and relative above it (the
    checkers of judges that print floats); everything else token for token."""
    assert outputs_match(b"0.3333333\n", "0.333333333", "numeric")  # |d| = 3.3e-8
    assert outputs_match(b"3 3.0000001", "3.0 3", "numeric")
    assert outputs_match(b"1000000.5", "1000000", "numeric")  # relative: 5e-7 of 1e6
    assert not outputs_match(b"0.334", "0.333", "numeric")
    assert not outputs_match(b"1001000", "1000000", "numeric")
    assert outputs_match(b"0.001", "0.0015", "numeric", tolerance=1e-3)
    assert not outputs_match(b"0.001", "0.0015", "numeric", tolerance=1e-4)
    assert outputs_match(b"YES 2.5\n", "YES 2.5000000001", "numeric")
    assert not outputs_match(b"NO 2.5", "YES 2.5", "numeric")  # words still match exactly
    assert not outputs_match(b"1 2", "1 2 3", "numeric")  # a missing number is a mismatch
    assert outputs_match(b"nan", "nan", "numeric")  # as text, "nan" equals "nan"
    assert not outputs_match(b"nan", "1", "numeric") and not outputs_match(b"inf", "1e400", "numeric")
    assert not outputs_match(b"1_000", "1000", "numeric")  # digit groups are not a number token
    assert not outputs_match(b"0.3333333", "0.333333333", "whitespace")  # the default stays exact


def test_numeric_mode_compares_integers_exactly() -> None:
    """Two integer tokens were compared as floats within the relative tolerance, so a wrong answer to a
    modular-arithmetic problem (1000000008 for 1000000007: 1e-9 apart, relatively) was a pass, and
    integers past 2**53 compared equal after rounding. Integers are now compared exactly; a real number
    on either side keeps the tolerance. Found in review."""
    assert not outputs_match(b"1000000008", "1000000007", "numeric")
    assert not outputs_match(b"9007199254740993", "9007199254740992", "numeric")
    assert outputs_match(b"1000000007 +5 007", "1000000007 5 7", "numeric")  # the same integers
    assert outputs_match(b"1000000007.0000001", "1000000007", "numeric")  # a real number: tolerance
    assert outputs_match(b"1000000000", "1000000000.5", "numeric")


def test_numeric_mode_compares_an_integer_answer_written_as_a_decimal_exactly() -> None:
    """An integer answer printed as a decimal (a program that computed in floats) was compared within the
    relative tolerance: 1000000008.0 passed for 1000000007, and 9007199254740993.0 for ...992. An
    integer-valued decimal or exponent form against an integer answer is compared exactly, digit for
    digit (no float: past 2**53 it rounds); a decimal with a fractional part keeps the tolerance. Found
    in review."""
    assert not outputs_match(b"1000000008.0", "1000000007", "numeric")
    assert not outputs_match(b"1.000000008e9", "1000000007", "numeric")
    assert not outputs_match(b"9007199254740993.0", "9007199254740992", "numeric")
    assert not outputs_match(b"9.007199254740993E15", "9007199254740992", "numeric")
    assert not outputs_match(b"1e9", "1000000007", "numeric")
    assert not outputs_match(b"-7.0", "7", "numeric")
    # the same integer in any decimal or exponent spelling
    assert outputs_match(b"1000000007.000 1.000000007e9 +1000000007e0", "1000000007 " * 3, "numeric")
    assert outputs_match(b"1e9 100e7 0.000e5 -0.0", "1000000000 1000000000 0 0", "numeric")
    assert outputs_match(b"9007199254740993.0", "9007199254740993", "numeric")
    # an exponent no integer of any printable length reaches, and one no int() reads (4300+ digits)
    assert not outputs_match(b"1e99999999999999999999", "1", "numeric")
    assert not outputs_match(("1e" + "9" * 5000).encode(), "1", "numeric")
    assert outputs_match(("0e" + "9" * 5000).encode(), "0", "numeric")
    assert not outputs_match(("1e-" + "9" * 5000).encode(), "1", "numeric")
    # a real answer (a fractional part on either side, or an expected value in decimal form): tolerance
    assert outputs_match(b"2.9999999", "3", "numeric")
    assert outputs_match(b"1000000008", "1000000007.0", "numeric")
    assert outputs_match(b"1000000001", "1e9", "numeric")


async def test_numeric_mode_takes_integers_of_any_length(client: httpx.AsyncClient) -> None:
    """An integer token past Python's 4300-digit conversion limit made the exact integer comparison
    raise: a program printing 5000 digits turned its item into an error instead of its 0.0, and a
    correct answer of that length written with a leading zero or sign failed the same way."""
    big = "1" * 5000
    assert not outputs_match(big.encode(), "42", "numeric")
    assert outputs_match(("+0" + big).encode(), big, "numeric")
    assert not outputs_match(("-" + big).encode(), big, "numeric")
    assert outputs_match(b"-0 +0 000", "0 0 0", "numeric")
    ref = {"cases": [{"stdin": "", "stdout": "42"}]}
    wrong = await _one(client, f"print('{big}')", ref, output_match="numeric")
    assert wrong["valid"] and wrong["score"] == 0.0, wrong


async def test_numeric_cases_through_the_api(client: httpx.AsyncClient) -> None:
    program = "import math\nprint(math.pi)\nprint(1 / 3)\n"
    ref = {"cases": [{"stdin": "", "stdout": "3.14159265\n0.33333333"}]}
    exact = await _one(client, program, ref)
    assert exact["valid"] and exact["score"] == 0.0
    tolerant = await _one(client, program, ref, output_match="numeric")
    assert tolerant["valid"] and tolerant["score"] == 1.0, tolerant
    strict = await _one(client, program, ref, output_match="numeric", float_tolerance=1e-12)
    assert strict["valid"] and strict["score"] == 0.0


async def test_apps_call_based_arguments_past_a_float_are_infinity(client: httpx.AsyncClient) -> None:
    """JSON's 1e400 is infinity; its repr, `inf`, went into the tests as a name they do not define, so
    every solution failed that case with a NameError, a 0.0 cached as its own (found in review)."""
    body = (
        '{"reward": "code", "options": {"use_cache": false}, "items": [{"response": '
        + json.dumps("def big(x):\n    return x > 10 ** 300\n")
        + ', "reference": {"fn_name": "big", "inputs": [[1e400], [-1e400], [5]], "outputs": [true, false, false]}}]}'
    )
    r = await client.post("/v1/score", content=body, headers={"content-type": "application/json"})
    result = r.json()["results"][0]
    assert result["valid"] and result["score"] == 1.0, result


async def test_apps_call_based_outputs_of_nan_are_matched_by_nan(client: httpx.AsyncClient) -> None:
    """JSON's NaN (Python's json writes a float nan so) as an expected output equals nothing, itself
    included, so every solution failed that case, the dataset's expectation scored as the model's 0.0
    (found in review). A NaN expected is matched by a NaN returned, within lists and dicts too; any
    other value still fails it."""
    ref = '{"fn_name": "f", "inputs": [[0], [1], [2]], "outputs": [NaN, [[1.5, NaN]], {"a": NaN}]}'
    program = "def f(x):\n    nan = float('nan')\n    return [nan, [[1.5, nan]], {'a': nan}][x]\n"
    for solution, mask in ((program, "111"), (program.replace("'a': nan", "'a': 0.0"), "110")):
        body = (
            '{"reward": "code", "options": {"use_cache": false}, "items": [{"response": '
            + json.dumps(solution)
            + ', "reference": '
            + ref
            + "}]}"
        )
        r = await client.post("/v1/score", content=body, headers={"content-type": "application/json"})
        result = r.json()["results"][0]
        assert result["valid"] and result["details"]["pass_mask"] == mask, result


async def test_apps_call_based_rows_without_fn_name_say_so(client: httpx.AsyncClient) -> None:
    """A call-based row whose fn_name is lost (absent, or null where a dataset's column is empty for it)
    read as stdin cases and said "reference.cases.0.stdin must be a string", which names neither the
    field at fault nor the fix (found in review). It is still parse_error, and says fn_name is missing."""
    for ref in (
        {"inputs": [[1, 2], [3, 4]], "outputs": [3, 7]},
        {"fn_name": None, "inputs": [[1, 2]], "outputs": [3]},
        {"inputs": [{"a": 1}], "outputs": [1]},
    ):
        result = await _one(client, "def add(a, b):\n    return a + b\n", ref)
        assert not result["valid"] and result["reason"] == "parse_error", result
        assert "fn_name" in result["details"]["message"], result


async def test_apps_call_based_problems(client: httpx.AsyncClient) -> None:
    """APPS/TACO call-based references (``fn_name`` + argument lists; verl's prime_code format) call the
    function, or the method of a LeetCode-style ``Solution``, as APPS's checker does. They were a
    parse_error ("cases.0.stdin must be a string")."""
    ref = {"fn_name": "add", "inputs": [[1, 2], [3, 4], [[1], [2, 3]]], "outputs": [[3], 7, [1, 2, 3]]}
    plain = await _one(client, "def add(a, b):\n    return a + b\n", ref)
    assert plain["valid"] and plain["score"] == 1.0, plain
    leet = await _one(client, "class Solution:\n    def add(self, a, b):\n        return a + b\n", ref)
    assert leet["valid"] and leet["score"] == 1.0, leet
    pair = {"fn_name": "divmod_", "inputs": [[7, 2]], "outputs": [[3, 1]]}
    as_tuple = await _one(client, "def divmod_(a, b):\n    return a // b, a % b\n", pair)
    assert as_tuple["score"] == 1.0, as_tuple  # a tuple reads as a list
    wrong = await _one(client, "def add(a, b):\n    return a - b\n", ref)
    assert wrong["valid"] and wrong["score"] == 0.0
    # one element of a longer expected list is not the answer (APPS's checker accepted it)
    first_only = await _one(
        client, "def add(a, b):\n    return 1\n", {**ref, "inputs": [[1, 2]], "outputs": [[1, 2]]}
    )
    assert first_only["score"] == 0.0
    cheat = await _one(
        client,
        "class Any:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Any()\n",
        ref,
    )
    assert cheat["valid"] and cheat["score"] == 0.0, cheat
    missing = await _one(client, "def other(a, b):\n    return a + b\n", ref)
    assert missing["valid"] and missing["score"] == 0.0
    for bad in (
        {**ref, "fn_name": "not a name"},
        {**ref, "inputs": [1, 2, 3]},
        {**ref, "outputs": [3]},
    ):
        assert (await _one(client, "def add(a, b):\n    return a + b\n", bad))["reason"] == "parse_error"
    cpp = await _one(client, "int add(int a, int b) { return a + b; }", {**ref, "language": "cpp"})
    assert cpp["reason"] == "unsupported"


JS_ASSERT = "const assert = require('node:assert');\n"
# (solution, tests) in the styles of real JavaScript tasks; each solution correct
JS_STYLES = {
    "HumanEval-X": (
        "const add = (a, b) => {\n  return a + b;\n}\n",
        "const testAdd = () => {\n  console.assert(add(1, 2) === 3);\n}\ntestAdd();\n",
    ),
    "MultiPL-E": (
        "function add(a, b) { return a + b; }",
        JS_ASSERT
        + "function test() {\n  let candidate = add;\n  assert.deepEqual(candidate(1, 2), 3);\n}\n\ntest();\n",
    ),
    "LeetCode var": (
        "var twoSum = function(nums, target) {\n  const m = new Map();\n  for (let i = 0; i < nums.length; i++) {\n"
        "    if (m.has(target - nums[i])) return [m.get(target - nums[i]), i];\n    m.set(nums[i], i);\n  }\n};\n",
        JS_ASSERT + "assert.deepStrictEqual(twoSum([2, 7, 11, 15], 9), [0, 1]);\n",
    ),
    "class Solution": (
        "class Solution { add(a, b) { return a + b; } }\n",
        JS_ASSERT + "assert.strictEqual(new Solution().add(1, 2), 3);\n",
    ),
    "module.exports, read by the tests": (
        "'use strict';\nmodule.exports = function add(a, b) { return a + b; };\n",
        JS_ASSERT + "assert.strictEqual(module.exports(1, 2), 3);\n",
    ),
    "exports.f": (
        "function add(a, b) { return a + b; }\nexports.add = add;\n",
        JS_ASSERT + "assert.strictEqual(exports.add(1, 2), 3);\n",
    ),
    "async, awaited in the tests": (
        "async function add(a, b) { await new Promise((r) => setTimeout(r, 5)); return a + b; }\n",
        JS_ASSERT
        + "(async () => {\n  assert.equal(await add(1, 2), 3);\n  await assert.rejects(add(1n, 2), TypeError);\n})();\n",
    ),
    "objects, BigInt, typed arrays": (
        "function f() { return [new Map([[1, { a: [1] }]]), new Set([2n]), new Uint8Array([3])]; }\n",
        JS_ASSERT
        + "assert.deepStrictEqual(f(), [new Map([[1, { a: [1] }]]), new Set([2n]), new Uint8Array([3])]);\n"
        "assert.ok(f()[0] instanceof Map);\nassert.throws(() => null.x, TypeError);\n",
    ),
    "helpers named test and check": (
        "function test(x) { return x > 0; }\nfunction check(x) { return test(x); }\n",
        JS_ASSERT + "function test() { assert.strictEqual(check(1), true); }\ntest();\n",
    ),
    "BOM, shebang, no newline": (
        "\ufeff#!/usr/bin/env node\nfunction add(a, b) { return a + b; } // done",
        "console.assert(add(1, 2) === 3);",
    ),
}


async def test_javascript_tests_in_real_task_styles(client: httpx.AsyncClient) -> None:
    # correct solutions in the styles of HumanEval-X, MultiPL-E and LeetCode pass; the same tests of a
    # solution that returns a wrong answer fail
    items = []
    for name, (code, tests) in JS_STYLES.items():
        wrong = (
            code.replace("a + b", "a - b")
            .replace("[m.get", "[-1, m.get")
            .replace("[3]", "[4]")
            .replace("x > 0", "x < 0")
        )
        assert wrong != code, name
        for which, c in (("correct", code), ("wrong", wrong)):
            items.append(
                {
                    "id": f"{name}: {which}",
                    "response": f"```js\n{c}\n```",
                    "reference": {"language": "javascript", "tests": tests},
                }
            )
    results = await score_results(
        client, "code", items, options={"use_cache": False}, timeout_s=5.0, total_timeout_s=15.0
    )
    scores = {i["id"]: r["score"] for i, r in zip(items, results, strict=True)}
    assert scores == {i["id"]: float(i["id"].endswith("correct")) for i in items}, results


async def test_a_run_cancelled_while_its_pipes_are_handed_to_the_loop_closes_them_all() -> None:
    """A request cancelled (its client gone, a single-flight owner going away) while its run's pipes were
    being handed to the event loop closed only those already handed over: the others stayed open until
    the garbage collector found them, and their ResourceWarning, an error under this suite's filters,
    failed whichever test was running then (seen on a loaded host). Every pipe is closed now."""
    import gc
    import sys
    import warnings

    from rewardhub.sandbox.runner import run_process

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        run = asyncio.create_task(
            run_process(
                [sys.executable, "-c", "import time; time.sleep(30)"],
                b"",
                deadline_s=30,
                stdout_cap=1024,
                stderr_cap=1024,
                env={},
            )
        )
        await asyncio.sleep(0)  # it spawned the process and is handing its first pipe to the loop
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        del run
        for _ in range(3):
            gc.collect()
            await asyncio.sleep(0)
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == []


async def test_python_functions_that_change_their_arguments_in_place(client: httpx.AsyncClient) -> None:
    """LeetCode-style tasks ("rotate nums in place, return nothing"; KodCode's pytest tests) check the
    list, dict or set the tests passed after the call. Arguments crossed to the solution's process by
    value, so its changes never came back: every correct solution failed those tests, and one that
    changed an argument the tests expect unchanged passed. What the call left in a list, dict or set
    argument is now written back into the tests' own object (nested ones kept: a matrix's rows)."""
    solution = (
        "def rotate(nums, k):\n    k %= len(nums)\n    nums[:] = nums[-k:] + nums[:-k]\n"
        "def transpose(m):\n    n = len(m)\n    for i in range(n):\n        for j in range(i):\n"
        "            m[i][j], m[j][i] = m[j][i], m[i][j]\n"
        "def tag(d, *, key):\n    d[key] = True\n"
        "def drop(s):\n    s.discard(1)\n"
        "def total(xs):\n    return sum(xs)\n"
    )
    tests = (
        "def test_rotate():\n    nums = [1, 2, 3, 4]\n    assert rotate(nums, 1) is None\n"
        "    assert nums == [4, 1, 2, 3]\n"
        "def test_transpose():\n    m = [[1, 2], [3, 4]]\n    row = m[0]\n    transpose(m)\n"
        "    assert m == [[1, 3], [2, 4]] and row == [1, 3]\n"
        "def test_dict_and_set():\n    d, s = {}, {1, 2}\n    tag(d, key='x')\n    drop(s)\n"
        "    assert d == {'x': True} and s == {2}\n"
        "def test_unchanged():\n    xs = [1, 2]\n    assert total(xs) == 3 and xs == [1, 2]\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, good
    # changing an argument the tests expect unchanged fails them, as it would in one process
    sneaky = solution.replace("return sum(xs)", "s = sum(xs)\n    xs.clear()\n    return s")
    bad = await _one(client, f"```python\n{sneaky}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "11110", bad


async def test_collections_dicts_and_lists_in_tuples_changed_in_place_come_back(
    client: httpx.AsyncClient,
) -> None:
    """The write-back of arguments a call changed in place took only a plain list, dict or set: an
    OrderedDict, a Counter or a defaultdict the tests passed (or their own dict subclass) came back
    unchanged, and so did a list inside a tuple argument (``f((nums, x))``). The solution got a plain dict
    for each of collections' dicts too, so ``counts[w] += 1`` on a new key or ``graph[u].append(v)`` raised
    KeyError and ``move_to_end`` did not exist. They cross as themselves now, and come back like a dict."""
    solution = (
        "def count(c, words):\n    for w in words:\n        c[w] += 1\n"
        "def add_edge(g, u, v):\n    g[u].append(v)\n"
        "def touch(od, k):\n    od.move_to_end(k)\n    if len(od) > 2:\n        od.popitem(last=False)\n"
        "def push(pair):\n    pair[0].append(pair[1])\n"
        "def fill(rows):\n    for name, xs in rows:\n        xs.append(name)\n"
        "def put(d):\n    d['x'] = 1\n"
        "def size(c):\n    return len(c)\n"
    )
    tests = (
        "from collections import Counter, OrderedDict, defaultdict\n\n"
        "def test_counter():\n    c = Counter(a=1)\n    count(c, ['a', 'b'])\n"
        "    assert c == Counter(a=2, b=1) and type(c) is Counter\n\n"
        "def test_defaultdict():\n    g = defaultdict(list)\n    add_edge(g, 1, 2)\n    add_edge(g, 1, 3)\n"
        "    assert g == {1: [2, 3]} and g[5] == []\n\n"
        "def test_ordered_dict():\n    od = OrderedDict([('a', 1), ('b', 2), ('c', 3)])\n    touch(od, 'a')\n"
        "    assert list(od) == ['c', 'a']\n\n"
        "def test_tuple():\n    nums = [1]\n    push((nums, 2))\n    assert nums == [1, 2]\n\n"
        "def test_tuples_in_a_list():\n    a, b = [], []\n    fill([('x', a), ('y', b)])\n    assert a == ['x'] and b == ['y']\n\n"
        "def test_own_dict_class():\n    class D(dict):\n        pass\n    d = D()\n    put(d)\n    assert d == {'x': 1}\n\n"
        "def test_unchanged():\n    c = Counter('aab')\n    assert size(c) == 2 and c == Counter(a=2, b=1)\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, good
    # changing one the tests expect unchanged fails them, as it would in one process
    sneaky = solution.replace("return len(c)", "n = len(c)\n    c.clear()\n    return n")
    bad = await _one(client, f"```python\n{sneaky}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "1111110", bad


async def test_a_deque_the_tests_pass_is_the_solution_s_to_use_and_change(client: httpx.AsyncClient) -> None:
    """A deque the tests passed (a BFS queue, a sliding window) crossed as a handle into the tests' process,
    on which the solution may not even look up ``popleft`` ("operation 'getattr' is not allowed"): every
    correct solution failed. It crosses as a deque now (its maxlen too), and what the call did to it
    comes back, as for a list."""
    solution = (
        "from collections import deque\n"
        "def bfs(graph, queue):\n    seen = []\n    while queue:\n        node = queue.popleft()\n"
        "        seen.append(node)\n        queue.extend(n for n in graph[node] if n not in seen and n not in queue)\n"
        "    return seen\n"
        "def window(buf, xs):\n    for x in xs:\n        buf.append(x)\n    return isinstance(buf, deque) and buf.maxlen\n"
        "def rows(q):\n    q[0].append(9)\n    q.rotate(1)\n"
    )
    tests = [
        "from collections import deque\nq = deque([0])\nassert bfs({0: [1, 2], 1: [2], 2: []}, q) == [0, 1, 2] and q == deque()",
        "from collections import deque\nb = deque(maxlen=2)\nassert window(b, [1, 2, 3]) == 2 and list(b) == [2, 3] and b.maxlen == 2",
        "from collections import deque\nq = deque([[1], [2]])\nrows(q)\nassert list(q) == [[2], [1, 9]]",
    ]
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, good


async def test_an_element_changed_to_an_equal_value_of_another_type_comes_back(
    client: httpx.AsyncClient,
) -> None:
    """A call's changes to its arguments were found by comparing them with what was sent, and ``True ==
    1 == 1.0``: a solution setting ``flags[i] = True`` where a 1 was (or 0 -> False, 1 -> 1.0) changed
    nothing the tests saw, though in one process ``type(flags[0]) is bool``. Types count now."""
    solution = (
        "def mark(xs):\n    xs[0] = True\n"
        "def clear(d):\n    d['a'] = False\n"
        "def scale(m):\n    m[0][0] = 1.0\n"
        "def same(xs):\n    xs[0] = 1\n"
    )
    tests = [
        "xs = [1, 2]\nmark(xs)\nassert xs[0] is True",
        "d = {'a': 0}\nclear(d)\nassert d['a'] is False",
        "m = [[1]]\nscale(m)\nassert type(m[0][0]) is float",
        "xs = [True]\nsame(xs)\nassert type(xs[0]) is int",
    ]
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, good


async def test_objects_in_an_argument_keep_their_identity_through_a_call(client: httpx.AsyncClient) -> None:
    """Arguments cross to the solution's process by value and what a call left in them was written back
    position by position: a function that reordered the rows of a grid (``grid.sort()``,
    ``rows.reverse()``) left the tests' ``row0 = grid[0]`` holding another row's contents, a list the
    tests passed twice (``[x, x]``) came back as two lists, and a function returning its argument
    (``lst.append(1); return lst``) returned a copy, so ``f(a) is a`` failed. The objects the tests
    passed now come back as themselves, wherever the call left them, as in one process."""
    solution = (
        "def sort_rows(grid):\n    grid.sort()\n"
        "def flip(rows):\n    rows.reverse()\n"
        "def take(grid):\n    row = grid.pop()\n    row.append(9)\n"
        "def bump(a):\n    a[0].append(1)\n"
        "def add(lst):\n    lst.append(1)\n    return lst\n"
        "def first(grid):\n    return grid[0]\n"
        "def pair(d, xs):\n    d['k'] = xs\n    return [xs, d]\n"
        "def run(cb):\n    xs = [[1]]\n    row = xs[0]\n    cb(xs)\n    return row is xs[1] and row == [1, 2]\n"
        "def swap(xs):\n    xs[0], xs[1] = xs[0].upper() + b'!', tuple(reversed(xs[1]))\n"
    )
    tests = [
        "grid = [[3], [1], [2]]\nrow0 = grid[0]\nsort_rows(grid)\n"
        "assert grid == [[1], [2], [3]] and grid[2] is row0 and row0 == [3]",
        "rows = [[1], [2]]\nfirst_row = rows[0]\nflip(rows)\nfirst_row.append(0)\nassert rows == [[2], [1, 0]]",
        "grid = [[1], [2]]\nlast = grid[1]\ntake(grid)\nassert grid == [[1]] and last == [2, 9]",
        "x = []\na = [x, x]\nbump(a)\nassert a == [[1], [1]] and a[0] is a[1] is x",
        "a = []\nassert add(a) is a and a == [1]",
        "grid = [[1], [2]]\nr = first(grid)\nassert r is grid[0]",
        "d, xs = {}, [1]\nout = pair(d, xs)\nassert out[0] is xs and out[1] is d and d['k'] is xs",
        "def cb(xs):\n    xs[0].append(2)\n    xs.insert(0, [0])\nassert run(cb) is True",
        "xs = [b'ab', (1, [2])]\nswap(xs)\nassert xs == [b'AB!', ([2], 1)]",
    ]
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]


async def test_arguments_changed_by_a_call_that_raises_come_back(client: httpx.AsyncClient) -> None:
    """A call's changes to its list, dict or set arguments were written back only when it returned: one
    that raised after changing them (a queue drained up to a bad item, then ValueError) left the tests'
    objects as they were, where in one process the tests see what it did before raising."""
    solution = (
        "class BadItem(Exception):\n    pass\n"
        "def drain(queue, seen):\n    while queue:\n        x = queue.pop(0)\n        if x < 0:\n"
        "            raise ValueError(x)\n        if x == 0:\n            raise BadItem(x)\n        seen.add(x)\n"
    )
    tests = [
        "q, seen = [1, -2, 3], set()\ntry:\n    drain(q, seen)\nexcept ValueError:\n    pass\n"
        "assert q == [3] and seen == {1}",
        "q, seen = [4, 0, 5], {9}\ntry:\n    drain(q, seen=seen)\nexcept BadItem:\n    pass\n"
        "assert q == [5] and seen == {4, 9}",
        "q, seen = [1, 2], set()\ndrain(q, seen)\nassert q == [] and seen == {1, 2}",
    ]
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, good


async def test_a_listed_test_that_loses_the_solution_does_not_fail_the_tests_after_it(
    client: httpx.AsyncClient,
) -> None:
    """A list of tests (MBPP's ``test_list``) is one test a string, but they shared one solution process:
    once a test lost it (an infinite loop past its time limit, an exit, a crash), every later test
    failed "not run", so a solution too slow on one input scored as if it had failed them all (cases,
    each run in a process of its own, did not). The tests after it now run in a fresh process; the
    test that lost it says why."""
    solution = (
        "import os\ndef f(x):\n    if x == 1:\n        while True:\n            pass\n"
        "    if x == 2:\n        os._exit(0)\n    return x\n"
    )
    tests = [
        "assert f(0) == 0",
        "assert f(1) == 1",
        "assert f(3) == 3",
        "assert f(2) == 2",
        "assert f(4) == 4",
    ]
    result = await _one(client, solution, {"tests": tests}, timeout_s=1.0)
    assert result["valid"] and result["details"]["pass_mask"] == "10101", result["details"]
    messages = [t.get("message", "") for t in result["details"]["tests"]]
    assert messages[1].startswith("timeout") and "exited with status 0" in messages[3], messages
    assert result["score"] == pytest.approx(3 / 5)
    # the item's total still bounds them all: tests it left no room for are not run, and not cached
    loops = await _one(
        client,
        "def f(x):\n    while True:\n        pass\n",
        {"tests": tests},
        timeout_s=1.0,
        total_timeout_s=2.5,
    )
    last = loops["details"]["tests"][-1]
    assert loops["valid"] and loops["score"] == 0.0 and last["message"] == "not run: total time limit", loops


async def test_an_exception_class_of_the_solution_is_caught_as_the_builtin_one_it_extends(
    client: httpx.AsyncClient,
) -> None:
    """A solution's exception crosses to the tests rebuilt as a builtin one (the tests' `except
    ValueError` works); one of a class the solution defined crossed as a RemoteError, which no
    ``except`` of the tests catches, so a correct solution raising its own ``class
    NegativeError(ValueError)`` failed every test expecting a ValueError. It is now rebuilt as the
    nearest builtin class it extends, with its message."""
    solution = (
        "class NegativeError(ValueError):\n    pass\n"
        "class Odd(NegativeError, KeyError):\n    pass\n"
        "def root(x):\n    if x < 0:\n        raise NegativeError('negative input')\n    return x ** 0.5\n"
        "def odd():\n    raise Odd('odd')\n"
    )
    tests = [
        "try:\n    root(-1)\nexcept ValueError as e:\n    assert str(e) == 'negative input'\nelse:\n    assert False",
        "assert root(4) == 2",
        "try:\n    odd()\nexcept ValueError:\n    pass\nelse:\n    assert False",
    ]
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, good
    # not any exception: a subclass of another builtin one is that one, which `except ValueError` misses
    other = solution.replace("NegativeError(ValueError)", "NegativeError(ArithmeticError)")
    bad = await _one(client, f"```python\n{other}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "010", bad


async def test_tests_catch_an_exception_class_the_solution_defines(client: httpx.AsyncClient) -> None:
    """Tests that expect the solution's own exception (``except InsufficientFunds``, a pytest.raises-style
    check, ``from solution import InsufficientFunds``) met the class as a handle into the solution's
    process, and Python refused to catch it ("catching classes that do not inherit from BaseException is
    not allowed"): every correct solution failed. The class is a genuine exception class in the tests now,
    its exceptions caught as in one process, their attributes the solution's."""
    solution = (
        "class BankError(Exception):\n    code = 7\n"
        "class InsufficientFunds(BankError):\n    def __init__(self, need):\n"
        "        super().__init__(f'need {need}')\n        self.need = need\n"
        "def withdraw(balance, amount):\n    if amount < 0:\n        raise BankError('negative')\n"
        "    if amount > balance:\n        raise InsufficientFunds(amount - balance)\n    return balance - amount\n"
        "def error():\n    return InsufficientFunds(1)\n"
        "def handle(e):\n    return f'short by {e.need}' if isinstance(e, InsufficientFunds) else 'other'\n"
        "def attempt(action):\n    try:\n        return action()\n    except ValueError:\n        return 'retry'\n"
    )
    raises = (
        "class raises:\n    def __init__(self, cls):\n        self.cls = cls\n    def __enter__(self):\n"
        "        return self\n    def __exit__(self, t, v, tb):\n        self.caught = t is not None and issubclass(t, self.cls)\n"
        "        return self.caught\n"
    )
    tests = [
        "try:\n    withdraw(5, -1)\nexcept BankError as e:\n    assert str(e) == 'negative'\nelse:\n    assert False",
        "try:\n    withdraw(5, 8)\nexcept BankError as e:\n    assert e.need == 3 and e.code == 7 and str(e) == 'need 3'\n"
        "else:\n    assert False",
        "try:\n    withdraw(5, -1)\nexcept InsufficientFunds:\n    assert False\nexcept BankError:\n    pass",
        raises + "with raises(InsufficientFunds) as r:\n    withdraw(1, 2)\nassert r.caught",
        "from solution import BankError as E\ntry:\n    withdraw(1, 2)\nexcept (KeyError, E):\n    pass\n"
        "else:\n    assert False",
        "assert isinstance(error(), BankError) and issubclass(InsufficientFunds, BankError)\n"
        "assert issubclass(BankError, Exception) and BankError.code == 7",
        "assert withdraw(5, 2) == 3",
        # made by the tests: the solution's own object, which the solution can inspect
        "e = InsufficientFunds(2)\nassert handle(e) == 'short by 2' and e.need == 2 and str(e) == 'need 2'\n"
        "try:\n    raise BankError('x')\nexcept BankError as e:\n    assert e.code == 7 and handle(e) == 'other'",
        "class Mine(BankError):\n    pass\ntry:\n    raise Mine('m')\nexcept BankError as e:\n"
        "    assert str(e) == 'm' and type(e) is Mine and e.code == 7",
        # through a callback of the tests' (the solution calls it, it calls the solution, which raises)
        "try:\n    attempt(lambda: withdraw(1, 5))\nexcept InsufficientFunds as e:\n    assert e.need == 4\n"
        "else:\n    assert False",
    ]
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, good
    # a solution raising the wrong one of its classes, or none, still fails
    wrong = solution.replace("raise BankError('negative')", "raise InsufficientFunds(0)")
    bad = await _one(client, f"```python\n{wrong}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "0101111111", bad
    silent = solution.replace("raise InsufficientFunds(amount - balance)", "return 0")
    bad = await _one(client, f"```python\n{silent}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "1010011110", bad


async def test_a_pytest_function_that_loses_the_solution_does_not_fail_the_functions_after_it(
    client: httpx.AsyncClient,
) -> None:
    """pytest-style tests (KodCode's) are called one function at a time, as pytest does, but they shared
    one solution process: once a function lost it (past its time limit, an exit), the functions after it
    failed "not run", where pytest would have run them. They now run in a fresh sandbox; the function
    that lost it fails its asserts with the reason, its module-level asserts are not run twice."""
    solution = "def f(x):\n    while x == 1:\n        pass\n    return x\n"
    tests = (
        "from solution import f\n\nassert f(0) == 0\n\n"
        "def test_a():\n    assert f(0) == 0\n\n"
        "def test_b():\n    y = f(1)\n    assert y == 1\n    assert f(5) == 5\n\n"
        "def test_c():\n    assert f(2) == 2\n\n"
        "class TestD:\n    def test_d(self):\n        assert f(1) == 1\n    def test_e(self):\n"
        "        assert f(3) == 3\n"
    )
    result = await _one(client, solution, {"tests": tests}, timeout_s=1.0)
    assert result["valid"] and result["details"]["pass_mask"] == "1100101", result["details"]
    messages = [t.get("message", "") for t in result["details"]["tests"]]
    assert messages[2].startswith("timeout") and messages[5].startswith("timeout"), messages


async def test_isinstance_against_a_class_of_the_solution(client: httpx.AsyncClient) -> None:
    """Tests of class-design tasks check what the solution built with ``isinstance(obj, Stack)``, Stack
    the solution's class. The class reaches the tests as a handle into the solution's process, which
    isinstance refused ("arg 2 must be a type"): every correct solution failed. The solution's process
    answers it now, as it answers a method call on its objects."""
    solution = (
        "class Shape:\n    pass\n"
        "class Square(Shape):\n    def __init__(self, side):\n        self.side = side\n"
        "def make(side):\n    return Square(side) if side > 0 else None\n"
    )
    tests = [
        "assert isinstance(make(2), Square) and isinstance(make(2), Shape)",
        "assert isinstance(make(2), (int, Square))",
        "assert not isinstance(make(0), Shape) and not isinstance(3, Square)",
        "assert issubclass(Square, Shape) and not issubclass(Shape, Square)",
    ]
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, good
    wrong = solution.replace("class Square(Shape)", "class Square")
    bad = await _one(client, f"```python\n{wrong}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "0110", bad


async def test_a_namespace_the_tests_hand_over_is_not_written_back(client: httpx.AsyncClient) -> None:
    """Arguments a call changed in place are written back into the tests' objects; a dict that is a
    namespace (the tests handing ``globals()`` to the function) would let the solution replace the
    judge's hooks there (a no-op in place of the one recording an assert's failure, which then passed).
    Such a dict is left as it was and the test fails."""
    solution = "def f(g):\n    g['__rh_r__'] = print\n    g['x'] = 1\ndef five(x):\n    return 5\n"
    tests = "f(globals())\nassert 1 == 2\n"
    result = await _one(client, solution, {"tests": tests})
    assert result["valid"] and result["score"] == 0.0, result
    # nor the builtins' (an `abs` of the solution's, which the tests would then call)
    swap = solution.replace("g['__rh_r__'] = print", "g['abs'] = five")
    builtin = await _one(client, swap, {"tests": ["import builtins\nf(vars(builtins))\nassert abs(-1) == 5"]})
    assert builtin["valid"] and builtin["score"] == 0.0, builtin


LINKED = (
    "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
    "class TreeNode:\n    def __init__(self, val=0, left=None, right=None):\n"
    "        self.val = val\n        self.left = left\n        self.right = right\n"
    "def build(xs):\n    head = None\n    for x in reversed(xs):\n        head = ListNode(x, head)\n    return head\n"
    "def to_list(node):\n    out = []\n    while node:\n        out.append(node.val)\n        node = node.next\n"
    "    return out\n"
    "def tree(xs):\n    nodes = [None if x is None else TreeNode(x) for x in xs]\n    kids = nodes[::-1]\n"
    "    root = kids.pop()\n    for node in nodes:\n        if node:\n"
    "            if kids:\n                node.left = kids.pop()\n            if kids:\n                node.right = kids.pop()\n"
    "    return root\n"
)


async def test_the_tests_own_linked_lists_and_trees_are_the_solution_s_to_walk_and_relink(
    client: httpx.AsyncClient,
) -> None:
    """LeetCode-style tests build their linked lists and trees from a ``ListNode``/``TreeNode`` class of
    their own; the nodes reach the solution as handles into the tests' process, on which it could not
    read ``head.val`` or set ``head.next`` ("operation 'getattr' is not allowed"): every correct solution
    of such a task failed. The data attributes of the tests' objects are the solution's to read and
    write now (the values cross as any others: builtins by value, other objects by handle), nodes the
    solution makes (of its own class, or of the tests' class it was handed) join them, and the nodes come
    back as themselves."""
    solution = (
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "class Solution:\n"
        "    def reverseList(self, head):\n        prev = None\n        while head:\n"
        "            head.next, prev, head = prev, head, head.next\n        return prev\n"
        "    def maxDepth(self, root):\n        if root is None:\n            return 0\n"
        "        return 1 + max(self.maxDepth(root.left), self.maxDepth(root.right))\n"
        "    def mergeTwoLists(self, a, b):\n        tail = dummy = ListNode()\n        while a and b:\n"
        "            if a.val <= b.val:\n                tail.next, a = a, a.next\n"
        "            else:\n                tail.next, b = b, b.next\n            tail = tail.next\n"
        "        tail.next = a or b\n        return dummy.next\n"
        "    def addTwoNumbers(self, a, b):\n        tail = dummy = ListNode()\n        carry = 0\n"
        "        while a or b or carry:\n            carry += (a.val if a else 0) + (b.val if b else 0)\n"
        "            tail.next = ListNode(carry % 10)\n            tail, carry = tail.next, carry // 10\n"
        "            a, b = a and a.next, b and b.next\n        return dummy.next\n"
        "    def invertTree(self, root):\n        if root:\n"
        "            root.left, root.right = self.invertTree(root.right), self.invertTree(root.left)\n"
        "        return root\n"
        "    def append(self, head, val, make):\n        node = head\n        while node.next:\n"
        "            node = node.next\n        node.next = make(val)\n        return head\n"
    )
    tests = [
        LINKED + "assert to_list(Solution().reverseList(build([1, 2, 3, 4, 5]))) == [5, 4, 3, 2, 1]",
        LINKED + "head = build([1, 2])\nsecond = head.next\nassert Solution().reverseList(head) is second\n"
        "assert second.next is head and head.next is None and Solution().reverseList(None) is None",
        LINKED + "assert Solution().maxDepth(tree([3, 9, 20, None, None, 15, 7])) == 3\n"
        "assert Solution().maxDepth(None) == 0 and Solution().maxDepth(tree([1, None, 2])) == 2",
        LINKED
        + "a, b = build([1, 2, 4]), build([1, 3, 4])\nfirst = b\nmerged = Solution().mergeTwoLists(a, b)\n"
        "assert to_list(merged) == [1, 1, 2, 3, 4, 4] and merged is a and a.next is first",
        LINKED + "assert to_list(Solution().addTwoNumbers(build([2, 4, 3]), build([5, 6, 4]))) == [7, 0, 8]",
        LINKED + "root = tree([4, 2, 7, 1, 3, 6, 9])\nleft = root.left\n"
        "assert Solution().invertTree(root) is root and root.right is left and left.left.val == 3",
        LINKED + "head = build([1])\nassert Solution().append(head, 2, ListNode) is head\n"
        "assert to_list(head) == [1, 2] and type(head.next) is ListNode",
    ]
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, good
    # a wrong solution still fails: reversing all but the last node
    wrong = solution.replace(
        "while head:\n            head.next", "while head and head.next:\n            head.next"
    )
    bad = await _one(client, f"```python\n{wrong}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"].startswith("00"), bad


async def test_a_node_the_solution_made_equals_the_tests_node_on_either_side_of_the_comparison(
    client: httpx.AsyncClient,
) -> None:
    """Tests whose ``ListNode`` defines ``__eq__`` compare the solution's result with a list they built:
    ``expected == result`` asked the tests' ``__eq__``, but ``result == expected`` (a node of the
    solution's own class on the left) was False without asking it, and the correct solution failed. An
    object of the solution's now leaves the comparison to the tests' object, as Python does; against a
    builtin value, or another object of the solution's, it is still equal only to itself."""
    tests = (
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "    def __eq__(self, other):\n"
        "        return other is not None and self.val == other.val and self.next == other.next\n"
        "def build(xs):\n    head = None\n    for x in reversed(xs):\n        head = ListNode(x, head)\n    return head\n"
        "assert build([7, 0, 8]) == Solution().add(build([2, 4, 3]), build([5, 6, 4]))\n"
        "assert Solution().add(build([2, 4, 3]), build([5, 6, 4])) == build([7, 0, 8])\n"
        "assert Solution().add(build([5]), build([5])) != build([0])\n"
        "assert Solution().add(build([1]), None) != 1 and Solution().add(build([1]), None) != [1]\n"
    )
    solution = (
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "    def __eq__(self, other):\n        return True\n"
        "class Solution:\n    def add(self, a, b):\n        tail = dummy = ListNode()\n        carry = 0\n"
        "        while a or b or carry:\n            carry += (a.val if a else 0) + (b.val if b else 0)\n"
        "            tail.next = ListNode(carry % 10)\n            tail, carry = tail.next, carry // 10\n"
        "            a, b = a and a.next, b and b.next\n        return dummy.next\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, good
    wrong = solution.replace("carry % 10", "carry % 10 + 1")
    bad = await _one(client, f"```python\n{wrong}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "0011", bad


async def test_a_leetcode_solution_makes_nodes_of_the_tests_class_without_defining_it(
    client: httpx.AsyncClient,
) -> None:
    """LeetCode's solutions use ``ListNode``/``TreeNode`` without defining them (the judge does): where the
    tests define the class, ``dummy = ListNode(0)`` or an annotation ``Optional[ListNode]`` was a
    NameError, and every correct solution scored 0. The solution now has a class of that name whose nodes
    are the tests' own (``type(node) is ListNode`` in the tests), relinked with the tests' nodes as in one
    process; a wrong solution still fails, and a solution defining its own class keeps it."""
    solution = (
        "from typing import List, Optional\n\n"
        "class Solution:\n"
        "    def mergeTwoLists(self, a: Optional[ListNode], b: Optional[ListNode]) -> Optional[ListNode]:\n"
        "        tail = dummy = ListNode(0)\n        while a and b:\n"
        "            if a.val <= b.val:\n                tail.next, a = a, a.next\n"
        "            else:\n                tail.next, b = b, b.next\n            tail = tail.next\n"
        "        tail.next = a or b\n        return dummy.next\n"
        "    def copyList(self, head: Optional[ListNode]) -> Optional[ListNode]:\n"
        "        tail = dummy = ListNode()\n        while head:\n"
        "            tail.next = ListNode(head.val)\n            tail, head = tail.next, head.next\n"
        "        return dummy.next\n"
        "    def sortedArrayToBST(self, nums: List[int]) -> Optional[TreeNode]:\n"
        "        if not nums:\n            return None\n        mid = len(nums) // 2\n"
        "        return TreeNode(nums[mid], self.sortedArrayToBST(nums[:mid]), right=self.sortedArrayToBST(nums[mid + 1 :]))\n"
    )
    tests = (
        LINKED + "def inorder(t):\n    return inorder(t.left) + [t.val] + inorder(t.right) if t else []\n"
        "a, b = build([1, 2, 4]), build([1, 3, 4])\nmerged = Solution().mergeTwoLists(a, b)\n"
        "assert to_list(merged) == [1, 1, 2, 3, 4, 4] and merged is a and type(merged) is ListNode\n"
        "assert Solution().mergeTwoLists(None, None) is None\n"
        "head = build([3, 1, 2])\ncopy = Solution().copyList(head)\n"
        "assert to_list(copy) == [3, 1, 2] and copy is not head and type(copy.next) is ListNode\n"
        "root = Solution().sortedArrayToBST([-10, -3, 0, 5, 9])\n"
        "assert inorder(root) == [-10, -3, 0, 5, 9] and type(root) is TreeNode and root.val == 0\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]
    wrong = solution.replace("ListNode(head.val)", "ListNode(head.val + 1)").replace(
        "a.val <= b.val", "a.val > b.val"
    )
    bad = await _one(client, f"```python\n{wrong}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "0101", bad
    # a class of that name the solution defines is its own (its nodes reach the tests as the solution's)
    own = "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val, self.next = val, next\n"
    mine = await _one(client, f"```python\n{own}{solution}```", {"tests": tests})
    assert mine["valid"] and mine["details"]["pass_mask"] == "1101", mine
    # the same tests as a list of strings, each defining the classes again: the class of the test that runs
    listed = await _one(client, f"```python\n{solution}```", {"tests": [tests, tests]})
    assert listed["valid"] and listed["score"] == 1.0, listed


async def test_the_tests_nodes_cost_the_solution_a_round_trip_per_thousands_not_per_access(
    client: httpx.AsyncClient,
) -> None:
    """Every read or write of a tests' node's attribute (and ``while head:``) was a round trip between
    the solution's process and the judge's: reversing a 20,000-node list took ~60,000 of them (1.5-2.9 s),
    a 100,000-node hidden test past the time limit. The judge now sends a node with the data attributes
    of the nodes after it (thousands a message) and the solution queues its writes, sent before anything
    else it sends; counted here by the times the solution's process waited (its voluntary context
    switches: one a round trip), under 2,000 (was over 40,000). What the tests see is what one process would: writes made before a callback of theirs
    or before an exception, a class whose nodes run code (``__len__``), a list or tuple written."""
    tests = (
        LINKED
        + "class Sized:\n    def __init__(self, val, next=None):\n        self.val, self.next = val, next\n"
        "    def __len__(self):\n        return 1 if self.next is None else 1 + len(self.next)\n"
        "head = build(list(range(20000)))\ntail = head\nwhile tail.next:\n    tail = tail.next\n"
        "assert Solution().reverseList(head) is tail and to_list(tail) == list(range(19999, -1, -1))\n"
        "assert head.next is None and 0 <= Solution.reads < 2000\n"
        "seen = []\nhead = build([1, 2, 3])\n"
        "assert Solution().relink(head, lambda h: seen.append(to_list(h))) == 'raised' and seen == [[1, 3]]\n"
        "assert to_list(head) == [1] and head.val == 1 and head.next is None\n"
        "s = Sized(1, Sized(2))\nassert Solution().reverseList(s).val == 2 and len(s) == 1 and s.next is None\n"
        "root = TreeNode(1)\nSolution().tag(root)\nassert root.left == [1, 2] and root.right == (3, 'x')\n"
    )
    solution = (
        "import resource\ndef reads():\n    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw\n"
        "class Solution:\n    reads = -1\n"
        "    def reverseList(self, head):\n        before = reads()\n        prev = None\n        while head:\n"
        "            nxt = head.next\n            head.next = prev\n            prev, head = head, nxt\n"
        "        Solution.reads = reads() - before\n        return prev\n"
        "    def relink(self, head, callback):\n        head.next = head.next.next\n        callback(head)\n"
        "        head.next = None\n        try:\n            self.fail(head)\n        except ValueError:\n"
        "            return 'raised'\n"
        "    def fail(self, head):\n        head.val = 1\n        raise ValueError(head.val)\n"
        "    def tag(self, node):\n        node.left = [1]\n        node.left.append(2)\n        node.right = (3, 'x')\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests, "timeout_s": 30})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]


async def test_nodes_the_solution_makes_cost_a_round_trip_per_thousands_and_are_the_tests_own(
    client: httpx.AsyncClient,
) -> None:
    """Each ``ListNode(x)`` of the solution's was a round trip to the judge, which made the node (``new``):
    copying a 20,000-node list took ~80,000 of them (several seconds, most of a hidden test's limit).
    A node of a class whose ``__init__`` only assigns is made in the solution's process now and in the
    judge only when something names it there (a return, an argument, a write to a tests' node) or the
    tests' code may run, thousands a message: counted by the solution's waits (voluntary context
    switches), under 2,000. What the tests see is as before: their own class's nodes, one node however
    often it comes back, a cycle, a node leading to one of theirs, a change made after it crossed, a
    class whose ``__init__`` does more (made by the judge, as before), a call that does not bind."""
    tests = (
        LINKED + "class Node:\n    made = 0\n    def __init__(self, val=0, next=None):\n"
        "        Node.made += 1\n        self.val = val\n        self.next = next\n"
        "head = build(list(range(20000)))\ncopy = Solution().copyList(head)\n"
        "assert to_list(copy) == list(range(20000)) and type(copy) is ListNode and copy is not head\n"
        "assert type(copy.next) is ListNode and 0 <= Solution.waits < 2000\n"
        "a = Solution().cycle()\nassert type(a) is ListNode and a.next.next is a and a.next.val == 2\n"
        "tail = ListNode(9)\nx = Solution().onto(tail)\nassert x.next is tail and x.val == 8 and tail.next is None\n"
        "same = Solution().twice()\nassert same[0] is same[1] and same[2] is same[0].next and same[2].val == 8\n"
        "assert to_list(Solution().keywords()) == [5, 6]\n"
        "h = ListNode(0)\nassert Solution().later(h, lambda n: n.next.val) == [41, 42] and h.next.val == 42\n"
        "assert Solution().kept(lambda n: n.val) == [True, True, True, False]\n"
        "t = Solution().tree()\nassert type(t) is TreeNode and t.left.val == 1 and t.right is None and t.val == 0\n"
        "made = Node.made\nn = Solution().counted()\nassert type(n) is Node and Node.made == made + 1 and n.val == 3\n"
        "assert Solution().unbound() == ['TypeError', 'TypeError']\n"
        "mine = Solution().mine()\nassert mine[:2] == [True, False] and type(mine[2]) is not ListNode\n"
    )
    solution = (
        "import resource\ndef waits():\n    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw\n"
        "class Mine(ListNode):\n    pass\n"
        "class Solution:\n    waits = -1\n"
        "    def copyList(self, head):\n        before = waits()\n        dummy = tail = ListNode(0)\n"
        "        while head:\n            tail.next = ListNode(head.val)\n            tail = tail.next\n"
        "            head = head.next\n        Solution.waits = waits() - before\n        return dummy.next\n"
        "    def cycle(self):\n        a = ListNode(1)\n        a.next = ListNode(2, a)\n        return a\n"
        "    def onto(self, tail):\n        return ListNode(8, tail)\n"
        "    def twice(self):\n        n = ListNode(7, ListNode(8))\n        return [n, n, n.next]\n"
        "    def keywords(self):\n        return ListNode(next=ListNode(val=6), val=5)\n"
        "    def later(self, head, peek):\n        n = ListNode(41)\n        head.next = n\n"
        "        first = peek(head)\n        n.val = 42\n        return [first, head.next.val]\n"
        "    def kept(self, peek):\n        n = ListNode(1)\n        seen = {n}\n        peek(n)\n"
        "        return [n in seen, type(n) is ListNode, isinstance(n, ListNode), isinstance(n, TreeNode)]\n"
        "    def tree(self):\n        t = TreeNode()\n        t.left = TreeNode(1)\n        return t\n"
        "    def counted(self):\n        return Node(3)\n"
        "    def unbound(self):\n        out = []\n        for args, kwargs in (((1, 2, 3), {}), ((1,), {'val': 2})):\n"
        "            try:\n                ListNode(*args, **kwargs)\n            except TypeError:\n"
        "                out.append('TypeError')\n        return out\n"
        "    def mine(self):\n        m = Mine()\n        m.val = 1\n        return [isinstance(m, ListNode), type(m) is ListNode, m]\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests, "timeout_s": 30})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]


async def test_a_node_the_solution_makes_is_of_the_stand_in_the_judge_s_nodes_of_its_class_are_of(
    client: httpx.AsyncClient,
) -> None:
    """A node the solution makes in its own process is of the stand-in for its class's own name, as the
    judge's nodes of that class are (the tests' ``Node = ListNode``: ``Node(1)`` is a ``ListNode``
    there, as it was when the judge made each node; it was of ``Node``'s stand-in)."""
    tests = (
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
        "class Node:\n    pass\nNode = ListNode\nassert f() == [True, False, True]\n"
    )
    solution = (
        "def f():\n    n = Node(1)\n    return [type(n) is ListNode, type(n) is Node, isinstance(n, Node)]\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]


async def test_a_tests_node_of_very_many_attributes_still_reaches_the_solution(
    client: httpx.AsyncClient,
) -> None:
    """A node goes to the solution with its data attributes (a message of at most 16 MB): one holding
    20 MB of attribute names made every message that carried it too large ("protocol error"), where a
    handle alone had crossed. Past a megabyte of names and strings, the others are read as before."""
    tests = (
        LINKED + "head = build([1, 2])\nhead.__dict__.update({'k' * 4000 + str(i): i for i in range(5000)})\n"
        "assert f(head) == [1, 2, 4999]\n"
    )
    solution = "def f(head):\n    return [head.val, head.next.val, getattr(head, 'k' * 4000 + '4999')]\n"
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]


async def test_handing_the_solution_an_object_runs_none_of_the_tests_code(client: httpx.AsyncClient) -> None:
    """Whether an object of the tests' goes to the solution as a node with its attributes is decided by its
    class, looked up by the judge: a class of a metaclass of the tests' was hashed for it, running their
    ``__hash__`` while the solution's copies of their nodes are taken to hold. Only a class of plain
    ``type`` is looked at now."""
    tests = (
        "calls = []\nclass Meta(type):\n    def __hash__(cls):\n        calls.append(cls.__qualname__)\n"
        "        return 1\n"
        "class Thing(metaclass=Meta):\n    pass\n"
        "assert f(Thing()) == 1 and calls == []\n"
    )
    good = await _one(client, "```python\ndef f(x):\n    return 1\n```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]


async def test_a_list_read_off_the_tests_node_is_the_tests_own(client: httpx.AsyncClient) -> None:
    """A list (dict, set) the solution reads off a node of the tests' (an N-ary tree's ``node.children``)
    crossed as a copy: ``node.children.append(child)`` or ``node.children.reverse()`` changed the copy
    only, and the tests saw no change, so every correct solution of such a task failed. What the call
    does to it is written back into the tests' own list now, as for its arguments, and one it returns
    or reads twice is that list itself."""
    tests = (
        "class Node:\n    def __init__(self, val=None, children=None):\n"
        "        self.val = val\n        self.children = children if children is not None else []\n"
        "        self.seen = {}\n"
        "def flat(node):\n    return [node.val, [flat(c) for c in node.children]]\n"
        "root = Node(1, [Node(2), Node(3, [Node(5)]), Node(4)])\nkids = root.children\n"
        "assert mirror(root) is None and flat(root) == [1, [[4, []], [3, [[5, []]]], [2, []]]] and root.children is kids\n"
        "leaf = Node(7)\nassert grow(leaf, [8, 9]) is leaf.children and [c.val for c in leaf.children] == [8, 9]\n"
        "assert type(leaf.children[0]) is Node and leaf.seen == {8: 1, 9: 1}\n"
        "assert same(root) is True\n"
    )
    solution = (
        "def mirror(node):\n    node.children.reverse()\n    for child in node.children:\n        mirror(child)\n"
        "def grow(node, vals):\n    for v in vals:\n        node.children.append(Node(v))\n"
        "        node.seen[v] = node.seen.get(v, 0) + 1\n    return node.children\n"
        "def same(node):\n    return node.children is node.children\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]
    wrong = solution.replace("node.children.reverse()", "node.children.sort(key=lambda c: c.val)")
    bad = await _one(client, f"```python\n{wrong}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "0111", bad


async def test_a_list_the_solution_puts_on_the_tests_node_stays_its_to_change(
    client: httpx.AsyncClient,
) -> None:
    """``node.children = kids`` sent a copy of ``kids`` to the tests' node, so a later ``kids.append(x)``
    (building an N-ary tree's children after linking them) changed the solution's list only: the tests
    saw the list as it was when written, and every such correct solution failed. The list the tests' node
    holds now is numbered in the call as one the tests passed, so what the call does to ``kids`` after
    writing it is written back into it, and ``node.children is kids`` reads back so."""
    tests = (
        "class Node:\n    def __init__(self, val=None, children=None):\n"
        "        self.val = val\n        self.children = children if children is not None else []\n"
        "def flat(node):\n    return [node.val, [flat(c) for c in node.children]]\n"
        "root = Node(1)\nassert grow(root, [2, 3]) is True and flat(root) == [1, [[2, []], [3, []]]]\n"
        "other = Node(1)\nassert tag(other) == 'x' and other.seen == {'a': 2} and other.children == [[5]]\n"
        "assert other.pair == ([], [6])\n"
    )
    solution = (
        "def grow(node, vals):\n    kids = []\n    node.children = kids\n    for v in vals:\n"
        "        kids.append(Node(v))\n    return node.children is kids\n"
        "def tag(node):\n    seen = {}\n    node.seen = seen\n    seen['a'] = 1\n    node.seen['a'] += 1\n"
        "    row = []\n    node.children = [row]\n    row.append(5)\n    pair = ([], [])\n    node.pair = pair\n"
        "    pair[1].append(6)\n    return 'x'\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]


async def test_the_plain_defaults_of_the_tests_node_class_are_the_solution_s_to_read(
    client: httpx.AsyncClient,
) -> None:
    """Tests whose node class gives its attributes class-level defaults (``class TreeNode: left = None``,
    ``__init__`` setting only ``val``) hand the solution leaves without a ``left`` of their own: reading
    it was "no data attribute", and every correct solution failed. A class attribute that is a plain
    value (``None``, a number, a string) is the instance's default to read now, and writing one gives the
    instance its own, as in Python; the class's own stays as it was."""
    tests = (
        "class TreeNode:\n    val = 0\n    left = None\n    right = None\n    color = 'red'\n"
        "    def __init__(self, x):\n        self.val = x\n"
        "def tree(a, b, c):\n    root = TreeNode(a)\n    root.left, root.right = TreeNode(b), TreeNode(c)\n    return root\n"
        "assert depth(tree(1, 2, 3)) == 2 and depth(None) == 0\n"
        "root = tree(1, 2, 3)\nleaf = root.left\nassert invert(root) is root and root.right is leaf and leaf.left is None\n"
        "assert paint(root) == 'red' and root.color == 'blue' and TreeNode.color == 'red'\n"
    )
    solution = (
        "def depth(node):\n    return 1 + max(depth(node.left), depth(node.right)) if node else 0\n"
        "def invert(node):\n    if node:\n        node.left, node.right = invert(node.right), invert(node.left)\n"
        "    return node\n"
        "def paint(node):\n    old = node.color\n    node.color = 'blue'\n    return old\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]
    wrong = solution.replace("invert(node.right), invert(node.left)", "invert(node.left), invert(node.right)")
    bad = await _one(client, f"```python\n{wrong}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "101", bad


async def test_isinstance_of_the_tests_node_class_the_solution_uses_by_name(
    client: httpx.AsyncClient,
) -> None:
    """A solution using the tests' ``ListNode``/``TreeNode`` by name may ask ``isinstance(x, ListNode)`` of
    the tests' nodes (a walk ``while isinstance(node, ListNode)``, a check of what it was given): it was
    False for every node of the tests', which reach the solution as handles. The judge answers it now,
    about its own class; of the solution's own objects it stays the solution's answer."""
    solution = (
        "def count(head):\n    n = 0\n    while isinstance(head, ListNode):\n        n, head = n + 1, head.next\n"
        "    return n\n"
        "def kinds(x):\n    return [isinstance(x, ListNode), isinstance(x, TreeNode), isinstance(object(), TreeNode),\n"
        "            isinstance(TreeNode(0), TreeNode), isinstance(x, (int, ListNode))]\n"
    )
    tests = (
        LINKED + "assert count(build([1, 2, 3])) == 3 and count(None) == 0\n"
        "assert kinds(TreeNode(1)) == [False, True, False, True, False]\n"
        "assert kinds(build([1])) == [True, False, False, True, True]\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]
    wrong = solution.replace("n + 1, head.next", "n + 2, head.next")
    bad = await _one(client, f"```python\n{wrong}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "011", bad


async def test_the_tests_nodes_are_of_the_class_the_solution_uses_by_name(client: httpx.AsyncClient) -> None:
    """A node of the tests' reached the solution as a handle: ``type(node) is ListNode`` was False, and an
    ``__eq__`` or ``__hash__`` the solution gave ``ListNode`` (to keep nodes in a set by value) was not
    theirs. The handles of the tests' nodes of a class the solution uses by name are of its stand-in for
    it now, once it holds their copy, so both hold as in one process; a class of the solution's
    extending ``ListNode`` is still its own."""
    solution = (
        "ListNode.__eq__ = lambda a, b: isinstance(b, ListNode) and a.val == b.val\n"
        "ListNode.__hash__ = lambda a: hash(a.val)\n"
        "class Mine(ListNode):\n    def __init__(self, val):\n        self.val = val\n"
        "def kinds(head, root):\n"
        "    return [type(head) is ListNode, type(root) is TreeNode, type(ListNode(0)) is ListNode,\n"
        "            type(head).__name__, type(Mine(1)) is Mine, isinstance(Mine(1), ListNode)]\n"
        "def distinct(head):\n    seen = set()\n    while head:\n        seen.add(head)\n        head = head.next\n"
        "    return len(seen)\n"
        "def same(a, b):\n    return a == b and a is not b\n"
        "def walk(node):\n    n = 0\n    while type(node) is ListNode:\n        n, node = n + 1, node.next\n"
        "    return n\n"
    )
    tests = (
        LINKED + "assert kinds(build([1]), tree([1])) == [True, True, True, 'ListNode', True, True]\n"
        "assert distinct(build([1, 2, 1, 3, 2])) == 3\n"
        "assert same(build([4]), build([4])) is True and same(build([4]), build([5])) is False\n"
        "assert walk(build(list(range(10000)))) == 10000\n"
        "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val, self.next = val, next\n"
        "    def __len__(self):\n        return 1 + len(self.next or ())\n"
        "assert kinds(ListNode(1), tree([1]))[:4] == [True, True, True, 'ListNode'] and walk(ListNode(1, ListNode(2))) == 2\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]


async def test_an_ordering_the_solution_gives_the_tests_node_class_orders_their_nodes(
    client: httpx.AsyncClient,
) -> None:
    """LeetCode's merge-k-lists solutions give ``ListNode`` an ordering and push nodes on a heap
    (``ListNode.__lt__ = lambda a, b: a.val < b.val``). Of the tests' nodes, handles in the solution, the
    heap's ``<`` raised TypeError, and every such correct solution failed. The ordering the solution gives
    the tests' class (used by name) orders their nodes now; without one they stay unordered."""
    solution = (
        "import heapq\n"
        "ListNode.__lt__ = lambda a, b: a.val < b.val\n"
        "class Solution:\n    def mergeKLists(self, lists):\n"
        "        heap = [node for node in lists if node]\n        heapq.heapify(heap)\n"
        "        tail = dummy = ListNode()\n        while heap:\n            node = heapq.heappop(heap)\n"
        "            tail.next, tail = node, node\n            if node.next:\n"
        "                heapq.heappush(heap, node.next)\n        return dummy.next\n"
        "def unordered(a, b):\n    try:\n        return a < b\n    except TypeError:\n        return 'unordered'\n"
    )
    tests = (
        LINKED + "merged = Solution().mergeKLists([build([1, 4, 5]), build([1, 3, 4]), build([2, 6])])\n"
        "assert to_list(merged) == [1, 1, 2, 3, 4, 4, 5, 6]\nassert Solution().mergeKLists([]) is None\n"
        "assert unordered(TreeNode(1), TreeNode(2)) == 'unordered'\n"
    )
    good = await _one(client, f"```python\n{solution}```", {"tests": tests})
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]
    wrong = solution.replace("a.val < b.val", "a.val > b.val")
    bad = await _one(client, f"```python\n{wrong}```", {"tests": tests})
    assert bad["valid"] and bad["details"]["pass_mask"] == "011", bad


# A reference in LeetCodeDataset's shape (newfacade/LeetCodeDataset): its `prompt`, the imports and
# helpers LeetCode's environment gives a solution, as `prelude`; its `test`, a check(candidate); its
# `entry_point`, a method of a new `Solution`.
LEETCODE_PRELUDE = (
    "import collections\nimport heapq\nimport math\n\n"
    "from typing import *\nfrom collections import *\nfrom heapq import *\nfrom math import *\n\n"
    "inf = float('inf')\n\n"
    "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n\n"
    "def list_node(values: list):\n    if not values:\n        return None\n    head = ListNode(values[0])\n"
    "    p = head\n    for val in values[1:]:\n        node = ListNode(val)\n        p.next = node\n        p = node\n"
    "    return head\n\n"
    "def is_same_list(p1, p2):\n    if p1 is None and p2 is None:\n        return True\n"
    "    if not p1 or not p2:\n        return False\n    return p1.val == p2.val and is_same_list(p1.next, p2.next)\n"
)
LEETCODE_MERGE = {
    "prelude": LEETCODE_PRELUDE,
    "tests": (
        "def check(candidate):\n"
        "    assert is_same_list(candidate(list1 = list_node([1, 2, 4]), list2 = list_node([1, 3, 4])), "
        "list_node([1, 1, 2, 3, 4, 4]))\n"
        "    assert is_same_list(candidate(list1 = list_node([]), list2 = list_node([])), list_node([]))\n"
        "    assert is_same_list(candidate(list1 = list_node([]), list2 = list_node([0])), list_node([0]))\n"
    ),
    "entry_point": "Solution().mergeTwoLists",
}


async def test_a_leetcode_dataset_prelude_gives_the_solution_its_imports_and_the_tests_their_helpers(
    client: httpx.AsyncClient,
) -> None:
    """LeetCode's solutions use ``Optional``, ``List``, ``heapq``, ``deque``, ``inf`` without importing
    them (LeetCode's environment has), and LeetCodeDataset's tests call helpers (``list_node``,
    ``is_same_list``) its ``prompt`` defines: a reference had no place for them, so ``def f(self, head:
    Optional[ListNode])`` was a NameError at load and every such correct solution scored 0. The
    reference's ``prelude`` runs on the tests' side before the tests, and its import statements run in the
    solution's namespace before the solution; ``Solution().mergeTwoLists`` as the entry point is a method
    of a new ``Solution`` (was "the solution does not define" it)."""
    solution = (
        "class Solution:\n"
        "    def mergeTwoLists(self, list1: Optional[ListNode], list2: Optional[ListNode]) -> Optional[ListNode]:\n"
        "        seen: Deque[int] = deque()\n"
        "        tail = dummy = ListNode(0)\n        while list1 or list2:\n"
        "            a = list1.val if list1 else inf\n            b = list2.val if list2 else inf\n"
        "            if a <= b:\n                tail.next, list1 = list1, list1.next\n"
        "            else:\n                tail.next, list2 = list2, list2.next\n"
        "            tail = tail.next\n            seen.append(tail.val)\n"
        "        assert heapq.nsmallest(1, seen or [0]) == [min(seen or [0])]\n"
        "        return dummy.next\n"
    )
    good = await _one(client, f"```python\n{solution}```", LEETCODE_MERGE)
    assert good["valid"] and good["score"] == 1.0, json.dumps(good["details"])[:1500]
    wrong = solution.replace("return dummy.next", "return dummy")
    bad = await _one(client, f"```python\n{wrong}```", LEETCODE_MERGE)
    assert bad["valid"] and bad["score"] == 0.0 and bad["details"]["pass_mask"] == "000", bad
    # the tests' helpers are not the solution's: only the prelude's import statements run there
    helper = solution.replace("return dummy.next", "return list_node([1, 1, 2, 3, 4, 4])")
    borrowed = await _one(client, f"```python\n{helper}```", LEETCODE_MERGE)
    assert borrowed["valid"] and borrowed["details"]["pass_mask"] == "000", borrowed
    assert "list_node" in borrowed["details"]["tests"][0]["message"], borrowed
    # a prelude that does not compile is the reference's
    broken = await _one(client, f"```python\n{solution}```", {**LEETCODE_MERGE, "prelude": "def f(:\n"})
    assert not broken["valid"] and broken["reason"] == "parse_error", broken
    # as is one that raises (before any test, calling nothing of the solution's): not a 0.0 for everyone
    raising = await _one(
        client,
        f"```python\n{solution}```",
        {**LEETCODE_MERGE, "prelude": "import heapq\nraise KeyError('x')\n"},
    )
    assert not raising["valid"] and raising["reason"] == "parse_error", raising
    assert "prelude failed: KeyError" in str(raising["details"]), raising
    # a prelude is Python's (assert-style tests), and a string
    for reference in (
        {"language": "javascript", "tests": "assert(1)", "prelude": "const x = 1;"},
        {**LEETCODE_MERGE, "prelude": ["import heapq"]},
    ):
        refused = await _one(client, "x", reference)
        assert not refused["valid"] and refused["reason"] == "parse_error", refused


async def test_a_solution_name_bound_to_none_reaches_the_tests(client: httpx.AsyncClient) -> None:
    """The solution's names sent to the tests left out every one bound to ``None`` (compared with "no
    node class of that name", None too): ``assert cache is None`` was a NameError for a solution that
    defines ``cache = None``."""
    result = await _one(client, "cache = None\nlimit = 3\n", {"tests": "assert cache is None and limit == 3"})
    assert result["valid"] and result["score"] == 1.0, result
