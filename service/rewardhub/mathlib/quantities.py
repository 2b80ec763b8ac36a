"""Quantities with units: ``3 hours`` is ``180 minutes``.

The equivalence rules drop the words after a number (:func:`.structures.strip_units`: ``7 goats`` is 7),
which is sound for one quantity against a bare number, but two quantities in different units of one
dimension compared their numbers: ``3 hours`` against ``180 minutes`` was wrong, and against ``3
minutes`` right. :func:`quantities_check` decides such a pair by converting both to one unit.

It decides only when *both* sides are a single number followed by a unit it knows: units of different
dimensions (``3 hours`` against ``3 meters``) are unequal, and differing units of one dimension (time,
length, mass) are converted. A bare number is never converted (``180`` against ``3 hours`` is left to
the other rules, which read the number), nor is an ambiguous unit (a year, a month, a ton; one-letter
symbols such as ``s``, which are variables as often), an ordinal (``15th day``), a unit with a power
(``12 inches^2``), a rate (``miles per hour``) or a compound (``3 hours and 20 minutes``). A lone ``m``
after a space (or typeset upright, ``1000\\,\\text{m}``) is metres only where the other side is in
another unit of length (``1000 m`` against ``1 km``); against anything else it may be minutes or a
variable and is left alone. The factors are exact
(an inch is 2.54 cm, a pound 0.45359237 kg), and the numbers compare as literals do (a prediction
rounded to 3 significant digits matches: ``1.33 hours`` is ``80 minutes``).
"""

from __future__ import annotations

import re
from fractions import Fraction

from rewardhub.mathlib.normalize import normalize
from rewardhub.mathlib.numeric import Literal, literals_equivalent, parse_literal

__all__ = ["quantities_check", "quantity"]


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

_METRE = ("length", Fraction(1))

# A number, then one unit word (an abbreviation may end in a full stop: "3 hrs."); a one-letter word
# only after a space ("1000 m", not "2m").
_QUANTITY_RE = re.compile(r"^(?P<num>.{1,100}?)(?:\s*(?P<unit>[A-Za-z]{2,12})|\s(?P<letter>[A-Za-z]))\.?$")
# An ordinal, "15th", "2^{nd}", "3^{\text{rd}}": "15th day" is a day, not 15 days (normalisation drops
# the suffix, so it is looked for in the answer as written).
_ORDINAL_RE = re.compile(
    r"\d\s*(?:\^\s*)?\{?\s*(?:\\(?:text|mathrm|textrm)\s*\{\s*)?(?:st|nd|rd|th)(?![A-Za-z])"
)


def quantity(s: str, metre: bool = False) -> tuple[Literal, str, Fraction] | None:
    """``s`` (normalised) as a number in a known unit: the number, the unit's dimension and its size in
    the dimension's base unit; None for anything else (a lone ``m`` too, unless ``metre``)."""
    m = _QUANTITY_RE.match(s.strip())
    if m is None:
        return None
    if m.group("unit") is not None:
        unit = _UNITS.get(m.group("unit").lower())
    else:
        unit = _METRE if metre and m.group("letter") == "m" else None
    number = parse_literal(m.group("num"))
    if unit is None or number is None or number.percent:
        return None
    return number, unit[0], unit[1]


# A number and an upright one-letter "m" at the end, "1000\\,\\text{m}" or "1000 \\mathrm{~m}": normalisation
# drops such a unit (:func:`.normalize.unwrap_text`), so a typeset metre is read from the answer as written.
_TYPESET_METRE_RE = re.compile(
    r"^\s*\$?\s*(?P<num>[0-9.,]{1,50})\s*(?:\\[,;:! ]\s*|~\s*)*"
    r"\\(?:text|textrm|mathrm|mbox)\s*\{\s*~?\s*m\s*\}\s*\.?\s*\$?\s*$"
)


def _typeset_metre(raw: str, normalised: str) -> str:
    """``normalised``, or ``"<number> m"`` where ``raw`` is a number with a typeset metre, which
    normalisation dropped."""
    m = _TYPESET_METRE_RE.match(raw)
    return f"{m.group('num')} m" if m is not None else normalised


def quantities_check(gold: str, pred: str) -> bool | None:
    """Whether two quantities in different units are equal (``3 hours`` and ``180 minutes``: True; ``3
    minutes`` or ``3 meters``: False), or None where this rule does not decide (see the module
    docstring): the gold converted exactly to the prediction's unit, compared as literals are."""
    if _ORDINAL_RE.search(gold) or _ORDINAL_RE.search(pred):
        return None
    try:
        ng, np = normalize(gold), normalize(pred)
        g, p = quantity(ng), quantity(np)
        if g is None and p is not None and p[1] == "length":
            g = quantity(_typeset_metre(gold, ng), metre=True)
        elif p is None and g is not None and g[1] == "length":
            p = quantity(_typeset_metre(pred, np), metre=True)
    except Exception:
        return None
    if g is None or p is None or g[2] == p[2] and g[1] == p[1]:
        return None
    if g[1] != p[1]:
        return False
    converted = Literal(g[0].value * g[2] / p[2])
    return literals_equivalent(converted, p[0])
