"""Quantities with units: ``3 hours`` is ``180 minutes``, ``1000 m`` is ``1000``.

The equivalence rules drop the words after a number (:func:`.structures.strip_units`: ``7 goats`` is 7),
which is sound for one quantity against a bare number, but two quantities in different units of one
dimension compared their numbers: ``3 hours`` against ``180 minutes`` was wrong, and against ``3
minutes`` right. :func:`quantities_check` decides such a pair by converting both to one unit.

A unit stated on one side only is ignored, as Math-Verify and Qwen's grader do: a bare number equals a
quantity that states it (``1000`` and ``1000 m``, ``5 s``, ``5 m/s``, ``5 cm^2``; ``1 km`` states 1, not
1000). This rule only accepts; an unequal number is left to the other rules (which read it unequal). The
comparer applies it (:func:`states_number`) after a label or in a list too (``d = 1000 m``, ``1000 m, 2
s``), but not to a number whose unit word the other rules dropped (:func:`mentions_unit`: ``3 hours``
is the item 3, and no bare 3 against ``3 m``).

Two quantities are decided when both are a single number followed by a unit it knows: units of
different dimensions (``3 hours`` against ``3 meters``) are unequal, and differing units of one
dimension (time, length, mass) are converted. A bare number is never converted (``180`` against ``3
hours``), nor is an ambiguous unit (a year, a month, a ton), an ordinal (``15th day``), a unit with a
power (``12 inches^2``), a rate (``miles per hour``) or a compound (``3 hours and 20 minutes``). The
one-letter symbols ``m``, ``s``, ``h`` and ``g`` are variables as often as units: one is a unit only
after a space (``1000 m``, not ``5m``) or typeset upright (``1000\\,\\text{m}``, which normalisation
drops), only against a bare number or a unit word (``1000 m`` against ``1 km``, ``60 s`` against ``1
minute``; one of another dimension differs, ``5 s`` is not ``5 meters`` whether s is seconds or a
variable, but against ``3 hours`` an ``m`` may be minutes and is left alone), and never with a
power (``5 m^2`` may be 5m squared). The factors are exact (an inch is 2.54 cm, a pound 0.45359237 kg),
and the numbers compare as literals do (a prediction rounded to 3 significant digits matches: ``1.33
hours`` is ``80 minutes``).
"""

from __future__ import annotations

import re
from fractions import Fraction

from rewardhub.mathlib.normalize import normalize
from rewardhub.mathlib.numeric import Literal, literals_equivalent, parse_literal

__all__ = ["mentions_unit", "quantities_check", "quantity", "states_number"]


def _units(dimension: str, factor: Fraction, *names: str) -> dict[str, tuple[str, Fraction]]:
    return dict.fromkeys(names, (dimension, factor))


# Unit words (lower case, as written after the number) -> (dimension, size in the dimension's base unit).
_UNITS: dict[str, tuple[str, Fraction]] = {
    **_units("time", Fraction(1, 1000), "millisecond", "milliseconds", "ms"),
    **_units("time", Fraction(1), "second", "seconds", "sec", "secs"),
    **_units("time", Fraction(60), "minute", "minutes", "min", "mins"),
    **_units("time", Fraction(3600), "hour", "hours", "hr", "hrs"),
    **_units("time", Fraction(86400), "day", "days"),
    **_units("time", Fraction(604800), "week", "weeks"),
    **_units("length", Fraction(1, 1000), "millimeter", "millimeters", "millimetre", "millimetres", "mm"),
    **_units("length", Fraction(1, 100), "centimeter", "centimeters", "centimetre", "centimetres", "cm"),
    **_units("length", Fraction(1), "meter", "meters", "metre", "metres"),
    **_units("length", Fraction(1000), "kilometer", "kilometers", "kilometre", "kilometres", "km"),
    **_units("length", Fraction(254, 10000), "inch", "inches"),
    **_units("length", Fraction(3048, 10000), "foot", "feet", "ft"),
    **_units("length", Fraction(9144, 10000), "yard", "yards", "yd", "yds"),
    **_units("length", Fraction(1609344, 1000), "mile", "miles"),
    **_units("mass", Fraction(1, 1000), "milligram", "milligrams", "mg"),
    **_units("mass", Fraction(1), "gram", "grams"),
    **_units("mass", Fraction(1000), "kilogram", "kilograms", "kg"),
    **_units("mass", Fraction(45359237, 100000), "pound", "pounds", "lb", "lbs"),
    **_units("mass", Fraction(45359237, 1600000), "ounce", "ounces", "oz"),
}

# One-letter unit symbols: metres, seconds, hours, grams. A letter is a variable as often as a unit ("5 s"
# may be 5s), so it is one only after a space (or typeset upright) and where the other side says so.
_LETTER_UNITS: dict[str, tuple[str, Fraction]] = {
    "m": ("length", Fraction(1)),
    "s": ("time", Fraction(1)),
    "h": ("time", Fraction(3600)),
    "g": ("mass", Fraction(1)),
}

# A number, then one unit word (an abbreviation may end in a full stop: "3 hrs."); a one-letter word
# only after a space ("1000 m", not "2m").
_QUANTITY_RE = re.compile(r"^(?P<num>.{1,100}?)(?:\s*(?P<unit>[A-Za-z]{2,12})|\s(?P<letter>[A-Za-z]))\.?$")
# A number in a rate of two units ("5 m/s", "60 km/h"), or in a unit word with a power ("5 cm^2"): read
# against a bare number only, for the number they state.
_RATE_RE = re.compile(
    r"^(?P<num>.{1,100}?)(?:\s?(?P<unit>[A-Za-z]{2,12})|\s(?P<letter>[A-Za-z]))\s?/\s?(?P<per>[A-Za-z]{1,12})\.?$"
)
_POWER_RE = re.compile(r"^(?P<num>.{1,100}?)\s?(?P<unit>[A-Za-z]{2,12})\s?\^\s?(?:\{\s?-?\d\s?\}|\d)\.?$")
# An ordinal, "15th", "2^{nd}", "3^{\text{rd}}": "15th day" is a day, not 15 days (normalisation drops
# the suffix, so it is looked for in the answer as written).
_ORDINAL_RE = re.compile(
    r"\d\s*(?:\^\s*)?\{?\s*(?:\\(?:text|mathrm|textrm)\s*\{\s*)?(?:st|nd|rd|th)(?![A-Za-z])"
)


# A quantity is a number (at most 100 characters here) and a unit: a longer answer, as written, is none.
# The patterns below read the answer as written, and two runs of spaces around an optional character
# ("\\{ ~? m") cost the square of the run: 20,000 spaces took 13 s of a worker.
_MAX_QUANTITY = 1_000


def quantity(s: str, letter: bool = False) -> tuple[Literal, str, Fraction] | None:
    """``s`` (normalised) as a number in a known unit: the number, the unit's dimension and its size in
    the dimension's base unit; None for anything else (a one-letter symbol too, unless ``letter``)."""
    m = _QUANTITY_RE.match(s.strip())
    if m is None:
        return None
    if m.group("unit") is not None:
        unit = _UNITS.get(m.group("unit").lower())
    else:
        unit = _LETTER_UNITS.get(m.group("letter")) if letter else None
    number = parse_literal(m.group("num"))
    if unit is None or number is None or number.percent:
        return None
    return number, unit[0], unit[1]


def _is_unit(word: str) -> bool:
    return word.lower() in _UNITS or word in _LETTER_UNITS


def _stated_number(s: str) -> Literal | None:
    """The number a quantity (``s`` normalised) states whatever its unit: ``1000 m``, ``5 s``, ``3
    hours``, ``5 m/s``, ``5 cm^2``; None where ``s`` is no number in a known unit (``5 x``, ``5 m^2``:
    a letter's power is a variable's as often)."""
    s = s.strip()
    q = quantity(s, letter=True)
    if q is not None:
        return q[0]
    m = _RATE_RE.match(s)
    if m is not None and _is_unit(m.group("unit") or m.group("letter")) and _is_unit(m.group("per")):
        number = parse_literal(m.group("num"))
        return None if number is None or number.percent else number
    m = _POWER_RE.match(s)
    if m is not None and m.group("unit").lower() in _UNITS:
        number = parse_literal(m.group("num"))
        return None if number is None or number.percent else number
    return None


_UNIT_WORD_RE = re.compile(
    r"(?<![A-Za-z])(?:" + "|".join(sorted(_UNITS, key=len, reverse=True)) + r")(?![A-Za-z])", re.IGNORECASE
)


def mentions_unit(s: str) -> bool:
    """Whether ``s`` (normalised) holds a unit word of a dimension (``hours``, ``km``): the equivalence
    rules drop such a word (``3 hours`` is 3), so a number there may not be a bare one."""
    return _UNIT_WORD_RE.search(s) is not None


def states_number(gold: str, pred: str) -> bool:
    """Whether one side (normalised) is a bare number and the other a quantity stating it (``1000`` and
    ``1000 m``): a unit stated on one side only is ignored."""
    lg, lp = parse_literal(gold), parse_literal(pred)
    if lg is not None and lp is None:
        stated = _stated_number(pred)
        return stated is not None and literals_equivalent(lg, stated)
    if lp is not None and lg is None:
        stated = _stated_number(gold)
        return stated is not None and literals_equivalent(stated, lp)
    return False


# A number and an upright one-letter unit symbol at the end, "1000\\,\\text{m}", "60 \\mathrm{~s}":
# normalisation drops such a unit (:func:`.normalize.unwrap_text`), so it is read from the answer as written.
_TYPESET_LETTER_RE = re.compile(
    r"^\s*\$?\s*(?P<num>-?[0-9.,]{1,50})\s*(?:\\[,;:! ]\s*|~\s*)*"
    r"\\(?:text|textrm|mathrm|mbox)\s*\{\s*~?\s*(?P<letter>[mshg])\s*\}\s*\.?\s*\$?\s*$"
)


def _typeset_letter(raw: str, normalised: str) -> str:
    """``normalised``, or ``"<number> <letter>"`` where ``raw`` is a number with a typeset unit symbol,
    which normalisation dropped."""
    m = _TYPESET_LETTER_RE.match(raw)
    return f"{m.group('num')} {m.group('letter')}" if m is not None else normalised


def _letter_quantity(
    s: str, other: tuple[Literal, str, Fraction]
) -> tuple[tuple[Literal, str, Fraction] | None, bool]:
    """``s`` as a number with a unit symbol against ``other``, a quantity in a unit word: (the quantity,
    False) where the symbol is of ``other``'s dimension; (None, True) where it is of another (``5 s`` is
    not ``5 meters``, whether s is seconds or a variable); (None, False) where ``s`` has no symbol or an
    ``m`` meets a time (it may be minutes)."""
    q = quantity(s, letter=True)
    if q is None or q[1] == other[1]:
        return q, False
    return None, not (s.rstrip(". ").endswith("m") and other[1] == "time")


def quantities_check(gold: str, pred: str) -> bool | None:
    """Whether two quantities are equal (``3 hours`` and ``180 minutes``: True; ``3 minutes`` or ``3
    meters``: False; ``1000 m`` and ``1000``: True), or None where this rule does not decide (see the
    module docstring): the gold converted exactly to the prediction's unit, compared as literals are."""
    if len(gold) > _MAX_QUANTITY or len(pred) > _MAX_QUANTITY:
        return None
    if _ORDINAL_RE.search(gold) or _ORDINAL_RE.search(pred):
        return None
    try:
        ng, np = _typeset_letter(gold, normalize(gold)), _typeset_letter(pred, normalize(pred))
        if (parse_literal(ng) is None) != (parse_literal(np) is None):
            # a unit stated on one side only is ignored: the number it states is the answer
            return True if states_number(ng, np) else None
        g, p = quantity(ng), quantity(np)
        if g is None and p is not None:
            g, differ = _letter_quantity(ng, p)
            if differ:
                return False
        elif p is None and g is not None:
            p, differ = _letter_quantity(np, g)
            if differ:
                return False
        elif g is None and p is None:
            # two unit symbols ("1000 m" and a typeset "1000 \\text{ m}", "3600 s" and "1 h"): of one dimension
            g, p = quantity(ng, letter=True), quantity(np, letter=True)
            if g is None or p is None or g[1] != p[1]:
                return None
    except Exception:
        return None
    if g is None or p is None:
        return None
    if g[2] == p[2] and g[1] == p[1]:
        # one unit (a symbol against its word, "5 s" and "5 seconds"): the numbers, else the other rules
        return True if literals_equivalent(g[0], p[0]) else None
    if g[1] != p[1]:
        return False
    converted = Literal(g[0].value * g[2] / p[2])
    return literals_equivalent(converted, p[0])
