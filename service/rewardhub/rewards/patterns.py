"""User-supplied regular expressions, run safely on the event loop.

Patterns in reward configs come from callers and are matched against model output, so a pathological
pair (``(x+x+)+y`` against a long run of ``x``) could stall the service's event loop for minutes with
the standard ``re`` module. The ``regex`` package takes a per-call ``timeout``; a match that runs past it
raises :class:`PatternTimeout` and the reward reports the item as ``timeout`` instead of hanging.

A per-match limit alone still lets one request stall the loop for its number of items times the limit
(4096 items × 0.5 s is half an hour), so a reward gives all the matches of one call a shared
:class:`MatchBudget`: once ``BATCH_BUDGET_S`` is spent, the remaining items are not matched and are
reported as ``timeout`` too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

import regex

__all__ = ["MatchBudget", "PatternTimeout", "compile_pattern", "last_match", "validate_pattern"]

# Seconds one match may take before the item is reported as a timeout.
MATCH_TIMEOUT_S = 0.5
# Seconds all the matches of one reward call (one request's items) may take together.
BATCH_BUDGET_S = 2.0

T = TypeVar("T")


class PatternTimeout(Exception):
    """A regex match exceeded its time budget."""


class MatchBudget:
    """The matching time left to one reward call; each match gets ``per_match_s`` or what is left."""

    def __init__(self, per_match_s: float = MATCH_TIMEOUT_S, total_s: float = BATCH_BUDGET_S) -> None:
        self.per_match_s = per_match_s
        self.total_s = total_s
        self.left_s = total_s

    def run(self, pattern: str, match: Callable[..., T], text: str) -> T:
        """``match(text, timeout=...)`` charged to the budget.

        Raises:
            PatternTimeout: the match ran past its timeout, or the budget was already spent.
        """
        if self.left_s <= 0:
            raise PatternTimeout(
                f"pattern {pattern[:80]!r} not run: this request's matches used up their {self.total_s}s"
            )
        timeout = min(self.per_match_s, self.left_s)
        t0 = time.perf_counter()
        try:
            return match(text, timeout=timeout)
        except TimeoutError:
            raise PatternTimeout(f"pattern {pattern[:80]!r} ran past {timeout:.3g}s") from None
        finally:
            self.left_s -= time.perf_counter() - t0


@lru_cache(maxsize=512)
def compile_pattern(pattern: str, dotall: bool = True, ignorecase: bool = False) -> regex.Pattern[str]:
    flags = regex.V0
    if dotall:
        flags |= regex.DOTALL
    if ignorecase:
        flags |= regex.IGNORECASE
    return regex.compile(pattern, flags)


def validate_pattern(pattern: str) -> str:
    """For config validators: raise ValueError with the compiler's message when the pattern is invalid."""
    try:
        compile_pattern(pattern)
    except regex.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return pattern


def last_match(
    pattern: str,
    text: str,
    *,
    dotall: bool = True,
    ignorecase: bool = False,
    timeout_s: float = MATCH_TIMEOUT_S,
    budget: MatchBudget | None = None,
) -> regex.Match[str] | None:
    """The last non-overlapping match of ``pattern`` in ``text``, or None (``budget``: the call's)."""
    rx = compile_pattern(pattern, dotall, ignorecase)

    def scan(text: str, timeout: float) -> regex.Match[str] | None:
        last = None
        for m in rx.finditer(text, timeout=timeout):
            last = m
        return last

    return (budget or MatchBudget(timeout_s, total_s=timeout_s)).run(pattern, scan, text)
