"""Finding the program in a model's response.

Chat models wrap code in Markdown fences, often several (an example, then the answer), and reasoning
models think out loud first. The rule, in order:

1. drop everything up to the last ``</think>``, and from a ``<think>`` after it that never closes (a
   response cut off in its reasoning): the reasoning is not the answer
   (:func:`~rewardhub.rewards.text.answer_text`);
2. the last non-empty fenced block whose tag names the language (```` ```py ````, ```` ```c++ ````,
   ...; the name may carry attributes or a file name: ```` ```python:main.py ````, ```` ```{python} ````,
   and a language standard or version: ```` ```c++17 ````, ```` ```c11 ````, ```` ```py3 ````);
3. else the last non-empty fenced block without a tag;
4. else, in ``auto`` mode, the whole response (a bare program, as completion-style models write it).

A tagged fence may also open after text on its line ("Final: ```sql"), as models write it (CommonMark
does not). A block closes at a fence line indented at most 3 columns past its opening one (CommonMark): a ``` line
deeper inside the program, in a string literal, is the program's. An unterminated last fence (a response
cut at the token limit) counts as running to the end. A fence indented by N spaces (inside a Markdown
list item) has up to N spaces of indentation removed from each of its lines, as CommonMark does, so
the program starts at column 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rewardhub.rewards.text import answer_text
from rewardhub.sandbox.languages import LANGUAGES, Language, resolve_language

__all__ = ["ExtractMode", "Extracted", "extract_block", "extract_code", "fence_language"]

ExtractMode = Literal["auto", "fenced", "raw"]

# A fence opens at the start of a line with 3+ backticks or tildes, an optional tag, then a newline.
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<tag>[^\s`]*)[^\n`]*\n", re.MULTILINE)
# Models also open a tagged fence after text on its line ("Final: ```sql"), which CommonMark does not;
# the tag is required there (a bare ``` inside a line is an inline code span's, not a block's).
_INLINE_FENCE = re.compile(r"(?<=[^\s`~])[ \t]*(?P<fence>`{3,}|~{3,})(?P<tag>[A-Za-z{.][^\s`]*)[ \t]*\r?\n")

# The language name that begins a fence's info word; attributes or a file name may follow it.
_LANG = re.compile(r"[{.]*([A-Za-z0-9_+#-]+)")


# Fence tags that name a language with its standard or version, as models label a block: the language's
# tag, never its name as a reference or SandboxFusion spells it (a reference saying "c++20" must not be
# compiled as gnu++17 in silence; a block's tag only says which block is the answer).
_CPP_STANDARDS = ("98", "03", "0x", "11", "1y", "14", "1z", "17", "2a", "20", "2b", "23", "2c", "26")
_C_STANDARDS = ("89", "90", "99", "9x", "11", "1x", "17", "18", "2x", "23")
_FENCE_ALIASES: dict[str, str] = {
    **{f"{name}{std}": "cpp" for name in ("c++", "cpp", "cxx", "gnu++") for std in _CPP_STANDARDS},
    **{f"{name}{std}": "c" for name in ("c", "gnu") for std in _C_STANDARDS},
    "py3": "python",
}


def fence_language(tag: str) -> Language | None:
    """The language a fence tag names, in any of its spellings or with a standard or version, or None."""
    lang = resolve_language(tag)
    if lang is None and (alias := _FENCE_ALIASES.get(tag.strip().lower())) is not None:
        lang = LANGUAGES[alias]
    return lang


@dataclass(frozen=True, slots=True)
class Extracted:
    code: str
    source: Literal["fenced", "untagged_fence", "raw"]


def _dedent(body: str, indent: int) -> str:
    """``body`` with up to ``indent`` leading spaces or tabs removed from each line."""
    if not indent:
        return body
    lines = body.split("\n")  # only \n: a \u2028 or \f inside a string literal is no line break
    return "\n".join(line[min(indent, len(line) - len(line.lstrip(" \t"))) :] for line in lines)


def _width(indent: str) -> int:
    """Columns of an indentation, a tab reaching the next multiple of 4 (CommonMark)."""
    col = 0
    for ch in indent:
        col = col + 4 - col % 4 if ch == "\t" else col + 1
    return col


def _blocks(text: str) -> list[tuple[str, str]]:
    """(tag, body) of every fenced block, in order."""
    out: list[tuple[str, str]] = []
    pos = 0
    while True:
        m = _FENCE.search(text, pos)
        inline = _INLINE_FENCE.search(text, pos, m.start() if m else len(text))
        if inline is not None:
            m = inline
        if m is None:
            return out
        fence = m.group("fence")
        # \r?: a CRLF response's closing fence line ends in \r, which `$` alone does not skip
        close = re.compile(
            rf"^(?P<indent>[ \t]*){re.escape(fence[0])}{{{len(fence)},}}[ \t]*\r?$", re.MULTILINE
        )
        # A closing fence is indented at most 3 columns more than the opening one (CommonMark): a line
        # of ``` deeper inside the program (in a string literal) is the program's, and ended it there.
        indent = m.group("indent") if m.re is _FENCE else ""
        most = _width(indent) + 3
        end = next((c for c in close.finditer(text, m.end()) if _width(c.group("indent")) <= most), None)
        body = text[m.end() : end.start()] if end else text[m.end() :]
        info = m.group("tag")
        lang = _LANG.match(info)  # the language name in 'python:main.py', '{python}', '{.py .numberLines}'
        tag = lang.group(1) if lang else info
        out.append((tag.lower(), _dedent(body, len(indent))))
        if end is None:
            return out
        pos = end.end()


def extract_code(response: str, language: Language, mode: ExtractMode = "auto") -> Extracted | None:
    """The program in ``response`` for ``language``, or None when there is none (an empty answer)."""
    return extract_block(response, lambda tag: fence_language(tag) is language, mode)


def extract_block(
    response: str,
    wanted: Callable[[str], bool],
    mode: ExtractMode = "auto",
    empty: Callable[[str], bool] | None = None,
) -> Extracted | None:
    """Like :func:`extract_code` for any fence tag ``wanted`` accepts (``sql``, say). ``empty``: whether a
    block's body holds no program although it is not blank (SQL comments only), to be skipped as a blank
    one is, so that a closing "-- the query above answers it" block does not hide the query."""
    if mode == "raw":
        return Extracted(response, "raw") if response.strip() else None
    text = answer_text(response)
    tagged: str | None = None
    untagged: str | None = None
    hollow: str | None = None  # the last wanted block ``empty`` skipped: the answer if there is no other
    for tag, body in _blocks(text):
        if not body.strip():  # an empty block is no answer: it must not hide an earlier program
            continue
        if empty is not None and empty(body):
            if not tag or wanted(tag):
                hollow = body
            continue
        if not tag:
            untagged = body
        elif wanted(tag):
            tagged = body
    if tagged is not None:
        return Extracted(tagged, "fenced")
    if untagged is not None:
        return Extracted(untagged, "untagged_fence")
    if hollow is not None:  # (the caller reads it as no answer, not the whole text as the program)
        return Extracted(hollow, "fenced")
    if mode == "fenced":
        return None
    return Extracted(text, "raw") if text.strip() else None
