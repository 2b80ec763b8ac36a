"""quick_check: certain verdicts only, no sympy, never raises, microseconds per call."""

from __future__ import annotations

import sys
import time

import pytest

from rewardhub.mathlib import Check, check, quick_check


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        # \dfrac and \frac are the same fraction
        ("\\dfrac{1}{2}", "\\frac{1}{2}"),
        # math delimiters and spacing do not matter
        ("$x+1$", "x + 1"),
        # \left/\right sizing is presentation only
        ("\\left(1,2\\right)", "(1, 2)"),
        # a trailing full stop is punctuation
        ("5.", "5"),
        # thin-space and {,} thousands separators ({,}: the one item where the Qwen grader disagrees)
        ("10\\,000", "10000"),
        ("10{,}000", "10000"),
        # \text{} is only a font
        ("\\text{Monday}", "Monday"),
        # ^{2} and ^2 typeset the same
        ("x^{2}", "x^2"),
        # an ordinal suffix is not part of the number
        ("12^{\\mathrm{th}}", "12"),
        # one upright unit, or a unit on one side only
        ("1000\\,\\text{m}", "1000 \\mathrm{m}"),
        ("1000\\,\\text{m}", "1000"),
        ("5 \\text{ L}", "5 \\text{ l}"),
        # superscript digits are a power, the cent sign is cents (math 1.1.16: both scored 0)
        ("x^2 + 1", "x² + 1"),
        ("8 \\text{ ft}^2", "8 ft²"),
        ("10^{-3}", "10⁻³"),
        ("50 cents", "50¢"),
        ("50 \\text{¢}", "50\\textcent"),
        # a dollar amount in thousands groups is one number in a list too (math 1.1.17: 1, 200 and 5)
        ("\\$1,200, \\$5", "1200, 5"),
        ("(\\$1,200, \\$5)", "(1200, 5)"),
    ],
)
def test_equal_strings(gold: str, pred: str) -> None:
    assert quick_check(gold, pred) == Check(True, "string", True)


@pytest.mark.parametrize(
    ("gold", "pred", "equivalent"),
    [
        # decimal vs fraction, exactly
        ("0.5", "\\frac{1}{2}", True),
        # signs inside and outside \frac
        ("-\\frac{3}{4}", "-0.75", True),
        ("\\frac{-3}{4}", "-0.75", True),
        # thousands separators (whole string only)
        ("1,000", "1000", True),
        # mixed numbers are proper fractions
        ("2\\frac{1}{3}", "7/3", True),
        # percent: 50% is 0.5, and a bare 50 is accepted as the same percentage
        ("50\\%", "0.5", True),
        ("50\\%", "50", True),
        # a decimal that correctly rounds the exact gold, with 3 significant digits
        ("\\frac{1}{3}", "0.333", True),
        ("\\frac{600}{7}", "85.71", True),
        # ... but 2 significant digits are too few to count as a rounding
        ("\\frac{1}{3}", "0.33", False),
        # a coarser decimal that rounds a decimal gold
        ("165.47", "165.5", True),
        # ... and a whole number is its coarsest rounding (math 1.1.15; 118.0 already was): 3 significant
        # digits, trailing zeros not counted (300 may be rounded to the hundreds)
        ("117.95", "118", True),
        ("117.95\\%", "118\\%", True),
        ("-117.95", "-118", True),
        ("1179.5", "1180", True),
        ("117.95", "117", False),
        ("299.94", "300", False),
        ("12.4", "12", False),
        # ... never against an exact gold: a fraction or an integer is not rounded
        ("\\frac{353}{3}", "118", False),
        ("118", "117.95", False),
        # a finer decimal than the gold must match exactly (the gold may be exact)
        ("2.50", "2.5049", False),
        # different values are certainly different
        ("10{,}000", "9999", False),
        ("2", "-2", False),
        ("0.5", "0.54", False),
        ("7", "7.0000001", False),
        ("50\\%", "5", False),
        # huge exact integers are compared exactly
        ("10000000000000000000000000000001", "10000000000000000000000000000000", False),
    ],
)
def test_rational_literals(gold: str, pred: str, equivalent: bool) -> None:
    assert quick_check(gold, pred) == Check(equivalent, "rational", True)


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        # needs algebra
        ("x+1", "1+x"),
        # irrational gold: needs evaluation
        ("\\sqrt{2}", "1.414"),
        # lists need structure
        ("1,2", "2,1"),
        # degree marks are not a string rule
        ("45^\\circ", "45"),
        # symbolic fractions
        ("\\frac{a}{b}", "a/b"),
        # an "improper mixed number" is ambiguous (product?): undecided, not wrong
        ("2\\frac{5}{3}", "11/3"),
        # division by zero is not a literal
        ("1/0", "2/0"),
        # empty side
        ("", "5"),
        ("5", "   "),
        # over the size limit: never do unbounded work on the event loop
        ("1" * 30_000, "1" * 30_000 + "0"),
        # numbers in two upright units: equal strings once normalisation dropped the units (it said "string"),
        # or unequal numbers of units that convert (it said "rational": 1 h is 3600 s)
        ("1000 \\text{ m}", "1000 \\text{ s}"),
        ("(1\\,\\text{m}, 2)", "(1\\,\\text{s}, 2)"),
        ("1\\,\\text{h}", "3600\\,\\text{s}"),
        # numbers with different words after them: the full check reads the words (5 years is no 5 days, a
        # differential no unit, a count noun no hours)
        ("5 days", "5 years"),
        ("5", "5\\,\\mathrm{d}x"),
        ("3 hours", "3 apples"),
    ],
)
def test_undecided(gold: str, pred: str) -> None:
    assert quick_check(gold, pred) is None


@pytest.mark.parametrize(
    "text",
    ["", "}", "\\", "\\frac{", "$$", "\\boxed{", "((((", "\x00", "\\text{" * 50, "\ud800", "1/" * 100, "%%%"],
)
def test_never_raises(text: str) -> None:
    quick_check(text, "1")
    quick_check("1", text)


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        ("0.5", "\\frac{1}{2}"),
        ("\\frac{1}{3}", "0.333"),
        ("1,000", "1000"),
        ("7", "7.0000001"),
        ("\\dfrac{1}{2}", "\\frac{1}{2}"),
    ],
)
def test_agrees_with_full_check(gold: str, pred: str) -> None:
    """The fast path must never contradict the full check (which calls it first anyway)."""
    quick = quick_check(gold, pred)
    assert quick is not None
    assert check(gold, pred).equivalent == quick.equivalent


def test_is_sympy_free() -> None:
    """The fast path answers without SymPy (milliseconds a call there; its speed is measured in
    bench/math_throughput.py, not asserted here: a per-call time bound failed by chance on loaded hosts)."""
    assert quick_check("\\frac{1}{2}", "0.5") == Check(True, "rational", True)
    assert quick_check("(1,2),(3,4)", "(3,4),(1,2)") is None  # left to the full check
    # the module imports nothing heavy (sympy may already be loaded by other tests)
    import rewardhub.mathlib.equivalence as eq

    assert "sympy" not in vars(eq)
    assert "rewardhub.mathlib.numeric" in sys.modules


@pytest.mark.parametrize("unit", ["$", "~", "\\,", "\\quad "])
def test_normalisation_is_linear_when_delimiters_become_spaces(unit: str) -> None:
    # Math delimiters and spacing commands turn into spaces after whitespace was collapsed; a
    # pattern with a leading \s* then rescanned the whole run at every position (quadratic), and
    # quick_check runs on the event loop: 20 KB of "$" held it for about a second per item.
    from rewardhub.mathlib.normalize import normalize

    text = "1" + unit * (100_000 // len(unit)) + "2"
    # its cost in this thread's CPU time, whatever else the host runs (a wall-clock bound of 2 s, then
    # 10 s, was tight under load): quadratic would take hours
    cpu0 = time.thread_time()
    normalize(text)
    assert time.thread_time() - cpu0 < 10.0
