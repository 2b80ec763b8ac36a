"""Safe arithmetic formulas over named values: the ``composite`` reward's ``formula``.

The grammar is the arithmetic of OpenAI's multi-grader ``calculate_output``::

    expr  :=  number | name | expr (+ - * / **) expr | -expr | +expr | (expr) | fn(expr, ...)
    fn    :=  min(x, ...) | max(x, ...) | abs(x) | sqrt(x) | log(x) | exp(x) | clip(x, lo, hi)

``calculate_output`` itself (``functions=OPENAI_FUNCTIONS, caret_is_power=True``) also writes a power
as ``^`` and has ``floor(x)`` and ``ceil(x)``.

A formula is user input that runs inside the service, so it is **never** handed to ``eval``. It is
parsed with :func:`ast.parse` (which only builds a tree, it evaluates nothing) and then compiled node by
node against a whitelist: constants (int/float, no bool, no complex, finite), names of the composite's
components, the five binary operators, unary ``+``/``-`` and calls of the seven functions by bare name.
Anything else (attribute access, subscripts, comparisons, lambdas, keyword arguments, ``__import__``...)
is a :class:`FormulaError`, which the composite turns into a 422 at config time.

Resource bounds, so a formula can neither hang the event loop nor exhaust memory:

* the source is at most :data:`MAX_SOURCE_CHARS` characters and :data:`MAX_NODES` syntax nodes;
* every value is a Python ``float``: a power is ``math.pow`` on floats, O(1) whatever the operands, and
  raises on overflow instead of building a billion-digit integer (``9**9**9`` with ints would);
* a constant exponent is at most :data:`MAX_EXPONENT` in magnitude and constant sub-expressions are
  folded at parse time, so ``9**9**9`` is rejected before any item is scored.

At evaluation an arithmetic fault (division by zero, ``log(0)``, ``sqrt(-1)``, overflow, a non-finite
intermediate) raises :class:`FormulaEvalError`; the composite reports that item as invalid.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

__all__ = [
    "FUNCTIONS",
    "MAX_EXPONENT",
    "MAX_NODES",
    "MAX_SOURCE_CHARS",
    "OPENAI_FUNCTIONS",
    "Formula",
    "FormulaError",
    "FormulaEvalError",
    "parse_formula",
]

MAX_SOURCE_CHARS = 500
MAX_NODES = 200
MAX_EXPONENT = 64.0

Values = Mapping[str, float]
_Fn = Callable[[Values], float]


class FormulaError(ValueError):
    """The formula is not acceptable (syntax, a forbidden construct, an unknown name, a bound)."""


class FormulaEvalError(ArithmeticError):
    """The formula could not be evaluated on these values (division by zero, a domain error...)."""


def _finite(x: float, what: str) -> float:
    if not math.isfinite(x):
        raise FormulaEvalError(f"{what} is not a finite number")
    return x


def _clip(x: float, lo: float, hi: float) -> float:
    if lo > hi:
        raise FormulaEvalError(f"clip: lower bound {lo} is above upper bound {hi}")
    return min(max(x, lo), hi)


def _log(x: float) -> float:
    if x <= 0:
        raise FormulaEvalError(f"log of a non-positive number ({x})")
    return math.log(x)


def _sqrt(x: float) -> float:
    if x < 0:
        raise FormulaEvalError(f"sqrt of a negative number ({x})")
    return math.sqrt(x)


def _pow(a: float, b: float) -> float:
    try:
        return math.pow(a, b)  # floats only: raises instead of returning complex or a huge integer
    except (OverflowError, ValueError, ZeroDivisionError) as exc:
        raise FormulaEvalError(f"{a} ** {b}: {exc}") from None


def _div(a: float, b: float) -> float:
    if b == 0:
        raise FormulaEvalError("division by zero")
    return a / b


# name -> (function, min args, max args or None for variadic)
FUNCTIONS: dict[str, tuple[Callable[..., float], int, int | None]] = {
    "min": (lambda *xs: min(xs), 1, None),
    "max": (lambda *xs: max(xs), 1, None),
    "abs": (abs, 1, 1),
    "sqrt": (_sqrt, 1, 1),
    "log": (_log, 1, 1),
    "exp": (math.exp, 1, 1),
    "clip": (_clip, 3, 3),
}

# OpenAI's multi-grader ``calculate_output`` also has floor and ceil (and ``^`` for a power, see
# :func:`parse_formula`); the composite keeps FUNCTIONS, where a component may be named ``floor``.
OPENAI_FUNCTIONS: dict[str, tuple[Callable[..., float], int, int | None]] = {
    **FUNCTIONS,
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
}

_BINOPS: dict[type[ast.operator], tuple[str, Callable[[float, float], float]]] = {
    ast.Add: ("+", lambda a, b: a + b),
    ast.Sub: ("-", lambda a, b: a - b),
    ast.Mult: ("*", lambda a, b: a * b),
    ast.Div: ("/", _div),
    ast.Pow: ("**", _pow),
}

# Friendlier names for the constructs people try most often.
_FORBIDDEN: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscripts",
    ast.Compare: "comparisons",
    ast.BoolOp: "boolean operators",
    ast.Lambda: "lambda",
    ast.IfExp: "conditional expressions",
    ast.NamedExpr: "assignment expressions",
    ast.Starred: "starred arguments",
}


@dataclass(frozen=True, slots=True)
class Formula:
    """A parsed, whitelisted formula; :meth:`evaluate` it on a mapping of name -> value."""

    source: str
    names: frozenset[str]  # the variable names it uses
    _fn: _Fn

    def evaluate(self, values: Values) -> float:
        """The formula's value; raises :class:`FormulaEvalError` on an arithmetic fault."""
        try:
            return _finite(self._fn(values), "the formula's result")
        except FormulaEvalError:
            raise
        except (ArithmeticError, ValueError) as exc:  # e.g. math.exp overflow
            raise FormulaEvalError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class _Compiled:
    fn: _Fn
    const: float | None  # the value when the sub-expression is constant (folded at parse time)


def parse_formula(
    source: str,
    names: Collection[str],
    *,
    functions: Mapping[str, tuple[Callable[..., float], int, int | None]] = FUNCTIONS,
    caret_is_power: bool = False,
) -> Formula:
    """Parse and compile ``source`` with ``names`` as the only variables.

    ``functions``: the callable functions (:data:`FUNCTIONS`, or :data:`OPENAI_FUNCTIONS`).
    ``caret_is_power``: ``^`` is a power, as in OpenAI's ``calculate_output`` (``a ^ 2``); it is
    rewritten to ``**`` before parsing, so it binds like a power (``a ^ 2 + b`` is ``(a ** 2) + b``),
    not like Python's bitwise xor, which would bind looser than ``+``. The grammar has no strings, so
    a ``^`` can mean nothing else.

    Raises:
        FormulaError: with a message naming the offending construct or name.
    """
    if not source.strip():
        raise FormulaError("the formula is empty")
    if len(source) > MAX_SOURCE_CHARS:
        raise FormulaError(f"the formula is longer than {MAX_SOURCE_CHARS} characters")
    text = source.strip().replace("^", "**") if caret_is_power else source.strip()
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        msg = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        raise FormulaError(f"not a valid expression: {msg}") from None
    count = sum(1 for _ in ast.walk(tree))  # ast.walk is iterative: safe on deep trees
    if count > MAX_NODES:
        raise FormulaError(f"the formula has {count} syntax nodes; at most {MAX_NODES} are allowed")
    compiler = _Compiler(frozenset(names), functions)
    compiled = compiler.compile(tree.body)
    return Formula(source=source, names=frozenset(compiler.used), _fn=compiled.fn)


class _Compiler:
    def __init__(
        self, names: frozenset[str], functions: Mapping[str, tuple[Callable[..., float], int, int | None]]
    ):
        self.names = names
        self.functions = functions
        self.used: set[str] = set()

    def compile(self, node: ast.expr) -> _Compiled:
        if isinstance(node, ast.Constant):
            return self._constant(node)
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, ast.BinOp):
            return self._binop(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        what = _FORBIDDEN.get(type(node), type(node).__name__)
        raise FormulaError(f"not allowed: {what} (column {node.col_offset + 1})")

    def _constant(self, node: ast.Constant) -> _Compiled:
        v = node.value
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise FormulaError(f"only numbers are allowed as constants, not {v!r:.40}")
        try:
            x = float(v)
        except OverflowError:
            raise FormulaError(f"the constant {v!r:.40} is too large") from None
        if not math.isfinite(x):
            raise FormulaError(f"the constant {v!r:.40} is not finite")
        return _Compiled(lambda _v: x, x)

    def _name(self, node: ast.Name) -> _Compiled:
        name = node.id
        if name in self.functions:
            raise FormulaError(f"function {name!r} must be called, e.g. {name}(...)")
        if name not in self.names:
            known = ", ".join(sorted(self.names)) or "(none)"
            raise FormulaError(f"unknown name {name!r}; the components are: {known}")
        self.used.add(name)
        return _Compiled(lambda v: v[name], None)

    def _unary(self, node: ast.UnaryOp) -> _Compiled:
        inner = self.compile(node.operand)
        if isinstance(node.op, ast.USub):
            f = inner.fn
            return _Compiled(lambda v: -f(v), None if inner.const is None else -inner.const)
        if isinstance(node.op, ast.UAdd):
            return inner
        raise FormulaError(f"not allowed: unary operator {type(node.op).__name__}")

    def _binop(self, node: ast.BinOp) -> _Compiled:
        entry = _BINOPS.get(type(node.op))
        if entry is None:
            raise FormulaError(
                f"not allowed: operator {type(node.op).__name__} (only + - * / **) "
                f"(column {node.col_offset + 1})"
            )
        symbol, op = entry
        left, right = self.compile(node.left), self.compile(node.right)
        if symbol == "**" and right.const is not None and abs(right.const) > MAX_EXPONENT:
            raise FormulaError(
                f"exponent {right.const:g} is too large (at most {MAX_EXPONENT:g} in magnitude)"
            )
        if left.const is not None and right.const is not None:
            try:
                folded = _finite(op(left.const, right.const), f"the constant {symbol} expression")
            except FormulaEvalError as exc:
                raise FormulaError(f"constant sub-expression fails: {exc}") from None
            return _Compiled(lambda _v: folded, folded)
        lf, rf = left.fn, right.fn

        def run(v: Values) -> float:
            return _finite(op(lf(v), rf(v)), f"a {symbol} intermediate")

        return _Compiled(run, None)

    def _call(self, node: ast.Call) -> _Compiled:
        if not isinstance(node.func, ast.Name):
            what = _FORBIDDEN.get(type(node.func), "calling an expression")
            raise FormulaError(f"not allowed: {what} (column {node.func.col_offset + 1})")
        if node.func.id not in self.functions:
            allowed = ", ".join(self.functions)
            raise FormulaError(f"not allowed: calling {node.func.id!r}; the functions are: {allowed}")
        name = node.func.id
        if node.keywords:
            raise FormulaError(f"not allowed: keyword arguments ({name})")
        fn, lo, hi = self.functions[name]
        n = len(node.args)
        if n < lo or (hi is not None and n > hi):
            want = str(lo) if hi == lo else f"at least {lo}" if hi is None else f"{lo} to {hi}"
            raise FormulaError(f"{name} takes {want} argument{'s' if (hi or lo) != 1 else ''}, got {n}")
        args = [self.compile(a) for a in node.args]
        fns = [a.fn for a in args]

        def run(v: Values) -> float:
            try:
                return _finite(float(fn(*(f(v) for f in fns))), f"{name}(...)")
            except OverflowError as exc:
                raise FormulaEvalError(f"{name}: {exc}") from None

        if all(a.const is not None for a in args):
            try:
                folded = run({})
            except FormulaEvalError as exc:
                raise FormulaError(f"constant sub-expression fails: {exc}") from None
            return _Compiled(lambda _v: folded, folded)
        return _Compiled(run, None)
