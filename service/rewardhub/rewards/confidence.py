"""Reading tagged sections and a verbalized confidence (RLCR; algorithms.md §3.3) out of a response.

:func:`last_tag` returns the content of the **last complete** ``<tag>…</tag>`` (the last closing tag and
the last opening tag before it), found with ``str.rfind`` in linear time. A model that revises itself
("<confidence>0.9</confidence> … actually <confidence>0.6</confidence>") is held to its final word.

:func:`parse_confidence` reads the content, surrounding whitespace ignored, by these rules in order:

1. ``<number>%`` (spaces allowed before ``%``) with the number in [0, 100]: q = number / 100
   (``80%`` → 0.8, ``12.5 %`` → 0.125);
2. ``<number>/<number>`` (spaces allowed around ``/``), a fraction x/y with y > 0 and 0 ≤ x ≤ y: q = x / y
   (``0.8/1`` → 0.8, ``85/100`` → 0.85; algorithms.md §3.3 accepts ``0.8/1``);
3. a bare whole number (digits only) from 2 to 100, leading zeros allowed: read as a percentage (``80`` →
   0.8, ``080`` and ``0100`` as 80 and 100). Models asked for "a number between 0 and 1" still answer
   ``80`` often enough; ``0`` and ``1`` (``00``, ``01``) stay probabilities;
4. a decimal number in [0, 1]: q itself (``0.8``, ``.25``, ``1``, ``1e-1``, ``1.0``).

``<number>`` is ASCII ``[+-]? (digits [. digits] | . digits) [e [+-] digits]``. Anything else is a
format failure with a reason: empty, text (``high``, ``0.8 (fairly)``, ``NaN``, ``inf``, ``0.8/``),
or out of range (``1.5``, ``-0.2``, ``150%``, ``101``, ``5/4``, ``3/0``). Training is strict on purpose (RLCR trains with
a bare ``float()`` check): a lenient reader would let the policy learn to hedge in prose.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["ParsedConfidence", "last_tag", "last_tag_span", "parse_confidence", "tag_content"]

# Possessive (``++``, ``*+``) and atomic: nothing that may follow a number (``%``, ``/``, spaces, the end)
# can start with a character a number holds, so giving characters back never finds a match; with
# backtracking, a megabyte of digits in a <confidence> tag took half a second of the event loop to refuse.
_NUMBER = r"(?>[+-]?(?:[0-9]++(?:\.[0-9]*+)?|\.[0-9]++)(?:[eE][+-]?[0-9]++)?)"
_DECIMAL_RE = re.compile(_NUMBER)
_PERCENT_RE = re.compile(rf"({_NUMBER})[ \t]*+%")
_FRACTION_RE = re.compile(rf"({_NUMBER})[ \t]*+/[ \t]*+({_NUMBER})")
_WHOLE_RE = re.compile(r"0*+([0-9]{1,3})")  # leading zeros are no digits: "0100" is 100, as "080" is 80


@dataclass(frozen=True, slots=True)
class ParsedConfidence:
    """``value`` in [0, 1], or None with ``error`` saying why not."""

    value: float | None
    error: str | None = None


def last_tag_span(text: str, tag: str) -> tuple[int, int] | None:
    """Where the last complete ``<tag>…</tag>`` of ``text`` starts and ends (tags included); None when
    there is none."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    close = text.rfind(close_tag)
    if close < 0:
        return None
    start = text.rfind(open_tag, 0, close)
    if start < 0:
        return None
    return start, close + len(close_tag)


def tag_content(text: str, span: tuple[int, int] | None, tag: str) -> str | None:
    """Content of the ``<tag>…</tag>`` at ``span`` (as :func:`last_tag_span` gives it); None for None."""
    if span is None:
        return None
    return text[span[0] + len(tag) + 2 : span[1] - len(tag) - 3]


def last_tag(text: str, tag: str) -> str | None:
    """Content of the last complete ``<tag>…</tag>`` of ``text``; None when there is none."""
    return tag_content(text, last_tag_span(text, tag), tag)


def _in_range(x: float, hi: float) -> bool:
    return math.isfinite(x) and 0.0 <= x <= hi


def parse_confidence(content: str) -> ParsedConfidence:
    """A confidence by the rules of the module docstring."""
    s = content.strip()
    if not s:
        return ParsedConfidence(None, "empty")
    m = _PERCENT_RE.fullmatch(s)
    if m is not None:
        p = float(m.group(1))
        if not _in_range(p, 100.0):
            return ParsedConfidence(None, f"out of range [0, 100%]: {s[:40]!r}")
        return ParsedConfidence(p / 100.0 + 0.0)  # + 0.0 turns -0.0 into 0.0
    m = _FRACTION_RE.fullmatch(s)
    if m is not None:
        x, y = float(m.group(1)), float(m.group(2))
        if not (math.isfinite(y) and y > 0.0 and _in_range(x, y)):
            return ParsedConfidence(None, f"out of range (x/y needs 0 ≤ x ≤ y, y > 0): {s[:40]!r}")
        return ParsedConfidence(min(1.0, x / y) + 0.0)
    m = _WHOLE_RE.fullmatch(s)
    if m is not None and 2 <= int(m.group(1)) <= 100:
        return ParsedConfidence(int(m.group(1)) / 100.0)
    if _DECIMAL_RE.fullmatch(s) is not None:
        q = float(s)
        if not _in_range(q, 1.0):
            return ParsedConfidence(None, f"out of range [0, 1]: {s[:40]!r}")
        return ParsedConfidence(q + 0.0)
    return ParsedConfidence(None, f"not a number: {s[:40]!r}")
