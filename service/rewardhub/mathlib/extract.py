"""Answer extraction from free-form model responses.

Runs on the service's event loop over responses of up to ~1 MB, so every method is a linear
scan: ``str.rfind`` plus an explicit brace scanner for ``\\boxed``, and regular expressions only
of the simple, non-nested kind whose matching is linear.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

from rewardhub.mathlib.scan import match_brace
from rewardhub.rewards.text import drop_invisible


@dataclass(frozen=True, slots=True)
class Extracted:
    """An extracted answer: the stripped ``text`` and the ``method`` that found it."""

    text: str
    method: str


DEFAULT_METHODS: tuple[str, ...] = ("boxed", "answer_tag", "answer_phrase", "last_number")

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
# Bounded quantifiers only: the pattern is tried at every "answer" in a response of up to 1 MB.
_PHRASE_RE = re.compile(
    r"answer(?:[ \t]{0,3}\*\*)?[ \t]{0,3}(?:is\b[ \t]{0,3}:?|[:：])(?:[ \t]{0,3}\*\*)?"
    r"|^[ \t]{0,8}####",
    re.IGNORECASE | re.MULTILINE,
)
# Thousands grouped by commas (LaTeX's {,} too) or (SI style) by spaces: "10 000 dollars" is 10000, not its
# last group 000.
_NUMBER_RE = re.compile(
    r"(?<![\w.])[-\u2212]?(?:[1-9]\d{0,2}(?:(?:(?:,|\{,\})\d{3})+|(?:[ \u00a0\u2009\u202f]\d{3})+)|\d+)"
    r"(?:\.\d+)?(?:/\d+)?(?![\d])"
)
_GROUP_SEPARATORS = str.maketrans(dict.fromkeys(",{} \u00a0\u2009\u202f") | {"\u2212": "-"})
_SENTENCE_END_RE = re.compile(r"\.(?:\s|$)")
# Words whose full stop is part of the answer ("The answer is Mr. Smith."), not its end. A single letter
# is not among them: "The answer is B. Because ..." is the choice B.
_ABBREVIATIONS = frozenset("mr mrs ms dr st mt jr sr prof lt sgt capt vs approx cf e.g i.e fig".split())
_WORD_BEFORE_RE = re.compile(r"(?:^|(?<=[\s(\[\"']))([A-Za-z]+(?:\.[A-Za-z]+)*)$")
_MAX_PHRASE_CHARS = 400


def _strip_wrappers(s: str) -> str:
    """Remove markdown bold, surrounding math delimiters and a trailing full stop."""
    s = s.strip()
    for _ in range(3):
        before = s
        s = s.strip().strip("*").strip()
        if s.endswith("."):
            s = s[:-1].rstrip()
        for open_, close in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            if len(s) >= len(open_) + len(close) and s.startswith(open_) and s.endswith(close):
                s = s[len(open_) : len(s) - len(close)].strip()
                break
        if s == before:
            break
    return s


def _boxed_at(text: str, start: int, cmd: str, end: int | None = None) -> tuple[str, int] | None:
    """Content and end index of the box command at ``start``; None when unbalanced before ``end``."""
    i = start + len(cmd)
    n = len(text) if end is None else min(end, len(text))
    while i < n and text[i] == " ":
        i += 1
    if i < n and text[i] == "{":
        close = match_brace(text, i, n)
        if close < 0:
            return None
        return text[i + 1 : close].strip(), close + 1
    # "\boxed 5": the argument is the next token.
    j = i
    while j < n and not text[j].isspace() and text[j] not in "$.,;":
        j += 1
    if j == i or i == start + len(cmd):
        return None
    return text[i:j], j


def _extract_boxed(text: str) -> str | None:
    """The last balanced box; further boxes on the same line join it as a list (``1, 2``).

    A model that writes ``\\boxed{1}, \\boxed{2}`` gives a two-element answer; an identical box
    repeated on one line (``\\boxed{840} \\boxed{840}``) is one answer, not ``840, 840``.
    All box positions come from one regex pass, and each brace scan stops where the previous
    candidate began or ended, so the whole extraction is linear in the response length.
    """
    starts = [(m.start(), m.group(0)) for m in _BOX_RE.finditer(text)]
    end = len(text)
    found: tuple[str, int] | None = None
    last = -1
    for idx in range(len(starts) - 1, -1, -1):
        pos, cmd = starts[idx]
        found = _boxed_at(text, pos, cmd, end)
        if found is not None:
            last = idx
            break
        end = pos
    if found is None:
        return None
    line_start = text.rfind("\n", 0, starts[last][0]) + 1
    first = bisect.bisect_left(starts, (line_start, ""))
    contents: list[str] = []
    i = line_start
    for k in range(first, last + 1):
        pos, cmd = starts[k]
        if pos < i:
            continue  # nested inside the previous box
        # A box on this line that is still open where the next one starts encloses it; the
        # scan limit skips it (its inner boxes are visited next) and keeps the work linear.
        limit = starts[k + 1][0] if k < last else found[1]
        got = _boxed_at(text, pos, cmd, limit)
        if got is None:
            continue
        if got[0] and (not contents or contents[-1] != got[0]):
            contents.append(got[0])
        i = got[1]
    if not contents:
        contents = [found[0]]
    return ", ".join(contents) if len(set(contents)) > 1 else contents[0]


def _extract_answer_tag(text: str) -> str | None:
    close = text.rfind("</answer>")
    if close < 0:
        return None
    open_ = text.rfind("<answer>", 0, close)
    if open_ < 0:
        return None
    content = text[open_ + len("<answer>") : close]
    # "<answer>The answer is 5.</answer>": a sentence in the tag announces its answer like one outside.
    phrase = _extract_phrase(content)
    return phrase if phrase and _strip_wrappers(phrase) else content


def _extract_phrase(text: str) -> str | None:
    """Text after the last "answer is" / "Answer:" / "####" anchor, up to the end of the line."""
    last = None
    for m in _PHRASE_RE.finditer(text):
        last = m
    if last is None:
        return None
    line_end = text.find("\n", last.end())
    tail = text[last.end() : line_end if line_end >= 0 else len(text)][:_MAX_PHRASE_CHARS].strip()
    if not tail.strip("*") and line_end >= 0:  # "The answer is:" ends its line: the answer is below it
        tail = _next_line_answer(text, line_end + 1)
        if tail.startswith(("$$", "\\[")):
            return tail
    if tail.startswith("$"):
        delim = "$$" if tail.startswith("$$") else "$"
        close = _unescaped(tail, delim, len(delim))
        if close > 0:
            return _span_list(tail) or tail[: close + len(delim)]
    if tail.startswith("\\("):
        listed = _span_list(tail)
        if listed is not None:
            return listed
    return tail[: _sentence_end(tail)]


# Inline math spans joined as a list: "$x=5$ or $x=-5$", "$2$, $3$, and $4$", "\(1\) and \(2\)".
_INLINE_SPAN_RE = re.compile(r"\$(?!\$)((?:[^$\\]|\\.)+?)\$|\\\((.+?)\\\)")
_SPAN_JOIN_RE = re.compile(r"[ \t]*+(?:,[ \t]*+(?:(?:and|or)[ \t]++)?|(?:and|or)[ \t]++)", re.IGNORECASE)
_LIST_END_RE = re.compile(r"[ \t]*+(?:[.;!?]|$)")


def _span_list(tail: str) -> str | None:
    """The contents of a list of inline math spans that is the whole answer (it ends the sentence), joined
    by their words ("x=5 or x=-5"); None for one span, or a span and prose ("$5$, and $6$ is wrong")."""
    m = _INLINE_SPAN_RE.match(tail)
    if m is None:
        return None
    listed, end, count = (m.group(1) or m.group(2)).strip(), m.end(), 1
    while (join := _SPAN_JOIN_RE.match(tail, end)) is not None and (
        m := _INLINE_SPAN_RE.match(tail, join.end())
    ) is not None:
        word = tail[end : join.end()].strip()
        listed += f"{'' if word.startswith(',') else ' '}{word} {(m.group(1) or m.group(2)).strip()}"
        end, count = m.end(), count + 1
    if count == 1 or _LIST_END_RE.match(tail, end) is None:
        return None
    return listed


def _sentence_end(tail: str) -> int:
    """Index of the full stop that ends the answer's sentence (the length when none does); the stop of
    an abbreviation ("Mr.", "approx.", "e.g.") does not."""
    for stop in _SENTENCE_END_RE.finditer(tail):
        word = _WORD_BEFORE_RE.search(tail, 0, stop.start())
        if word is None or word.group(1).lower() not in _ABBREVIATIONS:
            return stop.start()
    return len(tail)


def _next_line_answer(text: str, pos: int) -> str:
    """The answer on the first non-blank line from ``pos``, below an anchor that ends its line: a display
    (``$$...$$``, ``\\[...\\]``, whole, over several lines too), a line that starts with inline math, or a
    number alone; "" for anything else (a line of prose is the reasoning, not the answer)."""
    rest = text[pos : pos + _MAX_PHRASE_CHARS].lstrip()
    for open_, close in (("$$", "$$"), ("\\[", "\\]")):
        if rest.startswith(open_):
            c = rest.find(close, len(open_))
            return rest[: c + len(close)] if c > 0 else ""
    line = rest.split("\n", 1)[0].strip()
    if line.startswith(("$", "\\(")) or _NUMBER_RE.fullmatch(line.rstrip(".").strip("*").rstrip(".")):
        return line
    return ""


def _unescaped(s: str, needle: str, start: int) -> int:
    """Index of the first ``needle`` at or after ``start`` not escaped by a backslash (``\\$`` is money)."""
    i = start
    while True:
        i = s.find(needle, i)
        if i < 0:
            return -1
        slashes = 0
        while i - slashes - 1 >= 0 and s[i - slashes - 1] == "\\":
            slashes += 1
        if slashes % 2 == 0:
            return i
        i += 1


# What comes before a number that is a LaTeX argument, not a value of its own: a fraction's numerator or
# denominator (``\\frac{3}{4}``: 4), an exponent or a subscript (``r^2``, ``2^{10}``), a root's radicand.
_LATEX_ARGUMENT_RE = re.compile(
    r"(?:\\[dtc]?frac[ \t]*\{|\\binom[ \t]*\{|\\sqrt[ \t]*(?:\[[^\]]{0,8}\])?\{|\}[ \t]*\{|[\^_][ \t]*\{?)[ \t]*$"
)
_MATH_SPANS = (("\\(", "\\)"), ("\\[", "\\]"), ("$$", "$$"), ("$", "$"))


def _math_around(text: str, start: int, end: int) -> str | None:
    """The content of the math span (``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``) around
    ``text[start:end]``, from its last ``=`` outside braces on; None when there is none (or it is long)."""
    best: tuple[int, str] | None = None
    for open_, close in _MATH_SPANS:
        o = text.rfind(open_, 0, start)
        c = text.find(close, end)
        if o < 0 or c < 0 or text.find(close, o + len(open_), start) >= 0:
            continue
        if open_ == "$$" and text.count("$$", 0, start) % 2 == 0:
            continue  # the $$ before it closed a display
        if open_ == "$" and (text.count("$", 0, start) - 2 * text.count("$$", 0, start)) % 2 == 0:
            continue  # the $ before it closed an inline span
        if best is None or o > best[0]:
            best = (o, text[o + len(open_) : c])
    if best is None:
        return None
    content = best[1]
    depth, cut = 0, 0
    for i, ch in enumerate(content):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "=" and depth == 0:
            cut = i + 1
    content = content[cut:].strip().strip("&").strip()
    return content if 0 < len(content) <= _MAX_PHRASE_CHARS else None


def _extract_last_number(text: str) -> str | None:
    last = None
    for m in _NUMBER_RE.finditer(text):
        last = m
    if last is None:
        return None
    if _LATEX_ARGUMENT_RE.search(text, max(0, last.start() - 24), last.start()):
        # a denominator or an exponent alone was the answer ("4" of 3/4): a false accept for a gold 4
        return _math_around(text, last.start(), last.end())
    return last.group(0).translate(_GROUP_SEPARATORS)


_METHODS = {
    "boxed": _extract_boxed,
    "answer_tag": _extract_answer_tag,
    "answer_phrase": _extract_phrase,
    "last_number": _extract_last_number,
}


def extract_answer(response: str, methods: Sequence[str] = DEFAULT_METHODS) -> Extracted | None:
    """Try ``methods`` in priority order; the first that yields a non-empty answer wins, and an empty
    final ``\\boxed{}`` is no answer (the later rules are not tried).

    Unknown method names raise ``ValueError`` (a configuration error, not bad input).
    """
    for name in methods:
        fn = _METHODS.get(name)
        if fn is None:
            raise ValueError(f"unknown extraction method: {name!r}")
        raw = fn(response)
        if raw is None:
            continue
        text = _strip_wrappers(drop_invisible(raw))  # "4\u200b2" is 42: a zero-width space is no digit
        if text:
            return Extracted(text, name)
        if name == "boxed":
            # The final box is the model's own final word, and it is empty: there is no answer. Falling
            # through read the last number of the reasoning instead ("2 + 3 = 5 ... \boxed{}" was 5).
            return None
    return None


def read_gold(reference: str) -> str | None:
    """Normalise a gold reference: strip math delimiters, unwrap a whole ``\\boxed{...}``."""
    s = _strip_wrappers(drop_invisible(reference))
    for cmd in _BOX_COMMANDS:
        if s.startswith(cmd):
            got = _boxed_at(s, 0, cmd)
            if got is not None and got[1] == len(s):
                s = _strip_wrappers(got[0])
            break
    return s or None
