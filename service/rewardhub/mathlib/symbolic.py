"""The sympy / Math-Verify layer: parsing one item and comparing two parsed items.

Only :mod:`rewardhub.mathlib.equivalence` calls into this module, and only from ``check`` (never
from ``quick_check``), because parsing and simplification can take seconds or hang outright.

Timeouts are the caller's business.  ``check`` runs in a worker process's main thread under a
hard kill deadline and a SIGALRM soft timer whose exception derives from ``BaseException``;
math-verify's own signal-based timeouts would install a competing SIGALRM handler and turn a
timeout into a silent ``False``, so they are disabled (``parsing_timeout=None``,
``timeout_seconds=None``), and nothing here catches ``BaseException``.
"""

from __future__ import annotations

import logging
import re
from fractions import Fraction
from typing import Any

import mpmath
import sympy
from latex2sympy2_extended.latex2sympy2 import NormalizationConfig
from math_verify import LatexExtractionConfig, parse, verify

from rewardhub.mathlib.numeric import Literal, within_rounding

# math-verify logs a warning about the disabled timeouts on first use and debug tracebacks for
# every unparsable string; neither is actionable for us.
logging.getLogger("math_verify").setLevel(logging.ERROR)

# The boxed wrapper plus ``first_match`` makes math-verify parse exactly our string or fail; its
# default ``any_match`` would fall back to *any* number found inside an unparsable formula, which
# is how ``1-\frac{1}{\mathrm{e}}`` came to equal ``1+\frac{1}{\mathrm{e}}`` (math-verify #14).
# ``units=False``: we strip units ourselves (words only); math-verify's list would read ``4t``
# (a variable) as 4 tonnes.
_CONFIG = [
    LatexExtractionConfig(
        boxed_match_priority=0,
        normalization_config=NormalizationConfig(
            basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="all", equations=False
        ),
    )
]
# \\ldots, \\cdots, \\dots, \\dotsb..., \\vdots, \\ddots, "...", and the Unicode ellipses.
_ELLIPSIS_RE = re.compile(r"\\(?:[lcvd]?dots[a-z]*|hdots|mathellipsis)|\.\.\.|[\u2026\u22ef\u22ee\u22f1]")
_REL_TOL = Fraction(1, 10**30)
_DIGITS = 60
PARAMETER_LETTERS = frozenset({"k", "n", "m"})
# An equation solved for a missing variable (solve_for_missing) is at most this big: a cheap rule.
_MAX_SOLVE_OPS = 200


def parse_item(s: str, cache: dict[str, Any]) -> Any:
    """Parse one normalised item into a sympy object, or None when it is not math we can read.

    An ellipsis is not math we can read: the parser drops ``\\ldots`` (``1 + 2 + \\ldots + 10`` came
    out as 13, ``a_1 + a_2 + \\ldots + a_n`` as three terms) and reads ``3 \\cdots n`` as ``3 s n``,
    so such an item compares as a string only.
    """
    if s in cache:
        return cache[s]
    result = None
    if _ELLIPSIS_RE.search(s):
        cache[s] = result
        return result
    try:
        parsed = parse("\\boxed{" + s + "}", _CONFIG, extraction_mode="first_match", parsing_timeout=None)
    except Exception:
        parsed = []
    if parsed and not isinstance(parsed[0], str):
        result = parsed[0]
    cache[s] = result
    return result


def is_constant(expr: Any) -> bool:
    """A number-valued expression without free symbols (so it can be evaluated exactly)."""
    return (
        isinstance(expr, sympy.Expr)
        and not isinstance(expr, sympy.core.relational.Relational)
        and not expr.free_symbols
    )


def exact_decimals(expr: Any) -> Any:
    """Replace binary Floats by the exact decimal they were written as (``0.1`` -> 1/10).

    A decimal in an answer denotes that exact decimal; sympy stores it as a 15-digit binary
    float, whose representation error would otherwise fail the 30-digit comparison.
    """
    floats = expr.atoms(sympy.Float)
    if not floats:
        return expr
    return expr.xreplace({f: sympy.Rational(str(f)) for f in floats})


def is_equation(expr: Any) -> bool:
    """An equation, or a conjunction/chain of equations as math-verify parses ``a = b = c``."""
    if isinstance(expr, sympy.Eq):
        return True
    return isinstance(expr, sympy.And) and all(isinstance(a, sympy.Eq) for a in expr.args)


def _components(expr: Any) -> tuple[Fraction, Fraction, bool] | str | None:
    """``(re, im)`` of a finite constant, exactly when rational; ``"oo"``/``"-oo"`` if infinite.

    Rationals are kept exact so that ``10^{100}`` and ``10^{100}+1`` differ; irrational values
    are evaluated to 60 digits.  ``zoo`` and ``nan`` (``12:00`` read as 12/0) yield ``"undefined"``,
    which equals nothing.
    """
    try:
        val = exact_decimals(expr).doit()
        if val.has(sympy.zoo, sympy.nan):
            return "undefined"
        if val.is_Rational:
            return Fraction(int(val.p), int(val.q)), Fraction(0), True
        val = sympy.N(val, _DIGITS)
        if val.has(sympy.zoo, sympy.nan):
            return "undefined"
        if val.has(sympy.oo, -sympy.oo):
            return str(val)
        re_part, im_part = val.as_real_imag()
        return Fraction(str(sympy.N(re_part, _DIGITS))), Fraction(str(sympy.N(im_part, _DIGITS))), False
    except (ValueError, TypeError, ArithmeticError, AttributeError):
        return None


def constants_equal(gold: Any, pred: Any, gold_lit: Literal | None, pred_lit: Literal | None) -> bool | None:
    """Compare two constants numerically; None if they cannot be evaluated.

    Exact-looking values must agree to 30 significant digits *relative* to their size.
    math-verify instead evaluates ``gold - pred`` with ``chop=True``, which chops differences of
    tiny numbers to zero (``1/2004!`` "equals" ``1/2006!``).  A decimal literal on either side is
    judged by the shared rounding rule (:func:`rewardhub.mathlib.numeric.within_rounding`).
    Infinities are equal only to the same infinity.
    """
    g = _components(gold)
    p = _components(pred)
    if g is None or p is None:
        return None
    if isinstance(g, str) or isinstance(p, str):
        return g == p and g != "undefined"
    if g[:2] == p[:2]:
        return True
    scale = max(abs(g[0]), abs(g[1]), abs(p[0]), abs(p[1]))
    close = abs(g[0] - p[0]) <= scale * _REL_TOL and abs(g[1] - p[1]) <= scale * _REL_TOL
    if close and not (g[2] and p[2]):  # two exact rationals must be equal, not just close
        return True
    if g[1] != 0 or p[1] != 0:
        return False
    for lit, other in ((pred_lit, g[0]), (gold_lit, p[0])):
        if lit is None:
            continue
        readings = [lit.scaled(), lit] if lit.percent else [lit]
        if any(within_rounding(r, other) for r in readings):
            return True
    return False


def rename_symbols(expr: Any, mapping: dict[str, str]) -> Any:
    """Rename bound variables (``f(z) = z`` vs ``f(x) = x``) simultaneously, or None.

    Returns None when renaming would capture a variable: in ``f(t) = x^2`` the ``x`` is free,
    so renaming ``t -> x`` must not make it equal ``f(x) = x^2``.
    """
    if not mapping:
        return expr
    try:
        names = {sym.name for sym in expr.free_symbols if isinstance(sym, sympy.Symbol)}
        if names & (set(mapping.values()) - set(mapping)):
            return None
        subs = {
            sym: sympy.Symbol(mapping[sym.name], **sym.assumptions0)
            for sym in expr.free_symbols
            if isinstance(sym, sympy.Symbol) and sym.name in mapping
        }
        return expr.xreplace(subs)
    except Exception:
        return None


def mentions(expr: Any, symbol: Any) -> bool:
    """Whether ``symbol`` (a parsed simple name) is a free symbol of ``expr``; True when either is not
    a sympy object, which cannot be told."""
    if not isinstance(symbol, sympy.Symbol) or not isinstance(expr, sympy.Basic):
        return True
    return symbol in expr.free_symbols


def depends_on(expr: Any, symbol: Any) -> bool:
    """Whether ``symbol`` (a parsed simple name) is certainly a free symbol of ``expr``: False where
    either is not a sympy object (the opposite of :func:`mentions`, for a rule that needs the symbol)."""
    return isinstance(symbol, sympy.Symbol) and isinstance(expr, sympy.Basic) and symbol in expr.free_symbols


def family_parameter(expr: Any) -> str | None:
    """The integer parameter of a periodic solution family ``a + b k``, or None.

    Solutions of trigonometric equations are written ``\\frac{\\pi}{6} + k\\pi``; the letter is a
    bound dummy (for some integer k).  We recognise only the unmistakable shape: exactly one free
    symbol, one of the letters solvers use for an integer parameter (k, n, m), entering linearly
    with a step that is a nonzero rational multiple of pi, and a constant offset.  ``n^2\\pi``,
    ``x + k\\pi`` or ``2n + 1`` are not families by this definition.
    """
    if not isinstance(expr, sympy.Expr) or isinstance(expr, sympy.core.relational.Relational):
        return None
    symbols = expr.free_symbols
    if len(symbols) != 1:
        return None
    (param,) = symbols
    if not isinstance(param, sympy.Symbol) or param.name not in PARAMETER_LETTERS:
        return None
    step = sympy.diff(expr, param)
    if step.free_symbols:
        return None
    ratio = step / sympy.pi
    if not ratio.is_Rational or ratio == 0:
        return None
    return str(param.name)


def solve_for_missing(equation: Any, expr: Any) -> Any:
    """The equation solved for the one variable that ``expr`` leaves out, or None.

    ``\\rho\\sin\\theta = \\sqrt{3}`` against ``\\sqrt{3}\\csc\\theta``: an answer that is an
    expression in all but one of an equation's variables is that variable's value (the label ``\\rho =``
    dropped, as a bare ``2x + 1`` is read against ``y = 2x + 1``).  Sound only when the equation
    fixes that variable uniquely, so it must enter linearly, ``a v + b = 0`` with ``a`` free of ``v``
    and not zero; then ``v = -b/a``, defined where ``a`` is not zero.  ``y^2 = x``
    does not fix ``y`` (``\\sqrt{x}`` is one of two branches), and an answer without variables, or
    with one the equation lacks, or leaving out two, is not a solved form of it.
    """
    if not isinstance(equation, sympy.Eq) or not isinstance(expr, sympy.Expr):
        return None
    if isinstance(expr, sympy.core.relational.Relational):
        return None
    eq_symbols, expr_symbols = equation.free_symbols, expr.free_symbols
    missing = eq_symbols - expr_symbols
    if not expr_symbols or not expr_symbols < eq_symbols or len(missing) != 1:
        return None
    if sympy.count_ops(equation) > _MAX_SOLVE_OPS:
        return None
    (var,) = missing
    f = exact_decimals(equation.lhs - equation.rhs)
    coeff = sympy.diff(f, var)
    if var in coeff.free_symbols or sympy.expand(coeff) == 0:
        return None
    return -f.subs(var, 0) / coeff


# Sample points for :func:`agree_at_samples`, fixed (a verdict must not vary between runs): irrational-looking
# values, most in (-1, 1) where arcsin, arccos and square roots of 1 - x^2 are real, and some outside; the
# first ones are typical, so two different expressions usually part at the first point.
_SAMPLES = (0.43, 1.7, -1.3, 0.27, 3.1, -0.6, 0.74, -2.7, 0.11, 0.93, -0.15, 0.58, 5.3, -0.83)
_MIN_REAL_SAMPLES = 4
_SAMPLE_DPS = 50
# relative to the larger value, as constants are compared (_REL_TOL): no absolute floor, or x^2000 + 10^-40
# would pass for x^2000 at every point below 1
_SAMPLE_TOL = mpmath.mpf(10) ** -30
# Functions evaluated at the sample points: the elementary ones, by mpmath's principal values (sympy's).
_SAMPLED_FUNCTIONS: dict[str, Any] = {
    **{
        name: getattr(mpmath, name)
        for name in (
            "sin cos tan cot sec csc asin acos atan acot asec acsc sinh cosh tanh coth asinh acosh atanh exp log"
        ).split()
    },
    "Abs": abs,
}


class _Unsupported(Exception):
    """An expression :func:`_evaluate` does not evaluate (a sum, an integral, floor, a factorial...)."""


class _TooLarge(ArithmeticError):
    """A value past 2^:data:`_MAX_MAGNITUDE`: the sine of e^(e^(e^3.1)) would need pi to billions of digits."""


# The largest magnitude (in bits) a value may reach while an expression is evaluated at a point; past it the
# expression is undefined there (a worker would spend its deadline reducing a trigonometric argument).
_MAX_MAGNITUDE = 4096


def _evaluate(expr: Any, point: dict[Any, Any]) -> Any:
    """``expr`` at ``point`` (symbol -> mpmath number), in mpmath at the working precision, walking the tree
    (no code generation: ``lambdify`` costs a millisecond a call, most of a rejection's cost); raises
    :class:`_TooLarge` where a value grows past 2^:data:`_MAX_MAGNITUDE`."""
    value = _node(expr, point)
    if mpmath.mag(value) > _MAX_MAGNITUDE:
        raise _TooLarge
    return value


def _node(expr: Any, point: dict[Any, Any]) -> Any:
    """One node of :func:`_evaluate`'s walk."""
    if expr.is_Symbol:
        return point[expr]
    if expr.is_Rational:
        return mpmath.mpf(int(expr.p)) / int(expr.q)
    if expr.is_Float:
        return mpmath.mpf(str(expr))
    if expr is sympy.I:
        return mpmath.mpc(0, 1)
    if expr is sympy.pi:
        return +mpmath.pi
    if expr is sympy.E:
        return +mpmath.e
    if expr.is_Add:
        return mpmath.fsum(_evaluate(a, point) for a in expr.args)
    if expr.is_Mul:
        return mpmath.fprod(_evaluate(a, point) for a in expr.args)
    if expr.is_Pow:
        base = _evaluate(expr.base, point)
        if expr.exp.is_Integer:
            return base ** int(expr.exp)
        return mpmath.power(base, _evaluate(expr.exp, point))
    function = _SAMPLED_FUNCTIONS.get(type(expr).__name__)
    if function is None or not isinstance(expr, sympy.Function):
        raise _Unsupported
    return function(*(_evaluate(a, point) for a in expr.args))


def _value_at(expr: Any, point: dict[Any, Any]) -> Any:
    """``expr`` at ``point``, or None where it is undefined there (a pole, or a value too large to evaluate
    on: :class:`_TooLarge`)."""
    try:
        return _evaluate(expr, point)
    except (ArithmeticError, ValueError):
        return None


def agree_at_samples(gold: Any, pred: Any) -> bool:
    """Whether two expressions in the same variables are one function on the real line: at fixed sample
    points they are real at the same points, at least :data:`_MIN_REAL_SAMPLES` of them, and equal there (to
    30 relative digits, evaluated to 50).

    An identity that holds on a domain only is beyond simplification: ``2\\arcsin\\sqrt{a}`` is
    ``\\arccos(1 - 2a)`` for ``0 \\le a \\le 1``, where both are real, and nowhere else is either real.
    Values that are not real are not compared (principal branches part off the real line), but where one
    side is real the other must be: ``2\\ln x`` is not ``\\ln x^2`` (real for negative x too), and
    ``|x|`` is not ``x`` (they differ at negative points). A function that agrees with another at many points
    and is not it takes a construction (a product of the points' differences) no answer makes by chance.
    Expressions without variables, or in different variables, or with a function other than the elementary
    ones (:data:`_SAMPLED_FUNCTIONS`: no sums, integrals, floor or factorials), are left to the other rules
    (False).
    """
    if not all(
        isinstance(e, sympy.Expr) and not isinstance(e, sympy.core.relational.Relational)
        for e in (gold, pred)
    ):
        return False
    symbols = sorted(gold.free_symbols, key=str)
    if not symbols or len(symbols) > 3 or set(symbols) != pred.free_symbols:
        return False
    real = 0
    try:
        with mpmath.workdps(_SAMPLE_DPS):
            for i in range(len(_SAMPLES)):
                point = {
                    sym: mpmath.mpf(_SAMPLES[(i + 5 * j) % len(_SAMPLES)]) for j, sym in enumerate(symbols)
                }
                a, b = _value_at(gold, point), _value_at(pred, point)
                a_real, b_real = _is_real(a), _is_real(b)
                if a_real != b_real:
                    return False
                if not a_real:
                    continue
                if abs(a - b) > _SAMPLE_TOL * max(abs(a), abs(b)):
                    return False
                real += 1
    except (_Unsupported, RecursionError):
        return False
    return real >= _MIN_REAL_SAMPLES


def _is_real(value: Any) -> bool:
    """A finite real value (an mpc with no imaginary part, relative to its size, is one)."""
    if value is None or not mpmath.isfinite(value):
        return False
    return bool(abs(mpmath.im(value)) <= _SAMPLE_TOL * abs(value))


def mv_verify(gold: Any, pred: Any) -> bool:
    """math-verify's comparison (gold first: it is asymmetric by design), without its timeout."""
    return bool(verify(gold, pred, timeout_seconds=None))
