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


def warm_up() -> None:
    """Run one parse so the ANTLR grammar and SymPy caches are loaded before the first real item."""
    check("\\frac{1}{2}", "0.5")
