"""Functions that run inside CPU worker processes (module-level, so they pickle by reference).

Importing this module is what the forkserver preloads: it pulls in SymPy and Math-Verify once, so
replacement workers are warm.
"""

from __future__ import annotations

from rewardhub.mathlib import Check, check

__all__ = ["check_pair", "warm_up"]


def check_pair(payload: tuple[str, str]) -> Check:
    """Full equivalence check of (gold, prediction); may be slow, the pool enforces the deadline."""
    gold, pred = payload
    return check(gold, pred)


# One pair per code path worth warming: fractions and radicals, polynomials (simplify), complex numbers,
# intervals and unions, sets and tuples, equations, matrices, text.
_WARM_PAIRS = (
    ("\\frac{1}{2}", "0.5"),
    ("\\frac{\\sqrt{3}}{2}", "\\sqrt{3}/2"),
    ("(x+1)^2", "x^2+2x+1"),
    ("2x(15x^2-4x+10)", "2x(15x^2-4x+11)"),
    ("-11 + 27i", "-11 + 28i"),
    ("(-\\infty,-\\frac 12)\\cup (-\\frac 12,\\infty)", "(-\\infty, 3)"),
    ("\\{1, 2\\}", "\\{2, 1\\}"),
    ("(1, 2), (3, 4)", "(3, 4), (1, 2)"),
    ("y = 2x + 1", "y=1+2x"),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 3 \\end{pmatrix}"),
    ("\\text{Monday}", "monday"),
    ("45^\\circ", "45"),
)


def warm_up() -> None:
    """Exercise the main parsing and comparison paths so SymPy's lazy imports and caches are loaded."""
    for gold, pred in _WARM_PAIRS:
        check(gold, pred)
