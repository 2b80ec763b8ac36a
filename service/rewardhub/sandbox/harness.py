"""The service's side of the guest protocol: build the two frames, read back the nonce-signed lines.

Only lines that start with this run's nonce count. The nonce is random per run and lives in the judge's
(non-dumpable) memory only, so a program that reaches the sandbox's stdout anyway — or prints
``PASS`` — still cannot produce a line that is read as a verdict. A test that has no verdict line has
failed: silence (a killed judge, an exit before the tests) can never turn into a pass.
"""

from __future__ import annotations

import ast
import binascii
import functools
import marshal
import secrets
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ExecReport",
    "PytestReport",
    "RunReport",
    "encode_frames",
    "new_nonce",
    "node_classes",
    "parse_exec",
    "parse_pytests",
    "prelude_imports",
    "pytest_style_tests",
    "rewrite_asserts",
    "uncalled_check",
    "unittest_style",
]


class _AssertsAsTests(ast.NodeTransformer):
    """Every ``assert`` becomes a recorded test: ``__rh_t__(i)`` marks its start, then
    ``try: __rh_ok = True if <test> else False / except Exception as __rh_e: __rh_r__(i, __rh_e) /
    else: __rh_r__(i, __rh_ok)``. The hooks' names end in ``__``, so that Python's private-name mangling
    leaves them alone in a method of a class the tests define (``__rh_t`` became ``_Checker__rh_t``
    there, a NameError). Statements, not lambdas, so scoping (walrus, comprehensions, the locals
    of ``check``) is untouched, and an exception inside one assert fails that test only."""

    def __init__(self, source: str):
        self.source = source
        self.labels: list[str] = []

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        i = len(self.labels)
        self.labels.append((ast.get_source_segment(self.source, node) or f"assert #{i}")[:300])
        begin, test = ast.parse(
            f"__rh_t__({i})\n"
            f"try:\n    __rh_ok = True if X else False\n"
            f"except Exception as __rh_e:\n    __rh_r__({i}, __rh_e)\n"
            f"else:\n    __rh_r__({i}, __rh_ok)\n"
        ).body
        assert isinstance(test, ast.Try) and isinstance(test.body[0], ast.Assign)
        verdict = test.body[0].value
        assert isinstance(verdict, ast.IfExp)
        verdict.test = node.test
        return [begin, test]


@functools.lru_cache(maxsize=4096)
def rewrite_asserts(source: str) -> tuple[str, tuple[str, ...]]:
    """The tests with every assert recorded, and the asserts' source texts (the test labels).

    Done here, once per distinct test text (a GRPO group shares it), rather than in every sandbox run:
    importing the parser's node types costs the guest about a millisecond per run. Raises
    ``SyntaxError`` for tests that do not parse (the reference's fault, found before any run).
    """
    tree = ast.parse(source, "tests.py")
    rewriter = _AssertsAsTests(source)
    tree = ast.fix_missing_locations(rewriter.visit(tree))
    return ast.unparse(tree), tuple(rewriter.labels)


@functools.lru_cache(maxsize=4096)
def uncalled_check(source: str) -> bool:
    """Whether the tests define a top-level ``check`` that no top-level statement calls.

    HumanEval's tests are ``def check(candidate): ...``, called by the judge with the reference's
    ``entry_point``. Without one nothing calls ``check``, no assert runs, and every solution would pass.
    """
    try:
        tree = ast.parse(source, "tests.py")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False  # reported as the tests not compiling
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    if not any(isinstance(node, functions) and node.name == "check" for node in tree.body):
        return False
    for stmt in tree.body:
        if isinstance(stmt, (*functions, ast.ClassDef)):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "check":
                return False
    return True


def _asserts(node: ast.AST) -> int:
    return sum(1 for n in ast.walk(node) if isinstance(n, ast.Assert))


def _runnable(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> bool:
    """Whether pytest would call ``fn`` with no argument (past ``self``): no fixture, not async."""
    if isinstance(fn, ast.AsyncFunctionDef):
        return False
    a = fn.args
    positional = [*a.posonlyargs, *a.args][1 if method else 0 :]
    required = len(positional) - len(a.defaults)
    return required <= 0 and all(d is not None for d in a.kw_defaults)


@functools.lru_cache(maxsize=4096)
def pytest_style_tests(source: str) -> tuple[tuple[str, str, int, int, bool], ...]:
    """The pytest-style tests no top-level statement calls: ``(class, function, first, end, runnable)``
    per top-level ``def test*`` (class ``""``) or ``test*`` method of a top-level ``class Test*``;
    ``first``/``end`` bound the numbers of its asserts (as :func:`rewrite_asserts` numbers them, in source
    order, so each function's are consecutive); ``runnable``: takes no argument (pytest fixtures are not
    provided). Nothing calls such functions otherwise: their asserts would sit in untaken code, and every
    solution would pass them (KodCode's and AceCoder's tests are written so)."""
    try:
        tree = ast.parse(source, "tests.py")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()  # reported as the tests not compiling
    called = _top_level_calls(tree)
    out: list[tuple[str, str, int, int, bool]] = []
    count = 0
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for stmt in tree.body:
        if isinstance(stmt, functions) and stmt.name.startswith("test") and stmt.name not in called:
            n = _asserts(stmt)
            out.append(("", stmt.name, count, count + n, _runnable(stmt, False)))
            count += n
        elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test") and stmt.name not in called:
            # A plain class only: a base class's (unittest's) set-up, or the class's own set-up and
            # tear-down methods, would not run here.
            plain = not stmt.bases and not stmt.keywords
            plain = plain and not any(
                isinstance(part, functions) and part.name.lower().startswith(("setup", "teardown"))
                for part in stmt.body
            )
            for part in stmt.body:  # (decorators and bases hold no assert)
                n = _asserts(part)
                if isinstance(part, functions) and part.name.startswith("test"):
                    out.append((stmt.name, part.name, count, count + n, plain and _runnable(part, True)))
                count += n
        else:
            count += _asserts(stmt)
    return tuple(out)


def _top_level_calls(tree: ast.Module) -> set[str]:
    """The names called by name in the module's top-level statements (not in its definitions)."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                names.add(node.func.id)
    return names


@functools.lru_cache(maxsize=4096)
def unittest_style(source: str) -> bool:
    """Whether the tests are ``unittest.TestCase`` classes and have no assert statement of their own.

    The judge runs assert statements; ``unittest.main()`` would look for the test classes in the guest's
    own ``__main__`` module and find none, so such tests check nothing.
    """
    try:
        tree = ast.parse(source, "tests.py")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False  # reported as the tests not compiling
    test_case = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            return False
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                test_case = test_case or name.endswith("TestCase")
    return test_case


# The classes LeetCode's judge defines for its solutions (a solution uses them without defining them).
NODE_CLASSES = ("ListNode", "TreeNode", "Node")


@functools.lru_cache(maxsize=4096)
def node_classes(source: str) -> tuple[str, ...]:
    """The names of :data:`NODE_CLASSES` the tests define as top-level classes.

    LeetCode's solutions use ``ListNode``/``TreeNode`` without defining them (``dummy = ListNode(0)``, an
    annotation ``Optional[ListNode]``): the judge defines them. Where the tests define one, the solution
    gets a class of that name whose instances are the tests' own (:func:`rh_guest._node_class`)."""
    try:
        tree = ast.parse(source, "tests.py")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()  # reported as the tests not compiling
    defined = {stmt.name for stmt in tree.body if isinstance(stmt, ast.ClassDef)}
    return tuple(name for name in NODE_CLASSES if name in defined)


@functools.lru_cache(maxsize=1024)
def prelude_imports(source: str) -> str:
    """The top-level ``import``/``from ... import`` statements of a reference's ``prelude``, as source (less
    ``from __future__`` ones, which only set the compiler's flags), to run in the solution's namespace
    before the solution: LeetCode's solutions use ``Optional``, ``List``, ``heapq``, ``deque``, ``inf``
    without importing them, as LeetCode's environment (and LeetCodeDataset's ``prompt``) imports them. Only
    the statements, never anything else of the prelude (its helpers and values are the tests'). Raises
    SyntaxError (ValueError, RecursionError, MemoryError) when the prelude does not compile."""
    tree = ast.parse(source, "prelude.py")
    kept = [
        stmt
        for stmt in tree.body
        if isinstance(stmt, ast.Import) or (isinstance(stmt, ast.ImportFrom) and stmt.module != "__future__")
    ]
    return "\n".join(ast.unparse(stmt) for stmt in kept)


def new_nonce() -> str:
    return secrets.token_hex(16)


def encode_frames(public: dict[str, Any], private: dict[str, Any]) -> bytes:
    """stdin for the guest: the public frame (read before the fork) then the private one (after)."""
    out = bytearray()
    for frame in (public, private):
        data = marshal.dumps(frame, 4)
        out += len(data).to_bytes(8, "big") + data
    return bytes(out)


def _text(field: str) -> str:
    return _bytes(field).decode("utf-8", "replace")


def _bytes(field: str) -> bytes:
    if field == "-":
        return b""
    try:
        return binascii.a2b_base64(field)
    except (binascii.Error, ValueError):
        return b""


def _lines(stdout: bytes, nonce: str) -> list[list[str]]:
    prefix = nonce.encode("ascii") + b" "
    out: list[list[str]] = []
    for raw in stdout.split(b"\n"):
        if raw.startswith(prefix):
            out.append(raw[len(prefix) :].decode("ascii", "replace").split(" "))
    return out


@dataclass(slots=True)
class _GuestReport:
    """What every guest run reports: it started, it finished, or it failed itself."""

    ready: bool = False
    done: bool = False
    error: str | None = None  # the guest itself failed: an infrastructure fault

    def take(self, f: list[str]) -> bool:
        """Read a ``ready``/``done``/``error`` line; False for any other kind."""
        kind = f[0]
        if kind == "ready":
            self.ready = True
        elif kind == "done":
            self.done = True
        elif kind == "error":
            self.error = _text(f[1])
        else:
            return False
        return True


@dataclass(slots=True)
class PytestReport(_GuestReport):
    """The judge's verdicts for one solution."""

    reference_error: str | None = None  # the tests do not compile: the reference's fault
    reference_unsupported: str | None = None  # the tests import a module the sandbox lacks
    load_status: str | None = None  # ok | syntax | error | died
    load_message: str = ""
    labels: list[str] = field(default_factory=list)
    verdicts: dict[int, tuple[bool, str]] = field(default_factory=dict)


def parse_pytests(stdout: bytes, nonce: str) -> PytestReport:
    rep = PytestReport()
    for f in _lines(stdout, nonce):
        kind = f[0]
        try:
            if rep.take(f):
                continue
            if kind == "refbad":
                rep.reference_error = _text(f[1])
            elif kind == "refmissing":
                rep.reference_unsupported = _text(f[1])
            elif kind == "plan":
                n = int(f[1])
                rep.labels = [_text(x) for x in f[2 : 2 + n]]
            elif kind == "load":
                rep.load_status, rep.load_message = f[1], _text(f[2])
            elif kind == "test":
                i, verdict = int(f[1]), f[2]
                if 0 <= i < len(rep.labels):
                    previous = rep.verdicts.get(i)
                    # fail is final: a later "pass" for the same test never overrides it
                    if previous is None or previous[0]:
                        rep.verdicts[i] = (verdict == "pass", _text(f[3]))
        except (IndexError, ValueError):
            continue
    return rep


@dataclass(slots=True)
class RunReport:
    """One program run (a compile step or one case)."""

    status: str  # exited | signaled | timeout | output_limit | skipped
    return_code: int
    signal: int
    wall_s: float
    cpu_s: float
    max_rss_kb: int
    truncated: bool
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.status == "exited" and self.return_code == 0

    @classmethod
    def from_fields(cls, f: list[str]) -> RunReport:
        return cls(
            status=f[0],
            return_code=int(f[1]),
            signal=int(f[2]),
            wall_s=float(f[3]),
            cpu_s=float(f[4]),
            max_rss_kb=int(f[5]),
            truncated=f[6] == "1",
            stdout=_bytes(f[7]),
            stderr=_bytes(f[8]),
        )


@dataclass(slots=True)
class ExecReport(_GuestReport):
    """A compile step and the program's runs, one per stdin."""

    compile: RunReport | None = None
    # the parse-only check of the reference's part alone, run when the program did not parse
    reference_check: RunReport | None = None
    # the resolution of the modules the reference requires, run before anything else
    modules_check: RunReport | None = None
    runs: dict[int, RunReport] = field(default_factory=dict)
    files: dict[str, bytes | None] = field(default_factory=dict)


def parse_exec(stdout: bytes, nonce: str) -> ExecReport:
    rep = ExecReport()
    for f in _lines(stdout, nonce):
        kind = f[0]
        try:
            if rep.take(f):
                continue
            if kind == "compile":
                rep.compile = RunReport.from_fields(f[1:10])
            elif kind == "refcheck":
                rep.reference_check = RunReport.from_fields(f[1:10])
            elif kind == "modules":
                rep.modules_check = RunReport.from_fields(f[1:10])
            elif kind == "run":
                rep.runs[int(f[1])] = RunReport.from_fields(f[2:11])
            elif kind == "file":
                rep.files[_text(f[1])] = None if f[2] == "missing" else _bytes(f[3])
        except (IndexError, ValueError):
            continue
    return rep
