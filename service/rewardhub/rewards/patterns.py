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

__all__ = [
    "MAX_PATTERN_UNITS",
    "MatchBudget",
    "PatternTimeout",
    "compile_pattern",
    "last_match",
    "pattern_units",
    "validate_pattern",
]

# Seconds one match may take before the item is reported as a timeout.
MATCH_TIMEOUT_S = 0.5
# Seconds all the matches of one reward call (one request's items) may take together.
BATCH_BUDGET_S = 2.0

T = TypeVar("T")


class PatternTimeout(Exception):
    """A regex match exceeded its time budget."""


class MatchBudget:
    """The matching time left to one reward call; each match gets ``per_match_s`` or what is left.

    The budget is charged in wall time, as it bounds how long the event loop stalls; ``regex`` times a
    match by CPU time, so on a loaded host one catastrophic match can take more of the budget than its
    ``per_match_s`` (and leave the items after it reported as ``timeout``, never as a wrong 0.0).
    """

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


# Most units (about one per atom the compiled program holds, a counted repeat ``X{m}`` / ``X{m,}`` /
# ``X{m,n}`` holding m copies of X) a pattern may expand to: about 5 MB of compiled program, so that
# even a full compile_pattern cache (512 patterns) stays within a few GB.
MAX_PATTERN_UNITS = 20_000

_COUNTED = regex.compile(r"\{([0-9]*)(?:,([0-9]*))?\}")
_BRACED_ESCAPES = frozenset("pPNxuUg")


def pattern_units(pattern: str) -> int:
    """An estimate of the size of the program ``regex`` compiles ``pattern`` to (see MAX_PATTERN_UNITS).

    The engine lays out the minimum count of a counted repeat: ``(?:a{3000}){3000}``, 17 characters,
    took 6 s and 2.4 GB to compile on the event loop, and one more level was killed for memory. A scan
    of the text (escapes, classes and groups skipped over as units) is enough to bound that product.
    """
    stack: list[list[int]] = [[0, 0]]  # per open group: [total units so far, units of the last atom]
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        atom = 1
        if ch == "\\":
            i += 2
            if i - 1 < n and pattern[i - 1] in _BRACED_ESCAPES and i < n and pattern[i] == "{":
                close = pattern.find("}", i)
                i = n if close < 0 else close + 1
        elif ch == "[":
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                if pattern[i] == "\\":
                    i += 1
                elif pattern.startswith("[:", i):
                    close = pattern.find(":]", i + 2)
                    i = i if close < 0 else close + 1
                i += 1
            i += 1
        elif ch == "(":
            if pattern.startswith("(?#", i):
                close = pattern.find(")", i)
                i = n if close < 0 else close + 1
                continue
            stack.append([0, 0])
            i += 1
            continue
        elif ch == ")":
            if len(stack) > 1:
                atom = max(1, stack.pop()[0])
            i += 1
        elif ch == "{":
            m = _COUNTED.match(pattern, i)
            if m is not None and (m.group(1) or m.group(2)):
                frame = stack[-1]
                copies = max(1, int(m.group(1) or 0))
                frame[0] += frame[1] * (copies - 1)
                frame[1] *= copies
                i = m.end()
                continue
            i += 1
        elif ch in "|*+?":
            i += 1
            continue
        else:
            i += 1
        frame = stack[-1]
        frame[0] += atom
        frame[1] = atom
    while len(stack) > 1:  # unbalanced: the compiler will say so
        units = stack.pop()[0]
        stack[-1][0] += units
    return stack[0][0]


@lru_cache(maxsize=512)
def compile_pattern(pattern: str, dotall: bool = True, ignorecase: bool = False) -> regex.Pattern[str]:
    """The compiled pattern; raises ``regex.error`` for one that would expand past MAX_PATTERN_UNITS."""
    units = pattern_units(pattern)
    if units > MAX_PATTERN_UNITS:
        raise regex.error(
            f"the pattern expands to about {units:,} units, more than {MAX_PATTERN_UNITS:,} "
            "(nested counted repeats such as (?:a{1000}){1000} multiply); use * + or {0,n}"
        )
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
