"""Presentation-only normalisation of answer strings.

Every rewrite in this module changes how an answer is *typeset*, never what it *means*: two
strings that normalise to the same key denote the same mathematical object.  That is what lets
:func:`rewardhub.mathlib.equivalence.quick_check` declare a match from string equality alone.
Rewrites that change meaning under some reading (dropping labels, units, percent signs, degree
marks, ...) live in :mod:`rewardhub.mathlib.structures` where they are applied symmetrically and
only to well-delimited shapes.

All passes are single regex substitutions without nested quantifiers, or explicit scanners, so
the cost stays linear in the input length.
"""

from __future__ import annotations

import re

# Control characters that a JSON/Python string lost a backslash to (``"\frac"`` written in a
# non-raw literal becomes form-feed + "rac").  They never occur legitimately in an answer, so
# restoring the backslash is a repair, not a guess.
_LOST_ESCAPES = {"\x07": "a", "\x08": "b", "\x0b": "v", "\x0c": "f", "\t": "t", "\r": "r"}
_LOST_ESCAPE_RE = re.compile("([\x07\x08\x0b\x0c\t\r])(?=[a-zA-Z])")
# ``\\frac`` (doubled backslash before a command name) is the same damage in the other direction.
# Only safe where ``\\`` cannot be a row separator.
_DOUBLE_SLASH_RE = re.compile(r"\\\\(?=[a-zA-Z])")

_HTML_RE = re.compile(r"<(sup|sub)>([^<]{0,200})</\1>")

_UNICODE = {
    "∞": r"\infty ",
    "≤": r"\leq ",
    "≦": r"\leq ",
    "⩽": r"\leq ",
    "≥": r"\geq ",
    "≧": r"\geq ",
    "⩾": r"\geq ",
    "≠": r"\neq ",
    "∪": r"\cup ",
    "∩": r"\cap ",
    "π": r"\pi ",
    "×": r"\times ",
    "·": r"\cdot ",
    "⋅": r"\cdot ",
    "÷": r"\div ",
    "−": "-",
    "–": "-",
    "—": "-",
    "＞": ">",
    "＜": "<",
    "，": ",",
    "；": ";",
    "：": ":",
    "（": "(",
    "）": ")",
    "√": r"\sqrt",
    "°": r"^\circ ",
    "∈": r"\in ",
    "∀": r"\forall ",
    "±": r"\pm ",
    "∓": r"\mp ",
    "≈": r"\approx ",
    "∅": r"\emptyset ",
    "\u00a0": " ",
    "\u2009": " ",
    "\u202f": " ",
}
_UNICODE_RE = re.compile("|".join(re.escape(k) for k in _UNICODE))
# Superscript digits are a power: "m²" is "m^2", "10⁻³" is "10^{-3}" (a run is one exponent, braced: "2¹⁰"
# is 2^{10}).
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻", "0123456789+-")
_SUPERSCRIPT_RE = re.compile("[⁺⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+")
# The cent sign is the word (a cent's unit, read as such by :mod:`.quantities`): "50¢" is "50 cents",
# and so are LaTeX's "\\textcent" and "\\cent" (textcomp, wasysym).
_CENT_RE = re.compile(r"¢|\\(?:textcent|cent)(?![a-zA-Z])")
_CIRCLED = {chr(0x2460 + i): str(i + 1) for i in range(20)}
_CIRCLED_RE = re.compile("[" + "".join(_CIRCLED) + "]")

# Math-mode delimiters and sizing/spacing commands carry no mathematical content.
_DELIMS_RE = re.compile(r"\\\$|\$|(?<!\\)\\[()\[\]]")
_SIZING_RE = re.compile(
    r"\\(?:left|right|middle|[bB]ig{1,2}[lrm]?|displaystyle|textstyle|scriptstyle|limits)(?![a-zA-Z])"
)
# A dollar amount in thousands groups, "\\$1,200": one number (a sign starts no list item "200"), its commas
# dropped before a list is split on them ("\\$1,200, \\$5" is 1200 and 5). A bare "1,200" in a list stays
# ambiguous (the items 1 and 200, or 1200) and is left as written; so is a group that is no thousands group
# ("\\$1,20", "\\$1,200,5").
_DOLLAR_THOUSANDS_RE = re.compile(r"\\\$\s*[1-9]\d{0,2}(?:,\d{3})+(?!\d|,\d)")
_THOUSANDS_THIN_RE = re.compile(r"(?<=\d)(?:\\,|\\ |\{,\}|\\!)(?=\d{3}(?!\d))")
_SPACING_RE = re.compile(
    r"\\(?:quad|qquad|enspace|thinspace|medspace|thickspace)(?![a-zA-Z])|(?<!\\)\\[,;:! ]|~"
)
_RENAMES = [
    (re.compile(r"\\[dtc]frac(?![a-zA-Z])"), r"\\frac"),
    (re.compile(r"\\[dt]binom(?![a-zA-Z])"), r"\\binom"),
    (re.compile(r"\\(?:leqslant|leqq|le)(?![a-zA-Z])"), r"\\leq"),
    (re.compile(r"\\(?:geqslant|geqq|ge)(?![a-zA-Z])"), r"\\geq"),
    (re.compile(r"\\(?:ne)(?![a-zA-Z])"), r"\\neq"),
    (re.compile(r"\\lt(?![a-zA-Z])"), "<"),
    (re.compile(r"\\gt(?![a-zA-Z])"), ">"),
    (re.compile(r"<="), r"\\leq "),
    (re.compile(r">="), r"\\geq "),
    (re.compile(r"!="), r"\\neq "),
    (re.compile(r"\\(sin|cos|tan|cot|sec|csc)\s*\^\s*\{\s*-\s*1\s*\}"), r"\\arc\1"),
    (re.compile(r"\\(sin|cos|tan|cot|sec|csc)\s*\^\s*\(\s*-\s*1\s*\)"), r"\\arc\1"),
    (re.compile(r"\\(?:textdegree|degree)(?![a-zA-Z])"), r"^\\circ "),
    (re.compile(r"\^?\s*\\textcirc(?![a-zA-Z])"), r"^\\circ "),
    (re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![a-zA-Z])"), r"^\\circ "),
    (re.compile(r"\\%|%"), r"\\% "),
    (re.compile(r"\{,\}"), ","),
    (re.compile(r"\\varnothing(?![a-zA-Z])"), r"\\emptyset "),
]
# The empty set written as braces ("\{\}", "\left\{ \right\}") or in words ("no solution", "there are no
# real solutions"): the whole answer only.
_EMPTY_SET_RE = re.compile(
    r"\\\{ ?\\\}|(?:there (?:is|are) )?no (?:real )?solutions?(?: exists?)?\.?", re.IGNORECASE
)
# Commands whose argument is typeset text or a font change: we keep the argument, drop the font.
_TEXT_COMMANDS = (
    "text",
    "textbf",
    "textit",
    "textrm",
    "textsf",
    "texttt",
    "textnormal",
    "mbox",
    "mathrm",
    "mathit",
    "mathbf",
    "mathsf",
    "emph",
    "boldsymbol",
)
# Units are typeset upright; an italic or bold letter after a number is a variable or a vector (3x).
_UPRIGHT_COMMANDS = frozenset(
    {"text", "textrm", "textsf", "texttt", "textnormal", "mbox", "mathrm", "mathsf"}
)
_TEXT_OR_BRACE_RE = re.compile(r"\\(?:" + "|".join(_TEXT_COMMANDS) + r")(?![a-zA-Z]) ?\{|\\[{}]|[{}]")
# The power of a dropped one-letter unit (``\\mathrm{m}^2``, ``\\text{ m}^{-1}``) goes with it.
_UNIT_POWER_RE = re.compile(r" ?\^ ?(?:\{ ?-?\d{1,2} ?\}|\d)")
_POWER_DROP = str.maketrans("", "", " {}")
# Function names typed without a backslash (``sin(x)``, or ``\\text{sin}`` after unwrapping).
# ``sec`` is left alone: in answers it is far more often "seconds".
_PLAIN_FUNC_RE = re.compile(r"(?<![\\A-Za-z])(arcsin|arccos|arctan|sin|cos|tan|cot|csc|ln|log)(?![A-Za-z])")
# ``pi`` and ``sqrt`` typed as words (``pi/2``, ``2pi``, ``sqrt2``, ``sqrt{3}``): the same objects as
# ``\\pi`` and ``\\sqrt``. ``sqrt(`` is left to the plain-expression parser, which reads it already.
_PLAIN_PI_RE = re.compile(r"(?<![\\A-Za-z])pi(?![A-Za-z])")
_PLAIN_SQRT_RE = re.compile(r"(?<![\\A-Za-z])sqrt\s*(?:(\d+(?:\.\d+)?|[A-Za-z](?![A-Za-z]))|(?=\{))")
# Python's power ``x**2``, ``2**10``, ``x**(n+1)`` is TeX's ``x^{...}`` (braced: ``2^10`` is 2^1 0 in TeX).
_PY_POWER_RE = re.compile(r"\*\*\s*(\d+|[A-Za-z]|\([^()]{0,200}\))")
# Percent in words right after a number ("20 percent", "20 \\text{ per cent}") is the percent sign: the same
# number, typeset another way ("percentage points" is not).
_PERCENT_WORD_RE = re.compile(r"(?<=\d) ?(?:percent|per cent)(?![A-Za-z])", re.IGNORECASE)
# A whole answer in E-notation (``5e3``, ``1.2E-4``) and a whole answer that is a mixed number written
# with a slash (``1 1/2``, as ``1\\frac{1}{2}`` already reads).
_E_NOTATION_RE = re.compile(r"^([+-]?\d+(?:\.\d+)?)[eE]([+-]?\d{1,3})$")
_MIXED_SLASH_RE = re.compile(r"^(-?\d+) (\d+)/(\d+)$")
_ORDINAL_RE = re.compile(r"(?<=\d)\s*\^?\s*\{?\s*(?:st|nd|rd|th)\s*\}?(?![a-zA-Z])")
# ``x^{2}`` -> ``x^2``, but not ``x^{2}3`` -> ``x^23`` (TeX reads that as x^2 3; parsers do not).
_SINGLE_BRACE_RE = re.compile(r"([\^_])\{\s*([A-Za-z0-9])\s*\}(?![A-Za-z0-9])")
_CMD_SPACE_BRACE_RE = re.compile(r"(\\[a-zA-Z]+)\s+(?=\{)")
GREEK = (
    "alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta|vartheta|iota|kappa|lambda|mu|nu|xi|"
    "rho|sigma|tau|upsilon|phi|varphi|chi|psi|omega|Gamma|Delta|Theta|Lambda|Xi|Sigma|Phi|Psi|Omega"
)
# A function applied without parentheses to one factor (``\\cot t``, ``\\sin 2x``, ``\\ln \\theta``) and then
# an explicit product sign: the sign ends the argument, as in ``\\sin x \\cos x``.  The parser instead
# reads ``\\cos t \\cdot \\ln(\\cos t)`` as cos(t ln cos t), so the argument gets the parentheses the
# author left implicit.  Only a single factor (an optional number, then one letter, Greek letter or
# ``\\pi``, with an optional subscript; or a number alone) is wrapped; a longer argument is left as is.
_BARE_ARG_RE = re.compile(
    r"(\\(?:arcsin|arccos|arctan|sinh|cosh|tanh|sin|cos|tan|cot|sec|csc|ln|log|exp)(?![A-Za-z])"
    r"(?:_(?:\d|\{\d{1,3}\}))?(?:\^(?:\d|\{[^{}]{1,8}\}))?) ?"
    rf"((?:\d+(?:\.\d+)?)?(?:[A-Za-z]|\\(?:{GREEK}|pi))(?![A-Za-z])(?:_(?:[A-Za-z0-9]|\{{[A-Za-z0-9]{{1,3}}\}}))?"
    r"|\d+(?:\.\d+)?)"
    r"(?= ?\\(?:cdot|times)(?![A-Za-z]))"
)
_PLUS_INFTY_RE = re.compile(r"(^|[(\[,])\s*\+\s*\\infty")
_DANGLING_DOT_RE = re.compile(r"(?<=[})\]])\s*\.(?![\d.])|(?<!\.)\.\s*$")
_WS_RE = re.compile(r"\s+")
_KEY_SPACE_RE = re.compile(r"(?<![A-Za-z0-9]) | (?![A-Za-z0-9])")


def repair(s: str) -> str:
    """Undo transport damage: lost or doubled backslashes and HTML super/subscripts."""
    s = _LOST_ESCAPE_RE.sub(lambda m: "\\" + _LOST_ESCAPES[m.group(1)], s)
    if "\\begin" not in s and "matrix" not in s:
        s = _DOUBLE_SLASH_RE.sub(r"\\", s)
    if "<su" in s:
        s = _HTML_RE.sub(lambda m: ("^{" if m.group(1) == "sup" else "_{") + m.group(2) + "}", s)
    return s


def _ends_with_digit(parts: list[str]) -> bool:
    for part in reversed(parts):
        stripped = part.rstrip()
        if stripped:
            return stripped[-1].isdigit()
    return False


def _short_group(s: str, open_pos: int) -> tuple[str, int] | None:
    """If the group at ``s[open_pos] == '{'`` holds at most one visible character, return it."""
    j = open_pos + 1
    n = len(s)
    while j < n and s[j] == " ":
        j += 1
    content = ""
    if j < n and s[j] not in "{}\\":
        content = s[j]
        j += 1
    while j < n and s[j] == " ":
        j += 1
    if j < n and s[j] == "}":
        return content, j
    return None


def unwrap_text(s: str, units: list[str] | None = None, keep_units: bool = False) -> str:
    """Replace ``\\text{...}``-style groups by their contents, padded with spaces.

    Font and text-mode commands do not change the value; the padding keeps ``5\\text{cm}`` from
    fusing into one token.  A one-letter upright group right after a number (``2.6\\,\\mathrm{m}``)
    is a unit and is dropped with its power (``5\\,\\mathrm{m}^2`` is 5, not 5 squared; ``e``,
    ``i``, ``d`` are kept: Euler, imaginary unit, differential).
    One streaming pass with a brace stack, so nesting depth does not cost extra passes.
    ``units``, where given, receives each unit dropped, its letter and power (``m^2``): two answers that
    differ only there (``5\\,\\text{m}`` and ``5\\,\\text{s}``) normalise alike, and the caller says so.
    ``keep_units`` writes each such unit as `` \\mathrm{m}`` (with its power, ``^{2}``) instead of dropping
    it: the items of a list keep it through their split (:func:`.structures.parse_answer`).
    """
    if "\\" not in s:
        return s
    out: list[str] = []
    stack: list[bool] = []  # per open brace: does it belong to a text command?
    pos = 0
    while True:
        m = _TEXT_OR_BRACE_RE.search(s, pos)
        if m is None:
            break
        out.append(s[pos : m.start()])
        tok = m.group(0)
        if tok == "{":
            stack.append(False)
            out.append("{")
        elif tok == "}":
            out.append(" " if stack and stack.pop() else "}")
        elif tok in ("\\{", "\\}"):
            out.append(tok)
        else:
            open_pos = m.end() - 1
            short = _short_group(s, open_pos)
            if short is not None:
                letter, close = short
                pos = close + 1
                upright = tok[1:].rstrip("{ ") in _UPRIGHT_COMMANDS
                if not (upright and letter.isalpha() and letter not in "eidE" and _ends_with_digit(out)):
                    out.append(letter)
                else:
                    power = _UNIT_POWER_RE.match(s, pos)
                    exponent = "" if power is None else power.group(0).translate(_POWER_DROP)
                    if units is not None:
                        units.append(letter + exponent)
                    if keep_units:
                        out.append(f" \\mathrm{{{letter}}}" + (f"^{{{exponent[1:]}}}" if exponent else ""))
                    pos = pos if power is None else power.end()
                continue
            stack.append(True)
            out.append(" ")
        pos = m.end()
    out.append(s[pos:])
    return "".join(out)


def fix_frac_args(s: str) -> str:
    """Brace single-token ``\\frac`` arguments: ``\\frac12`` -> ``\\frac{1}{2}``, ``\\frac{a}c`` -> ``{a}{c}``.

    TeX itself reads an unbraced argument as the next single token, so this is exactly what the
    author typeset; the parser downstream only understands the braced form.  Streaming with a
    brace stack: after the group that closes a ``\\frac``'s first argument we look at one char.
    """
    if "\\frac" not in s:
        return s
    out: list[str] = []
    stack: list[bool] = []  # per open brace: is it a \frac's first argument?
    i = 0
    n = len(s)
    while i < n:
        if s.startswith("\\frac", i) and not s[i + 5 : i + 6].isalpha():
            out.append("\\frac")
            i += 5
            while i < n and s[i] == " ":
                i += 1
            if i < n and s[i] == "{":
                stack.append(True)
                out.append("{")
                i += 1
            elif i < n and s[i].isalnum():
                out.append("{" + s[i] + "}")
                i = _second_frac_arg(s, i + 1, out)
            continue
        c = s[i]
        if c == "\\":
            out.append(s[i : i + 2])
            i += 2
            continue
        if c == "{":
            stack.append(False)
        elif c == "}" and stack and stack.pop():
            out.append("}")
            i = _second_frac_arg(s, i + 1, out)
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _second_frac_arg(s: str, i: int, out: list[str]) -> int:
    j = i
    while j < len(s) and s[j] == " ":
        j += 1
    if j < len(s) and s[j].isalnum():
        out.append("{" + s[j] + "}")
        return j + 1
    return i


def _circled(s: str) -> str:
    """``②③`` (choice labels) becomes ``2, 3``."""
    s = _CIRCLED_RE.sub(lambda m: _CIRCLED[m.group(0)] + ", ", s)
    return s.strip().rstrip(",").strip()


def superscripts(s: str) -> str:
    """``s`` with each run of superscript digits written as a power: ``8 ft²`` is ``8 ft^{2}``."""
    if s.isascii() or not _SUPERSCRIPT_RE.search(s):
        return s  # (isascii: most answers skip the scan)
    return _SUPERSCRIPT_RE.sub(lambda m: "^{" + m.group(0).translate(_SUPERSCRIPTS) + "}", s)


def normalize(s: str, units: list[str] | None = None, keep_units: bool = False) -> str:
    """Canonical typeset form of an answer: same meaning, fewer spellings. ``units``, where given,
    receives the upright one-letter units dropped (see :func:`unwrap_text`); ``keep_units`` keeps them, as
    `` \\mathrm{m}``."""
    s = _WS_RE.sub(" ", repair(s))
    s = _UNICODE_RE.sub(lambda m: _UNICODE[m.group(0)], s)
    s = superscripts(s)
    if "cent" in s or (not s.isascii() and "¢" in s):
        s = _CENT_RE.sub(" cents ", s)
    if _CIRCLED_RE.search(s):
        s = _circled(s)
    if "\\$" in s:
        s = _DOLLAR_THOUSANDS_RE.sub(lambda m: m.group(0).replace(",", ""), s)
    s = _DELIMS_RE.sub(" ", s)
    s = _SIZING_RE.sub("", s)
    s = _THOUSANDS_THIN_RE.sub("", s)
    # Delimiters and spacing commands just became spaces: collapse them again, or a rename with a
    # leading ``\s*`` rescans a long run of them at every position (quadratic, on the event loop).
    s = _WS_RE.sub(" ", _SPACING_RE.sub(" ", s))
    for pattern, repl in _RENAMES:
        s = pattern.sub(repl, s)
    s = _WS_RE.sub(" ", unwrap_text(s, units, keep_units))
    if "per" in s or "Per" in s or "PER" in s:
        s = _PERCENT_WORD_RE.sub(r"\\% ", s)
    s = _PLAIN_FUNC_RE.sub(r"\\\1", s)
    if "pi" in s:
        s = _PLAIN_PI_RE.sub(r"\\pi ", s)
    if "sqrt" in s:
        s = _PLAIN_SQRT_RE.sub(lambda m: r"\sqrt" + (f"{{{m.group(1)}}}" if m.group(1) else ""), s)
    if "**" in s:
        s = _PY_POWER_RE.sub(lambda m: "^{" + m.group(1) + "}", s)
    s = fix_frac_args(s)
    s = _ORDINAL_RE.sub("", s)
    s = _CMD_SPACE_BRACE_RE.sub(r"\1", s)
    s = _SINGLE_BRACE_RE.sub(r"\1\2", s)
    if "\\cdot" in s or "\\times" in s:
        s = _BARE_ARG_RE.sub(r"\1(\2)", s)
    s = _PLUS_INFTY_RE.sub(r"\1\\infty", s)
    s = _WS_RE.sub(" ", s).strip()
    s = _DANGLING_DOT_RE.sub("", s).strip()
    s = _E_NOTATION_RE.sub(r"\1\\times 10^{\2}", s)
    s = _MIXED_SLASH_RE.sub(r"\1\\frac{\2}{\3}", s)
    if _EMPTY_SET_RE.fullmatch(s):
        s = "\\emptyset"
    return s


def key(s: str) -> str:
    """Comparison key of an already normalised string: spaces kept only between two word chars.

    ``x + 1`` and ``x+1`` share a key; ``\\pi r`` and ``\\pir`` or ``1 2`` and ``12`` do not.
    """
    return _KEY_SPACE_RE.sub("", s)
