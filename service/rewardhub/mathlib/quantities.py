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

Two quantities are decided when both are a single number followed by a unit it knows, after one label or a
label on one side only (``t = 3 hours`` and ``180 minutes``; two labels, ``x = 3 hours`` and ``t = 180
minutes``, are left to the other rules): units of different dimensions (``3 hours`` against ``3 meters``,
``5 cm^2`` against ``5 cm``) are unequal, and differing units of one dimension (time, length, mass, volume,
a power of one, ``cm^2``, or a rate of two, ``km/h`` or ``miles per hour``) are converted (a litre is 1,000
``cm^3``). A bare number is never converted (``180`` against ``3 hours``), nor is an ambiguous unit (a
ton), an ordinal (``15th day``) or a compound (``3 hours and 20 minutes``). Months and years are no fixed
number of days: they are a dimension of their own (``calendar``), converted among themselves only (``1
year`` is ``12 months``, ``2 decades`` ``20 years``), and against a day, a week or an hour they differ
(``5 years`` is not ``5 days``). A square or cubic unit in words is a power (``25 square meters``, ``25 sq
m`` and ``1 cubic meter`` are ``25 m^2``, ``25 m^2`` and ``1000 L``; superscript digits are one too, as
normalisation writes them: ``8 ft²`` is ``8 ft^2``), an acre 43,560 square feet, the inch's ``in`` a unit
with a power or after such a word (``8 in^3``, ``8 cu in``), or alone ending the answer against a unit
(:func:`_plain_inch`: ``8 in`` is ``20.32 cm`` and not ``8 cm``, ``8 hours`` nor ``8^\\circ``; against a
bare 8 it is a unit on one side only, and ``8 in total`` is none), a rate in one word a rate (``60 mph``, ``60 kph``), and a cent (``¢`` too) a hundredth of a dollar: a dollar amount (``\\$0.50``, which normalisation reads
as 0.50) is one against cents or dollars only (:func:`_dollars`: ``50 cents`` is ``\\$0.50`` and not
``\\$50``; ``\\$10`` against ``10`` is a bare 10), in a list or a tuple too (a list item keeps its sign as
its quantity: :func:`.structures.parse_answer`; ``50 cents, 2`` is not ``\\$50, 2``). A known unit against a number and a word that names
none (``3 hours`` and ``3 apples``, ``5 days`` and ``5 dx``) is two answers (:func:`_noun_against_unit`; a
count noun against a bare number, or against another unknown word, is left to the other rules). Degrees,
an angle's or a temperature's, are no unit here (the other rules compare them, radians converted), but
against a unit of another kind they differ (:func:`_degrees_against_unit`: ``8^\\circ`` is not ``8 cm`` nor
``8 hours``; against ``8`` it is a unit on one side only), as one number in two temperature scales does
(:func:`_scales_differ`: ``8 °C`` and ``8 °F``), and a percentage against a unit (:func:`_percent_against_unit`:
``8\\%`` is not ``8 cm``; against ``8`` or ``0.08`` the other rules decide). Radians are an angle's unit and
kelvin a temperature's (``8 rad`` is not ``8 cm`` nor ``8 °C``, ``8 kelvin`` not ``8 °C`` nor ``8^\\circ``, and
is ``8\\,\\text{K}``; a plain ``8 K`` is kelvin only against a temperature in a unit: :func:`_plain_kelvin`);
radians against degrees are left to the comparer, which converts the degrees (``8 rad`` is not ``8^\\circ``,
``\\pi`` rad is ``180^\\circ``: :mod:`.equivalence`). A preposition before a quantity is dropped
(:func:`_after_preposition`: ``in 8 hours`` and ``at 8\\,\\text{h}`` are ``8 hours``, and the "in" no inch). A
rate's units typeset as a fraction are the slash's (:func:`_frac_rate`: ``96.56
\\frac{\\text{km}}{\\text{h}}`` is ``96.56 km/h`` and ``60 mph``; ``\\frac{96}{2}`` is 48). The
one-letter symbols ``m``, ``s``, ``h``, ``g`` and ``L`` (an upright ``l`` too; a plain ``l``, too like a
1, only against a volume: :func:`_plain_litre`) are variables as often as units: one is a unit only after
a space (``1000 m``, not ``5m``) or typeset upright (``1000\\,\\text{m}``, which
normalisation drops: it is read from the answer as written), and never with a power unless upright (``5
m^2`` may be 5m squared; ``5\\,\\text{m}^2`` is an area) or the other side states that power in a unit
(``2000000 m^2`` against ``2 km^2`` is an area: 2000000m squared is no answer in square kilometres). The
day's ``d`` is a differential or a variable far more often still: it is a unit only typeset upright after a
number, ending the answer (``5\\,\\text{d}`` is ``5 days``; ``5 d`` is no quantity). One of
another dimension differs (``5 s`` is not ``5 meters`` whether s is seconds or a variable), but an ``m``
against a time may be minutes: it differs only where it is neither (``3 m`` is not ``3 hours``; against ``3
minutes`` it is left alone). Two different upright symbols after one number are two units whatever they are
(``5\\,\\text{A}`` is not ``5\\,\\text{V}``; litres' ``l`` and ``L`` are one), in a list too
(:func:`typeset_units_differ`), and one that names no unit known here is not a known unit word
(``5\\,\\text{x}`` is not ``5 hours``: x is a variable or another unit; against a bare ``5`` it is a unit on
one side only); a rate typeset in two groups, ``5\\,\\text{m}/\\text{s}``, is 5 m/s. The comparer applies
this rule to two items of a list whose unit words it dropped (``3 hours, 2`` is not ``3 minutes, 2``), or
kept (``2 km^2, 3`` is ``2000000 m^2, 3``), or whose upright symbols normalisation dropped
(:func:`.structures.parse_answer` keeps them through the split: ``(5\\,\\text{m}, 2)`` is not ``(5 hours,
2)``), and to a tuple's components in order (``(1 hour, 2)`` is ``(60 minutes, 2)``; a component's unit words
are otherwise dropped as a whole answer's are: ``(30 degrees, 2)`` is ``(30, 2)``). The factors are exact
(an inch is 2.54 cm, a pound 0.45359237 kg), and the numbers compare as literals do (a prediction rounded to
3 significant digits matches: ``1.33 hours`` is ``80 minutes``). Converted, a prediction in another unit
than the gold's agrees at its own precision: a whole number is a rounding there too (``161 km/h`` for ``100
mph``, 160.9344) where the gold in the prediction's unit is a decimal, and exact where it is a whole number
or a fraction, as plain numbers are (:func:`_as_written`: ``143 weeks`` is not ``1000 days``, 1000/7 weeks,
as ``143`` is not ``\\frac{1000}{7}``), and a decimal gold is a rounding of an exact prediction converted
to its unit (``96.56 km/h`` and ``60 mph``, 96.56064 km/h, as ``0.33`` is one of ``1/3``). The floor of 3
significant digits holds here as everywhere: ``97 km/h`` is no rounding of 60 mph (96.56064 km/h), as ``97`` is none of ``96.56``; two digits would
accept answers nearly 5% off (``11 km`` for 10.5 km, ``11000 s`` for 3 hours).
"""

from __future__ import annotations

import re
from fractions import Fraction

from rewardhub.mathlib.normalize import key, normalize, superscripts
from rewardhub.mathlib.numeric import Literal, literals_equivalent, parse_literal
from rewardhub.mathlib.scan import find_top_level
from rewardhub.mathlib.structures import is_name

__all__ = [
    "is_unit_word",
    "mentions_ordinal",
    "mentions_unit",
    "quantities_check",
    "quantity",
    "states_number",
    "typeset_units_differ",
]


def _units(dimension: str, factor: Fraction, *names: str) -> dict[str, tuple[str, Fraction]]:
    return dict.fromkeys(names, (dimension, factor))


# Unit words (lower case, as written after the number) -> (dimension, size in the dimension's base unit).
_UNITS: dict[str, tuple[str, Fraction]] = {
    **_units("time", Fraction(1, 1000), "millisecond", "milliseconds", "ms"),
    **_units("time", Fraction(1), "second", "seconds", "sec", "secs"),
    **_units("time", Fraction(60), "minute", "minutes", "min", "mins"),
    **_units("time", Fraction(3600), "hour", "hours", "hr", "hrs"),
    **_units("time", Fraction(86400), "day", "days"),
    **_units("time", Fraction(604800), "week", "weeks", "wk", "wks"),
    # months and years are no fixed number of days (a month is 28 to 31, a year 365 or 366): they are a
    # dimension of their own, converted among themselves only ("1 year" is "12 months"; "5 years" is not
    # "5 days" and no number of days either)
    **_units("calendar", Fraction(1), "month", "months"),
    **_units("calendar", Fraction(12), "year", "years", "yr", "yrs"),
    **_units("calendar", Fraction(120), "decade", "decades"),
    **_units("calendar", Fraction(1200), "century", "centuries"),
    **_units("calendar", Fraction(12000), "millennium", "millennia"),
    **_units("length", Fraction(1, 1000), "millimeter", "millimeters", "millimetre", "millimetres", "mm"),
    **_units("length", Fraction(1, 100), "centimeter", "centimeters", "centimetre", "centimetres", "cm"),
    **_units("length", Fraction(1), "meter", "meters", "metre", "metres"),
    **_units("length", Fraction(1000), "kilometer", "kilometers", "kilometre", "kilometres", "km"),
    **_units("length", Fraction(254, 10000), "inch", "inches"),
    **_units("length", Fraction(3048, 10000), "foot", "feet", "ft"),
    **_units("length", Fraction(9144, 10000), "yard", "yards", "yd", "yds"),
    **_units("length", Fraction(1609344, 1000), "mile", "miles", "mi"),
    # an acre is 43,560 square feet
    **_units("length^2", 43560 * Fraction(3048, 10000) ** 2, "acre", "acres"),
    **_units("mass", Fraction(1, 1000), "milligram", "milligrams", "mg"),
    **_units("mass", Fraction(1), "gram", "grams"),
    **_units("mass", Fraction(1000), "kilogram", "kilograms", "kg"),
    **_units("mass", Fraction(45359237, 100000), "pound", "pounds", "lb", "lbs"),
    **_units("mass", Fraction(45359237, 1600000), "ounce", "ounces", "oz"),
    # a volume is a length cubed (a litre is 1,000 cm^3, a millilitre one): "1 L" is "1000 cm^3"
    **_units(
        "length^3", Fraction(1, 1000000), "milliliter", "milliliters", "millilitre", "millilitres", "ml"
    ),
    **_units("length^3", Fraction(1, 1000), "liter", "liters", "litre", "litres"),
    # a rate in one word: "60 mph" is "60 miles per hour" (and "96.56 km/h"), "60 kph" "60 km/h"
    **_units("length/time", Fraction(1609344, 3600000), "mph"),
    **_units("length/time", Fraction(1000, 3600), "kph", "kmh", "kmph"),
    # money: a cent is a hundredth of a dollar ("50 cents" is "\\$0.50", a dollar amount read as
    # "0.50 dollars" against cents only: :func:`_dollars`), and no 50 dollars
    **_units("money", Fraction(1, 100), "cent", "cents"),
    **_units("money", Fraction(1), "dollar", "dollars"),
    # an angle in radians ("8 rad" is about 458.4 degrees, no 8 cm): degrees are no unit here (no factor
    # converts them, pi being irrational), so radians against degrees are left to the comparer, which converts
    # the degrees (:func:`_degrees_against_unit`)
    **_units("angle", Fraction(1), "rad", "radian", "radians"),
    # a temperature in kelvin ("8 kelvin" is no 8 °C), one scale: the others are degrees (:func:`_degrees`)
    **_units("temperature", Fraction(1), "kelvin", "kelvins"),
}

# One-letter unit symbols: metres, seconds, hours, grams, litres. A letter is a variable as often as a unit
# ("5 s" may be 5s), so it is one only after a space (or typeset upright) and where the other side says so.
_LETTER_UNITS: dict[str, tuple[str, Fraction]] = {
    "m": ("length", Fraction(1)),
    "s": ("time", Fraction(1)),
    "h": ("time", Fraction(3600)),
    "g": ("mass", Fraction(1)),
    "L": ("length^3", Fraction(1, 1000)),
}
# The day's symbol d is a differential or a variable far more often than a unit: it is one only typeset
# upright right after a number and ending the answer ("5\\,\\text{d}", "5\\,\\mathrm{d}"), never plain ("5 d").
# So is kelvin's K ("8\\,\\text{K}"): a plain "8 K" may be a variable's, or 8 thousand, and is kelvin only
# against a temperature in a unit (:func:`_plain_kelvin`).
_UPRIGHT_UNITS: dict[str, tuple[str, Fraction]] = {"d": ("time", Fraction(86400)), "K": _UNITS["kelvin"]}
# The inch's "in" is a preposition as often ("3 in" may be cut off): it is an inch with a power or after a
# square or cubic word ("8 in^3", "8 cu in", "8 \\text{ in}^2"), or alone against a unit (:func:`_plain_inch`).
_POWERED_UNITS: dict[str, tuple[str, Fraction]] = {"in": ("length", Fraction(254, 10000))}

# A number, then one unit: a word (an abbreviation may end in a full stop: "3 hrs."), a one-letter word only
# after a space ("1000 m", not "2m"), or an upright symbol read from the answer as written
# (:func:`_typeset_letter`, "1000 \\mathrm{m}"); then a rate's second unit ("5 m/s", "60 miles per hour"),
# and a power of the last unit ("5 cm^2", "5 km/h^2"; :func:`quantity` refuses a plain symbol's).
_QUANTITY_RE = re.compile(
    r"^(?P<num>.{1,100}?)"
    r"(?:\s(?i:(?P<square>square|sq)|(?P<cubic>cubic|cu))\.?)?"
    r"(?:\s*(?P<unit>[A-Za-z]{2,12})|\s(?P<letter>[A-Za-z])|\s\\mathrm\{(?P<upright>[A-Za-z])\})"
    r"(?:(?:\s?/\s?|\sper\s)(?P<per>[A-Za-z]{1,12}))?"
    r"(?:\s?\^\s?(?:\{\s?(?P<power>-?\d)\s?\}|(?P<digit>\d)))?\.?$"
)
# An ordinal, "15th", "2^{nd}", "3^{\text{rd}}": "15th day" is a day, not 15 days (normalisation drops
# the suffix, so it is looked for in the answer as written).
_ORDINAL_RE = re.compile(
    r"\d\s*(?:\^\s*)?\{?\s*(?:\\(?:text|mathrm|textrm)\s*\{\s*)?(?:st|nd|rd|th)(?![A-Za-z])"
)


# A quantity is a number (at most 100 characters here) and a unit: a longer answer, as written, is none.
# The patterns below read the answer as written, and two runs of spaces around an optional character
# ("\\{ ~? m") cost the square of the run: 20,000 spaces took 13 s of a worker.
_MAX_QUANTITY = 1_000


def _unit(word: str, letter: bool, minutes: bool) -> tuple[str, Fraction] | None:
    if len(word) > 1:
        return _UNITS.get(word.lower())
    if not letter:
        return None
    return ("time", Fraction(60)) if minutes and word == "m" else _LETTER_UNITS.get(word)


def quantity(
    s: str, letter: bool = False, minutes: bool = False, plain_power: bool = False
) -> tuple[Literal, str, Fraction] | None:
    """``s`` (normalised) as a number in a known unit: the number, the unit's dimension (``length``,
    ``length^2``, ``length/time``) and its size in the dimension's base unit; None for anything else: a
    one-letter symbol too, unless ``letter``, and a plain one with a power unless ``plain_power`` (``5
    m^2`` and ``9.8 m/s^2`` may be 5m squared and 9.8m over s squared; an upright one is a unit's,
    ``5\\,\\text{m}^2``). ``minutes`` reads the symbol ``m`` as minutes."""
    m = _QUANTITY_RE.match(s.strip())
    if m is None:
        return None
    # litres' upright l is L (a plain l, after a space, is too like a 1 to be read as a unit: see
    # :func:`_plain_litre`)
    upright = m.group("upright") and m.group("upright").replace("l", "L")
    unit = _unit(m.group("unit") or m.group("letter") or upright, letter, minutes)
    if unit is None and upright and letter:
        unit = _UPRIGHT_UNITS.get(upright)
    per_word = m.group("per")
    per = None if per_word is None else _unit(per_word, letter, False)
    power = m.group("power") or m.group("digit")
    if unit is None and m.group("unit") and (power or m.group("square") or m.group("cubic")):
        unit = _POWERED_UNITS.get(m.group("unit").lower())
    if unit is None or (per_word is not None and per is None):
        return None
    on_plain = len(per_word) == 1 if per_word is not None else m.group("letter") is not None
    if power is not None and (int(power) == 0 or (on_plain and not plain_power)):
        return None  # the power is on a plain symbol's
    if "/" in unit[0] and (
        power is not None or per_word is not None or m.group("square") or m.group("cubic")
    ):
        return None  # "60 mph^2", "60 kph/s": a rate word's power or rate is none of the forms read here
    if m.group("square") or m.group("cubic"):
        # "25 square meters", "25 sq ft", "2 cubic meters", "25 sq m": the word names the power (of the
        # unit, a plain symbol's too: "sq m" is no variable's), and with a written power too says nothing
        if power is not None or per_word is not None:
            return None
        power = "2" if m.group("square") else "3"
    number = parse_literal(m.group("num"))
    if number is None or number.percent:
        return None
    exponent = 1 if power is None else int(power)
    if per is None:
        return number, _dimension_power(unit[0], exponent), unit[1] ** exponent
    return number, f"{unit[0]}/{_dimension_power(per[0], exponent)}", unit[1] / per[1] ** exponent


def _dimension_power(dimension: str, exponent: int) -> str:
    """A dimension to a power: ``length`` squared is ``length^2``, a volume (``length^3``) squared
    ``length^6``."""
    base, _, power = dimension.partition("^")
    total = int(power or 1) * exponent
    return base if total == 1 else f"{base}^{total}"


def _named_power(s: str, other: tuple[Literal, str, Fraction]) -> tuple[Literal, str, Fraction] | None:
    """``s`` (normalised) as a quantity whose power is on a plain symbol (``2000000 m^2``), where ``other``
    names that dimension in a unit (``2 km^2``): against an area, ``m^2`` is square metres (5m squared, the
    other reading, is no area in a unit); None elsewhere (against ``5``, ``5 m^2`` stays no unit)."""
    q = quantity(s, letter=True, plain_power=True)
    return q if q is not None and q[1] == other[1] else None


# A number and a plain l after a space, ending the answer: "3 l" (normalised).
_PLAIN_LITRE_RE = re.compile(r"^(?P<num>.{1,100}?)\sl\.?$")


def _plain_litre(s: str, other: tuple[Literal, str, Fraction]) -> tuple[Literal, str, Fraction] | None:
    """``s`` (normalised) as a number of litres where it is a number and a plain ``l`` after a space (``3
    l``) and ``other`` a volume in a unit (``3 litres``, ``1500 mL``): the other side says the l is
    litres. Elsewhere a plain l is too like a 1, or a variable, to be a unit (``2 l`` against ``2`` stays
    no quantity, ``2l`` is a product): None."""
    m = _PLAIN_LITRE_RE.match(s)
    if m is None or other[1] != "length^3":
        return None
    return quantity(f"{m.group('num')} L", letter=True)


# A number and a plain K after a space, ending the answer: "8 K" (normalised).
_PLAIN_KELVIN_RE = re.compile(r"^(?P<num>.{1,100}?)\sK\.?$")


def _plain_kelvin(s: str, other: tuple[Literal, str, Fraction]) -> tuple[Literal, str, Fraction] | None:
    """``s`` (normalised) as a number of kelvin where it is a number and a plain ``K`` after a space (``8
    K``) and ``other`` a temperature in a unit (``8 kelvin``, ``8\\,\\text{K}``): the other side says the K
    is kelvin, as a volume says a plain l is litres (:func:`_plain_litre`). Elsewhere a plain K may be a
    variable or a thousand (``8 K`` against ``8`` stays no quantity): None."""
    m = _PLAIN_KELVIN_RE.match(s)
    if m is None or other[1] != "temperature":
        return None
    return quantity(f"{m.group('num')} kelvin")


# A number and a plain "in" after a space, ending the answer: "8 in" (normalised; "8 \\text{ in}" too).
_PLAIN_INCH_RE = re.compile(r"^(?P<num>.{1,100}?)\sin\.?$")


def _plain_inch(s: str) -> tuple[Literal, str, Fraction] | None:
    """``s`` (normalised) as a number of inches where it is a number and a plain ``in`` ending the answer
    (``8 in``, ``8\\text{ in}``); None elsewhere. The caller reads it so only where the other side states a
    unit: against a length it converts (``8 in`` is ``20.32 cm`` and not ``8 cm``), and against a unit of
    another dimension (``8 hours``, ``8 kg``, ``8 L``, ``8 cm^2``, ``8 mph``, ``8 cents``, an upright
    symbol, a degree: :func:`_degrees`) it differs: an answer's number followed by "in" and nothing else
    is a model's inch far more often than a sentence cut off after its preposition, and ``8 in`` for ``8
    hours`` names no hours either way. Against a bare number (``8``) it is a unit on one side only, as
    ``8 cm`` is (the gold states no unit to contradict); where words follow it (``8 in total``, ``8 in
    each row``) or precede the number (``in 8 hours``) the "in" is a preposition and no quantity."""
    m = _PLAIN_INCH_RE.match(s)
    return None if m is None else quantity(f"{m.group('num')} inches", letter=True)


# A number in degrees, an angle's or a temperature's, ending the answer (normalised: "8^\\circ", "8 ^\\circ
# C", "8 degrees", "8 degrees Celsius"), with the temperature's scale where named. Degrees are compared by the
# other rules (radians convert); here they only tell a unit of another kind against them apart
# (:func:`_degrees_against_unit`) and two scales (:func:`_scales_differ`).
_DEGREES_RE = re.compile(
    r"^(?P<num>.{1,100}?)(?:\s?\^\\circ|\s(?i:degrees?|deg))"
    r"(?:\s?(?P<scale>(?i:[CFK]|celsius|fahrenheit|kelvin)))?\.?$"
)


def _degrees(s: str) -> str | None:
    """The scale of ``s`` (normalised) where it is a number in degrees: ``C``, ``F`` or ``K`` for ``8 ^\\circ
    C``, ``8 degrees Fahrenheit``, ``""`` where none is named (``8^\\circ``, ``8 degrees``: an angle, or a
    temperature whose scale goes without saying); None where ``s`` is no number in degrees."""
    m = _DEGREES_RE.match(s)
    if m is None or parse_literal(m.group("num")) is None:
        return None
    return (m.group("scale") or "")[:1].upper()


def _degrees_against_unit(s: str, other: str, other_quantity: tuple[Literal, str, Fraction] | None) -> bool:
    """Whether ``s`` (normalised) is a number in degrees and ``other`` one in a unit of another kind: a known
    unit (``other_quantity``: ``8 cm``, ``8 hours``, ``8 kg``, ``8 cents``, ``8\\,\\text{m}``), a plain
    "in" (an inch: :func:`_plain_inch`) or an upright symbol this module does not know (``8\\,\\text{A}``).
    The other rules drop both units and read them one 8; ``8^\\circ`` is neither 8 cm nor 8 hours. Radians
    are an angle too: against degrees that name no scale (an angle's, ``8^\\circ``) they are left to the
    comparer, which converts the degrees (``8 rad`` is no ``8^\\circ``, ``\\pi`` rad is ``180^\\circ``), but
    against a temperature's (``8 °C``) they differ; kelvin is a temperature, one with degrees kelvin (``8
    ^\\circ K``) and another than degrees Celsius, Fahrenheit or an angle's (``8\\,\\text{K}`` is no
    ``8^\\circ``). Against a bare number (``8``), a dollar amount read as one (``\\$8``) or a count noun
    (``8 apples``) nothing states another unit, as for ``8 in``."""
    scale = _degrees(s)
    if scale is None:
        return False
    if other_quantity is not None:
        if other_quantity[1] == "angle":
            return scale != ""
        return other_quantity[1] != "temperature" or scale != "K"
    return _plain_inch(other) is not None or _TYPESET_QUANTITY_RE.match(other) is not None


def _scales_differ(ng: str, np: str) -> bool:
    """Whether ``ng`` and ``np`` (normalised) are degrees in two named temperature scales (``8 ^\\circ C``
    and ``8 ^\\circ F``): one number in two scales is two temperatures (8 °C is 46.4 °F), which the other
    rules, dropping the scale, read equal. Temperatures are not converted (the scales are not multiples of
    one another): in two scales they are unequal, as two different numbers in one are; where one side names
    no scale (``8^\\circ``) the other rules decide."""
    sg, sp = _degrees(ng), _degrees(np)
    return bool(sg) and bool(sp) and sg != sp


# A preposition before a quantity that restates the answer: "in 8 hours", "after 8 hours", "within 8 km",
# "for 8 dollars", "at 8 hours" (normalised, or as written: "in 8\\,\\text{h}").
_PREPOSITION_RE = re.compile(r"^\s*(?i:in|after|within|for|at)\s(?P<rest>.{1,100})$")


def _after_preposition(raw: str, s: str) -> str:
    """``s`` (``raw`` normalised) without a leading preposition where the rest is a number in a known unit
    (``in 8 hours`` is ``8 hours``: an answer phrased as the question asks, "when?", states the same
    quantity); else ``s`` as it is. The rest's upright symbol, which normalisation drops, is read from
    ``raw`` (:func:`_typeset_letter`: ``in 8\\,\\text{h}`` is ``8\\,\\text{h}``). Only a leading word before
    a whole quantity: the "in" of ``in 8 hours`` is never an inch, and ``in 8`` (no unit), ``in 8 in`` or
    ``at least 8 hours`` are left alone."""
    m = _PREPOSITION_RE.match(s)
    if m is None:
        return s
    written = _PREPOSITION_RE.match(raw)
    rest = m.group("rest") if written is None else _typeset_letter(written.group("rest"), m.group("rest"))
    return s if quantity(rest, letter=True) is None else rest


def _percent_against_unit(s: str, other: str) -> bool:
    """Whether ``s`` (normalised) is a percentage (``8\\%``) and ``other`` a number in a unit (``8 cm``, ``8
    hours``, ``8 in``, ``8^\\circ``, ``8\\,\\text{K}``): a ratio is no length nor time, though its number
    is (the other rules read ``8\\%`` as 8 or 0.08 and drop the unit). Against a bare number, a count noun
    or a dollar amount read as a bare number (``\\$8``) it is left to the other rules."""
    number = parse_literal(s)
    if number is None or not number.percent:
        return False
    return (
        quantity(other, letter=True) is not None
        or _plain_inch(other) is not None
        or _degrees(other) is not None
        or _TYPESET_QUANTITY_RE.match(other) is not None
    )


def _stated_number(s: str) -> Literal | None:
    """The number a quantity (``s`` normalised) states whatever its unit: ``1000 m``, ``5 s``, ``3
    hours``, ``5 m/s``, ``5 cm^2``; None where ``s`` is no number in a known unit (``5 x``, ``5 m^2``:
    a letter's power is a variable's as often)."""
    q = quantity(s, letter=True)
    return None if q is None else q[0]


_UNIT_WORD_RE = re.compile(
    r"(?<![A-Za-z])(?:" + "|".join(sorted(_UNITS, key=len, reverse=True)) + r")(?![A-Za-z])", re.IGNORECASE
)


def is_unit_word(word: str) -> bool:
    """Whether ``word`` names a unit of a dimension here (``cm``, ``hrs``, ``rad``, the inch's ``in``), in
    any case: :func:`.structures.strip_units` drops it after a tuple's component as a unit, not a product of
    variables (``2 cm`` against ``2 xy``)."""
    return word.lower() in _UNITS or word.lower() in _POWERED_UNITS


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


# A number and an upright one-letter unit symbol at the end, with its power: "1000\\,\\text{m}", "60
# \\mathrm{~s}", "5\\,\\text{m}^2": normalisation drops such a unit (:func:`.normalize.unwrap_text`; e, i,
# d and E it keeps, and the day's d is read here too), so it is read from the answer as written. A rate's
# second unit may follow, typeset in a group of its own or not: "5\\,\\text{m}/\\text{s}" normalises to "5
# /s" (the s, after no number, is kept), and is 5 m/s. No two runs of spaces around an optional character
# ("\\s*(?:~\\s*)?", not "\\s*~?\\s*"): each run of spaces is read one way only.
_TYPESET_LETTER_RE = re.compile(
    r"^\s*(?:\$\s*)?(?P<num>(?:[+-]\s?)?[0-9.,]{1,50})\s*(?:\\[,;:! ]\s*|~\s*)*"
    r"\\(?:text|textrm|mathrm|mbox)\s*\{\s*(?:~\s*)?(?P<letter>[A-DF-Za-hj-z])\s*\}"
    r"(?:\s*/\s*(?:\\(?:text|textrm|mathrm|mbox)\s*\{\s*(?:~\s*)?(?P<per>[A-Za-z]{1,12})\s*\}"
    r"|(?P<plain>[A-Za-z]{1,12})))?"
    r"(?:\s*\^\s*(?:\{\s*(?P<power>-?\d)\s*\}|(?P<digit>\d)))?[\s.$]*$"
)
_TYPESET_QUANTITY_RE = re.compile(r"^(?P<num>.{1,100}) \\mathrm\{(?P<letter>[A-Za-z])\}(?P<power>\^-?\d)?$")


def _typeset_letter(raw: str, normalised: str) -> str:
    """``normalised``, or ``"<number> \\mathrm{<letter>}/<per>^<power>"`` where ``raw`` is a number with a
    typeset unit symbol, which normalisation dropped (a rate's second unit and the power where written; a
    sign, as ``\\pm`` expands to ``+ 5``, joined to its number)."""
    m = _TYPESET_LETTER_RE.match(raw)
    if m is None:
        return normalised
    power = m.group("power") or m.group("digit")
    per = m.group("per") or m.group("plain")
    return (
        f"{m.group('num').replace(' ', '')} \\mathrm{{{m.group('letter')}}}"
        + ("" if per is None else f"/{per}")
        + ("" if power is None else f"^{power}")
    )


# A rate's units typeset as a fraction after a number, ending the answer: "96.56 \\frac{\\text{km}}{\\text{h}}",
# "5\\,\\dfrac{m}{s}", "9.8 \\frac{\\mathrm{m}}{\\mathrm{s}^2}". Each part is one unit name, bare or upright,
# the second with its power; a fraction of numbers ("\\frac{96}{2}") is none. Matched from the last "\\frac"
# on, so a long answer is read once.
_UNIT_ARG = r"\s*(?:\\(?:text|textrm|mathrm|mbox)\s*\{\s*(?:~\s*)?[A-Za-z]{1,12}\s*\}|[A-Za-z]{1,12})"
_FRAC_RATE_RE = re.compile(
    r"\\[dt]?frac\s*\{(?P<unit>" + _UNIT_ARG + r")\s*\}\s*"
    r"\{(?P<per>" + _UNIT_ARG + r"(?:\s*\^\s*(?:\{\s*-?\d\s*\}|\d))?)\s*\}(?P<tail>[\s.$]*)"
)


def _frac_rate(raw: str) -> str:
    """``raw``, or ``raw`` with a rate's units written as a fraction (``96.56 \\frac{\\text{km}}{\\text{h}}``)
    written as a slash between them (``96.56 \\text{km}/\\text{h}``), the form the rules here read: one
    rate however it is typeset (``60 mph`` is either). Only where the result is a number in units known here
    (a plain or upright symbol's power is then read as ``\\text{m}/\\text{s}^2`` is); else ``raw`` as it
    is (``3 \\frac{x}{y}``)."""
    at = raw.rfind("frac")
    if at < 1:
        return raw
    start = at - 1 if raw[at - 1] == "\\" else at - 2
    m = _FRAC_RATE_RE.fullmatch(raw, max(start, 0))
    head = raw[: max(start, 0)].rstrip()
    if m is None or not head or (not head[-1].isdigit() and not head.endswith(("\\,", "\\;", "\\ ", "~"))):
        return raw
    rewritten = f"{head} {m.group('unit').strip()}/{m.group('per').strip()}{m.group('tail')}"
    read = _typeset_letter(rewritten, normalize(rewritten))
    return rewritten if quantity(read, letter=True, plain_power=True) is not None else raw


# A dollar amount as written: "\\$0.50", "$0.50", "0.50\\$" (normalisation drops the sign).
_DOLLARS_RE = re.compile(r"^\s*(?:\\?\$\s*[0-9.,]{1,50}|[0-9.,]{1,50}\s*\\?\$)\s*$")


def _dollars(raw: str, normalised: str, other: str) -> str:
    """``normalised``, or ``"<number> dollars"`` where ``raw`` is a dollar amount (``\\$0.50``) and
    ``other`` (normalised) a number of cents or dollars (``50 cents``): the sign, which normalisation
    drops, is the unit there (``50 cents`` is ``\\$0.50``, not ``\\$50``). Against anything else the
    amount stays a bare number (``\\$10`` is ``10``)."""
    if _DOLLARS_RE.match(raw) is None or parse_literal(normalised) is None:
        return normalised
    q = quantity(other)
    return normalised if q is None or q[1] != "money" else f"{normalised} dollars"


def _same_symbol(a: str, b: str) -> bool:
    """Two upright unit symbols (with their powers) name one unit: the same letter, or litres' l and L."""
    return a.replace("L", "l") == b.replace("L", "l")


def _symbols_differ(ng: str, np: str) -> bool:
    """Whether ``ng`` and ``np`` state one number in two different upright symbols (``5\\,\\text{A}`` and
    ``5\\,\\text{V}``): two units, whatever they are, one number: unequal (no two symbols are one unit but
    litres' l and L)."""
    mg, mp = _TYPESET_QUANTITY_RE.match(ng), _TYPESET_QUANTITY_RE.match(np)
    if mg is None or mp is None:
        return False
    if _same_symbol(
        mg.group("letter") + (mg.group("power") or ""), mp.group("letter") + (mp.group("power") or "")
    ):
        return False
    lg, lp = parse_literal(mg.group("num")), parse_literal(mp.group("num"))
    return lg is not None and lp is not None and literals_equivalent(lg, lp)


# A number and one word: "3 apples", "5 dx" (normalised), against a number in a known unit.
_NOUN_RE = re.compile(r"^(?P<num>.{1,100}?)\s(?P<word>[A-Za-z]{2,12})\.?$")
# Words after a number that may name the other side's unit though no known unit word here: a placeholder
# ("square units" say only that the answer has one), and spellings of units not read here ("3 in", "5 kilos",
# "5 gm"; a known unit's plural, "5 kms", is one too: see :func:`_noun_against_unit`).
_UNIT_SPELLINGS = frozenset(
    "unit units in fps kilo kilos cc mo mos sq cu hs yo ly au pc ns us ks dm dl dg dam "
    "hm ha gm gms gr grs ltr ltrs lt mtr mtrs msec msecs mn mnt mnts".split()
)


def _noun_against_unit(s: str, other: str, other_quantity: tuple[Literal, str, Fraction] | None) -> bool:
    """Whether ``s`` (normalised) is a number and a word that names no unit (``3 apples``, ``5 dx``) and
    ``other`` a number in a known unit word or upright symbol (``3 hours``, ``3\\,\\text{s}``): an answer
    that names a unit known here against one that names something else is two answers, whatever the word is
    (a count noun, a variable's differential), and unequal. A plain letter (``3 m``, after a space) is a
    unit only against another unit, so not here: it may be a variable. The other rules drop such a word as
    a count noun, rightly against a bare number (``12 apples`` is ``12``) and, for want of a way to tell,
    against another unknown word (``12 apples`` and ``12 oranges`` stay to them); a word that may spell a
    unit (:data:`_UNIT_SPELLINGS`, or a known unit's plural, ``kms``) is left alone too."""
    if other_quantity is None or (quantity(other) is None and _TYPESET_QUANTITY_RE.match(other) is None):
        return False
    m = _NOUN_RE.match(s)
    if m is None:
        return False
    word = m.group("word").lower()
    if word in _UNITS or word in _UNIT_SPELLINGS or word.rstrip("s") in _UNITS:
        return False
    number = parse_literal(m.group("num"))
    return number is not None and not number.percent


def _foreign_symbol(s: str, other: tuple[Literal, str, Fraction] | None) -> bool:
    """Whether ``s`` (normalised) is a number in an upright symbol that names no unit known here
    (``5\\,\\text{x}``, ``5\\,\\text{A}``) and ``other`` a number in a known unit (``5 hours``): the
    symbol is another unit or a variable, and no symbol of that unit (the known units' one-letter symbols
    are those of ``_LETTER_UNITS``): unequal. Against a bare number it is a unit on one side only."""
    if other is None:
        return False
    m = _TYPESET_QUANTITY_RE.match(s)
    letter = None if m is None else m.group("letter").replace("l", "L")
    return letter is not None and letter not in _LETTER_UNITS and letter not in _UPRIGHT_UNITS


def typeset_units_differ(gold: list[str], pred: list[str]) -> bool:
    """Whether two answers that normalise alike dropped different upright unit symbols (the ``units`` of
    :func:`.normalize.normalize`): as many, and one of them not the other's (``5\\,\\text{m}`` and
    ``5\\,\\text{s}``; ``(1\\,\\text{m}, 2\\,\\text{s})`` and ``(1\\,\\text{s}, 2\\,\\text{m})``). One number
    in two units is two answers; a unit stated on one side only (a different count) is ignored."""
    return len(gold) == len(pred) and not all(_same_symbol(a, b) for a, b in zip(gold, pred, strict=True))


def _label(raw: str) -> tuple[str | None, str]:
    """``raw`` as a simple name's label and its value (``t = 3 hours``), or no label and ``raw``."""
    eq = find_top_level(raw, "=")
    if eq <= 0 or raw[eq - 1] in "<>!" or find_top_level(raw[eq + 1 :], "=") >= 0:
        return None, raw
    name = normalize(raw[:eq])
    return (key(name), raw[eq + 1 :]) if is_name(name) else (None, raw)


def _differ(
    ng: str, np: str, g: tuple[Literal, str, Fraction], p: tuple[Literal, str, Fraction]
) -> bool | None:
    """Two quantities of different dimensions differ (False), unless the symbol ``m`` meets a time: it may be
    minutes, and is left alone (None) where read so it is equal (``3 \\text{ m}`` and ``3 minutes``); read as
    metres or as minutes, ``3 m`` is not ``3 hours``."""
    gm, pm = quantity(ng, letter=True, minutes=True), quantity(np, letter=True, minutes=True)
    if gm is not None and pm is not None and gm[1] == pm[1] and (gm[1:] != g[1:] or pm[1:] != p[1:]):
        return None if _convert(gm, pm) else False
    return False


# The most fractional digits a converted gold is written with as a decimal (1 mile is 1609.344 m): past them
# it is the fraction it is (no unit here converts to more than 12).
_MAX_CONVERTED_DECIMALS = 30


def _as_written(value: Fraction) -> Literal:
    """The literal that writes ``value`` exactly, as a gold in that unit would be written: a whole number
    or a fraction exact (``1000`` m, ``\\frac{1000}{7}`` weeks), a terminating decimal a decimal
    (``1609.344`` m), which a whole number may round (:func:`.numeric.literals_equivalent`)."""
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den, twos = den // 2, twos + 1
    while den % 5 == 0:
        den, fives = den // 5, fives + 1
    places = max(twos, fives)
    if den != 1 or places == 0 or places > _MAX_CONVERTED_DECIMALS:
        return Literal(value)
    digits = str(abs(value.numerator) * 10**places // value.denominator).rjust(places + 1, "0")
    sign = "-" if value < 0 else ""
    written = parse_literal(f"{sign}{digits[:-places]}.{digits[-places:]}")
    return Literal(value) if written is None else written


def _convert(g: tuple[Literal, str, Fraction], p: tuple[Literal, str, Fraction]) -> bool:
    """Two quantities of one dimension in different units: the gold converted exactly to the prediction's
    unit and written as the literal that states it (:func:`_as_written`), compared as literals are, as
    plain numbers: the prediction a rounding at its own precision where it is a decimal, or where it is a
    whole number and the converted gold a decimal (``161 km/h`` for ``100 mph``, 160.9344, as ``161`` for
    ``160.9344``; 3 significant digits at least, as everywhere: ``97 km/h`` is no rounding of 96.56064, as
    ``97`` is none of ``96.56``), a whole number exact against a whole or fractional gold (``143 weeks``
    is not ``1000 days``, 1000/7 weeks, as ``143`` is not ``\\frac{1000}{7}``, nor ``1001 m`` ``1 km``); or a
    decimal gold against an exact prediction, converted to the gold's unit (``96.56 km/h`` and ``60 mph``:
    the gold rounds 96.56064, as ``0.33`` rounds ``1/3``; a finer decimal prediction than the gold,
    ``60.001 mph``, is not read so)."""
    if literals_equivalent(_as_written(g[0].value * g[2] / p[2]), p[0]):
        return True
    return (
        g[0].decimals is not None
        and p[0].decimals is None
        and literals_equivalent(g[0], Literal(p[0].value * p[2] / g[2]))
    )


def mentions_ordinal(s: str) -> bool:
    """Whether ``s`` (as written) may hold an ordinal: ``15th day`` is a day, and no quantity of 15 days. A
    longer answer than the pattern reads (see ``_MAX_QUANTITY``) may."""
    return len(s) > _MAX_QUANTITY or _ORDINAL_RE.search(s) is not None


def quantities_check(gold: str, pred: str, stated: bool = True) -> bool | None:
    """Whether two quantities are equal (``3 hours`` and ``180 minutes``: True; ``3 minutes`` or ``3
    meters``: False; ``1000 m`` and ``1000``: True), or None where this rule does not decide (see the
    module docstring): the gold converted exactly to the prediction's unit, compared as literals are.
    Without ``stated`` a unit on one side only (``1000 m`` and ``1000``) is None, not True: a True is then
    two quantities that each state a unit, which a list's items compare by (their values lost the units)."""
    if len(gold) > _MAX_QUANTITY or len(pred) > _MAX_QUANTITY:
        return None
    if _ORDINAL_RE.search(gold) or _ORDINAL_RE.search(pred):
        return None
    try:
        (label_g, gold), (label_p, pred) = _label(superscripts(gold)), _label(superscripts(pred))
        if label_g is not None and label_p is not None and label_g != label_p:
            return None  # "x = 3 hours" and "t = 180 minutes": the labels decide (other rules)
        gold, pred = _frac_rate(gold), _frac_rate(pred)
        ng, np = _typeset_letter(gold, normalize(gold)), _typeset_letter(pred, normalize(pred))
        ng, np = _dollars(gold, ng, np), _dollars(pred, np, ng)
        ng, np = _after_preposition(gold, ng), _after_preposition(pred, np)
        if _percent_against_unit(ng, np) or _percent_against_unit(np, ng) or _scales_differ(ng, np):
            return False
        if (parse_literal(ng) is None) != (parse_literal(np) is None):
            # a unit stated on one side only is ignored: the number it states is the answer
            return True if stated and states_number(ng, np) else None
        g, p = quantity(ng, letter=True), quantity(np, letter=True)
        if g is None and p is not None:
            g = _named_power(ng, p) or _plain_litre(ng, p) or _plain_kelvin(ng, p) or _plain_inch(ng)
        elif p is None and g is not None:
            p = _named_power(np, g) or _plain_litre(np, g) or _plain_kelvin(np, g) or _plain_inch(np)
        if g is None or p is None:
            # against an upright symbol no quantity here reads, a plain "in" is an inch too ("8 in" and
            # "8\\,\\text{K}" differ)
            g_unit, p_unit = g or _plain_inch(ng), p or _plain_inch(np)
            differ = (
                _symbols_differ(ng, np)
                or _foreign_symbol(ng, p_unit)
                or _foreign_symbol(np, g_unit)
                # degrees against a unit of another kind ("8^\\circ" and "8 cm", "8 hours", "8 in")
                or _degrees_against_unit(ng, np, p)
                or _degrees_against_unit(np, ng, g)
                or _noun_against_unit(ng, np, p)
                or _noun_against_unit(np, ng, g)
            )
            return False if differ else None
        if g[1] != p[1]:
            return _differ(ng, np, g, p)
        if g[2] == p[2]:
            # one unit (a symbol against its word, "5 s" and "5 seconds"): the numbers, else the other rules
            return True if literals_equivalent(g[0], p[0]) else None
        return _convert(g, p)
    except Exception:
        return None
