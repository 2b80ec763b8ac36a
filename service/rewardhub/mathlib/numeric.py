"""Exact rational literals and the rounding rule, without sympy.

Most graded answers are plain numbers.  Parsing them into :class:`fractions.Fraction` costs
microseconds and gives an exact, certain verdict, which is why the event-loop fast path
(:func:`rewardhub.mathlib.equivalence.quick_check`) is built on this module.

The *rounding rule* is shared with the full check so both paths agree: a decimal literal ``D``
with ``k`` fractional digits stands for "some value that rounds to ``D`` at ``k`` places".  We
accept such a literal against an exact value ``V`` when ``|V - D| <= 5 * 10**-(k+1)`` *and* ``D``
has at least :data:`MIN_SIG_DIGITS` significant digits, so ``3.14`` matches ``\\pi`` but ``3``
or ``0.3`` never match anything but themselves.  Two decimals are compared this way only when the
prediction is the coarser one (it rounded the gold); a prediction more precise than the gold is
held to exact equality because the gold may well be exact.  A whole number is the coarsest decimal
(no fractional digits): against a decimal gold it is a rounding too (``118`` for ``117.95``, as
``118.0`` already was), with its significant digits counted without trailing zeros (``300`` has one:
it may be a rounding to the hundreds, and is no rounding of ``299.94``).  Against an exact gold (an
integer or a fraction) a whole number stays exact: ``118`` is not ``\\frac{353}{3}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

MIN_SIG_DIGITS = 3

_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)"
_INT = r"\d+"
_DEC_RE = re.compile(rf"^(?P<sign>[+-]?)(?P<num>{_NUM})$")
# A thousands group never starts with 0: "0,100" is the list 0, 100 (or a decimal comma), not 100.
_THOUSANDS_RE = re.compile(r"^(?P<sign>[+-]?)(?P<num>[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?)$")
# A space groups thousands too (SI style: "12 345"); the parser would read the groups as a sum.
_THOUSANDS_SPACE_RE = re.compile(r"^(?P<sign>[+-]?)(?P<num>[1-9]\d{0,2}(?: \d{3})+(?:\.\d+)?)$")
_SLASH_RE = re.compile(rf"^(?P<sign>[+-]?)(?P<a>{_INT})/(?P<b>{_INT})$")
_FRAC_RE = re.compile(
    rf"^(?P<sign>[+-]?)(?P<whole>{_INT})?\s?\\frac\{{(?P<s1>[+-]?)(?P<a>{_INT})\}}\{{(?P<s2>[+-]?)(?P<b>{_INT})\}}$"
)
_PERCENT_RE = re.compile(r"\s*\\?%\s*$")
# A repeating decimal: "0.\overline{3}" (1/3), "0.1\overline{6}" (1/6), "0.\dot{3}".
_REPEATING_RE = re.compile(
    r"^(?P<sign>[+-]?)(?P<whole>\d+)\.(?P<fixed>\d*)\\(?:overline|dot)\{(?P<rep>\d{1,50})\}$"
)


@dataclass(frozen=True, slots=True)
class Literal:
    """A parsed rational literal.

    ``decimals`` is the number of fractional digits when the literal was written as a decimal
    (``None`` for integers and fractions, which are exact); ``sig`` its significant digits.
    """

    value: Fraction
    decimals: int | None = None
    sig: int = 0
    percent: bool = False

    def scaled(self) -> Literal:
        """The value of ``X%`` as a plain number: ``X/100``, two more fractional digits."""
        decimals = None if self.decimals is None else self.decimals + 2
        return Literal(self.value / 100, decimals, self.sig, False)


def _sig_digits(num: str) -> int:
    digits = num.replace(".", "").lstrip("0")
    return len(digits)


def parse_literal(s: str) -> Literal | None:
    """Parse a plain rational literal, or return None for anything else.

    Accepted: integers, decimals, ``1,000``- or ``1 000``-style thousands groups (whole string only), ``a/b``,
    ``\\frac{a}{b}``, mixed numbers ``2\\frac{1}{3}`` (proper fraction only, as in school
    answers), a leading sign and a trailing percent sign.  Input must already be normalised.
    """
    s = s.strip()
    percent = False
    m_pct = _PERCENT_RE.search(s)
    if m_pct is not None:
        percent = True
        s = s[: m_pct.start()].strip()
    if not s or len(s) > 200:
        return None
    lit = _parse_plain(s)
    if lit is None:
        return None
    return Literal(lit.value, lit.decimals, lit.sig, percent) if percent else lit


def _repeating(m: re.Match[str]) -> Literal:
    """The exact value of a repeating decimal: whole.fixed(rep)(rep)... ."""
    fixed, rep = m.group("fixed"), m.group("rep")
    value = Fraction(int(m.group("whole"))) + Fraction(int(fixed or "0"), 10 ** len(fixed))
    value += Fraction(int(rep), (10 ** len(rep) - 1) * 10 ** len(fixed))
    return Literal(-value if m.group("sign") == "-" else value)


def _parse_plain(s: str) -> Literal | None:
    m_rep = _REPEATING_RE.match(s)
    if m_rep is not None:
        return _repeating(m_rep)
    m = _DEC_RE.match(s) or _THOUSANDS_RE.match(s) or _THOUSANDS_SPACE_RE.match(s)
    if m is not None:
        num = m.group("num").replace(",", "").replace(" ", "")
        value = Fraction(num)
        if m.group("sign") == "-":
            value = -value
        if "." in num and not num.endswith("."):
            return Literal(value, len(num) - num.index(".") - 1, _sig_digits(num))
        return Literal(value)
    m = _SLASH_RE.match(s)
    if m is not None:
        b = int(m.group("b"))
        if b == 0:
            return None
        value = Fraction(int(m.group("a")), b)
        return Literal(-value if m.group("sign") == "-" else value)
    m = _FRAC_RE.match(s)
    if m is not None:
        a, b = int(m.group("a")), int(m.group("b"))
        if b == 0:
            return None
        frac = Fraction(a, b)
        if (m.group("s1") == "-") != (m.group("s2") == "-"):
            frac = -frac
        whole = m.group("whole")
        if whole is not None:
            # A mixed number needs a proper, unsigned fraction: ``2\frac{1}{3}`` is 7/3, but
            # ``2\frac{5}{3}`` or ``2\frac{-1}{3}`` read as products, so we stay undecided.
            if not 0 <= a < b or m.group("s1") or m.group("s2"):
                return None
            frac = int(whole) + frac
        return Literal(-frac if m.group("sign") == "-" else frac)
    return None


def within_rounding(decimal: Literal, exact: Fraction | float) -> bool:
    """True if ``decimal`` is a correct rounding of ``exact`` at its own precision."""
    if decimal.decimals is None or decimal.sig < MIN_SIG_DIGITS:
        return False
    tol = Fraction(5, 10 ** (decimal.decimals + 1))
    diff = abs(Fraction(exact) - decimal.value) if isinstance(exact, float) else abs(exact - decimal.value)
    return diff <= tol


def _variants(lit: Literal, other: Literal) -> list[Literal]:
    """Readings of a literal against another: ``5%`` may mean 0.05 or (sloppily) 5."""
    if lit.percent and not other.percent:
        return [lit.scaled(), Literal(lit.value, lit.decimals, lit.sig)]
    return [lit]


def as_rounding(lit: Literal) -> Literal:
    """A whole number read as a decimal of no fractional digits (significant digits without trailing
    zeros: ``300`` has one); a decimal, a fraction or a non-integer as it is."""
    if lit.decimals is not None or lit.value.denominator != 1:
        return lit
    digits = str(abs(lit.value.numerator)).rstrip("0")
    return Literal(lit.value, 0, len(digits), lit.percent)


def literals_equivalent(gold: Literal, pred: Literal) -> bool:
    """Exact equality, or the rounding rule (see module docstring), over percent readings."""
    for g in _variants(gold, pred):
        for p in _variants(pred, gold):
            if g.value == p.value:
                return True
            if g.decimals is not None:
                # a whole number against a decimal gold is its coarsest rounding: 118 for 117.95
                p = as_rounding(p)
            if p.decimals is not None and (g.decimals is None or p.decimals < g.decimals):
                if within_rounding(p, g.value):
                    return True
            if g.decimals is not None and p.decimals is None and within_rounding(g, p.value):
                return True
    return False
