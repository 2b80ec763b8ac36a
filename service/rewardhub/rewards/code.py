"""``code``: run the response's program against the reference's tests, in the sandbox.

Reference (an object):

* Python assert-style tests: ``{"tests": "<asserts or a HumanEval check(candidate)>", "entry_point":
  "<function name for check(candidate)>", "setup": "<optional>"}``. ``tests`` may also be a list of
  assert strings (MBPP's ``test_list``); ``setup`` runs after the solution, in its namespace (MBPP's
  ``test_setup_code``, which builds fixtures from the solution's own classes). Every ``assert`` of a
  string is one test; every string of a list is one test (a test of a list that loses the solution's
  process, past its time limit or by an exit, fails alone: the ones after it run in a fresh sandbox,
  within ``total_timeout_s``). Tests that define ``check`` and never call it
  need the ``entry_point`` (else ``parse_error``: no assert would run, and anything would pass); an
  ``entry_point`` written ``Solution().name`` (LeetCodeDataset's) is that method of a new ``Solution``.
  ``prelude`` (optional, a string; LeetCodeDataset's ``prompt``): code run on the tests' side before the
  tests (its helpers and classes are the tests': ``list_node()``, ``is_same_list()``, a ``ListNode`` the
  solution then uses by name as the tests' own), whose top-level ``import``/``from ... import``
  statements also run in the solution's namespace before the solution (LeetCode's pre-imported
  ``Optional``, ``List``, ``heapq``, ``deque``), nothing else of it: names they bind that the solution
  does not rebind are not the solution's. One that does not compile is ``parse_error``, one importing a
  module the sandbox lacks ``unsupported``; ``prelude`` is for Python ``tests`` (or ``fn_name``) only.
  pytest-style tests (``from solution import f``, ``def test_...():``, ``class Test...`` methods) are
  called by the judge, each on its own (the functions after one that loses the solution's process run in
  a fresh sandbox, as a list's tests do); ones that take fixtures or have set-up methods are ``unsupported``.
* JavaScript/bash assert-style tests: ``{"language": "javascript", "tests": ..., "setup": ...}``, run in
  the solution's own program after it and the setup. A string is one test; a list is one test a string,
  each in a run of its own (a test sees the setup's declarations, not an earlier test's). A bash test's
  own ``exit 0``, a JavaScript test's own ``process.exit(0)``, ends it as finished (the solution's,
  before the tests ran, fails them). JavaScript runs behind a harness (:data:`_JS_HARNESS`), bash
  after the shell is put back (:func:`_bash_program`).
* stdin/stdout cases, any language: ``{"language": "cpp", "cases": [{"stdin": "...", "stdout": "..."}]}``
  (verl/APPS's ``{"inputs": [...], "outputs": [...]}`` is accepted too). Outputs are compared outside
  the sandbox, which never sees them.
* APPS/TACO call-based problems, Python: ``{"fn_name": "f", "inputs": [[args...]], "outputs": [...]}``
  become one assert per case (:func:`call_based_tests`).
* ``language`` (default: the config's), ``weights`` (one per test/case, default equal).

Score: the (weighted) fraction of tests passed, or 1/0 with ``all_or_nothing``; components
``pass_rate`` and ``passed_all``; ``details.tests`` says what passed and why each failure failed (the
first 100 tests), ``details.pass_mask`` which of all of them passed, as a string of ``1``/``0`` in test
order (what group rewards such as ``verpo`` read per test).

Valid or invalid: everything the *program* does is the model's responsibility, so a crash, a wrong
answer, a timeout (an infinite loop fails that test) or a memory blow-up is a valid score with
per-test details. A program that does not compile (a ``SyntaxError``, a ``gcc`` error, a compile
timeout) stops early: valid ``0.0`` with ``reason: format``. Reference tests (or a setup) that do not
compile are the dataset's ``parse_error``: Python's are compiled by the judge; a JavaScript or bash
program that does not parse has its reference's part (the program less the solution) checked on its
own, and only when that parses is the syntax error the solution's. JavaScript tests (or a setup) that
``require`` a module this server's node cannot load are ``unsupported``, as are bash tests that failed at
``<program>: command not found`` for a common program (``jq``, ``bc``, ``python2``: :data:`_HOST_PROGRAMS`)
that the reference calls, the solution does not name, and this server's sandbox lacks (checked before
the solution runs). No code in the response: ``0.0`` with
``reason: no_answer``. Only the sandbox failing is ``invalid: sandbox_error``; a missing or unreadable
reference is ``missing_reference``/``parse_error``; a language this host cannot run is ``unsupported``.

Cacheable: the result is a function of the code, the tests and the limits (all three in the cache
key: the limits are config fields, and the server's sandbox limits are in the version). The one timing-dependent verdict is a timeout; limits are CPU time:
for Python assert tests the judge reads the solution's from ``/proc``; a case's program (and a compile
step) is timed by its own and its waited-for children's CPU time, killed once that passes the limit
(``RLIMIT_CPU`` at the whole second above), and one that finished past it is a timeout too. The wall
clock only caps a test or case at 3x ``timeout_s`` (a program that sleeps or waits), within
``total_timeout_s``; concurrency never exceeds the cores, so a cached timeout is a real one. A result
in which the wall clock decided a verdict (tests or cases cut off by ``total_timeout_s``, a timeout
with CPU time to spare) is returned but not cached: on an idle host the same program may pass them.
``options.use_cache=false`` re-runs anyway.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import secrets
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.code_extract import ExtractMode, extract_code
from rewardhub.sandbox import LANGUAGES, Language, RawRun, SandboxUnavailable, resolve_language
from rewardhub.sandbox.harness import ExecReport, RunReport, pytest_style_tests, unittest_style
from rewardhub.sandbox.pool import SandboxPool, refusal, sandbox_version

__all__ = ["CodeConfig", "CodeReward", "CodeTask", "outputs_match", "parse_task"]

OutputMatch = Literal["whitespace", "lines", "exact", "numeric"]
# a number token of a program's output (no "_" digit groups, "nan" or "inf", no non-ASCII digits: those
# must match as text)
_NUMBER_TOKEN = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", re.ASCII)
_INTEGER_TOKEN = re.compile(r"[-+]?\d+", re.ASCII)
# a number token's parts, to read its exact value without a float (or an int: see _integral)
_NUMBER_PARTS = re.compile(
    r"(?P<sign>[-+]?)(?P<int>\d*)(?:\.(?P<frac>\d*))?(?:[eE](?P<exp>[-+]?\d+))?", re.ASCII
)
# An exponent past this many digits writes no integer a program could print in full (nor a want token).
_EXPONENT_DIGITS = 18
_MAX_DETAIL_TESTS = 100
_TAIL = 1000
# The wall clock caps a step at this many times its CPU limit (the guest's _WALL_FACTOR).
_WALL_FACTOR = 3.0
_STDERR_KEEP = 4096  # of each run's stderr, the tail (messages show 300 or _TAIL characters of it)


class CodeConfig(RewardConfig):
    language: str = Field("python", description="Language when the reference does not name one.")

    @field_validator("language")
    @classmethod
    def _known_language(cls, v: str) -> str:
        """A typo here is the config's fault, answered 422 before anything runs (it made every item that
        names no language ``unsupported``). Whether this host has the language installed is not: items
        may name their own, so an uninstalled default stays an item's ``unsupported``."""
        if resolve_language(v) is None:
            known = sorted(LANGUAGES)
            raise ValueError(f"unknown language {v!r}; known: {', '.join(known)}")
        return v

    timeout_s: float = Field(
        5.0,
        gt=0,
        le=300,
        description="Per test (one assert, one case), seconds of the program's CPU time (the wall clock "
        "caps it at 3x).",
    )
    total_timeout_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="Per item, all tests together, wall-clock seconds in the sandbox (not the queue): tests "
        "it cut off fail, and the result is not cached.",
    )
    compile_timeout_s: float = Field(
        10.0, gt=0, le=300, description="Compiling (C, C++), seconds of the compiler's CPU time."
    )
    memory_mb: int | None = Field(
        None, ge=64, le=65536, description="Address-space limit per process, MiB (default: the server's)."
    )
    output_match: OutputMatch = Field(
        "whitespace",
        description="stdout comparison: `whitespace` (same tokens), `lines` (trailing spaces and blank "
        "lines ignored), `exact` (bytes) or `numeric` (same tokens, numbers within `float_tolerance`).",
    )
    float_tolerance: float = Field(
        1e-6,
        ge=0,
        le=1,
        description="`numeric`: two numbers match when |got - want| <= tol * max(1, |want|) (absolute "
        "below 1, relative above, as judges' real-number checkers do); an integer answer only by the same "
        "integer, in any spelling (7, 7.0, 7e0), unless the output has a fractional part (6.9999999).",
    )
    all_or_nothing: bool = Field(False, description="Score 1 only when every test passes, else 0.")
    extract: ExtractMode = Field(
        "auto",
        description="`auto`: last fenced block of the language, else last untagged block, else the whole "
        "response; `fenced`: a fenced block is required; `raw`: the whole response is the program.",
    )


@dataclass(slots=True)
class CodeTask:
    """A reference, validated."""

    language: Language
    tests: str | list[str] | None = None
    entry_point: str | None = None
    setup: str | None = None
    prelude: str | None = None
    cases: list[tuple[bytes, str]] = field(default_factory=list)  # (stdin, expected stdout)
    weights: list[float] | None = None


class ReferenceError_(ValueError):
    """The reference cannot be used; carries the invalid reason. ``transient``: because of this server
    (a language it lacks), not of the item: a composite zeroing it must not cache the stand-in."""

    def __init__(self, reason: Reason, message: str, *, transient: bool = False):
        super().__init__(message)
        self.reason = reason
        self.transient = transient


def _text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ReferenceError_(Reason.PARSE_ERROR, f"reference.{where} must be a string")


def parse_task(reference: Any, default_language: str, available: dict[str, Language]) -> CodeTask:
    """Read an item's reference; raises :class:`ReferenceError_` with the reason when unusable."""
    if reference is None:
        raise ReferenceError_(Reason.MISSING_REFERENCE, "code needs a reference with `tests` or `cases`")
    if not isinstance(reference, dict):
        raise ReferenceError_(Reason.PARSE_ERROR, "the code reference must be an object")
    name = reference.get("language")
    if name is None:  # absent or null (datasets exported with a column for it): the config's
        name = default_language
    lang = resolve_language(str(name))
    if lang is None:
        raise ReferenceError_(Reason.UNSUPPORTED, f"unknown language {name!r}")
    if lang.name not in available:
        raise ReferenceError_(
            Reason.UNSUPPORTED, f"{lang.name} is not installed on this server", transient=True
        )
    task = CodeTask(language=lang)
    prelude = reference.get("prelude")
    if prelude is not None:  # (whether it compiles: the sandbox's run_tests, a parse_error too)
        if not isinstance(prelude, str):
            raise ReferenceError_(Reason.PARSE_ERROR, "reference.prelude must be a string")
        task.prelude = prelude if prelude.strip() else None
    cases = reference.get("cases")
    fn_name = reference.get("fn_name")
    if fn_name is not None and cases is None and reference.get("tests") is None:
        # APPS / TACO call-based problems (verl's prime_code reads the same JSON): no stdin, the
        # function is called with each input's arguments; Python only, as in APPS
        if lang.name != "python":
            raise ReferenceError_(
                Reason.UNSUPPORTED, f"call-based tests (fn_name) are Python only, not {lang.name}"
            )
        task.tests = call_based_tests(fn_name, reference.get("inputs"), reference.get("outputs"))
        return _with_weights(task, reference)
    if (
        cases is None
        and isinstance(reference.get("inputs"), list)
        and isinstance(reference.get("outputs"), list)
    ):
        for k, stdin in enumerate(reference["inputs"]):
            if isinstance(stdin, list | dict):
                # APPS/TACO's call-based rows hold argument lists here: a row whose fn_name was lost
                # (absent, or a null column) is the dataset's, and the message names the field
                raise ReferenceError_(
                    Reason.PARSE_ERROR,
                    f"reference.inputs.{k} is not a string: a stdin case's input is text, a call-based "
                    "problem's arguments need reference.fn_name, the function to call",
                )
        cases = [{"stdin": i, "stdout": o} for i, o in _io_pairs(reference["inputs"], reference["outputs"])]
    tests = reference.get("tests")
    if cases is not None:
        if not isinstance(cases, list) or not cases:
            raise ReferenceError_(Reason.PARSE_ERROR, "reference.cases must be a non-empty list")
        for k, case in enumerate(cases):
            if not isinstance(case, dict) or "stdout" not in case:
                raise ReferenceError_(Reason.PARSE_ERROR, f"reference.cases.{k} needs `stdout` (and `stdin`)")
            # absent or null (a dataset's column, empty for a problem that reads nothing): no input
            stdin = case.get("stdin")
            stdin = _text("" if stdin is None else stdin, f"cases.{k}.stdin")
            task.cases.append(
                (stdin.encode("utf-8", "surrogatepass"), _text(case["stdout"], f"cases.{k}.stdout"))
            )
    elif tests is not None:
        if isinstance(tests, list):
            if not tests or not all(isinstance(t, str) for t in tests):
                raise ReferenceError_(
                    Reason.PARSE_ERROR, "reference.tests must be a string or a list of strings"
                )
            task.tests = list(tests)
        elif isinstance(tests, str) and tests.strip():
            task.tests = tests
        else:
            raise ReferenceError_(Reason.PARSE_ERROR, "reference.tests must be a string or a list of strings")
        if lang.name in ("c", "cpp"):
            raise ReferenceError_(
                Reason.UNSUPPORTED, f"{lang.name} is scored with stdin/stdout `cases`, not `tests`"
            )
        if lang.name == "python" and isinstance(task.tests, str) and unittest_style(task.tests):
            raise ReferenceError_(
                Reason.UNSUPPORTED,
                "unittest.TestCase tests are not run: write the tests as assert statements",
            )
        if lang.name == "python" and isinstance(task.tests, str):
            fixtures = [f"{c}.{n}" if c else n for c, n, _, _, ok in pytest_style_tests(task.tests) if not ok]
            if fixtures:
                raise ReferenceError_(
                    Reason.UNSUPPORTED,
                    f"pytest tests that take fixtures, are async or use set-up methods are not run: "
                    f"{', '.join(fixtures[:5])}",
                )
    else:
        raise ReferenceError_(Reason.MISSING_REFERENCE, "the code reference has neither `tests` nor `cases`")
    if task.prelude is not None and (task.cases or lang.name != "python"):
        raise ReferenceError_(
            Reason.PARSE_ERROR, "reference.prelude is for Python tests (`tests` or `fn_name`), not `cases`"
        )
    for key in ("entry_point", "setup"):
        value = reference.get(key)
        if value is not None:
            setattr(task, key, _text(value, key))
    _with_weights(task, reference)
    if isinstance(task.tests, str) and lang.name != "python" and task.weights and len(task.weights) != 1:
        # said before anything runs (the sandbox would only find one test to weigh)
        raise ReferenceError_(
            Reason.PARSE_ERROR,
            f"{lang.name} tests given as one string are one test, so reference.weights has "
            f"{len(task.weights)} entries for 1 test: give the tests as a list, one string a test",
        )
    return task


def call_based_tests(fn_name: Any, inputs: Any, outputs: Any) -> list[str]:
    """One assert per case of an APPS call-based problem, as APPS's own checker judges it: the function
    (a method of ``Solution`` when the solution defines that class, as LeetCode-style problems do) is
    called with the case's arguments; a tuple result reads as a list; the result matches the expected
    output (a NaN in it by a NaN), or its only element (APPS wraps many outputs in a list: ``[[3]]`` for a 3).

    The helpers live in the tests, so they run in the judge: the solution's return values reach the
    comparison as plain builtin values, never as objects with their own ``__eq__``."""
    if not isinstance(fn_name, str) or not fn_name.isidentifier() or fn_name.startswith("__"):
        raise ReferenceError_(Reason.PARSE_ERROR, "reference.fn_name must be a function name")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or not inputs:
        raise ReferenceError_(
            Reason.PARSE_ERROR, "reference.fn_name needs non-empty lists inputs and outputs"
        )
    pairs = _io_pairs(inputs, outputs)
    if not all(isinstance(args, list) for args in inputs):
        raise ReferenceError_(Reason.PARSE_ERROR, "each of reference.inputs must be a list of arguments")
    helpers = (
        "def _apps_function():\n"
        "    try:\n"
        "        cls = Solution\n"
        "    except NameError:\n"
        f"        return {fn_name}\n"
        f"    return getattr(cls(), {fn_name!r}) if hasattr(cls, {fn_name!r}) else {fn_name}\n"
        "def _apps_eq(got, want):\n"
        "    if type(want) is float and want != want:\n"
        "        return type(got) is float and got != got\n"
        "    if type(want) is list and type(got) is list:\n"
        "        return len(got) == len(want) and all(map(_apps_eq, got, want))\n"
        "    if type(want) is dict and type(got) is dict:\n"
        "        return got.keys() == want.keys() and all(_apps_eq(got[k], want[k]) for k in want)\n"
        "    return got == want\n"
        "def _apps_same(got, want, nan=False):\n"
        "    if isinstance(got, tuple):\n"
        "        got = list(got)\n"
        "    eq = _apps_eq if nan else (lambda a, b: a == b)\n"
        "    return eq(got, want) or (isinstance(want, list) and len(want) == 1 and eq(got, want[0]))\n"
    )
    tests = [
        f"assert _apps_same(_apps_function()(*{_literal(args)}), {_literal(want)}"
        f"{', nan=True' if _has_nan(want) else ''})"
        for args, want in pairs
    ]
    return [helpers + tests[0], *tests[1:]]


def _has_nan(value: Any) -> bool:
    """Whether an expected output holds a NaN (JSON's NaN, as Python's json writes a float nan): it
    equals nothing, itself included, so every solution failed that case; such a case is compared by
    ``_apps_eq``, a NaN matched by a NaN (the others keep ``==``, the comparison APPS's checker makes)."""
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    return False


def _literal(value: Any) -> str:
    """A Python expression for a JSON value: ``repr`` wrote JSON's 1e400 (infinity) as ``inf``, a name
    the tests do not define, so every solution failed that case with a NameError."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _io_pairs(inputs: list[Any], outputs: list[Any]) -> list[tuple[Any, Any]]:
    """APPS-style ``inputs``/``outputs`` lists (stdin cases or call arguments) as pairs."""
    if len(inputs) != len(outputs):
        raise ReferenceError_(Reason.PARSE_ERROR, "reference.inputs and reference.outputs differ in length")
    return list(zip(inputs, outputs, strict=True))


def _with_weights(task: CodeTask, reference: dict[str, Any]) -> CodeTask:
    weights = reference.get("weights")
    if weights is not None:
        if not isinstance(weights, list) or not all(_finite_weight(w) for w in weights):
            raise ReferenceError_(
                Reason.PARSE_ERROR, "reference.weights must be a list of non-negative finite numbers"
            )
        task.weights = [float(w) for w in weights]
        if not math.isfinite(sum(task.weights)) or sum(task.weights) <= 0:
            raise ReferenceError_(
                Reason.PARSE_ERROR, "reference.weights must not all be zero, nor sum past a float"
            )
    return task


def _finite_weight(w: Any) -> bool:
    """A number a float holds, finite and non-negative (JSON's 1e400 is infinity, and an integer of
    400 digits no float holds: a NaN score, an OverflowError)."""
    if isinstance(w, bool) or not isinstance(w, int | float):
        return False
    try:
        return math.isfinite(float(w)) and w >= 0
    except OverflowError:
        return False


def _integral(token: str) -> tuple[bool, str, int] | None:
    """A number token's exact value when it is an integer, as (negative, significant digits without
    leading or trailing zeros, power of ten): ``1000000007``, ``1000000007.0`` and ``1.000000007e9`` are
    all ``(False, "1000000007", 0)``, ``1e9`` and ``1000000000`` both ``(False, "1", 9)``. None when it has
    a fractional part. No float (past 2**53 it rounds), no ``int()`` of the digits or of the exponent (it
    refuses more than 4300 digits, and the program chooses how many it prints)."""
    m = _NUMBER_PARTS.fullmatch(token)
    if m is None:
        return None
    frac = m.group("frac") or ""
    digits = (m.group("int") + frac).lstrip("0")
    if not digits:  # zero, whatever its sign or exponent
        return (False, "", 0)
    significant = digits.rstrip("0")
    written = m.group("exp") or "0"
    magnitude = written.lstrip("+-").lstrip("0") or "0"
    if len(magnitude) > _EXPONENT_DIGITS:
        # 10 to a power of 19+ digits: an integer no token of an output matches, or a fraction
        return None if written.startswith("-") else (m.group("sign") == "-", significant, -1)
    power = (-1 if written.startswith("-") else 1) * int(magnitude)
    power += len(digits) - len(significant) - len(frac)
    if power < 0:
        return None
    return (m.group("sign") == "-", significant, power)


def _close(got: str, want: str, tol: float) -> bool:
    if got == want:
        return True
    if not (_NUMBER_TOKEN.fullmatch(got) and _NUMBER_TOKEN.fullmatch(want)):
        return False
    if _INTEGER_TOKEN.fullmatch(want):
        # An integer answer is compared exactly when the program printed an integer, in any spelling:
        # 1000000008 or 1000000008.0 is a wrong answer to 1000000007, however close in relative terms
        # (and past 2**53 floats could not tell them apart). A fractional part keeps the tolerance.
        exact = _integral(got)
        if exact is not None:
            return exact == _integral(want)
    x, y = float(got), float(want)
    return math.isfinite(x) and math.isfinite(y) and abs(x - y) <= tol * max(1.0, abs(y))


def outputs_match(got: bytes, expected: str, mode: OutputMatch, tolerance: float = 1e-6) -> bool:
    if mode == "exact":
        return got == expected.encode("utf-8", "surrogatepass")
    text = got.decode("utf-8", "replace")
    if mode == "whitespace":
        return text.split() == expected.split()
    if mode == "numeric":
        g, w = text.split(), expected.split()
        return len(g) == len(w) and all(_close(a, b, tolerance) for a, b in zip(g, w, strict=True))

    def norm(s: str) -> list[str]:
        lines = [line.rstrip() for line in s.replace("\r\n", "\n").split("\n")]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    return norm(text) == norm(expected)


def _stdout_cap(expected: str) -> int:
    """How much of a case's stdout is kept: what any comparison mode can need (the same tokens with other
    whitespace, numbers with more digits), so a program flooding its stdout in every case does not make
    the service hold the output limit per case. Past it the case fails with "output limit exceeded"."""
    return max(64 << 10, 16 * len(expected.encode("utf-8", "surrogatepass")) + 4096)


def _tail(data: bytes | str, n: int = _TAIL) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text if len(text) <= n else "…" + text[-n:]


@register
class CodeReward(Reward[CodeConfig]):
    name: ClassVar[str] = "code"
    # 1.1: output_match "numeric"; console.assert fails JavaScript tests (it only printed); APPS fn_name
    # 1.2: details.pass_mask, every test's verdict as 1/0 (details.tests stops at 100)
    # 1.3: a Python solution's prints past the output cap are dropped, no longer a BrokenPipeError that
    # failed the tests; assert-style tests' solutions import the interpreter's site-packages, as cases do;
    # memory_mb limits the program, not its compiler or V8's own address-space reservations; a program
    # cannot make its later cases a sandbox_error; a setup that does not compile is parse_error; a
    # JavaScript or bash syntax error is reason format, as Python's; a case's stdout past 16x its
    # expected output (64 KiB at least) is "output limit exceeded"; asserts in a method of a class the
    # tests define are recorded (name mangling made them a NameError); pytest-style test functions are
    # called (every solution passed them), `from solution import f` works; tests importing a module the
    # sandbox lacks are unsupported (were a 0.0), ones importing an installed package run; verdicts of
    # many tests with long non-ASCII labels are no longer cut off; `numeric` compares two integers
    # exactly (1000000008 passed for 1000000007 within the relative tolerance)
    # 1.3.2: a case's (and a compile step's) time limit is the program's CPU time, the wall clock capping
    # it at 3x: a correct program on a loaded host was a wall-clock timeout, cached as its own 0.0
    # 1.3.3: JavaScript/bash tests the wall clock cut off (CPU time to spare) are not cached; their CPU
    # limit is a third of total_timeout_s (was all of it, which the wall clock always reached first); a
    # Python test (or load) stopped at its wall-clock cap with CPU time to spare is "timeout (wall
    # clock)", not cached; a load that died says why (was "protocol error"); a compile timeout with CPU
    # time to spare is not cached; a null language is the config's (was the language "None"); a
    # JavaScript or bash solution with assert tests that does not parse is reason format (was a crash);
    # bash extglob patterns pass the syntax check; non-finite weights are parse_error; a line of ```
    # indented 4+ columns past the opening fence no longer ends the program; JavaScript tests run in a
    # block of their own (a const both they and the solution declared was a SyntaxError); an APPS
    # argument or output of 1e400 is infinity in the tests (was the undefined name `inf`)
    # 1.3.4: `numeric` compares an integer answer exactly against an integer-valued decimal or exponent
    # form too (1000000008.0 passed for 1000000007 within the relative tolerance); a fence tag with a
    # language standard or version (c++17, cpp20, c11, py3) names its language (the block was passed over);
    # a list of JavaScript/bash tests is one test a string, each run on its own, weighted by `weights`
    # (was one verdict for the whole list, weights ignored); weights for a string of them are parse_error
    # 1.3.5: JavaScript/bash reference tests or setup that do not parse are parse_error (were the
    # solution's reason format, 0.0); an APPS expected output of NaN is matched by a NaN (nothing matched
    # it: every solution failed that case); JavaScript tests requiring a module node cannot load here are
    # unsupported (were a 0.0), as are bash tests failing at a program the reference calls and the
    # sandbox lacks (jq, bc, python2: `command not found`, were a 0.0)
    # 1.3.6: JavaScript/bash tests' completion marker is in two pieces in the program's text (a program
    # that printed its own source and exited passed); a bash test's own `exit 0` prints it (such tests
    # failed every solution, a correct one too)
    # 1.3.7: JavaScript tests run after a harness that reads the completion marker from the run's stdin
    # (in no source, file or global: the marker read from the program's or its callers' source passed),
    # freezes `assert` (`require('assert').strictEqual = () => {}` passed) and gives the tests `require`,
    # `assert`, `console` and `process` as parameters the solution cannot shadow (its own `function
    # require` passed); the solution runs as a script of its own (solution.js), its syntax errors still
    # reason format; the tests' own `process.exit(0)` prints the marker (such tests failed every solution)
    # 1.3.8: JavaScript tests' marker is printed once the event loop is done (was as soon as their
    # synchronous part returned: an async test failing later passed if the solution swallowed the
    # rejection, `process.on('unhandledRejection', () => {})`); an unhandled rejection or uncaught
    # exception fails the run whatever listeners the solution adds or removes; the tests' `module` and
    # `exports` are the solution's (`module.exports = f` then `module.exports(1)` in the tests failed)
    # 1.3.9: JavaScript tests waiting at their end on a promise that never settles (`await f()`, `.then`)
    # fail, "the tests never finished" (node exited 0 there and they passed); the tests are the body of
    # an async function, so a top-level `await` in them runs (was parse_error); their static `import`
    # declarations (`import assert from 'node:assert'`) run as require() of the harness's (were
    # parse_error), other ES module syntax (export, import.meta, import attributes) is unsupported
    # 1.3.10: bash tests run after the shell is put back (the solution's functions, aliases and disabled
    # builtins named as `exit`, `[`, `test`, `set`..., its DEBUG/RETURN/ERR traps: `exit() { :; }` passed,
    # as did `[() { :; }`, `alias exit=:`, `enable -n set`); a solution that makes that impossible runs no
    # test; the marker is only in the run's stdin (it was in the program's text, read and joined), the
    # solution in solution.sh; a listed test's number cannot be set by the solution (`readonly
    # __rewardhub_test=0` ran the first test in every run); listed tests' extglob patterns parse; its
    # signals' traps are cleared and no DEBUG trap may be left (one skipping its removal, or a CHLD trap
    # putting one back, passed)
    # 1.3.11: a Python function that changes a list, dict or set argument in place (LeetCode's "rotate
    # nums in place") changes the tests' object too (arguments crossed by value: every correct solution
    # failed such tests, and one changing an argument the tests expect unchanged passed); a listed test
    # that loses the solution's process (its time limit, an exit, a crash) no longer fails the tests after
    # it "not run": they run again in a fresh sandbox, within the item's total time (pytest-style test
    # functions after one that lost it too, its own asserts failing with the reason); an exception of a
    # class the solution defined reaches the tests as the builtin one it extends (`class
    # NegativeError(ValueError)` was no ValueError to the tests' `except ValueError`); a case's null
    # stdin is no input (was parse_error); `isinstance(obj, Stack)` and `issubclass` against a class of
    # the solution work, the solution's process answering (a TypeError failed every correct solution)
    # 1.3.15: a solution may read and write the data attributes of the tests' own objects (the ListNode
    # or TreeNode their linked lists and trees are built of: every correct solution failed such tasks);
    # the judge's hooks in a namespace the tests hand over (`f(globals())`), and its builtins that run or
    # reach code (`exec`, `getattr`, of `f(vars(builtins))`: the solution's own now), are not the
    # solution's to call; `result == expected`, a node of the solution's against the tests' with an
    # `__eq__`, asks the tests' `__eq__`
    # 1.3.16: where the tests define a ListNode, TreeNode or Node class, a solution using it without
    # defining it (LeetCode's `dummy = ListNode(0)`, `Optional[ListNode]`) makes the tests' own nodes (a
    # NameError failed every such solution; `isinstance` against it and an ordering the solution gives
    # it for a heap work too); a list, dict or set the solution reads off a tests' node
    # (`node.children.append(child)`) and changes is written back into the tests' own (was a copy); a
    # plain class-level default of a tests' node class (`left = None`) is the solution's to read
    # 1.3.17: a reference's `prelude` (LeetCodeDataset's `prompt`) runs before the tests, its import
    # statements in the solution's namespace before the solution (LeetCode's solutions use `deque`,
    # `heapq`, `inf` without importing them: a NameError failed every such correct solution); an
    # entry_point `Solution().name` is that method of a new Solution (was "the solution does not
    # define"); a module-level name the solution binds to None reaches the tests (was left out)
    # 1.3.18: the tests' nodes (of a class without __bool__, __len__ or attribute hooks) reach the
    # solution with the data attributes of the nodes after them, thousands a message, and its writes go
    # back batched before anything else it sends: a round trip per attribute access made reversing a
    # 100,000-node list cost ~6 s of CPU (a timeout on a loaded host), now ~1.5 s; such a node of a
    # class the solution uses by name (ListNode) is of its stand-in there: `type(node) is ListNode`, and
    # an `__eq__`/`__hash__` the solution gives the class is its nodes' (were the handle's); a list the
    # solution writes onto a tests' node (`node.children = kids`) and changes after is written back
    # into the node's (the node kept a copy as written)
    # 1.3.19: the nodes a solution makes of a tests' class whose `__init__` only assigns (`ListNode(x)`)
    # are made in its process and in the judge's thousands a message when they cross (a round trip each:
    # copying a 20,000-node list took ~80,000); past 2**17 a run, one at a time as before
    # 1.3.20: a handle number out of the range of any object's (a forged message's) is the solution's
    # protocol error at once (16,384+ colliding ones kept the judge busy past the item's total time), and
    # so is a dict or set of the solution's with over 128 keys of one hash, or an exception class of its
    # with over 64 bases (the judge's work on them quadratic, cubic)
    version: ClassVar[str] = "1.3.20"
    description: ClassVar[str] = (
        "Runs the response's program in the bubblewrap sandbox against assert-style tests (Python: "
        "HumanEval check(candidate), MBPP test lists) or stdin/stdout cases (python, c, cpp, javascript, "
        "bash); score = fraction of tests passed. Verdicts cannot be forged by the program."
    )
    config_model = CodeConfig
    reads = ("response", "reference")

    def unavailable(self) -> str | None:
        return refusal(self.runtime.sandbox)

    def version_for(self, config: CodeConfig) -> str:
        # the server's sandbox limits decide verdicts too (a memory_mb left to the server's, the output
        # limit, the cap on timeout_s): other limits, another version and cache key
        return sandbox_version(self.version, self.runtime.sandbox)

    def ready(self) -> dict[str, Any]:
        pool = self.runtime.sandbox
        if pool is None:
            return {"ok": True, "code_execution": False, "message": "no sandbox in this runtime"}
        return {"ok": True, "code_execution": pool.level != "none", "isolation": pool.level}

    async def score(self, items: Sequence[ScoreItem], config: CodeConfig, ctx: ScoreContext) -> list[Outcome]:
        pool = self.runtime.sandbox
        outcomes: list[Outcome | None] = [None] * len(items)
        message = refusal(pool)
        if pool is None or message is not None:  # (a missing pool has a message too)
            return [Outcome.invalid(Reason.SANDBOX_ERROR, str(message)) for _ in items]
        jobs: list[tuple[int, CodeTask, str, str]] = []
        for i, item in enumerate(items):
            try:
                task = parse_task(item.reference, config.language, pool.languages)
            except ReferenceError_ as exc:
                outcomes[i] = Outcome.invalid(exc.reason, str(exc), transient=exc.transient)
                continue
            found = extract_code(item.response, task.language, config.extract)
            if found is None:
                outcomes[i] = Outcome(
                    0.0,
                    Reason.NO_ANSWER,
                    {"pass_rate": 0.0, "passed_all": 0.0},
                    {"language": task.language.name},
                )
                continue
            jobs.append((i, task, found.code, found.source))
        if jobs:
            with pool.admit(len(jobs)):
                done = await asyncio.gather(
                    *(self._run(pool, task, code, config) for _, task, code, _ in jobs)
                )
            for (i, task, _, source), outcome in zip(jobs, done, strict=True):
                outcome.details.setdefault("language", task.language.name)
                if outcome.valid:
                    outcome.details["extracted_from"] = source
                outcomes[i] = outcome
        return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in outcomes]

    async def _run(self, pool: SandboxPool, task: CodeTask, code: str, config: CodeConfig) -> Outcome:
        try:
            if task.cases:
                return await self._run_cases(pool, task, code, config)
            if task.language.name == "python":
                return await self._run_pytests(pool, task, code, config)
            return await self._run_script_tests(pool, task, code, config)
        except SandboxUnavailable as exc:
            return Outcome.invalid(Reason.SANDBOX_ERROR, str(exc))

    # --- Python assert-style tests ------------------------------------------------------------
    async def _run_pytests(self, pool: SandboxPool, task: CodeTask, code: str, config: CodeConfig) -> Outcome:
        assert task.tests is not None
        report, raw = await pool.run_tests(
            solution=code,
            tests=task.tests,
            entry_point=task.entry_point,
            setup=task.setup,
            prelude=task.prelude,
            test_timeout_s=config.timeout_s,
            total_timeout_s=config.total_timeout_s,
            memory_mb=config.memory_mb,
        )
        broken = _sandbox_fault(raw, report.ready, report.error)
        if broken is not None:
            return broken
        if report.reference_error is not None:
            return Outcome.invalid(Reason.PARSE_ERROR, report.reference_error)
        if report.reference_unsupported is not None:  # this server's lack, not the item's
            return Outcome.invalid(Reason.UNSUPPORTED, report.reference_unsupported, transient=True)
        timing = _timing(raw)
        if report.load_status == "syntax":
            return _compile_failed(report.load_message, timing)
        n = len(report.labels)
        why_missing = _why_missing(raw, report.done)
        results: list[tuple[str, bool, str]] = []
        for k in range(n):
            passed, message = report.verdicts.get(k, (False, why_missing))
            results.append((report.labels[k], passed, message))
        stderr, by_wall = raw.stderr, raw.deadline_hit
        resumable = isinstance(task.tests, list) or bool(pytest_style_tests(task.tests))
        if resumable and report.load_status == "ok":
            rerun = await self._after_lost_solution(pool, task, code, config, results, raw)
            if isinstance(rerun, Outcome):
                return rerun
            timing, stderr, wall = rerun
            by_wall = by_wall or wall
        details: dict[str, Any] = dict(timing)
        if report.load_status not in (None, "ok"):
            details["load_error"] = report.load_message
        if stderr and not all(p for _, p, _ in results):
            details["stderr"] = _tail(stderr)
        # the judge's own words for the wall clock deciding (the item's total spent, a test's wall-clock
        # cap with CPU time to spare); the solution's load is timed as a test is
        messages = [m for _, _, m in results] + [report.load_message or ""]
        by_wall = by_wall or any(m in _BY_WALL for m in messages)
        return _scored(results, task.weights, config, details, by_wall=by_wall)

    async def _after_lost_solution(
        self,
        pool: SandboxPool,
        task: CodeTask,
        code: str,
        config: CodeConfig,
        results: list[tuple[str, bool, str]],
        raw: RawRun,
    ) -> Outcome | tuple[dict[str, Any], bytes, bool]:
        """The tests of a list, and pytest-style test functions, share one solution process; a test (or
        function) that loses it (past its time limit, an exit, a crash) leaves the ones after it "not
        run". Those run again in a fresh sandbox, within what is left of the item's total time, as often
        as one loses it (each run gets further: the test or function that lost it has its verdict), so a
        solution too slow on one input fails that test only, as a case would (and as pytest would run
        the functions after it). Not tests of a string lost outside a pytest-style function (its
        module-level asserts, HumanEval's ``check``): they cannot be resumed. ``results`` is updated in
        place; returned: the timing of all the runs, their stderr and whether the wall clock decided
        (the total spent before the tests' turn), or the invalid outcome of a sandbox that failed."""
        n = len(results)
        # the asserts of each pytest-style test function, in the order the judge calls them
        ranges = (
            [(int(first), int(end)) for _, _, first, end, _ in pytest_style_tests(task.tests)]
            if isinstance(task.tests, str)
            else None
        )
        total = min(config.total_timeout_s, pool.max_timeout_s)
        spent, queued, stderr, by_wall = raw.wall_s, raw.queue_s, raw.stderr, False
        while True:
            lost = next((k for k, (_, ok, m) in enumerate(results) if not ok and _lost_solution(m)), None)
            if lost is None:
                break
            tests: str | list[str]
            if isinstance(task.tests, list):  # the tests from the first not run, each its own
                tests, calls_from, mapping = task.tests[lost:], 0, {lost + k: k for k in range(n - lost)}
            else:  # the functions from the first not run; the module-level asserts keep their verdicts
                assert task.tests is not None and ranges is not None
                calls_from = next((k for k, (first, _) in enumerate(ranges) if first >= lost), len(ranges))
                tests, mapping = (
                    task.tests,
                    {i: i for first, end in ranges[calls_from:] for i in range(first, end)},
                )
                if any(_lost_solution(m) and i not in mapping for i, (_, _, m) in enumerate(results)):
                    break  # lost outside the functions: nothing to resume
            left = total - spent
            if left <= 0.05:  # (the judge reports past its total as "total time limit")
                for i in mapping:
                    label, ok, m = results[i]
                    results[i] = (label, ok, "not run: total time limit" if _lost_solution(m) else m)
                by_wall = True
                break
            report, again = await pool.run_tests(
                solution=code,
                tests=tests,
                entry_point=task.entry_point,
                setup=task.setup,
                prelude=task.prelude,
                test_timeout_s=config.timeout_s,
                total_timeout_s=left,
                memory_mb=config.memory_mb,
                calls_from=calls_from,
            )
            broken = _sandbox_fault(again, report.ready, report.error)
            if broken is not None:
                return broken
            spent, queued, stderr = spent + again.wall_s, queued + again.queue_s, stderr + again.stderr
            by_wall = by_wall or again.deadline_hit
            if report.load_status != "ok" or len(report.labels) != (
                len(tests) if isinstance(tests, list) else n
            ):
                break  # (it loaded before: a load past the time left, say; the tests stay not run)
            why_missing = _why_missing(again, report.done)
            for i, k in mapping.items():
                results[i] = (results[i][0], *report.verdicts.get(k, (False, why_missing)))
            after = next((k for k, (_, ok, m) in enumerate(results) if not ok and _lost_solution(m)), None)
            if after is not None and after <= lost:
                break  # no further than before (the one that lost the solution has its own verdict)
        return {"time_s": round(spent, 4), "queue_s": round(queued, 4)}, stderr, by_wall

    # --- stdin/stdout cases ---------------------------------------------------------------------
    async def _run_cases(self, pool: SandboxPool, task: CodeTask, code: str, config: CodeConfig) -> Outcome:
        report, raw = await pool.run_program(
            language=task.language,
            code=code,
            stdins=[stdin for stdin, _ in task.cases],
            compile_timeout_s=config.compile_timeout_s,
            run_timeout_s=config.timeout_s,
            total_timeout_s=config.total_timeout_s,
            memory_mb=config.memory_mb,
            syntax_check=True,
            stdout_caps=[_stdout_cap(expected) for _, expected in task.cases],
            stderr_keep=_STDERR_KEEP,
        )
        broken = _sandbox_fault(raw, report.ready, report.error)
        if broken is not None:
            return broken
        timing = _timing(raw)
        compiled = _compile_outcome(report, raw, config, pool, timing)
        if compiled is not None:
            return compiled
        limit = min(config.timeout_s, pool.max_timeout_s)  # (the server's cap on limits)

        def answer(k: int, run: RunReport) -> str:
            expected = task.cases[k][1]
            if outputs_match(run.stdout, expected, config.output_match, config.float_tolerance):
                return ""
            return f"wrong answer: expected {_tail(expected, 120)!r}, got {_tail(run.stdout, 120)!r}"

        labels = [f"case {k}" for k in range(len(task.cases))]
        results, by_wall = _verdicts(report, raw, labels, limit, f"timeout ({limit:g}s)", answer)
        return _scored(results, task.weights, config, timing, by_wall=by_wall)

    # --- assert-style tests in other languages ----------------------------------------------------
    async def _run_script_tests(
        self, pool: SandboxPool, task: CodeTask, code: str, config: CodeConfig
    ) -> Outcome:
        """JavaScript/bash ``tests`` run in the solution's own process (see the sandbox's threat model):
        a random completion marker, printed after the test, catches an exit before it.

        A list is one test a string, each in a run of its own (the program reads which from its stdin,
        as a case reads its input), limited as a case is (``timeout_s`` of CPU time): a crash, a loop or
        an early exit fails that test only, and ``weights`` weigh them, as Python's list does.

        A string is one test, one run whose CPU limit is a third of ``total_timeout_s``, the wall clock
        capping it at the total (3x, as a test's or a case's): with the CPU limit at the total, the wall
        clock always came first, so an infinite loop was never a timeout at its CPU limit, the program's
        own (cached)."""
        assert task.tests is not None
        total_s = min(config.total_timeout_s, pool.max_timeout_s)  # (the server's cap on limits)
        marker = f"rewardhub-tests-finished-{secrets.token_hex(12)}"
        if isinstance(task.tests, list):
            tests, labels = task.tests, task.tests
            cpu_limit = min(config.timeout_s, pool.max_timeout_s)
            selectors = [str(k) for k in range(len(tests))]
            # the output limit shared out, as the one run of a string had it: a program flooding its
            # stdout in each of many tests must not make the service hold the limit per test
            caps: list[int] | None = [max(64 << 10, pool.limits.output_bytes // len(tests))] * len(tests)
        else:
            tests, labels = [task.tests], ["tests"]
            cpu_limit = total_s / _WALL_FACTOR
            selectors, caps = [""], None
        language, files, setup, esm = task.language, None, task.setup or "", None
        if language.name == "javascript":
            # the tests' static imports as require() calls of the harness's (see _js_static_imports)
            setup, tests = _js_static_imports(setup), [_js_static_imports(t) for t in tests]
            esm = _js_module_syntax([setup, *tests])
            # the solution a file of its own, the harness the program (see _JS_HARNESS); the marker only
            # in the run's stdin, which the harness reads and closes before the solution runs
            program = _js_program(setup, tests)
            stdins = [f"{sel}\n{marker}\n".encode() for sel in selectors]
            # less a byte-order mark, as node strips it from a file it runs: a `#!` line after it was a
            # SyntaxError (vm.Script reads the mark as a space, and a shebang only at the very start)
            files = {_JS_SOLUTION: code.removeprefix("\ufeff").encode("utf-8", "surrogatepass")}
            language = _JS_LANGUAGE
            reference = program
        else:
            # the same shape (see _bash_program): the solution its own file, the marker only in the stdin
            program = _bash_program(task.setup or "", tests)
            stdins = [f"{sel}\n{marker}\n".encode() for sel in selectors]
            files = {_BASH_SOLUTION: code.encode("utf-8", "surrogatepass")}
            language = _BASH_LANGUAGE
            reference = program
        modules_check: list[str] | None = None
        if task.language.name == "javascript":
            modules = _js_required_modules([setup, *tests])
            modules_check = ["node", "-e", _JS_RESOLVE, "--", *modules] if modules else None
        elif task.language.name == "bash":
            programs = _bash_reference_programs([task.setup or "", *tests], code)
            modules_check = ["bash", "-c", _BASH_LOOKUP, "bash", *programs] if programs else None
        report, raw = await pool.run_program(
            language=language,
            code=program,
            stdins=stdins,
            compile_timeout_s=config.compile_timeout_s,
            run_timeout_s=cpu_limit,
            total_timeout_s=total_s,
            memory_mb=config.memory_mb,
            files=files,
            syntax_check=True,
            reference_check=reference,
            modules_check=modules_check,
            stdout_caps=caps,
            stderr_keep=_STDERR_KEEP,
        )
        broken = _sandbox_fault(raw, report.ready, report.error)
        if broken is not None:
            return broken
        unresolved = _modules_outcome(report.modules_check)
        if unresolved is not None:
            return unresolved
        timing = _timing(raw)
        compiled = _compile_outcome(report, raw, config, pool, timing)
        if compiled is not None:
            return _reference_fault(report.reference_check, compiled, esm)
        done = marker.encode()

        def finished(k: int, run: RunReport) -> str:
            return "" if done in run.stdout else "the program exited before the tests finished"

        timeout = f"timeout ({cpu_limit:.3g}s of CPU)"
        results, by_wall = _verdicts(report, raw, labels, cpu_limit, timeout, finished)
        if task.language.name == "bash":
            failed = [
                run for k, (_, passed, _) in enumerate(results) if not passed and (run := report.runs.get(k))
            ]
            lacking = _bash_missing_outcome(report.modules_check, failed)
            if lacking is not None:
                return lacking
        return _scored(results, task.weights, config, timing, by_wall=by_wall)


def _bash_program(setup: str, tests: list[str]) -> str:
    """The program of a bash solution's tests (for JavaScript see :func:`_js_program`): one ``{ ...; }``
    group, which bash reads whole before it runs any of it, so that no alias the solution defines
    (``alias exit=:``) reaches the tests. In it, in order:

    * the run's stdin read: its first line the test's number (of several tests) kept in a readonly
      variable, so the solution cannot choose another test; the rest (the completion marker) left on a
      descriptor of its own, the solution's stdin a pipe of that first line (of one test, nothing). No
      source, file or variable holds the marker (it was in the program's text, in two pieces a program
      could read and join).
    * the solution, sourced from its own file (:data:`_BASH_SOLUTION`).
    * the shell put back (:data:`_BASH_RESET`): the solution's functions, aliases, disabled builtins and
      DEBUG/RETURN/ERR traps stood in for the tests' ``exit``, ``[``, ``test`` or ``set``, and a failed
      check carried on to the marker. Where that cannot be done, or the solution read its stdin (of
      several tests), no test runs.
    * the setup, the test (of several, the one the number names), then the marker printed: the last
      line of the stdin read anew from ``/proc/self/fd`` (a test's own ``exit 0`` prints it first,
      :func:`_bash_exit_zero`; one in a subshell whose output is captured leaves it for the run's end).
      Nothing that prints it need be guarded: a program that could make it print would need the marker."""
    finish = (
        'mapfile -t __rewardhub_marker </proc/self/fd/"$__rewardhub_fd" && '
        "printf '%s\\n' \"${__rewardhub_marker[-1]}\""
    )
    tests = [_bash_exit_zero(t, finish) for t in tests]
    if len(tests) == 1:
        stdin, body = "0</dev/null", tests[0]
    else:
        # `:` first: a test of only comments is an empty branch, a syntax error in bash
        branches = "el".join(
            f"if [[ $__rewardhub_test == {k} ]]; then\n:\n{t}\n" for k, t in enumerate(tests)
        )
        body = (
            'if ! IFS= read -r __rewardhub_stdin || [[ $__rewardhub_stdin != "$__rewardhub_test" ]]; then\n'
            "printf '%s\\n' 'no test selected: the program read its standard input' >&2\nexit 2\n"
            f"el{branches}fi"
        )
        stdin = '0<<<"$__rewardhub_test"'
    return (
        # before the group: its extglob patterns (the syntax check's -O extglob) parse
        "shopt -s extglob\n{\n"
        f"IFS= read -r __rewardhub_test || :\nexec {{__rewardhub_fd}}<&0 {stdin}\n"
        # the traps the shell started with (signals ignored on entry show, and cannot be reset)
        'readonly __rewardhub_traps="$(trap -p DEBUG RETURN ERR {1..64})"\n'
        f"readonly __rewardhub_test __rewardhub_fd\n. ./{_BASH_SOLUTION}\n{_BASH_RESET}"
        f"{setup}\n:\n{body}\n{finish}\nelse\n"
        "printf '%s\\n' 'the program changed the shell the tests run in past repair' >&2\nfi\n}\n"
    )


# The builtins the tests' verdicts rest on, which a solution's function, alias or `enable -n` replaced.
_BASH_GUARDED = (
    "exit return echo printf test [ set shopt trap unset enable builtin command read eval exec source . : "
    "true false type declare local typeset export readonly unalias alias let shift break continue"
).split()
# The shell put back after the solution, before the setup and the tests (see _bash_program), with no
# name the solution could have replaced: in POSIX mode (turned on by an assignment, no command) the
# special builtins (`unset`, `trap`) come before functions of their names, so `unset -f` removes the
# solution's functions named as a builtin (and its command_not_found_handle), `enable` restores the
# builtins it disabled, its DEBUG (with extdebug: skipped the tests' `exit 1`), RETURN and ERR traps
# are cleared, and its signals' traps (a CHLD trap put a DEBUG trap back once a test's `$( )` ended),
# extdebug and aliases turned off. Then the check, with `[[ ]]` (a keyword: no function or alias reaches
# it): POSIX mode off again (the tests run as before), extdebug off, none of those traps left (a DEBUG
# trap could skip its own removal; one that takes itself off at the check is gone: those the shell
# started with, signals ignored on entry, cannot be reset and are expected), and every guarded
# name a builtin. A solution that made this impossible (a readonly POSIXLY_CORRECT, `enable -n
# enable`) runs no test. Its EXIT trap and its shell options (set -e, nocasematch) are left: honest
# programs set them.
_BASH_RESET = (
    "POSIXLY_CORRECT=y\nif [[ -o posix ]]; then\n"
    f"unset -f -- {' '.join(_BASH_GUARDED)} command_not_found_handle\n"
    f"enable -- {' '.join(_BASH_GUARDED)}\n"
    "trap -- - DEBUG RETURN ERR {1..64} 2>/dev/null || :\nshopt -u extdebug expand_aliases\nunalias -a\n"
    "unset POSIXLY_CORRECT\nfi\n"
    "if [[ ! -o posix && :$BASHOPTS: != *:extdebug:* && "
    '$(trap -p DEBUG RETURN ERR {1..64}) == "$__rewardhub_traps" && '
    f"$(type -t -- {' '.join(_BASH_GUARDED)}) == "
    "$'" + "\\n".join(["builtin"] * len(_BASH_GUARDED)) + "' ]]; then\n"
)
_BASH_SOLUTION = "solution.sh"
# The syntax check of the program and of the solution beside it (the reference's check, of the
# program alone under another name, is of the program only).
_BASH_CHECK = 'bash -O extglob -n "$1" || exit; [ "$1" != main.sh ] || bash -O extglob -n ' + _BASH_SOLUTION
_BASH_LANGUAGE = replace(LANGUAGES["bash"], syntax_check=("bash", "-c", _BASH_CHECK, "bash", "main.sh"))


def _js_program(setup: str, tests: list[str]) -> str:
    """The program of a JavaScript solution's tests: :data:`_JS_HARNESS`, then the setup and tests in a
    function whose parameters are the harness's ``require``, ``assert``, ``console`` and ``process``
    (:data:`_JS_HARNESS`). The solution is not in it (its own file, run by the harness first), nor is
    the marker (the run's stdin: the test's number, a line, the marker), so that the program's text, the
    same for every solution, is also the reference's to syntax-check.

    The setup and tests in a block of their own within the function: their ``const assert =
    require('assert')`` beside the parameter was a redeclaration, a SyntaxError. Of several tests, the
    one the stdin names, each in a block of its own, which sees the setup's declarations."""
    if len(tests) == 1:
        body = tests[0]
    else:
        branches = "".join(f"if (__rewardhub.test === '{k}') {{\n{t}\n}} else " for k, t in enumerate(tests))
        body = f"{branches}{{ throw new Error('no test selected'); }}"
    return f"{_JS_HARNESS}{{\n{setup}\n;{{\n{body}\n}}\n}}\n}});\n"


# A bash test's `exit 0` as a command of its own (at a line's start, or after `;`, `&&`, `||`, `{`,
# `then`, `else`, `do`), ending its command (`;`, a comment or the line's end after it).
_BASH_EXIT_ZERO = re.compile(
    r"(^|;|&&|\|\||\{|\b(?:then|else|do))([ \t]*)exit[ \t]+0(?=[ \t]*(?:;|#|$))", re.M
)


def _bash_exit_zero(test: str, finish: str) -> str:
    """A bash test whose ``exit 0`` commands (its own word that the tests passed: test files often end
    with one) print the marker before they exit: the marker after the test was never reached, and every
    solution, a correct one too, failed such tests. ``{ finish; exit 0; }`` stands wherever the command
    did. The solution's own ``exit 0`` is not in the test's text: it still prints nothing."""
    return _BASH_EXIT_ZERO.sub(lambda m: f"{m.group(1)}{m.group(2)}{{ {finish}; exit 0; }}", test)


# The JavaScript tests' harness, the program's first lines (trusted: it runs before the solution).
# It reads the run's stdin (the test's number, then the completion marker) and closes it, so the
# marker is in no file, no global and no source the solution can read, only in this function's
# closure; freezes `assert` (its functions, `assert.strict`: Node's assert compares with internal
# primordials, so patching prototypes does not reach it); then runs the solution (solution.js) as a
# script of the global scope, its top-level declarations globals the tests can call, and the tests in
# a function whose parameters shadow any global the solution defined: `require` (the frozen assert
# for 'assert', 'node:assert', 'assert/strict'), `assert`, `console` (whose assert throws: Node's
# prints "Assertion failed" and carries on) and `process`, whose `exit(0)` (the tests' own word that
# they passed: test files end with one) prints the marker first; `module` and `exports` are the
# solution's (as in one CommonJS module). The tests are the body of an async function (a top-level
# `await` in them works). The marker is printed with the
# `fs.writeSync` taken before the solution ran, once that body has completed and the event loop is done
# (async tests settled): from the `beforeExit` listener, then an immediate, each only while node's
# active resources are those of an idle program, so that the solution emitting `beforeExit` itself (or
# calling the listener) while a test awaits a timer prints nothing, and microtasks have run. Node exits
# 0 when its loop empties whatever still waits on a promise, so a test stuck at `await f()` (or
# `f().then(...)`) on a promise the solution never settles passed: v8.promiseHooks count each promise
# with a parent (an `await`, a `then`) created once the tests began, theirs or the solution's code,
# until its reaction runs or it settles (a private field marks it: no WeakMap to grow, nothing the
# solution can see), and one still waiting then (or a body not completed) fails the run, "the tests
# never finished" on stderr, status 1. Fail-closed: a probe `then` must still be counted (hooks turned
# off fail), and `process.binding('async_wrap')`, which turns them off, is refused. An unhandled rejection or uncaught
# exception fails the run (the state in this closure, then the `reallyExit` taken before the solution
# ran, status 1): `process.emit` is locked to report both to the harness first, and the harness's
# capture callback locked in place, so the solution's own `unhandledRejection`/`uncaughtException`
# listeners, removed or added, swallow nothing. The solution's own `process.exit` (or an override of
# it) prints nothing. Its functions are strict: `.caller` from the solution's functions does not reach
# them.
_JS_HARNESS = (
    "const __rewardhub = (function () {\n"
    "  'use strict';\n"
    "  const fs = require('fs');\n"
    "  const vm = require('vm');\n"
    "  const realRequire = require;\n"
    "  const realProcess = process;\n"
    "  const realConsole = console;\n"
    "  const exit = process.exit.bind(process);\n"
    "  const writeSync = fs.writeSync;\n"
    "  const { apply, get } = Reflect;\n"
    "  const { freeze, isFrozen, getOwnPropertyNames, getOwnPropertyDescriptor, defineProperty } = Object;\n"
    "  const { promiseHooks } = realRequire('v8');\n"
    "  const then = Promise.prototype.then;\n"
    "  const settled = Promise.resolve();\n"
    "  let input = '';\n"
    "  try { input = fs.readFileSync(0, 'utf8'); } catch (e) { input = ''; }\n"
    "  try { fs.closeSync(0); fs.openSync('/dev/null', 'r'); } catch (e) { /* no stdin */ }\n"
    "  const nl = input.indexOf('\\n');\n"
    "  const test = nl < 0 ? input : input.slice(0, nl);\n"
    "  let marker = nl < 0 ? '' : input.slice(nl + 1).trim();\n"
    "  input = '';\n"
    "  const assert = realRequire('assert');\n"
    "  const deepFreeze = (o, depth) => {\n"
    "    if ((typeof o !== 'function' && (typeof o !== 'object' || o === null)) || isFrozen(o)) return;\n"
    "    freeze(o);\n"
    "    if (depth <= 0) return;\n"
    "    for (const k of getOwnPropertyNames(o)) {\n"
    "      const d = getOwnPropertyDescriptor(o, k);\n"
    "      if (d && 'value' in d) deepFreeze(d.value, depth - 1);\n"
    "    }\n"
    "  };\n"
    "  deepFreeze(assert, 3);\n"
    "  const strict = assert.strict;\n"
    "  const safeRequire = function require(name) {\n"
    "    if (name === 'assert' || name === 'node:assert') return assert;\n"
    "    if (name === 'assert/strict' || name === 'node:assert/strict') return strict;\n"
    "    return realRequire(name);\n"
    "  };\n"
    "  for (const k of ['resolve', 'cache', 'main', 'extensions']) safeRequire[k] = realRequire[k];\n"
    "  let finished = false, failed = false, returned = false;\n"
    "  const finish = () => {\n"
    "    if (finished || failed || !marker) return;\n"
    "    finished = true;\n"
    "    writeSync(1, '\\n' + marker + '\\n');\n"
    "  };\n"
    "  const reallyExit = realProcess.reallyExit;\n"
    "  const { inspect } = realRequire('util');\n"
    "  const fail = (err) => {\n"
    "    if (failed) return;\n"
    "    failed = true;\n"
    "    let why = 'error';\n"
    "    try { why = inspect(err); } catch (e) { /* its own inspection threw */ }\n"
    "    try { writeSync(2, 'Uncaught ' + why + '\\n'); } catch (e) { /* stderr closed */ }\n"
    "    apply(reallyExit, realProcess, [1]);\n"
    "  };\n"
    "  const realEmit = realProcess.emit;\n"
    "  defineProperty(realProcess, 'emit', { configurable: false, writable: false, value: function emit(event, ...args) {\n"
    "    if (event === 'unhandledRejection' || event === 'uncaughtException') { fail(args[0]); return true; }\n"
    "    return apply(realEmit, this, [event, ...args]);\n"
    "  } });\n"
    "  realProcess.setUncaughtExceptionCaptureCallback(fail);\n"
    "  for (const k of ['setUncaughtExceptionCaptureCallback', 'reallyExit']) {\n"
    "    defineProperty(realProcess, k, { configurable: false, writable: false, value: realProcess[k] });\n"
    "  }\n"
    "  const realBinding = realProcess.binding;\n"
    "  defineProperty(realProcess, 'binding', { configurable: false, writable: false, value: function binding(name) {\n"
    "    if (String(name) === 'async_wrap') throw new Error('No such module: async_wrap');\n"
    "    return apply(realBinding, realProcess, [name]);\n"
    "  } });\n"
    "  let waiting = 0, testing = false;\n"
    "  class Waiting extends function (o) { return o; } {\n"
    "    #waiting = true;\n"
    "    static ran(o) { if (!(#waiting in o) || !o.#waiting) return false; o.#waiting = false; return true; }\n"
    "  }\n"
    "  const ran = Waiting.ran;\n"
    "  promiseHooks.onInit((promise, parent) => {\n"
    "    if (!testing || parent === undefined) return;\n"
    "    new Waiting(promise);\n"
    "    waiting++;\n"
    "  });\n"
    "  const reacted = (promise) => { if (ran(promise)) waiting--; };\n"
    "  promiseHooks.onBefore(reacted);\n"
    "  promiseHooks.onSettled(reacted);\n"
    "  const hooked = () => {\n"
    "    const probe = apply(then, settled, [() => {}]);\n"
    "    if (!ran(probe)) return false;\n"
    "    waiting--;\n"
    "    return true;\n"
    "  };\n"
    "  const stuck = () => {\n"
    "    if (failed) return;\n"
    "    failed = true;\n"
    "    const why = !returned ? 'they wait on a promise that never settles'\n"
    "      : waiting > 0 ? 'their async work waits on a promise that never settles'\n"
    "      : 'their async work could not be followed (the promise hooks were turned off)';\n"
    "    try { writeSync(2, '\\nthe tests never finished: ' + why + '\\n'); } catch (e) { /* stderr closed */ }\n"
    "    apply(reallyExit, realProcess, [1]);\n"
    "  };\n"
    "  const activeResources = realProcess.getActiveResourcesInfo;\n"
    "  const { setImmediate } = globalThis;\n"
    "  realProcess.stdout; realProcess.stderr;\n"
    "  const resources = () => apply(activeResources, realProcess, []).sort().join(',');\n"
    "  const idle = resources();\n"
    "  realProcess.on('beforeExit', () => {\n"
    "    if (finished || failed || resources() !== idle) return;\n"
    "    setImmediate(() => {\n"
    "      if (finished || failed || resources() !== idle) return;\n"
    "      if (returned && waiting === 0 && hooked()) finish(); else stuck();\n"
    "    });\n"
    "  });\n"
    "  const testsExit = function (code) {\n"
    "    const c = code === undefined ? realProcess.exitCode : code;\n"
    "    if (c === undefined || c === null || Number(c) === 0) finish();\n"
    "    exit(code);\n"
    "  };\n"
    "  const testsProcess = new Proxy(realProcess, {\n"
    "    get(target, key) { return key === 'exit' ? testsExit : get(target, key, target); },\n"
    "  });\n"
    "  const testsConsole = { __proto__: realConsole };\n"
    "  for (const k of getOwnPropertyNames(realConsole)) testsConsole[k] = realConsole[k];\n"
    "  testsConsole.assert = (ok, ...m) => {\n"
    "    if (!ok) throw new Error('Assertion failed' + (m.length ? ': ' + m.join(' ') : ''));\n"
    "  };\n"
    "  const fakeExports = {};\n"
    "  const fakeModule = { exports: fakeExports };\n"
    "  globalThis.require = realRequire;\n"
    "  globalThis.module = fakeModule;\n"
    "  globalThis.exports = fakeModule.exports;\n"
    "  const file = realRequire('path').join(__dirname, 'solution.js');\n"
    "  globalThis.__filename = file;\n"
    "  globalThis.__dirname = __dirname;\n"
    "  const source = fs.readFileSync(file, 'utf8');\n"
    "  const script = new vm.Script(source, { filename: 'solution.js' });\n"
    "  return freeze({\n"
    "    test,\n"
    "    solve() { script.runInThisContext(); },\n"
    "    run(tests) {\n"
    "      const exports = get(globalThis, 'exports');\n"
    "      testing = true;\n"
    "      const body = apply(tests, fakeExports, [safeRequire, assert, fakeModule, exports, testsConsole, testsProcess]);\n"
    "      apply(then, body, [() => { returned = true; }, fail]);\n"
    "    },\n"
    "  });\n"
    "})();\n"
    "__rewardhub.solve();\n"
    "__rewardhub.run(async function (require, assert, module, exports, console, process) {\n"
)
_JS_SOLUTION = "solution.js"
# The syntax check of the program (as a CommonJS module, as node runs it) and of the solution beside it
# (as a script, as the harness runs it: a SyntaxError is reason format, as `node --check` made it); the
# reference's check (the program as reference.js) is of the program alone.
_JS_CHECK = (
    "const fs = require('fs'), vm = require('vm');\n"
    "const f = process.argv[1];\n"
    "try {\n"
    "  vm.compileFunction(fs.readFileSync(f, 'utf8'), ['exports', 'require', 'module', '__filename', "
    "'__dirname'], { filename: f });\n"
    "  if (f === 'main.js') new vm.Script(fs.readFileSync('solution.js', 'utf8'), { filename: 'solution.js' });\n"
    "} catch (e) { process.stderr.write(String(e && e.stack) + '\\n'); process.exit(1); }\n"
)
_JS_LANGUAGE = replace(LANGUAGES["javascript"], syntax_check=("node", "-e", _JS_CHECK, "--", "main.js"))


def _timing(raw: RawRun) -> dict[str, Any]:
    """The run's time in the sandbox and in the queue before it, for ``details``."""
    return {"time_s": round(raw.wall_s, 4), "queue_s": round(raw.queue_s, 4)}


def _sandbox_fault(raw: RawRun, ready: bool, error: str | None) -> Outcome | None:
    """An invalid outcome when the sandbox, not the program, failed."""
    if raw.spawn_error is not None:
        return Outcome.invalid(Reason.SANDBOX_ERROR, raw.spawn_error)
    if error is not None:
        return Outcome.invalid(Reason.SANDBOX_ERROR, error, stderr=_tail(raw.stderr, 500))
    if not ready:
        # The guest never got to read its job: a sandbox start-up failure (or an overloaded host).
        why = (
            "the sandbox did not start in time"
            if raw.deadline_hit
            else f"the sandbox exited ({raw.returncode})"
        )
        return Outcome.invalid(Reason.SANDBOX_ERROR, why, stderr=_tail(raw.stderr, 500))
    return None


def _cpu_limit_hit(run: RunReport, limit_s: float) -> bool:
    """Whether a timed-out run had spent its CPU limit (the program's own timeout), not the wall clock
    cut it off. ``RLIMIT_CPU``'s ``SIGXCPU`` counts: the kernel samples CPU time by ticks and may send
    it with the run's exact CPU time (its rusage) a little under the limit, on a loaded host often."""
    return run.cpu_s >= limit_s or run.signal == signal.SIGXCPU


def _run_failure(
    run: RunReport | None, why_missing: str, limit_s: float, timeout_message: str
) -> tuple[str | None, bool]:
    """The verdict of a case's (or a JavaScript/bash test's) run that did not exit with status 0: not
    run, skipped, a timeout at ``limit_s`` of CPU time, the output cut off, a crash; None when it did,
    and its output decides. The second value: whether the wall clock decided it (the item's total
    time spent before its turn, a timeout with CPU time to spare), a result not to cache."""
    if run is None:
        return why_missing, False
    if run.status == "skipped":  # the item's total time was spent before the run's turn
        return "not run: total time limit", True
    if run.status == "timeout":
        return timeout_message, not _cpu_limit_hit(run, limit_s)
    if run.status == "output_limit":
        return "output limit exceeded", False
    if not run.ok:
        what = f"killed by signal {run.signal}" if run.signal else f"exit status {run.return_code}"
        return f"{what}: {_tail(run.stderr, 300)}", False
    return None, False


def _verdicts(
    report: ExecReport,
    raw: RawRun,
    labels: Sequence[str],
    limit_s: float,
    timeout_message: str,
    judge: Callable[[int, RunReport], str],
) -> tuple[list[tuple[str, bool, str]], bool]:
    """(label, passed, message) for each run of a case or a JavaScript/bash test, in order: a run that
    did not exit with status 0 fails as :func:`_run_failure` says, one that did as ``judge(k, run)``
    says ("" for a pass). The second value: whether the wall clock decided any of them (the item's total
    spent, or a timeout with CPU time to spare: it waited for a core, or slept), a verdict that depends on
    the host's load, so the result is returned but not cached."""
    why_missing = _why_missing(raw, report.done)
    by_wall = raw.deadline_hit
    results: list[tuple[str, bool, str]] = []
    for k, label in enumerate(labels):
        run = report.runs.get(k)
        failure, wall = _run_failure(run, why_missing, limit_s, timeout_message)
        by_wall = by_wall or wall
        if failure is None:
            assert run is not None  # (a missing run is a failure)
            failure = judge(k, run)
        results.append((label, not failure, failure))
    return results, by_wall


def _why_missing(raw: RawRun, done: bool) -> str:
    if raw.deadline_hit:
        return "not run: total time limit"
    return "not run" if done else "not run: the sandbox ended early"


def _compile_outcome(
    report: ExecReport, raw: RawRun, config: CodeConfig, pool: SandboxPool, timing: dict[str, Any]
) -> Outcome | None:
    """The outcome of a program that did not compile (or parse), else None."""
    if report.compile is None or report.compile.ok:
        return None
    c = report.compile
    if c.status != "timeout":
        return _compile_failed(_tail(c.stderr or c.stdout), timing)
    # A compile the wall clock stopped (CPU time to spare: a loaded host, or a compiler whose worker
    # it has not yet waited for) is returned but not cached, as a case's timeout.
    limit = min(config.compile_timeout_s, pool.max_timeout_s)
    wall = raw.deadline_hit or not _cpu_limit_hit(c, limit)
    return _compile_failed("compile timeout", timing, transient=wall)


# A literal require() of JavaScript tests or setup, and the comments its search leaves out (a line
# comment only from a line's start: `//` within a string, a URL, is no comment).
_JS_REQUIRE = re.compile(r"""\brequire\s*\(\s*(?:'([^'\\\n]+)'|"([^"\\\n]+)"|`([^`\\$\n]+)`)\s*\)""")
_JS_LINE_COMMENT = re.compile(r"^[ \t]*//[^\n]*", re.MULTILINE)
# Node's builtin modules that tests use most: not resolved in the sandbox (a process start). Any other
# name is, builtins included, so this list decides only what costs a step, never a verdict.
_JS_COMMON_BUILTINS = frozenset(
    "assert assert/strict buffer child_process crypto events fs fs/promises os path process readline "
    "stream string_decoder timers url util vm worker_threads zlib".split()
)
# Resolves its arguments as the program's require() would, from the same directory: exit status 3
# and the names it cannot resolve, as JSON, when there are any.
_JS_RESOLVE = (
    "const missing = process.argv.slice(1).filter((n) => { try { require.resolve(n); return false; } "
    "catch { return true; } });\n"
    "if (missing.length) { process.stdout.write(JSON.stringify(missing)); process.exit(3); }\n"
)


# A static import declaration at a line's start: `import x from 'm'`, `import * as ns from 'm'`,
# `import {a, b as c} from 'm'` (its braces may span lines), `import x, {a} from 'm'`, `import 'm'`.
# Not `import(...)` (a dynamic import, valid in a function), `import.meta`, nor an import with
# attributes (`with { type: 'json' }`: a JSON module, which require would read otherwise).
_JS_IMPORT = re.compile(
    r"""^(?P<indent>[ \t]*)import[ \t]+"""
    r"""(?:(?P<clause>[\w$]+(?:[ \t]*,[ \t]*(?:\*[ \t]*as[ \t]+[\w$]+|\{[^{}]*\}))?"""
    r"""|\*[ \t]*as[ \t]+[\w$]+|\{[^{}]*\})\s*from[ \t]*)?"""
    r"""(?P<q>['"])(?P<spec>[^'"\n]+)(?P=q)(?![ \t]*(?:with|assert)\b)[ \t]*;?""",
    re.MULTILINE,
)
_JS_IMPORT_NAME = re.compile(r"""^([\w$]+|"[^"]*"|'[^']*')(?:\s+as\s+([\w$]+))?$""")
# ES module syntax left after the rewrite: another import or export declaration, `import.meta`.
_JS_MODULE_SYNTAX = re.compile(r"^[ \t]*(?:import|export)\b(?![ \t]*\()[^\n]*|\bimport\.meta\b", re.MULTILINE)


def _js_static_imports(source: str) -> str:
    """``source`` with its static ``import`` declarations as ``const`` declarations of ``require()``:
    tests written as an ES module (``import assert from 'node:assert'``, ``import {strict as assert}
    from 'assert'``) were a SyntaxError in the function the harness runs them in, the reference's
    ``parse_error``. The ``require`` is the harness's (the frozen ``assert``); a module's default import
    is its ``module.exports``, as node's ES modules import node's own and CommonJS modules. A
    declaration's lines stay lines, so an error's line numbers still point at the tests' text."""
    if "import" not in source:
        return source
    return _JS_IMPORT.sub(_js_import_as_require, source)


def _js_import_as_require(m: re.Match[str]) -> str:
    req = f"require({json.dumps(m.group('spec'))})"
    lines = "\n" * m.group(0).count("\n")
    clause = m.group("clause")
    if clause is None:
        return f"{m.group('indent')}{req};{lines}"
    default = namespace = named = None
    head, _, rest = clause.partition(",") if not clause.startswith("{") else ("", "", clause)
    for part in (head.strip(), rest.strip()):
        if part.startswith("{"):
            named = part[1:-1]
        elif part.startswith("*"):
            namespace = part.split()[-1]
        elif part:
            default = part
    module = default or namespace
    decls = [f"{module} = {req}"] if module else []
    if default and namespace:
        decls.append(f"{namespace} = {default}")
    if named is not None:
        keys: list[str] = []
        for spec in filter(None, (x.strip() for x in named.split(","))):
            n = _JS_IMPORT_NAME.match(spec)
            if n is None:
                return m.group(0)  # not a form this rewrite knows: left for the syntax check to report
            name, alias = n.group(1), n.group(2)
            if name == "default":  # (`default as x`: the module itself)
                decls.append(f"{alias} = {module or req}")
            else:
                keys.append(f"{name}: {alias}" if alias else name)
        if keys:
            decls.append(f"{{ {', '.join(keys)} }} = {module or req}")
    if not decls:
        return f"{m.group('indent')}{req};{lines}"
    return f"{m.group('indent')}const {', '.join(decls)};{lines}"


def _js_module_syntax(sources: list[str]) -> str | None:
    """The first ES module syntax the rewrite left in the tests (or setup), or None."""
    for source in sources:
        found = _JS_MODULE_SYNTAX.search(_without_js_comments(source))
        if found is not None:
            return found.group(0).strip()[:120]
    return None


def _js_required_modules(sources: list[str]) -> list[str]:
    """The modules the reference's JavaScript requires by a literal name, less the common builtins: they
    are resolved in the sandbox before the solution runs (:func:`_modules_outcome`)."""
    names: dict[str, None] = {}
    for source in sources:
        for m in _JS_REQUIRE.finditer(_without_js_comments(source)):
            name = next(g for g in m.groups() if g is not None)
            if not name.startswith("node:") and name not in _JS_COMMON_BUILTINS:
                names[name] = None
    return list(names)


def _without_js_comments(source: str) -> str:
    """``source`` less its block comments and whole-line comments, so that a commented-out require is not
    one. Block comments by a scan, not a lazy regex: that read to the end from each of many unclosed
    ``/*``, quadratic in the reference's length."""
    kept: list[str] = []
    at = 0
    while (start := source.find("/*", at)) >= 0:
        kept.append(source[at:start])
        end = source.find("*/", start + 2)
        if end < 0:
            at = len(source)
            break
        at = end + 2
    kept.append(source[at:])
    return _JS_LINE_COMMENT.sub("", "".join(kept))


def _modules_outcome(check: RunReport | None) -> Outcome | None:
    """The outcome of JavaScript tests that require a module this server's node cannot load (a package
    not installed, a file of the dataset's): every run failed at the require, a 0.0 the solution was not
    to blame for. ``unsupported``, transient (another server may have it), as Python tests importing a
    module the sandbox lacks are; None when they all resolve (or none was checked). Bash's lookup of
    programs (:data:`_BASH_LOOKUP`) exits 0: it reaches here only when it could not run."""
    if check is None or check.ok:
        return None
    if check.status == "exited" and check.return_code == 3:
        try:
            names = ", ".join(repr(n) for n in json.loads(check.stdout))
        except ValueError:
            names = _tail(check.stdout, 300)
        return Outcome.invalid(
            Reason.UNSUPPORTED,
            f"the tests require {names}, which this server's node cannot load",
            transient=True,
        )
    if check.status == "exited":
        why = f"exit status {check.return_code}"
    else:
        why = f"killed by signal {check.signal}" if check.signal else check.status
    return Outcome.invalid(
        Reason.SANDBOX_ERROR,
        f"checking what the tests require (modules, programs) failed ({why}): {_tail(check.stderr, 300)}",
    )


# Programs bash tests call that a server may not have installed (interpreters, jq, bc, archivers...).
# Only these count as the host's lack: a name the tests call that the solution was to define as a
# function (`add 1 2`) fails the same way, `add: command not found`, and is the solution's fault.
_HOST_PROGRAMS = frozenset(
    "awk base32 base64 bc bzip2 cmp column comm csvtool curl cut dc diff expr factor file find fold gawk "
    "gzip gunzip hexdump iconv java jq lua mawk md5sum nawk node nodejs numfmt od openssl paste patch "
    "perl php python python2 python3 rev ruby sed seq sha1sum sha256sum sha512sum shasum shuf sort "
    "sqlite3 tac tar tclsh tr tree units uniq unzip uuidgen wget xargs xmllint xxd xz yq zcat zip".split()
)
# Prints each of its arguments that is no command in the sandbox (its PATH), one a line; exits 0 so
# that the program runs after it (a failed check stops the run).
_BASH_LOOKUP = 'for n in "$@"; do command -v -- "$n" >/dev/null 2>&1 || printf \'%s\\n\' "$n"; done; exit 0'
# bash's message for a command it cannot find: `main.sh: line 3: jq: command not found`
_BASH_NOT_FOUND = re.compile(r"^[^\n]*?: ([A-Za-z0-9_.+-]+): command not found$", re.MULTILINE)


def _bash_reference_programs(sources: list[str], solution: str) -> list[str]:
    """The :data:`_HOST_PROGRAMS` the reference's bash names (as a word) and the solution does not:
    looked up in the sandbox before the solution runs, so that :func:`_bash_missing_outcome` knows
    which are this server's lack. One the solution names may be the solution's own call, which stays
    its fault (a 0.0), so it is left out."""
    names: dict[str, None] = {}
    for source in sources:
        for word in re.findall(r"[A-Za-z0-9_.+-]+", source):
            if word in _HOST_PROGRAMS and word not in names:
                names[word] = None
    in_solution = set(re.findall(r"[A-Za-z0-9_.+-]+", solution))
    return [n for n in names if n not in in_solution]


def _bash_missing_outcome(check: RunReport | None, failed: list[RunReport]) -> Outcome | None:
    """Bash tests (``failed``: the runs of those that failed) that failed at a program the reference calls
    and this server's sandbox lacks (``jq: command not found``, exit status 127 or a test's own check
    failing on the empty output that left): every run failed there, a 0.0 the solution was not to blame
    for. ``unsupported``, transient (another server may have it), as JavaScript tests requiring a module
    node cannot load are. The lookup ran in a process of its own before the solution, so a solution
    that printed the message (or emptied ``PATH``) for a program the sandbox has is still scored."""
    if check is None or not check.ok:
        return None
    missing = set(check.stdout.decode("utf-8", "replace").split())
    hit: dict[str, None] = {}
    for run in failed:
        for name in _BASH_NOT_FOUND.findall(run.stderr.decode("utf-8", "replace")):
            if name in missing:
                hit[name] = None
    if not hit:
        return None
    names = ", ".join(repr(n) for n in hit)
    return Outcome.invalid(
        Reason.UNSUPPORTED,
        f"the tests call {names}, which this server's sandbox does not have (command not found)",
        transient=True,
    )


def _reference_fault(check: RunReport | None, compiled: Outcome, module_syntax: str | None = None) -> Outcome:
    """A program of a solution and its reference tests that did not parse: the reference's
    ``parse_error`` (valid false, as Python tests that do not compile are) when its part alone does not
    parse either, whatever the solution; else the solution's ``compiled`` outcome. A check that did not
    finish (the item's time spent) decides nothing: ``compiled``, not cached. JavaScript tests with ES
    module syntax the harness does not rewrite (``module_syntax``, :func:`_js_module_syntax`) are
    ``unsupported`` instead: valid tests, for a module, that this harness cannot run."""
    if check is not None and check.status == "exited" and check.return_code != 0:
        why = _tail(check.stderr or check.stdout, 500)
        if module_syntax is not None:
            return Outcome.invalid(
                Reason.UNSUPPORTED,
                f"the reference tests (or setup) use ES module syntax the JavaScript harness does not run "
                f"({module_syntax!r}): they run as the body of a CommonJS function, where only static "
                f"`import ... from '...'` declarations are rewritten (to require): {why}",
            )
        return Outcome.invalid(Reason.PARSE_ERROR, f"the reference tests (or setup) do not parse: {why}")
    if check is None or not check.ok:
        compiled.transient = True
    return compiled


def _compile_failed(message: str, timing: dict[str, Any], *, transient: bool = False) -> Outcome:
    return Outcome(
        0.0,
        Reason.FORMAT,
        {"pass_rate": 0.0, "passed_all": 0.0},
        {"compile_error": _tail(message), **timing},
        transient=transient,
    )


def _lost_solution(message: str) -> bool:
    """Whether a Python test was not run because an earlier one lost the solution's process (the judge's
    ``not run: <why>``: a timeout, the process gone, a protocol error), not because the item's total time
    was spent, the sandbox ended, or a pytest-style function raised (``not run: ValueError: ...``)."""
    return message.startswith(
        ("not run: timeout", "not run: the solution process", "not run: protocol error")
    )


# The verdicts the guest's judge gives a test it stopped, or did not reach, because the wall clock said
# so: the item's total time spent, or the test's wall-clock cap reached with CPU time to spare.
_BY_WALL = frozenset({"total time limit", "not run: total time limit", "timeout (wall clock)"})


def _scored(
    results: list[tuple[str, bool, str]],
    weights: list[float] | None,
    config: CodeConfig,
    details: dict[str, Any],
    *,
    by_wall: bool = False,
) -> Outcome:
    """The score of the tests' results. ``by_wall``: a verdict was the wall clock's (the item's total
    spent on a loaded host, a case's timeout with CPU time to spare), so the outcome is transient: a
    score, not a cached one, as the same program may pass them when the host is idle."""
    n = len(results)
    if weights is not None and len(weights) != n:
        return Outcome.invalid(
            Reason.PARSE_ERROR, f"reference.weights has {len(weights)} entries for {n} tests", tests=n
        )
    w = weights or [1.0] * n
    total = sum(w)
    passed_w = sum(wk for wk, (_, ok, _) in zip(w, results, strict=True) if ok)
    fraction = passed_w / total if total > 0 else 0.0
    all_passed = n > 0 and all(ok for _, ok, _ in results)
    score = (1.0 if all_passed else 0.0) if config.all_or_nothing else fraction
    details = {
        "passed": sum(1 for _, ok, _ in results if ok),
        "total": n,
        "pass_mask": "".join("1" if ok else "0" for _, ok, _ in results),
        **details,
        "tests": [
            {"test": label[:200], "passed": ok, **({"message": msg} if msg else {})}
            for label, ok, msg in results[:_MAX_DETAIL_TESTS]
        ],
    }
    components: dict[str, float | None] = {"pass_rate": fraction, "passed_all": 1.0 if all_passed else 0.0}
    return Outcome(score, None, components, details, transient=by_wall)
