"""Answer structure: lists of solutions, labels, intervals and other shapes.

A normalised answer string is turned into a list of :class:`Item` (an optional label plus a value
string).  The rules here are the ones that change the *surface* of an answer in ways that need an
argument to be sound; each function's docstring gives that argument.  All of them are applied to
gold and prediction alike, so neither side gains a reading the other cannot have.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from fractions import Fraction

from rewardhub.mathlib.normalize import GREEK, key, normalize
from rewardhub.mathlib.numeric import parse_literal
from rewardhub.mathlib.scan import find_top_level, outer_brackets, split_top_level

MAX_ITEMS = 64
_MAX_PM = 3
_PM_RE = re.compile(r"\\[pm]{2}(?![a-zA-Z])")

_SUB = r"(?:_(?:[A-Za-z0-9]|\{[A-Za-z0-9\\ ,+\-]{1,20}\}))?'*"
_NAME = rf"(?:[A-Za-z]|\\(?:{GREEK}))(?![A-Za-z]){_SUB}"
_NAME_RE = re.compile(rf"^{_NAME}$")
_ARG = rf"(?:{_NAME}|-?\d+)"
_CALL_RE = re.compile(rf"^(?P<f>{_NAME})\s?\((?P<args>\s?{_ARG}(?:\s?,\s?{_ARG}){{0,5}}\s?)\)$")
_WORDS_RE = re.compile(r"^[A-Za-z]{4,}(?: [A-Za-z]+){0,3}(?: \d{1,3})?$")
_QUALIFIER_RE = re.compile(r"\s(?:for all|for every|for each|for any|\\forall)\s.*$")
# A whole number written in words ("three", "twenty-one", "one hundred and five"), as the whole value or
# before its unit words ("three apples"); words joined by a hyphen to anything else ("one-to-one") are none.
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
} | {w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
_NUMBER_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_NUMBER_WORD = (
    "(?:" + "|".join(sorted([*_NUMBER_WORDS, "hundred", *_NUMBER_SCALES], key=len, reverse=True)) + ")"
)
_NUMBER_PHRASE_RE = re.compile(
    rf"{_NUMBER_WORD}(?:(?:[ -]|\s+and\s+){_NUMBER_WORD})*(?=$|\s+[A-Za-z])", re.IGNORECASE
)
# The arithmetic an answer shows before its result: "5 + 3 = 8", "2 \times 3 = 6".
_ARITHMETIC_RE = re.compile(r"(?:[\d\s.+\-*/()^{}]|\\(?:times|cdot|div|frac|sqrt)(?![A-Za-z]))++")


def _number_words(value: str) -> str:
    """``value`` with a leading number in words written in digits ("three apples" -> "3 apples")."""
    m = _NUMBER_PHRASE_RE.match(value)
    if m is None:
        return value
    total, current = 0, 0
    for word in re.split(r"[ -]+", m.group(0).lower()):
        if word == "and":
            continue
        if word == "hundred":
            if current == 0:
                return value  # "hundred" alone, "zero hundred": not a number we read
            current *= 100
        elif word in _NUMBER_SCALES:
            if current == 0:
                return value
            total, current = total + current * _NUMBER_SCALES[word], 0
        else:
            current += _NUMBER_WORDS[word]
    return f"{total + current}{value[m.end() :]}"


# An angle's unit in radians after a value ("8 rad", "8 radians", "\\frac{\\pi}{2} \\text{ rad}"): kept, written so
# (:func:`strip_units`), where other units are dropped.
_RADIAN_WORDS = frozenset({"rad", "radian", "radians"})
RADIANS = " rad"
# A temperature's unit, the degree sign and its scale after a number: "10^\circ C" (10°C, 10°F, 10 °K).
_TEMPERATURE_RE = re.compile(r"(?<=[\d}])\s?\^\\circ ?[CFK]$")
_UNIT_TAIL_RE = re.compile(r"\s(?:[A-Za-z]{2,}|\([A-Za-z]{1,3}\)|\^\{?\d\}?|/)$")
# A power is a unit's (``inches ^2``) only right after a unit word, not after a number (``2 ^2``).
_UNIT_WORD_END_RE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}$")
_VALUE_END_RE = re.compile(r"(?:\d|[)}\]]|\\[a-zA-Z]+)$")
_NOT_UNITS = frozenset({"pi", "and", "or", "mod", "infty", "inf"})
# A differential, "dx", "dt" ("5\\,\\mathrm{d}x" normalises to "5 dx"): a variable's, no unit word ("5 dx"
# is no 5); d before a unit's letter (dm, dl, dg, dB) is left to be read as a unit word.
_DIFFERENTIAL_RE = re.compile(r"d[a-fh-kn-z]")
# Words after a number that change its value: a multiplier, a power, a fraction's denominator or
# a negation.  A tail containing one of them is not a unit, so nothing is stripped.
_VALUE_WORDS = frozenset(
    {
        *("hundred", "hundreds", "thousand", "thousands", "million", "millions", "billion", "billions"),
        *("trillion", "trillions", "dozen", "dozens", "squared", "cubed", "factorial", "power"),
        *("halves", "thirds", "quarters", "fourths", "fifths", "sixths", "sevenths", "eighths"),
        *("ninths", "tenths", "hundredths", "thousandths", "millionths", "percent", "percentage"),
        *("not", "no", "negative", "minus", "plus", "times", "over", "inverse", "reciprocal"),
        *("less", "more", "fewer", "than", "wrong", "incorrect", "false"),
    }
)
_INFINITE_WORDS = frozenset({"infinitely many", "infinite", "infinity", "infinitely many solutions"})
_MATRIX_RE = re.compile(r"^\\begin\{([pbBvV]?matrix)\}(?P<body>.*)\\end\{\1\}$", re.DOTALL)
_REL_RE = re.compile(r"\\leq|\\geq|\\neq|<|>|=")
_CONST_CMDS = frozenset(
    {"frac", "sqrt", "pi", "infty", "cdot", "times", "ln", "log", "sin", "cos", "tan", "e", "exp"}
)
_CMD_RE = re.compile(r"\\([a-zA-Z]+)")
_SEPARATORS = (",", ";", " and ", " or ")


@dataclass(frozen=True, slots=True)
class Item:
    """One element of an answer list: ``value``, optionally announced by ``label`` (``x = 3``).

    ``quantity`` is the value with the units it lost kept: the unit words :func:`strip_units` dropped (``3
    hours``, the value 3; a tuple's components' too, ``(30 degrees, 2)``), a temperature's scale (``8 °C``),
    or the upright unit symbols normalisation dropped (``5 \\mathrm{m}``, a tuple's ``(5 \\mathrm{m},
    2)``); None where it lost none: two items in different units compare as quantities
    (:func:`.quantities.quantities_check`: ``3 hours`` is not ``3 minutes`` in a list either)."""

    label: str | None
    value: str
    quantity: str | None = None


def is_name(s: str) -> bool:
    """A simple variable name: one letter or Greek letter, optional subscript and primes."""
    return _NAME_RE.match(s.strip()) is not None


def call_parts(label: str) -> tuple[str, list[str]] | None:
    """``f(x, y)`` -> ``("f", ["x", "y"])`` for a function-call label, else None."""
    m = _CALL_RE.match(label.strip())
    if m is None:
        return None
    return m.group("f"), [a.strip() for a in m.group("args").split(",")]


def tuple_label(lhs: str) -> list[str] | None:
    """``(x, y)`` or ``(f(n), g(n))`` on the left of ``=``: the names of a tuple's components."""
    br = outer_brackets(lhs.strip())
    if br is None or br[0] != "(" or br[2] != ")":
        return None
    parts = [p.strip() for p in split_top_level(br[1])]
    if len(parts) > 1 and all(is_name(p) or _CALL_RE.match(p) for p in parts):
        return [key(p) for p in parts]
    return None


def parse_label(lhs: str) -> str | None:
    """Canonical label if ``lhs`` is something a solver writes before ``=`` to name a value.

    Accepted: a simple name (``x``, ``a_n``, ``m_{\\max}``), a function applied to names or
    integers (``f(x)``, ``T(10)``), a tuple of those, or prose of real words (``Maximum``,
    ``Sequence 1``; at least four letters so that products like ``xy`` are not mistaken for
    words).  Anything else (``2x+1``, ``y+1``) is an equation side, not a label.
    """
    lhs = lhs.strip()
    if not lhs:
        return None
    if is_name(lhs) or _CALL_RE.match(lhs) or _WORDS_RE.match(lhs):
        return key(lhs)
    names = tuple_label(lhs)
    return None if names is None else "(" + ",".join(names) + ")"


def split_label(item: str) -> tuple[str | None, str]:
    """Split ``label = value`` (repeatedly, for ``x = y = 1``) or ``Words: value``."""
    label: str | None = None
    while True:
        eq = find_top_level(item, "=")
        if eq < 0 or item[eq - 1 : eq] in ("<", ">", "!"):
            break
        lab = parse_label(item[:eq])
        rest = item[eq + 1 :].strip()
        if (
            lab is None
            and rest
            and _ARITHMETIC_RE.fullmatch(item[:eq])
            and any(c.isdigit() for c in item[:eq])
        ):
            item = rest  # "5 + 3 = 8": the arithmetic shown, then its result
            continue
        if lab is None or not rest:
            break
        label = lab if label is None else label
        item = rest
    if label is None:
        colon = find_top_level(item, ":")
        if colon > 0 and _WORDS_RE.match(item[:colon].strip()) and item[colon + 1 :].strip():
            return key(item[:colon].strip()), item[colon + 1 :].strip()
    return label, item


def strip_units(value: str) -> str:
    """Drop trailing prose after a number: ``7 goats`` -> ``7``, ``5.4 square units`` -> ``5.4``.

    Sound because words after a numeric value name what is counted (its unit) and cannot change
    the number.  We strip only words of two or more letters (single letters are variables),
    never ``pi``, and only when what remains still ends like a number or a closed group.  Words
    that change the value (``5 thousand``, ``5 squared``, ``5 is not the answer``) are not units:
    such a tail is kept whole, and so is one ending in a differential (``5 dx``, as
    ``5\\,\\mathrm{d}x`` normalises: a variable's, which makes the value a product, not 5). Degrees and
    radians are kept, written ``30^\\circ`` and ``8 rad`` (:data:`RADIANS`, after ``\\pi`` too): each
    compares with the other converted.
    """
    if len(value) > 500:
        return value
    out = value
    words: list[str] = []
    for _ in range(8):
        m = _UNIT_TAIL_RE.search(out)
        if (
            m is None
            or m.group(0).strip().lower() in _NOT_UNITS
            or _DIFFERENTIAL_RE.fullmatch(m.group(0).strip())
        ):
            break
        if m.group(0).lstrip().startswith("^") and not _UNIT_WORD_END_RE.search(out, 0, m.start()):
            break
        words.append(m.group(0).strip().lower())
        if words[-1] in _VALUE_WORDS:
            return value
        out = out[: m.start()].rstrip()
    radians = len(words) == 1 and words[0] in _RADIAN_WORDS
    if (
        out != value
        and _VALUE_END_RE.search(out)
        and (any(c.isdigit() for c in out) or (radians and "\\pi" in out))
    ):
        # "30 degrees" keeps its unit as the degree mark, so it still compares with radians, and "8 radians" as
        # RADIANS ("\\pi rad" too), so it compares with degrees converted (:mod:`.equivalence`: 8 rad is no 8
        # degrees)
        if radians:
            return out + RADIANS
        return out + "^\\circ" if words == ["degrees"] or words == ["degree"] else out
    return value


def expand_pm(value: str) -> list[str]:
    """``a \\pm b`` denotes the two values ``a+b`` and ``a-b``; expand it so lists compare.

    With ``\\mp`` present the signs are correlated (``\\pm`` takes s, ``\\mp`` takes -s) as the
    notation prescribes; otherwise independent ``\\pm`` signs (``(\\pm 1, \\pm 2)``) give every
    combination.  This makes ``\\pm 2021`` a two-element answer, so it can never match ``2021``.
    More than three signs are left unexpanded (and then only match the same string).
    """
    pieces = _PM_RE.split(value)
    signs = _PM_RE.findall(value)
    if not signs or len(signs) > _MAX_PM:
        return [value]
    if "\\mp" in signs:
        choices = [tuple(s if x == "\\pm" else t for x in signs) for s, t in (("+", "-"), ("-", "+"))]
    else:
        choices = list(itertools.product("+-", repeat=len(signs)))
    return [pieces[0] + "".join(c + p for c, p in zip(choice, pieces[1:], strict=True)) for choice in choices]


def _is_const(s: str) -> bool:
    """A closed-form constant: digits and constant-valued commands, no variables (``e`` = Euler)."""
    s = s.strip()
    if not s or "=" in s:
        return False
    for m in _CMD_RE.finditer(s):
        if m.group(1) not in _CONST_CMDS:
            return False
    rest = _CMD_RE.sub("", s)
    if any(c.isalpha() and c != "e" for c in rest):
        return False
    return any(c.isdigit() for c in rest) or "\\pi" in s or "\\infty" in s or "e" in rest


def _interval_piece(piece: str) -> tuple[str, str] | None:
    """Solved-form relation on one variable -> ``(variable, interval latex)``.

    Only *solved* forms qualify: the variable alone on one side, constants elsewhere
    (``x < 3``, ``-1 \\leq a < 2``, ``x = 5``, ``x \\neq 1``).  An unsolved relation such as
    ``x^2 < 4`` is never turned into a set, so a prediction that merely restates the problem's
    inequality cannot be "solved" into the gold by us.
    """
    ops = [(m.start(), m.group(0)) for m in _REL_RE.finditer(piece)]
    if not ops or len(ops) > 2:
        return None
    parts = []
    prev = 0
    for pos, op in ops:
        parts.append(piece[prev:pos].strip())
        prev = pos + len(op)
    parts.append(piece[prev:].strip())
    names = [op for _, op in ops]
    if len(names) == 1:
        a, b = parts
        op = names[0]
        if is_name(a) and _is_const(b):
            var, c, flipped = a, b, False
        elif is_name(b) and _is_const(a):
            var, c, flipped = b, a, True
        else:
            return None
        if op == "=":
            return key(var), "\\{" + c + "\\}"
        if op == "\\neq":
            return key(var), f"(-\\infty, {c}) \\cup ({c}, \\infty)"
        upper = op in ("<", "\\leq")
        if flipped:
            upper = not upper
        strict = op in ("<", ">")
        if upper:
            return key(var), f"(-\\infty, {c}" + (")" if strict else "]")
        return key(var), ("(" if strict else "[") + f"{c}, \\infty)"
    lo, var, hi = parts
    if not (is_name(var) and _is_const(lo) and _is_const(hi)):
        return None
    ascending = all(op in ("<", "\\leq") for op in names)
    descending = all(op in (">", "\\geq") for op in names)
    if not (ascending or descending):
        return None
    if descending:
        lo, hi = hi, lo
        names = names[::-1]
    left = "(" if names[0] in ("<", ">") else "["
    right = ")" if names[1] in ("<", ">") else "]"
    return key(var), f"{left}{lo}, {hi}{right}"


def inequality_to_interval(s: str) -> tuple[str, str] | None:
    """A disjunction of solved-form relations in one variable, as an interval union."""
    pieces = [p for p in split_top_level(s, (" or ", "\\lor", "\\vee")) if p.strip()]
    converted = [_interval_piece(p) for p in pieces]
    if any(c is None for c in converted) or not converted:
        return None
    found = [c for c in converted if c is not None]
    if len({v for v, _ in found}) != 1:
        return None
    if all(iv.startswith("\\{") for _, iv in found):
        return None  # plain "x = 1 or x = 2" is a list of solutions, handled by labels
    return found[0][0], " \\cup ".join(iv for _, iv in found)


def set_builder(s: str) -> tuple[str, str] | None:
    """``\\{x \\mid cond\\}`` with a solved-form ``cond`` on ``x`` -> the interval union."""
    br = outer_brackets(s)
    if br is None or br[0] != "\\{":
        return None
    inner = br[1]
    for sep in ("\\mid", "|", ":"):
        pos = find_top_level(inner, sep)
        if pos > 0:
            var = inner[:pos].strip()
            res = inequality_to_interval(inner[pos + len(sep) :])
            if is_name(var) and res is not None and res[0] == key(var):
                return res
            return None
    return None


def _endpoint(s: str) -> Fraction | float | None:
    """An interval end we can order exactly: a rational literal or an infinity."""
    s = s.strip()
    if s == "\\infty":
        return math.inf
    if s == "-\\infty":
        return -math.inf
    lit = parse_literal(s)
    return None if lit is None or lit.percent else lit.value


def _remove_point(piece: str, point: str, value: Fraction) -> list[str] | None:
    """One interval less one point: itself, itself opened at an end, or two intervals."""
    br = outer_brackets(piece)
    if br is None or br[0] not in "([" or br[2] not in ")]":
        return None
    ends = split_top_level(br[1])
    if len(ends) != 2:
        return None
    lo, hi = _endpoint(ends[0]), _endpoint(ends[1])
    if lo is None or hi is None or lo > hi:
        return None
    a, b = ends[0].strip(), ends[1].strip()
    if value < lo or value > hi or (value == lo and br[0] == "(") or (value == hi and br[2] == ")"):
        return [piece.strip()]
    if lo == hi:
        return []
    if value == lo:
        return [f"({a}, {b}{br[2]}"]
    if value == hi:
        return [f"{br[0]}{a}, {b})"]
    return [f"{br[0]}{a}, {point})", f"({point}, {b}{br[2]}"]


def set_difference(s: str) -> tuple[str, str] | None:
    """``\\{x \\mid x < 2\\} \\setminus \\{-6\\}`` (or with ``-``) -> ``(-\\infty, -6) \\cup (-6, 2)``.

    The left side must be a set of reals written as intervals or as a set-builder we read as an
    interval union, the right side a set literal of rational numbers; the difference is
    then computed exactly, piece by piece, so it compares with the same set written as intervals.
    The minus sign between two sets can only mean the set difference.  Endpoints that are not
    rational literals or infinities leave the answer as it was (we do not order irrationals here).
    """
    for op in ("\\setminus", "\\backslash", "-"):
        pos = find_top_level(s, op)
        if pos > 0:
            break
    else:
        return None
    removed = outer_brackets(s[pos + len(op) :])
    if removed is None or removed[0] != "\\{":
        return None
    left = s[:pos].strip()
    built = set_builder(left)
    var, union = ("", left) if built is None else built
    pieces = [p.strip() for p in split_top_level(union, ("\\cup",))]
    if built is None and len(pieces) > 1:
        return None  # A \cup B - C: which operation comes first is a matter of convention
    points = [p.strip() for p in split_top_level(removed[1])]
    if len(points) > MAX_ITEMS or len(pieces) > MAX_ITEMS:
        return None  # each point visits every piece: bounded, so the work stays linear
    for point in points:
        lit = parse_literal(point)
        if lit is None or lit.percent:
            return None
        out: list[str] = []
        for piece in pieces:
            rest = _remove_point(piece, point, lit.value)
            if rest is None:
                return None
            out.extend(rest)
        pieces = out
    if not pieces:
        return None
    return var, " \\cup ".join(pieces)


def matrix_to_tuple(s: str) -> str:
    """A one-column or one-row matrix is a vector; write it as the tuple it denotes."""
    m = _MATRIX_RE.match(s.strip())
    if m is None:
        return s
    body = m.group("body").strip().rstrip("\\").strip()
    rows = [r.strip() for r in body.split("\\\\")]
    if len(rows) > 1 and all("&" not in r for r in rows):
        return "(" + ", ".join(rows) + ")"
    if len(rows) == 1 and "&" in rows[0]:
        return "(" + ", ".join(c.strip() for c in rows[0].split("&")) + ")"
    return s


# An answer given as an approximation: "\approx 3.14", "\sim 0.5", "approximately 3.14", "about 3.14".
_APPROX_LEAD_RE = re.compile(
    r"(?:\\(?:approx|simeq|sim)(?![A-Za-z])|(?:approximately|approx\.?|about|around|roughly)(?![A-Za-z]))\s*",
    re.IGNORECASE,
)


def _strip_prefixes(s: str) -> str:
    """``x \\in S`` states the answer is the set ``S``; ``A \\approx 1.36`` keeps the exact ``A``, but
    ``x \\approx 3.14`` states that ``x`` is 3.14 (it was the answer "x"), and a leading ``\\approx`` or
    "approximately" only says the value that follows is rounded."""
    pos = find_top_level(s, "\\approx")
    if pos > 0:
        left = s[:pos].strip()
        s = f"{left} = {s[pos + 7 :].strip()}" if is_name(left) else left
    lead = _APPROX_LEAD_RE.match(s)
    if lead is not None and lead.end() < len(s):
        s = s[lead.end() :]
    pos = find_top_level(s, "\\in")
    if pos > 0 and is_name(s[:pos]):
        s = s[pos + 3 :].strip()
    return s


# A component's last word of two or three letters, with a power ("2 xy", "2\\cdot ab", "3 AB", "5 cm^2").
_SHORT_TAIL_RE = re.compile(r"\s(?P<word>[A-Za-z]{2,3})(?:\s?\^\{?\d\}?)?$")


def _component_without_units(part: str) -> str:
    """A tuple's component without its unit words and its temperature's scale (:func:`_without_units`), but
    for a last word of two or three letters that names no unit (:func:`.quantities.is_unit_word`): ``2 xy``,
    ``2\\cdot ab``, ``3 AB`` are products of variables far more often than a count noun, kept whole as before
    (stripped, ``(x + y, 2 xy)`` was ``(x + y, 2)``: no ``(x+y, 2xy)``, and ``(x+y, 2)``); ``2 cm``, ``3
    hrs``, ``1 rad``, ``2 in`` and ``30 deg`` are units, and longer words (``8 apples``) count nouns,
    dropped as a whole value's are."""
    # quantities imports this module: its unit table is read at call time
    from rewardhub.mathlib.quantities import is_unit_word

    m = _SHORT_TAIL_RE.search(part)
    # "deg" is a degree's, as a whole value's ("30 deg" is "30^\\circ"), though no unit of a dimension there
    if m is not None and m.group("word").lower() != "deg" and not is_unit_word(m.group("word")):
        return part
    return strip_units(_TEMPERATURE_RE.sub("", part))


def _without_units(value: str) -> str:
    """``value`` without its unit words (:func:`strip_units`), and a tuple's or an interval's components each
    without theirs and their temperature's (``(30 degrees, 2)`` is ``(30^\\circ, 2)``, as ``30 degrees`` is
    ``30^\\circ``; ``(8 cm, 2)`` is ``(8, 2)``): a component compares as a whole value does, and where both
    state a unit its text with the units kept decides first (the item's ``quantity``:
    :func:`.quantities.quantities_check` reads ``(8 cm, 2)`` and ``(8 in, 2)`` unequal). A set literal's
    elements are list items already."""
    value = strip_units(value)
    br = outer_brackets(value)
    if br is None or br[0] == "\\{":
        return value
    parts = [p.strip() for p in split_top_level(br[1])]
    if not 1 < len(parts) <= MAX_ITEMS:
        return value
    stripped = [_component_without_units(p) for p in parts]
    return value if stripped == parts else f"{br[0]}{', '.join(stripped)}{br[2]}"


def _item_value(value: str) -> list[str]:
    value = _QUALIFIER_RE.sub("", value).strip()
    value = _TEMPERATURE_RE.sub("", _number_words(value))
    value = _without_units(value)
    if value.lower() in _INFINITE_WORDS:
        value = "\\infty"
    value = matrix_to_tuple(value)
    iv = inequality_to_interval(value) or set_builder(value) or set_difference(value)
    if iv is not None:
        return [iv[1]]
    return expand_pm(value)


def _quantity_text(value: str) -> str | None:
    """``value`` as :func:`_item_value` reads it, but for the units it drops, where it holds some: unit words
    (ending it, or a tuple's component: :func:`_without_units`) or a temperature's scale (``8 °C, 2`` is not
    ``8 °F, 2``, as ``8 °C`` is not ``8 °F``); else None."""
    value = _number_words(_QUALIFIER_RE.sub("", value).strip())
    return value if _without_units(_TEMPERATURE_RE.sub("", value)) != value else None


def parse_items(s: str) -> list[Item]:
    """Split a (raw or normalised) answer into labelled items; see the module docstring."""
    return parse_answer(s)[0]


def parse_answer(s: str) -> tuple[list[Item], bool]:
    """:func:`parse_items`, and whether the answer was written as a set literal ``\\{a, b\\}``.

    The set braces are dropped (a set of solutions is a list of solutions), but the caller must
    know they were there: a set is unordered, so it is never the same answer as a tuple or an
    interval with the same components (``\\{0, 1\\}`` is not ``(0, 1)``).
    """
    units: list[str] = []
    items, is_set = _parse_normalised(normalize(s, units))
    if units:
        items = _typeset_quantities(items, _parse_normalised(normalize(s, keep_units=True))[0])
    if "\\$" in s and _DOLLAR_AMOUNT_RE.search(s):
        items = _dollar_quantities(
            items, _parse_normalised(normalize(_DOLLAR_AMOUNT_RE.sub(_dollars_word, s)))[0]
        )
    return items, is_set


# A dollar amount as written, its sign escaped: "\\$0.50", or in thousands groups, "\\$1,200.50" (normalisation
# drops the sign, and the commas of such an amount: 1200.50). An unescaped $ is a math delimiter as often
# ("$3$"), left alone; so is a group that is no thousands group ("\\$1,20", "\\$1,200,5").
_DOLLAR_AMOUNT_RE = re.compile(r"\\\$\s*([1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?!\d|[.,]\d)")

# The same amount once written "<amount> dollars" for the split, and normalised.
_DOLLARS_WORD_RE = re.compile(r"(\d+(?:\.\d+)?|\.\d+) dollars(?![A-Za-z])")


def _dollars_word(m: re.Match[str]) -> str:
    """A dollar amount written ``<amount> dollars``, without its thousands commas (``\\$1,200`` is ``1200
    dollars``: the item normalisation reads, 1200, once the word is left out)."""
    return m.group(1).replace(",", "") + " dollars"


def _dollar_quantities(items: list[Item], kept: list[Item]) -> list[Item]:
    """``items`` whose dollar signs normalisation dropped, each with its amounts written ``\\$<amount>`` as its
    ``quantity`` (``\\$50, 2`` is the items 50 and 2, the first the quantity ``\\$50``; a tuple, ``(\\$50,
    2)``): a lone ``\\$50`` is a dollar amount against cents or dollars (:func:`.quantities.quantities_check`:
    ``50 cents, 2`` is not ``\\$50, 2`` and is ``\\$0.50, 2``), else the bare number (``\\$3, \\$5`` is ``3,
    5``). ``kept`` is the answer split with each amount written ``<amount> dollars``, and must be ``items`` item
    for item once the word is left out (else ``items`` as they are: the splits differ)."""
    if len(items) != len(kept):
        return items
    out: list[Item] = []
    for item, with_sign in zip(items, kept, strict=True):
        if item.label != with_sign.label or key(_DOLLARS_WORD_RE.sub(r"\1", with_sign.value)) != key(
            item.value
        ):
            return items
        text = with_sign.quantity or with_sign.value
        if item.quantity is None and _DOLLARS_WORD_RE.search(text):
            item = Item(item.label, item.value, _DOLLARS_WORD_RE.sub(r"\\$\1", text))
        out.append(item)
    return out


# An upright unit symbol that normalize(keep_units=True) kept, with its power: " \\mathrm{m}^{2}".
_KEPT_UNIT_RE = re.compile(r" ?\\mathrm\{[A-Za-z]\}(?:\^(?:\{-?\d{1,2}\}|\d))?")


def _typeset_quantities(items: list[Item], kept: list[Item]) -> list[Item]:
    """``items`` whose unit symbols normalisation dropped, each with its text that keeps them as its
    ``quantity`` (``5\\,\\text{m}, 2`` is the items 5 and 2, the first the quantity ``5 \\mathrm{m}``; a
    tuple, ``(5 \\mathrm{m}, 2)``): ``kept`` is the answer split with the symbols kept, and must be
    ``items`` item for item once they are left out (else ``items`` as they are: the splits differ)."""
    if len(items) != len(kept):
        return items
    out: list[Item] = []
    for item, with_unit in zip(items, kept, strict=True):
        if item.label != with_unit.label or key(_KEPT_UNIT_RE.sub("", with_unit.value)) != key(item.value):
            return items
        # the symbols kept, and the unit words too where the item has some (``(5 \\mathrm{m}, 2 hours)``)
        text = with_unit.quantity or with_unit.value
        if "\\mathrm{" in text:
            item = Item(item.label, item.value, text)
        out.append(item)
    return out


def _parse_normalised(s: str) -> tuple[list[Item], bool]:
    s = _number_words(_strip_prefixes(s))  # whole: "one hundred and five" is no list
    if not s:
        return [], False
    if parse_literal(s) is not None:
        return [Item(None, s)], False
    whole = inequality_to_interval(s) or set_builder(s) or set_difference(s)
    if whole is not None:
        return [Item(None, whole[1])], False
    br = outer_brackets(s)
    is_set = br is not None and br[0] == "\\{"
    if br is not None and is_set:
        s = br[1]
    return _split_items(s), is_set


def _split_items(s: str) -> list[Item]:
    # A tuple label on the whole answer distributes over a tuple value of the same arity:
    # (x, y) = (1, 2) means x = 1, y = 2.  Over anything else it is just dropped.
    eq = find_top_level(s, "=")
    if eq > 0:
        names = tuple_label(s[:eq])
        if names is not None:
            rhs = _QUALIFIER_RE.sub("", s[eq + 1 :]).strip()
            vb = outer_brackets(rhs)
            if vb is not None and vb[0] == "(" and len(split_top_level(vb[1])) == len(names):
                values = split_top_level(vb[1])
                return [
                    Item(n, v, _quantity_text(val.strip()))
                    for n, val in zip(names, values, strict=True)
                    for v in _item_value(val.strip())
                ]
            s = rhs
    items: list[Item] = []
    pieces = split_top_level(s, _SEPARATORS)
    if len(pieces) > MAX_ITEMS:
        return [Item(None, s)]  # too long to compare as a list; whole-string rules only
    for piece in pieces:
        piece = piece.strip()
        for word in ("and ", "or "):
            if piece.startswith(word):
                piece = piece[len(word) :].strip()
        if not piece:
            continue
        label, value = split_label(piece)
        quantity = _quantity_text(value)
        items.extend(Item(label, v, quantity) for v in _item_value(value))
    return items
