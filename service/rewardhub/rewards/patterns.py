"""User-supplied regular expressions, run safely on the event loop.

Patterns in reward configs come from callers and are matched against model output, so a pathological
pair (``(x+x+)+y`` against a long run of ``x``) could stall the service's event loop for minutes with
the standard ``re`` module. The ``regex`` package takes a per-call ``timeout``; a match that runs past it
raises :class:`PatternTimeout` and the reward reports the item as ``timeout`` instead of hanging.
"""

from __future__ import annotations

from functools import lru_cache

import regex

__all__ = ["PatternTimeout", "compile_pattern", "last_match", "validate_pattern"]

# Seconds one match may take before the item is reported as a timeout.
MATCH_TIMEOUT_S = 0.5


class PatternTimeout(Exception):
    """A regex match exceeded its time budget."""


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
) -> regex.Match[str] | None:
    """The last non-overlapping match of ``pattern`` in ``text``, or None."""
    rx = compile_pattern(pattern, dotall, ignorecase)
    last = None
    try:
        for m in rx.finditer(text, timeout=timeout_s):
            last = m
    except TimeoutError:
        raise PatternTimeout(f"pattern {pattern[:80]!r} ran past {timeout_s}s") from None
    return last
