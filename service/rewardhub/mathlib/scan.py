"""Linear-time scanners for LaTeX-ish answer strings.

Everything here walks the string once, character by character, instead of using regular
expressions with nested quantifiers.  Model responses reach us at up to ~1 MB and this code runs
on the service's event loop, so a single catastrophically backtracking regex would stall every
request in flight.  Brace matching in particular cannot be expressed by a regular expression at
all; a scanner is both correct and O(n).
"""

from __future__ import annotations

from collections.abc import Sequence

_OPEN = "([{"
_CLOSE = ")]}"


def match_brace(s: str, open_pos: int, end: int | None = None) -> int:
    """Return the index of the ``}`` that closes the ``{`` at ``open_pos``, or -1 if unbalanced.

    Escaped braces (``\\{`` / ``\\}``) are skipped: they are literal set braces, not grouping.
    The scan stops at ``end`` (default: end of string) so callers can keep total work linear.
    """
    depth = 0
    i = open_pos
    n = len(s) if end is None else min(end, len(s))
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def starts_token(s: str, token: str, i: int) -> bool:
    """True if ``token`` occurs at ``s[i]`` and does not continue as a longer command/word.

    ``\\cup`` must not match the start of ``\\cupdot``, and ``or`` must not match ``order``.
    """
    if not s.startswith(token, i):
        return False
    end = i + len(token)
    return not (token[-1].isalpha() and end < len(s) and s[end].isalpha())


def _command_at(s: str, i: int) -> str:
    """Return the control sequence starting at ``s[i] == '\\'`` (e.g. ``\\frac`` or ``\\{``)."""
    j = i + 1
    n = len(s)
    while j < n and s[j].isalpha():
        j += 1
    if j == i + 1 and j < n:
        j += 1
    return s[i:j]


def split_top_level(s: str, separators: Sequence[str] = (",",)) -> list[str]:
    """Split ``s`` on ``separators`` that occur outside every bracket pair.

    Round, square and curly brackets (including ``\\{ \\}``) all count as nesting, and a closing
    bracket of any kind closes any opening one.  That mismatch tolerance is deliberate: half-open
    intervals such as ``[1, 2)`` must stay one piece.  Word separators (e.g. ``" and "``) are
    matched literally and should carry their own surrounding spaces.
    """
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    n = len(s)
    while i < n:
        if depth == 0:
            sep = next((x for x in separators if starts_token(s, x, i)), None)
            if sep is not None:
                parts.append(s[start:i])
                i += len(sep)
                start = i
                continue
        c = s[i]
        if c == "\\":
            cmd = _command_at(s, i)
            if cmd == "\\{":
                depth += 1
            elif cmd == "\\}":
                depth = max(0, depth - 1)
            i += len(cmd)
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        i += 1
    parts.append(s[start:])
    return parts


def outer_brackets(s: str) -> tuple[str, str, str] | None:
    """If ``s`` is one bracketed group, return ``(open, inner, close)``; otherwise None.

    ``(1, 2), (3, 4)`` is *not* one group even though it starts with ``(`` and ends with ``)``,
    which is why this scans for the point where the outermost bracket closes.  ``\\{ ... \\}`` is
    reported with open ``"\\{"`` and close ``"\\}"``.
    """
    s = s.strip()
    if len(s) < 2:
        return None
    if s.startswith("\\{"):
        opener, body_start = "\\{", 2
    elif s[0] in "([":
        opener, body_start = s[0], 1
    else:
        return None
    depth = 0
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            cmd = _command_at(s, i)
            if cmd == "\\{":
                depth += 1
            elif cmd == "\\}":
                depth -= 1
                if depth == 0:
                    return (opener, s[body_start:i], "\\}") if i + 2 == n else None
            i += len(cmd)
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth == 0:
                return (opener, s[body_start:i], c) if i + 1 == n else None
        i += 1
    return None


def find_top_level(s: str, needle: str) -> int:
    """Index of the first occurrence of ``needle`` outside all brackets, or -1."""
    depth = 0
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            cmd = _command_at(s, i)
            if depth == 0 and starts_token(s, needle, i):
                return i
            if cmd == "\\{":
                depth += 1
            elif cmd == "\\}":
                depth = max(0, depth - 1)
            i += len(cmd)
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0 and starts_token(s, needle, i):
            return i
        i += 1
    return -1
