"""check: every equivalence rule with positive cases and adversarial near-misses.

Each block below is one rule; the negative cases are the wrong answers a policy could produce
that a careless version of the rule would accept.
"""

from __future__ import annotations

from typing import Any

import pytest

from rewardhub.mathlib import Check, check
from rewardhub.mathlib.symbolic import agree_at_samples, parse_item

CASES = [
    # --- normalisation (presentation only) -------------------------------------------------
    # \left/\right and \dfrac
    ("\\left(\\dfrac{1}{2}, 3\\right)", "(\\frac12, 3)", True),
    # a \frac with an unbraced argument reads the next token
    ("\\frac{1+a+b+c}c", "\\dfrac{a + b + c + 1}{c}", True),
    # lost backslash (form feed) and doubled backslash repaired
    ("[\x0crac{1}{e}, 1)", "[\\frac{1}{e}, 1)", True),
    ("\\\\frac{\\\\pi}{2}", "\\frac{\\pi}{2}", True),
    # unicode symbols
    ("(-∞, -3) ∪ (3, +∞)", "(-\\infty, -3) \\cup (3, \\infty)", True),
    ("2 × 10^(-10)", "2 \\times 10^{-10}", True),
    ("2 × 10^(-10)", "2 \\times 10^{-11}", False),
    # HTML superscripts
    ("3<sup>x</sup>", "3^x", True),
    # circled choice numbers are a list of statement numbers
    ("②③", "2, 3", True),
    ("②③", "1, 2", False),
    # --- rational literals and the rounding rule -------------------------------------------
    ("\\frac{600}{7}", "85.71", True),
    ("\\frac{600}{7}", "85.72", False),
    ("30.52", "\\dfrac{1587}{52}", True),
    ("30.52", "\\dfrac{1687}{52}", False),
    # a prediction more precise than a decimal gold must be exact
    ("2.50", "2.5049", False),
    # --- numeric constants -----------------------------------------------------------------
    ("\\sqrt{8}", "2\\sqrt{2}", True),
    ("\\frac{\\log 2}{\\log 2-\\log 3}", "-\\frac{\\ln 2}{\\ln 3-\\ln 2}", True),
    ("10^{1/100}", "10^{0.01}", True),
    # tiny values must agree relatively, not absolutely (math-verify says True here)
    ("\\frac{1}{2004!}", "\\frac{1}{2006!}", False),
    ("\\frac{1}{2^{99}}", "\\frac{1}{2^{98}}", False),
    # huge exact integers compare exactly
    ("10^{100}", "10^{100}+1", False),
    # an irrational value vs a rounded decimal: rounding rule with 3 significant digits
    ("\\pi", "3.14", True),
    ("\\pi", "3.1", False),
    ("\\pi", "3", False),
    ("41.494", "17 + 10\\sqrt{6}", False),
    # 12:00 is not a ratio (12/0 is undefined and equals nothing)
    ("12:00", "1:00", False),
    # a ratio a:b is the number a/b
    ("5:8", "\\dfrac{5}{8}", True),
    ("5:8", "5:6", False),
    # --- percent ---------------------------------------------------------------------------
    ("62.5\\%", "\\dfrac{5}{8}", True),
    ("41.4\\%", "\\sqrt{2} - 1", True),
    ("41.4\\%", "28.5\\%", False),
    ("5\\%", "0.5", False),
    # --- answer lists: multisets -----------------------------------------------------------
    ("5,1", "1, 5", True),
    ("1,-1,7,-7", "-7, -1, 1, 7", True),
    # a missing element
    ("(0,2),(0,-2),(4,23),(4,-23)", "(0, 2), (0, -2), (4, 23)", False),
    # same numbers, different multiplicity
    ("1,1,2", "1,2,2", False),
    ("1,2", "1,1,2", False),
    # a leading group of 0 is no thousands separator: "0,100" lists 0 and 100
    ("0,100", "100", False),
    ("100", "0,100", False),
    ("-2,-2", "a = -2, \\ b = -2", True),
    # set braces and "and"/"or" separators
    ("-2,-1,1,2", "\\{-2, -1, 1, 2\\}", True),
    ("1,3", "1 \\text{ and } 3", True),
    ("1,3", "1 \\text{ and } 2", False),
    # an answer hedged with "or" is a two-element list, not the single gold
    ("2", "2 \\text{ or } 3", False),
    # --- tuples ----------------------------------------------------------------------------
    ("(6,3),(9,3),(9,5),(54,5)", "(9, 3), (6, 3), (54, 5), (9, 5)", True),
    # tuples are ordered
    ("(1,2),(3,4)", "(2,1),(3,4)", False),
    # a set literal is unordered: never a tuple or an interval with the same components
    ("(0, \\infty)", "\\{0, \\infty\\}", False),
    ("(1,2)", "\\{1, 2\\}", False),
    ("\\{1, 2\\}", "(1, 2)", False),
    ("(1,2),(3,4)", "\\{1,2\\},\\{3,4\\}", False),
    ("(1,2),(3,4)", "\\{(1,2),(3,4)\\}", True),
    # a single tuple against the bare list of its components, in order
    ("1,2,3", "(x, y, z) = (1, 2, 3)", True),
    ("1,2,3", "(x, y, z) = (1, 3, 4)", False),
    # a tuple label distributes over a tuple value
    ("$f(n)=n$, $g(n)=1$", "(f(n), g(n)) = (n, 1) \\text{ for all positive integers } n", True),
    ("$f(n)=n$, $g(n)=1$", "(f(n), g(n)) = (n, 2)", False),
    # a tuple label over a list of tuples is dropped
    (
        "(10^4, 10^3, 10^{10}),(10^2, 10^{-1}, 10^{-2})",
        "(x, y, z) = (10000, 1000, 10^{10}) \\text{ or } (100, 0.1, 0.01)",
        True,
    ),
    # --- \pm expansion ---------------------------------------------------------------------
    ("1 \\pm \\sqrt{19}", "1 + \\sqrt{19}, 1 - \\sqrt{19}", True),
    ("1 \\pm \\sqrt{19}", "1 + \\sqrt{19}", False),
    ("\\pm 2021", "2021", False),
    ("2021", "\\pm 2021", False),
    (
        "(\\sqrt{2}, 0, \\sqrt{2}), (\\sqrt{2}, 0, -\\sqrt{2}), (-\\sqrt{2}, 0, \\sqrt{2}), (-\\sqrt{2}, 0, -\\sqrt{2})",
        "(\\pm \\sqrt{2}, 0, \\pm \\sqrt{2})",
        True,
    ),
    ("(\\sqrt{2}, 0, \\sqrt{2}), (-\\sqrt{2}, 0, -\\sqrt{2})", "(\\pm \\sqrt{2}, 0, \\pm \\sqrt{2})", False),
    ("0, \\pm 1, \\pm 2", "\\{-2, -1, 0, 1, 2\\}", True),
    # --- labels (variable assignments) -----------------------------------------------------
    ("-3,0", "b=-3, c=0", True),
    ("-3,0", "b=-3, c=1", False),
    ("$g(x)=x^2-2x+2$", "x^2-2x+2", True),
    ("$m_{\\max }=n^{2}-n-1$", "n^2 - n - 1", True),
    ("x = y = z = \\frac{\\sqrt{2}}{2}", "\\frac{\\sqrt{2}}{2}", True),
    # a gold that names each value is a tuple: a bare list must keep its order
    ("x = 1, y = 2", "1, 2", True),
    ("x = 1, y = 2", "2, 1", False),
    ("(x, y) = (1, 2)", "2, 1", False),
    # ... but subscripts of one name number the solutions of one unknown
    ("x_1=-2, x_2=3", "3, -2", True),
    # both labelled: labels must match
    ("x = 2, y = 3", "x = 3, y = 2", False),
    ("x = 2", "y = 2", False),
    # word labels (four letters or more), "=" or ":"
    ("1,2", "Maximum = 2, Minimum = 1", True),
    ("1,3", "Minimum: 1, Maximum: 3", True),
    ("7,14,18", "Paolo: 18, Qing: 12, Rayna: 5", False),
    ("10,11,12,13,14,-2,-1,0,1,2", "Sequence 1: -2, -1, 0, 1, 2 and Sequence 2: 10, 11, 12, 13, 14", True),
    # "xy" is a product, not a label
    ("6", "xy = 6", False),
    # --- function labels: bound variables may be renamed -----------------------------------
    ("$f(z)=z$", "f(x)=x", True),
    ("$f(n) = 2 n+1007$", "f(m) = 2m + 1007", True),
    ("$f(n) = 2 n+1007$", "f(m) = 2m + 2014", False),
    # renaming must not capture a free variable
    ("f(x)=x^2", "f(t)=x^2", False),
    # one function named two ways: the label only names it (a bare x^2 equals either), so the
    # right-hand sides decide; a call's arguments are bound, a simple name stands for a call
    ("f(x)=x^2", "g(x)=x^2", True),
    ("y = x^2", "f(x) = x^2", True),
    ("f(x) = x^2", "y = x^2", True),
    ("f(x)=x^2", "g(t)=t^2", True),
    ("f(x, y) = x + y", "g(a, b) = a + b", True),
    ("y = 2x + 1", "f(x) = 2x + 1", True),
    ("y = x^2", "f(x) = x^3", False),
    ("f(x)=x^2", "g(t)=x^2", False),
    ("f(x)=x^2", "g(x, y)=x^2", False),
    # ... but a name that is the call's argument, or that its value mentions, is not the function
    ("x = 5", "f(x) = 5", False),
    # a constant value does not show that a simple name is a function (found in review: a = 5 equalled
    # f(b) = 5): it names a variable's value, as x = 5 and y = 5 stay apart; two calls are two names of
    # one constant function
    ("a = 5", "f(b) = 5", False),
    ("f(b) = 5", "a = 5", False),
    ("y = 5", "f(x) = 5", False),
    ("y = c + 1", "f(x) = c + 1", False),
    ("f(x) = 5", "g(t) = 5", True),
    ("z = x", "f(x, y) = x", True),
    ("f(x) = x + y", "y = x + y", False),
    # a prime is a derivative, not part of a name: f'(x) = x^2 says f(x) = x^3/3 (found in review);
    # a derivative named two ways is still one
    ("f(x) = x^2", "f'(x) = x^2", False),
    ("f'(x) = 2x", "f(x) = 2x", False),
    ("y = x^2", "f''(x) = x^2", False),
    ("y' = 2x", "f(x) = 2x", False),
    ("f'(x) = 2x", "g'(t) = 2t", True),
    ("y' = 2x", "f'(x) = 2x", True),
    # and the labels of a list of answers say which value is which
    ("f(x) = x, g(x) = x^2", "g(x) = x, f(x) = x^2", False),
    # --- qualifiers and units --------------------------------------------------------------
    # two quantities in different units of one dimension are converted (their numbers compared: 3 hours
    # was not 180 minutes, and was 3 minutes); a bare number never is
    ("3 hours", "180 minutes", True),
    ("180 \\text{ minutes}", "3 \\text{ hours}", True),
    ("3 hours", "3 minutes", False),
    ("\\frac{1}{2} \\text{ hour}", "30 min", True),
    ("5 \\text{ cm}", "50 \\text{ mm}", True),
    ("2 feet", "24 inches", True),
    ("1 kg", "1000 grams", True),
    ("1 pound", "16 ounces", True),
    ("80 minutes", "1.33 hours", True),  # rounded to 3 significant digits
    ("80 minutes", "1.3 hours", False),
    ("3 hours", "180", False),
    ("180", "3 hours", False),
    ("15th Day", "360 hours", False),  # an ordinal: a day, not 15 days
    # units of different dimensions differ whatever the numbers (their units were dropped: 3 = 3)
    ("3 hours", "3 meters", False),
    ("3 \\text{ kg}", "3 \\text{ hours}", False),
    ("2 feet", "2 pounds", False),
    # a lone "m" is metres only against another length unit (elsewhere it may be minutes or a variable)
    ("1 km", "1000 m", True),
    ("1000 m", "1 km", True),
    ("1 km", "100 m", False),
    ("250 cm", "2.5 m", True),
    ("3 m", "3 hours", False),
    # typeset, the metre was dropped by normalisation: 1 km against 1000 (0)
    ("1 \\text{ km}", "1000 \\text{ m}", True),
    ("1000\\,\\mathrm{m}", "1 km", True),
    ("1 \\text{ km}", "100 \\text{ m}", False),
    ("2 \\text{ km}", "2000 \\text{ m}^2", False),
    # a unit stated on one side only is ignored (Math-Verify and Qwen's grader read the number): a
    # one-letter symbol after a space, s m g h, scored 0 against its bare number (read as 5 times s)
    ("1000", "1000 m", True),
    ("1000 m", "1000", True),
    ("1000 \\text{ m}", "1000 m", True),
    ("1000", "1000\\,\\text{m}", True),
    ("1000 \\mathrm{m}", "1000", True),
    ("5", "5 s", True),
    ("5 s", "5", True),
    ("5", "5 s.", True),
    ("3.5", "3.5 h", True),
    ("-3", "-3 m", True),
    ("\\frac{1}{2}", "\\frac{1}{2} h", True),
    ("5 \\text{ g}", "5 g", True),
    ("5", "6 s", False),
    ("1000", "1 km", False),  # the number it states is 1
    ("1 \\text{ km}", "1000", False),
    ("1", "1 km", True),
    # ... a letter that is not a unit symbol is a variable, and one glued to its number a product
    ("5", "5 x", False),
    ("5", "5 n", False),
    ("5", "5m", False),
    ("5 m", "5m", True),
    # ... a letter with a power may be a variable's (5 m^2 is 5m^2 in TeX); a unit word's power is a unit's
    ("5", "5 m^2", False),
    ("5", "5 cm^2", True),
    ("25", "5 cm^2", False),
    # ... a rate of unit symbols too (they scored 0 where "5 miles per hour" scored 1)
    ("5", "5 m/s", True),
    ("5", "5 \\text{ km/h}", True),
    ("6", "5 m/s", False),
    ("5", "5 x/y", False),
    # ... after a label, in a list or a tuple too (a typeset unit was dropped there, a plain symbol was not)
    ("1000", "d = 1000 m", True),
    ("5", "v = 5 m/s", True),
    ("1000, 2", "1000 m, 2 s", True),
    ("1000, 2", "1000 m, 3 s", False),
    ("(1, 2)", "(1 m, 2 m)", True),
    ("5", "t = 5 x", False),
    # ... but a number whose unit word was dropped is no bare number: 3 hours is not 3 m, in a list either
    ("3 hours, 2", "3 m, 2", False),
    ("x = 3 hours", "x = 3 m", False),
    ("5 hours", "5 m/s", False),
    # percent in words is the percent sign: "20 percent" scored 0 against 20 (20\\% scored 1)
    ("20", "20 percent", True),
    ("20 \\text{ percent}", "20", True),
    ("0.2", "20 percent", True),
    ("20\\%", "20 per cent", True),
    ("0.2", "20 per cent", True),
    ("21", "20 percent", False),
    ("20", "20 percentage points", False),
    # degrees and dollars, as before
    ("30", "30 \\text{ degrees}", True),
    ("5", "\\$5", True),
    ("5", "5 \\text{ dollars}", True),
    # a unit symbol against a unit of its dimension is converted, typeset or not (the typeset letter was
    # dropped: "5 \\text{ s}" equalled "5 minutes"; "5 s" was not "5 seconds")
    ("5 s", "5 seconds", True),
    ("1 h", "60 min", True),
    ("1000 g", "1 kg", True),
    ("60 \\text{ s}", "1 minute", True),
    ("1 \\text{ h}", "60 minutes", True),
    ("5 \\text{ s}", "5 minutes", False),
    ("5 s", "5 minutes", False),
    ("3 s", "3 meters", False),
    # ... and one of another dimension differs, typeset too (the typeset s was dropped: "5 \\text{ s}" was 5
    # meters); an m against a time is left alone (it may be minutes)
    ("5 \\text{ s}", "5 meters", False),
    ("2 \\text{ g}", "2 hours", False),
    ("5 m", "5 kg", False),
    # ... a typeset symbol too: normalisation dropped it, and the two numbers were equal (both 1); an m
    # against a time is metres or minutes, and differs where neither reading is equal
    ("1000 \\text{ m}", "1000 \\text{ s}", False),
    ("5 \\mathrm{m}", "5 \\mathrm{s}", False),
    ("2 \\text{ g}", "2 \\text{ s}", False),
    ("3 \\text{ m}", "3 hours", False),
    ("1000 m", "1000 s", False),
    ("1 \\text{ h}", "3600 \\text{ s}", True),
    ("1 \\text{ h}", "360 \\text{ s}", False),
    ("1 \\text{ m}", "60 \\text{ s}", False),
    # ... two different upright symbols after one number are two units (5 amperes are not 5 volts), but
    # the case of one letter is left alone (litres: "l" and "L")
    ("5 \\text{ A}", "5 \\text{ V}", False),
    ("5 \\text{ L}", "5 \\text{ l}", True),
    ("5", "5 \\text{ A}", True),
    # ... in a list or after a function's label too; a unit stated on one side only is still ignored there
    ("(1 \\text{ m}, 2 \\text{ s})", "(1 \\text{ s}, 2 \\text{ m})", False),
    ("f(x) = 5 \\text{ m}", "f(x) = 5 \\text{ s}", False),
    ("(1 \\text{ m}, 2 \\text{ m})", "(1, 2 \\text{ m})", True),
    ("(1 \\text{ m}, 2 \\text{ s})", "(1 \\text{ m}, 2 \\text{ s})", True),
    (
        "5" + ",5\\,\\text{m}" * 2500,
        "5" + ",5\\,\\text{s}" * 2500,
        False,
    ),  # past quick_check's 20,000 characters
    # a unit word's power is a dimension: an area is no time nor length (the unit was dropped: both 1), and
    # converts as its unit squared
    ("5 \\text{ cm}^2", "5 hours", False),
    ("5 \\text{ cm}^2", "5 cm", False),
    ("5 \\text{ m}^2", "5 \\text{ m}", False),
    ("5 \\text{ m}^2", "5 hours", False),
    ("1 cm^2", "100 mm^2", True),
    ("5 \\text{ cm}^2", "500 \\text{ mm}^2", True),
    ("1 cm^2", "10 mm^2", False),
    ("1 \\text{ m}^2", "10000 \\text{ cm}^2", True),
    # a rate of known units converts (5 m/s is 18 km/h: both scored 0), one of another dimension differs
    ("5 m/s", "18 km/h", True),
    ("18 \\text{ km/h}", "5 \\text{ m/s}", True),
    ("5 m/s", "5 km/h", False),
    ("5 m/s", "18 km/s", False),
    ("5 m/s", "5 m", False),
    ("5 m/s", "5 s", False),
    # ... written in words too (they scored 0 whatever the numbers, 60 km/h against 60 miles per hour: 0 too)
    ("60 miles per hour", "1 mile per minute", True),
    ("1 mile per minute", "96.56064 km/h", True),
    ("60 miles per hour", "60 km/h", False),
    ("5", "5 miles per hour", True),
    # after one label, or a label on one side only, as in a whole answer (t = 3 hours was t = 3 minutes)
    ("3 hours", "t = 180 minutes", True),
    ("t = 3 hours", "t = 180 minutes", True),
    ("t = 3 hours", "t = 3 minutes", False),
    ("t = 3 hours", "3 minutes", False),
    ("3 hours", "t = 3 minutes", False),
    ("t = 3 hours", "t = 3 meters", False),
    ("d = 1000 \\text{ m}", "d = 1000 \\text{ s}", False),
    ("x = 3 hours", "t = 180 minutes", False),
    # ... in a list too (the items' units were dropped: 3 hours, 2 was 3 minutes, 2), matched in any order
    ("3 hours, 2", "3 minutes, 2", False),
    ("3 hours, 2", "180 minutes, 2", True),
    ("3 hours, 2 minutes", "2 minutes, 180 minutes", True),
    ("x = 3 hours, y = 2 km", "x = 3 minutes, y = 2 km", False),
    ("x = 3 hours, y = 2 km", "y = 2 km, x = 180 minutes", True),
    ("3 hours, 2", "3, 2", True),
    ("7 goats, 4 apples", "7, 4", True),
    ("15th Day, 2", "360 hours, 2", False),  # an ordinal: a day, not 15 days
    ("x = 3 hours, y = 2", "3 minutes, 2", False),  # labels on one side: a tuple in order
    ("x = 3 hours, y = 2", "180 minutes, 2", True),
    # ... a typeset symbol's unit too, in a list or a tuple (normalisation dropped it before the split: the
    # item 5 against 5 hours scored 1); an m against a time differs where neither metres nor minutes equal it
    ("(5 \\text{ m}, 2)", "(5 hours, 2)", False),
    ("5 \\text{ m}, 2", "5 hours, 2", False),
    ("\\{5 \\text{ m}, 2\\}", "\\{5 hours, 2\\}", False),
    ("x = 5 \\text{ m}, y = 2", "x = 5 hours, y = 2", False),
    ("x = 5 \\text{ m}, y = 2", "5 hours, 2", False),
    ("(5 \\text{ m}, 2)", "5 hours, 2", False),
    ("5 \\text{ s}, 2", "5 m, 2", False),
    ("(5 \\text{ s}, 2)", "(5 meters, 2)", False),
    ("5 \\text{ m}, 2", "2, 5 hours", False),
    ("5 \\text{ m}, 2", "5 minutes, 2", True),  # 5 minutes, read so
    ("(5 \\text{ m}, 2)", "(5 minutes, 2)", True),
    ("5 \\text{ m}, 2", "5 meters, 2", True),
    ("(5 \\text{ m}, 2)", "(5 meters, 2)", True),
    ("(5 \\text{ m}, 2)", "(6 meters, 2)", False),
    ("5 \\text{ m}, 2", "5, 2", True),  # a unit on one side only is ignored
    ("(5 \\text{ m}, 2)", "(5, 2)", True),
    ("5 \\text{ m}, 2 \\text{ s}", "2 \\text{ s}, 5 \\text{ m}", True),
    ("5 \\text{ m}, 2 \\text{ s}", "5 \\text{ m}, 2 hours", False),
    ("1 \\text{ h}, 2", "60 minutes, 2", True),
    # a typeset rate split in two groups ("5 \\text{ m}/\\text{s}" normalised to "5 /s") is 5 m/s
    ("5 \\text{ m}/\\text{s}", "18 km/h", True),
    ("5 \\text{ m}/\\text{s}", "5", True),
    ("5 \\text{ m}/\\text{s}", "5 m/s", True),
    ("5 \\text{ m}/\\text{s}", "5 km/h", False),
    ("5 \\text{ m}/\\text{s}", "5 hours", False),
    ("5 \\text{ m}/\\text{s}", "6", False),
    ("5 \\text{ m}/\\text{x}", "5", False),  # x is no unit
    # a plain symbol's power is a unit's where the other side states that power in a unit (an area: 2000000m
    # squared is no answer in square kilometres); a volume is a length cubed (a litre is 1,000 cm^3)
    ("2 km^2", "2000000 m^2", True),
    ("2\\text{ km}^2", "2000000 m^2", True),
    ("1 m^2", "10000 cm^2", True),
    ("1\\,\\text{m}^2", "10000 cm^2", True),
    ("9.8 m/s^2", "9.8 meters/second^2", True),
    ("1000\\,\\text{cm}^3", "1 L", True),
    ("1 L", "1000 mL", True),
    ("1 m^3", "1000 liters", True),
    ("1\\,\\text{l}", "1000 mL", True),  # litres' upright l
    ("5 L", "5", True),  # a unit on one side only
    ("2 km^2", "2000 m", False),
    ("2 km^2", "2 km", False),
    ("2 km^2", "2 m^2", False),
    ("1 L", "1 mL", False),
    ("1\\,\\text{cm}^3", "2 mL", False),
    ("9.8 m/s^2", "9.8", False),
    ("2 l", "2", False),  # a plain l is too like a 1 to be a unit
    # an upright symbol of no unit known here is not a known unit word (x is a variable or another unit);
    # against a bare number it is a unit on one side only
    ("5\\,\\text{x}", "5 hours", False),
    ("5\\,\\text{A}", "5 hours", False),
    ("5\\,\\text{t}", "5 kg", False),
    ("5\\,\\text{x}, 2", "5 hours, 2", False),
    ("5\\,\\text{x}", "5", True),
    ("1\\,\\text{l}", "1 liter", True),
    # a week's wk and (typeset upright after a number) a day's d are units (math 1.1.15): 5\\,\\text{d} was
    # not 5 days, and 5 wk (a word of no known unit, dropped) was 5 hours
    ("5 days", "5\\,\\text{d}", True),
    ("5 \\text{ days}", "5\\,\\mathrm{d}", True),
    ("2 weeks", "14\\,\\text{d}", True),
    ("1\\,\\text{d}", "24 hours", True),
    ("35 days", "5 wk", True),
    ("2 wks", "14 days", True),
    ("5 hours", "5 wk", False),
    ("5 hours", "5\\,\\text{d}", False),
    ("5 weeks", "5\\,\\text{d}", False),
    ("5\\,\\text{d}", "5\\,\\text{s}", False),
    ("5 days", "5 d", False),  # a plain d is a variable (or a differential), as 5d is
    # ... D and w are no unit symbols (D is no day, W a watt)
    ("5 days", "5\\,\\text{D}", False),
    ("5 weeks", "5\\,\\text{w}", False),
    # months and years are units (math 1.1.15) of no fixed number of days: converted among themselves, not
    # to days, weeks or hours (5 years was dropped as an unknown word and scored as 5 days)
    ("1 year", "12 months", True),
    ("2 decades", "20 years", True),
    ("1 century", "100 years", True),
    ("60 months", "5 yrs", True),
    ("5 years", "5", True),  # a unit on one side only
    ("5 days", "5 years", False),
    ("5 years", "5 days", False),
    ("5 weeks", "5 months", False),
    ("2 hours", "2 years", False),
    ("3 m", "3 years", False),  # metres or minutes, no years
    ("2 decades", "2 years", False),
    ("1 year", "365 days", False),  # no fixed conversion: not a guess either way
    ("5 \\text{ years}, 2", "5 \\text{ days}, 2", False),
    # a differential is no unit word (math 1.1.15): 5\\,\\mathrm{d}x normalises to 5 dx, which was dropped to 5
    ("5 days", "5 dx", False),
    ("5", "5\\,\\mathrm{d}x", False),
    ("5", "5 dt", False),
    ("5 dx", "5 dx", True),
    ("5 dm", "5", True),  # d before a unit's letter stays a unit word (decimetres)
    # a known unit against a word that names no unit is two answers (math 1.1.15: the word was dropped as a
    # count noun); a count noun against a bare number, or against another unknown word, is still dropped
    ("3 hours", "3 apples", False),
    ("3 apples", "3 hours", False),
    ("10 cm", "10 cats", False),
    ("t = 3 hours", "3 apples", False),
    ("3 hours, 2", "3 apples, 2", False),
    ("3 \\text{ hours}", "3 \\text{ apples}", False),
    ("3\\,\\text{s}", "3 sides", False),  # an upright symbol is a unit
    ("12 apples", "12", True),
    ("12", "12 apples", True),
    ("12 apples", "12 oranges", True),
    ("5 hours", "300 minutes", True),
    ("3 hours", "3 units", True),  # a placeholder for the unit
    ("10 cm", "10 cms", True),  # a known unit's plural
    ("60 mph", "60 miles per hour", True),
    ("3 inches", "3 in", True),  # spellings of units not read here are left alone
    ("5 kg", "5 kilos", True),
    ("6 s", "6 sides", True),  # a plain letter may be a variable: a unit only against another unit
    # a plain l is litres against a volume (math 1.1.15: it was no unit, and "3 l" against "3 litres" 0)
    ("3 litres", "3 l", True),
    ("3 l", "3 liters", True),
    ("1500 ml", "1.5 l", True),
    ("3 liters, 2", "3 l, 2", True),
    ("3 litres", "3 m", False),
    ("3 litres", "4 l", False),
    ("3 l", "3 m", False),
    ("1.5 kg", "1.5 l", False),
    ("2 l", "2", False),  # against no volume, still too like a 1
    ("2 liters", "2l", False),  # a product
    # square and cubic units in words (math 1.1.15: "25 square meters" was no quantity against "25 m^2")
    ("25 square meters", "25 m^2", True),
    ("25 m^2", "25 square meters", True),
    ("25 cm^2", "25 square centimeters", True),
    ("25 cm^2", "25 sq cm", True),
    ("25 square feet", "25 sq. ft.", True),
    ("25 ft^2", "25 sq ft", True),
    ("25 m^3", "25 cubic meters", True),
    ("1000 liters", "1 cubic meter", True),
    ("0.25 m^2", "2500 sq cm", True),
    ("3 km^2", "3 square kilometres", True),
    ("25 m", "25 square meters", False),
    ("25 square meters", "25 meters", False),
    ("25 m^2", "25 cubic meters", False),
    ("25 sq ft", "25 ft", False),
    ("25 square meters", "25", True),  # a unit on one side only
    ("5", "5 square units", True),
    # cents are hundredths of a dollar, a dollar amount's sign its unit against cents (math 1.1.15: "50
    # cents" against "\\$0.50" scored 0, against "\\$50" 1)
    ("\\$0.50", "50 cents", True),
    ("50 cents", "\\$0.50", True),
    ("$0.50", "50 cents", True),
    ("0.5 dollars", "50 cents", True),
    ("200 cents", "\\$2", True),
    ("\\$50", "50 cents", False),
    ("50 cents", "\\$50", False),
    ("\\$10", "10 cents", False),
    ("50 dollars", "50 cents", False),
    ("2 hours", "2 cents", False),
    ("50", "50 cents", True),
    ("\\$10", "10", True),
    ("\\$10", "10 dollars", True),
    # a rate in one word converts (math 1.1.15: "60 mph" against "96.56064 km/h" scored 0, against "60 kph" 1)
    ("96.56064 km/h", "60 mph", True),
    ("60 km/h", "60 kph", True),
    ("50 m/s", "180 kmh", True),
    ("60 kph", "60 mph", False),
    ("8.04672 km", "5 mi", True),
    ("3 apples", "3 mph", False),
    # inches squared or cubed, unit powers in superscript digits (math 1.1.16: "8 cubic inches" against "8
    # in^3", or "8 ft^2" against "8 ft²", scored 0; "8 \\text{ in}^2" against "8 cubic inches" 1, both 8
    # once the unit words were dropped). "in" is an inch only with its power or after square/cubic words:
    # a bare "3 in" is a preposition as often, and stays an unknown spelling
    ("8 cubic inches", "8 in^3", True),
    ("8 in^3", "8 cubic inches", True),
    ("8 in^3", "8 \\text{ cubic inches}", True),
    ("8 cubic inches", "8 \\text{ in}^3", True),
    ("8 in^3", "8 cu in", True),
    ("8 \\text{ in}^3", "8 cu. in.", True),
    ("8 square inches", "8 in^2", True),
    ("8 sq in", "8 \\text{in}^2", True),
    ("8 square feet", "8 ft²", True),
    ("8 cubic feet", "8 ft³", True),
    ("8 cubic centimeters", "8 cm³", True),
    ("8 square meters", "8 m²", True),
    ("8 cubic meters", "8 m³", True),
    ("8 m^2", "8 m²", True),
    ("8 \\text{ cm}^3", "8 cm³", True),
    ("1 ft^3", "1728 in^3", True),
    ("1 ft²", "144 sq in", True),
    ("x^2 + 1", "x² + 1", True),  # superscript digits are a power anywhere
    ("10^{-3}", "10⁻³", True),
    ("2^{10}", "2¹⁰", True),
    ("8 in^2", "8 cubic inches", False),
    ("8 \\text{ in}^2", "8 cubic inches", False),
    ("8 cubic inches", "8 in²", False),
    ("9 in^3", "8 cubic inches", False),
    ("8 cubic inches", "9 in³", False),
    ("8 ft²", "8 ft", False),
    ("8 ft²", "8 ft³", False),
    ("8 m²", "8 m³", False),
    ("8 cm³", "8 m³", False),
    ("2¹⁰", "2^{11}", False),
    ("x² + 1", "x^3 + 1", False),
    ("3 inches", "3 in", True),  # still an unknown spelling, left to the other rules
    # acres are areas (math 1.1.16: "1 acre" against "43560 ft^2" scored 0, an unknown word against a unit)
    ("3 acres", "3 acre", True),
    ("3 acres", "3\\text{ acres}", True),
    ("3\\text{ acres}", "3 acre", True),
    ("1 acre", "43560 ft^2", True),
    ("1 acre", "43,560 square feet", True),
    ("2 acres", "87120 sq ft", True),
    ("43560 ft²", "1 acre", True),
    ("3 acres", "4 acres", False),
    ("3 acres", "4 \\text{ acres}", False),
    ("1 acre", "43560 ft", False),
    ("1 acre", "43561 ft^2", False),
    ("3 acres", "3 ft^2", False),
    ("3 acres", "3 hours", False),
    ("3 acres", "3", True),  # a unit on one side only
    # the cent sign (math 1.1.16: "50¢" against "50 cents" or "\\$0.50" scored 0)
    ("50 cents", "50¢", True),
    ("50¢", "50 cents", True),
    ("50 ¢", "50 cents", True),
    ("50 \\text{¢}", "50 cents", True),
    ("50\\textcent", "50 cents", True),
    ("\\$0.50", "50¢", True),
    ("50¢", "\\$0.50", True),
    ("50 ¢", "\\$0.50", True),
    ("\\$1.25", "125¢", True),
    ("50¢", "50", True),  # a unit on one side only, as "50 cents" against 50
    ("50¢", "\\$50", False),
    ("\\$50", "50¢", False),
    ("50¢", "51 cents", False),
    ("50¢", "\\$0.05", False),
    ("50¢", "50 dollars", False),
    # dollar signs in a list or a tuple are the bare numbers, as a lone "\\$3" is "3" (already so: guards)
    ("\\$3, \\$5", "3, 5", True),
    ("3, 5", "\\$3, \\$5", True),
    ("(\\$3, \\$5)", "(3,5)", True),
    ("(3, 5)", "(\\$3, \\$5)", True),
    ("\\$3, \\$5", "\\$5, \\$3", True),
    ("\\$3, \\$5", "3, 6", False),
    ("(\\$3, \\$5)", "(5,3)", False),
    ("\\$3 and \\$5", "3, 5", True),
    ("x = \\$3, y = \\$5", "x = 3, y = 5", True),
    ("\\$3, \\$5", "3 dollars, 5 dollars", True),
    ("[\\$3, \\$5]", "[3, 5]", True),
    # ... and, as a whole answer's, dollar amounts against cents (math 1.1.16: "50 cents, 2" against "\\$50, 2"
    # scored 1, the item's dollar sign dropped, and against "\\$0.50, 2" 0)
    ("50 cents, 20 cents", "\\$0.50, \\$0.20", True),
    ("\\$0.50, \\$0.20", "50 cents, 20 cents", True),
    ("50 cents, 2", "\\$0.50, 2", True),
    ("(50 cents, 2)", "(\\$0.50, 2)", True),
    ("(\\$0.50, 2)", "(50¢, 2)", True),
    ("50 cents, 2", "\\$50, 2", False),
    ("\\$50, 2", "50 cents, 2", False),
    ("(50 cents, 2)", "(\\$50, 2)", False),
    ("50¢, 2", "\\$50, 2", False),
    ("(50¢, 2)", "(\\$50, 2)", False),
    ("50 cents, 20 cents", "\\$50, \\$20", False),
    ("\\$1,200", "1200", True),  # one amount in thousands groups
    ("\\$3, 2", "3 apples, 2", True),  # against no money, a dollar amount is its number
    # a converted quantity agrees at the answer's own precision (math 1.1.16): the prediction rounded in its
    # unit as a literal against the exact conversion (3 significant digits at least, as everywhere: "97"
    # against 96.56 is no rounding, nor "97 km/h" against 60 mph, 96.56064 km/h), a whole number too ("161
    # km/h" for 100 mph scored 0); and a decimal gold against an exact prediction in another unit, converted
    # to the gold's: "96.56 km/h" against "60 mph" scored 0 (as "0.33" against 1/3 is 1)
    ("60 mph", "96.56 km/h", True),
    ("60 mph", "96.6 km/h", True),
    ("100 mph", "161 km/h", True),
    ("1 mile", "1609 m", True),
    ("1 lb", "454 g", True),
    ("96.56 km/h", "60 mph", True),
    ("96.6 km/h", "60 mph", True),
    ("1.61 km", "1 mile", True),
    ("96.56 km/h", "60.0 mph", True),
    ("60 mph", "97 km/h", False),  # 2 significant digits: too few to be a rounding
    ("60 mph", "90 km/h", False),
    ("60 mph", "100 km/h", False),
    ("60 mph", "96.5 km/h", False),
    ("60 mph", "96.57 km/h", False),
    ("60 mph", "97.0 km/h", False),
    ("100 mph", "160 km/h", False),
    ("100 mph", "162 km/h", False),
    ("97 km/h", "60 mph", False),  # 60 mph is 96.56 km/h: no 97
    ("96.5 km/h", "60 mph", False),
    ("96.56 km/h", "60.001 mph", False),  # a finer prediction than the gold must match it exactly
    ("96.56 km/h", "59.9 mph", False),
    ("1 inch", "2.5 cm", False),
    ("5 mi", "8 km", False),
    ("3 hours", "10900 s", False),
    ("3 hours", "11000 s", False),
    ("2 hours", "121 minutes", False),
    # a rate's units typeset as a fraction are the rate (math 1.1.17: "96.56 \\frac{\\text{km}}{\\text{h}}"
    # against "60 mph" scored 0; against "96.56 km/h" sympy read the letters as symbols and agreed), with the
    # slash's rules: a bare number states it, and a symbol's power is read only as a typeset slash's is
    ("60 mph", "96.56 \\frac{\\text{km}}{\\text{h}}", True),
    ("60 mph", "96.56 \\dfrac{\\text{km}}{\\text{h}}", True),
    ("60 mph", "96.56\\,\\tfrac{\\text{km}}{\\text{h}}", True),
    ("60 mph", "96.56 \\frac{km}{h}", True),
    ("96.56 \\frac{\\text{km}}{\\text{h}}", "60 mph", True),
    ("96.56 km/h", "96.56 \\frac{\\text{km}}{\\text{h}}", True),
    ("100 mph", "$161 \\frac{\\mathrm{km}}{\\mathrm{h}}$", True),
    ("18 km/h", "5 \\frac{\\text{m}}{\\text{s}}", True),
    ("5 \\frac{m}{s}", "18 km/h", True),
    ("980 cm/sec^2", "9.8 \\frac{\\mathrm{m}}{\\mathrm{s}^2}", True),
    ("96.56", "96.56 \\frac{\\text{km}}{\\text{h}}", True),
    ("60 mph", "97 \\frac{\\text{km}}{\\text{h}}", False),
    ("96.56 km/h", "96.56 \\frac{\\text{km}}{\\text{s}}", False),
    ("60 mph", "96.56 \\frac{\\text{km}}{\\text{s}}", False),
    ("18 km/h", "5 \\frac{\\text{m}}{\\text{min}}", False),
    ("96.56 km/h", "96.56 \\frac{\\text{km}}{\\text{h}^2}", False),
    ("48", "\\frac{96}{2}", True),  # a fraction of numbers keeps its value
    ("96", "\\frac{96}{2}", False),
    ("96 km/h", "\\frac{96}{2} km/h", False),
    ("3 hours", "3 \\frac{x}{y}", False),
    # a dollar amount in thousands groups is one number in a list too (math 1.1.17: "\\$1,200, \\$5" split
    # into 1, 200 and 5); without the sign a list's "1,200" is as ambiguous as before (1 and 200 is read)
    ("1200, 5", "\\$1,200, \\$5", True),
    ("(1200, 5)", "(\\$1,200, \\$5)", True),
    ("\\$1,200, \\$5", "1200, 5", True),
    ("1200.5, 5", "\\$1,200.50, \\$5", True),
    ("\\$1,200, \\$5", "1200, 5 dollars", True),
    ("1, 200, 5", "\\$1,200, \\$5", False),  # 1 before (the amount's groups were two items)
    ("12, 5", "\\$1,200, \\$5", False),
    ("1200, 5", "\\$1,200, \\$6", False),
    ("1200, 5", "1,200, 5", False),
    ("1, 200, 5", "1,200, 5", True),
    ("1200", "1,200", True),
    # ... and keeps its sign as its unit against cents, as an amount without groups does (math 1.1.18: "\\$1,200,
    # \\$300" against "120000 cents, 30000 cents" scored 0, and "\\$1,200, 5" against "1200 cents, 5" 1: the
    # amount was its bare number 1200)
    ("\\$1,200, \\$300", "120000 cents, 30000 cents", True),
    ("120000 cents, 30000 cents", "\\$1,200, \\$300", True),
    ("\\$1,200.50, \\$300", "120050 cents, 30000 cents", True),
    ("120000 cents, 5", "\\$1,200, 5", True),
    ("1200 cents, 5", "\\$1,200, 5", False),
    ("\\$1,200, 5", "1200 cents, 5", False),
    ("(\\$1,200, 5)", "(1200 cents, 5)", False),
    ("\\$1,200, \\$300", "1200 cents, 300 cents", False),
    ("\\$1,200, \\$300", "\\$1,200, \\$300", True),
    ("\\$1,200, \\$300", "\\$300, \\$1,200", True),
    ("\\$1,200, \\$300", "1200, 300", True),
    ("\\$1,200, \\$300", "\\$1200, \\$300", True),
    ("(\\$1,200, \\$300)", "(1200, 300)", True),
    ("\\$1,200, \\$300", "\\$1,300, \\$200", False),
    ("\\$1,200, \\$300", "\\$1,200, \\$301", False),
    ("\\$1,200", "1200", True),
    ("\\$1,200.50", "\\$1200.5", True),
    ("\\$1200.5", "\\$1,200.50", True),
    ("\\$1,200.50, \\$300", "\\$1200.5, \\$300", True),
    ("\\$1,200.50, 3", "\\$1200.05, 3", False),
    # a converted quantity compares as a plain number: the gold, in the prediction's unit, is the literal that
    # writes it exactly, a decimal that a whole number may round (1 mile is 1609.344 m: "1609 m", as 1609 for
    # 1609.344), or a fraction that it may not (math 1.1.18: "143 weeks" against "1000 days", 1000/7 weeks,
    # scored 1, as 143 against \\frac{1000}{7} does not; a day off in a thousand)
    ("1000 days", "143 weeks", False),
    ("2000 days", "286 weeks", False),
    ("\\frac{1000}{7}", "143", False),
    ("1000 days", "142.86 weeks", True),
    ("1000 days", "142.9 weeks", True),
    ("143 weeks", "1000 days", False),
    ("143 weeks", "1001 days", True),
    ("1001", "1000", False),
    ("7 days", "1 week", True),
    ("1 week", "7 days", True),
    ("90 minutes", "1.5 hours", True),
    ("1.5 hours", "90 minutes", True),
    ("1 min", "60 s", True),
    ("1 km", "1000 m", True),
    ("1000 m", "1 km", True),
    ("1 km", "1001 m", False),
    ("1 week", "168 hours", True),
    ("1 week", "169 hours", False),
    # the inch's plain "in" ending an answer is an inch against a length in a unit (math 1.1.18: "8 in" against
    # "8 cm" or "8 ft" scored 1, the word dropped, and against "20.32 cm" 0); against a bare number it is a
    # unit on one side only, and "8 in total" no quantity (a sentence's "in")
    ("8 in", "8 cm", False),
    ("8 cm", "8 in", False),
    ("8 in", "8 ft", False),
    ("8 in", "8 m", False),
    ("8 \\text{ in}", "8 \\text{ cm}", False),
    ("8 in, 2", "8 cm, 2", False),
    ("8 in", "20.32 cm", True),
    ("20.32 cm", "8 in", True),
    ("2 ft", "24 in", True),
    ("24 in", "2 ft", True),
    ("(8 in, 2)", "(20.32 cm, 2)", True),
    ("8 in", "8 inches", True),
    ("8 inches", "8 in", True),
    ("8 inches", "8 in.", True),
    ("8 \\text{ in}", "8 inches", True),
    ("8 in, 2", "8 inches, 2", True),
    ("8 in", "9 inches", False),
    ("1 ft", "13 in", False),
    ("8 in", "8", True),
    ("8", "8 in", True),
    ("8 cm", "8", True),
    ("8", "8 in total", True),
    ("8 cm", "8 in total", True),
    ("8 inches", "8 in total", True),
    # ... and against a unit of another dimension too, which it differs from (math 1.1.19: "8 in" against "8
    # hours", "8 kg", "8 L", "8 cm^2", "8 mph", "8 cents", "8^\\circ", "8\\,\\text{s}" scored 1, the word
    # dropped): an answer's number ending in "in" is an inch, not the start of a lost phrase. Against a bare
    # number, a count noun or a dollar amount (read as a bare number against anything but money, as "\\$8"
    # against "8 cm") nothing states another unit, and where words follow it, or precede the number, the "in"
    # is a preposition
    ("8 hours", "8 in", False),
    ("8 in", "8 hours", False),
    ("8 hours", "8\\text{ in}", False),
    ("8 hours", "8 \\mathrm{in}", False),
    ("8 hours", "8 in.", False),
    ("8 minutes", "8 in", False),
    ("8 s", "8 in", False),
    ("8\\,\\text{s}", "8 in", False),
    ("8 years", "8 in", False),
    ("8 kg", "8 in", False),
    ("8 in", "8 pounds", False),
    ("8 liters", "8 in", False),
    ("8 cubic inches", "8 in", False),
    ("8 cm^2", "8 in", False),
    ("8 in^2", "8 in", False),
    ("8 acres", "8 in", False),
    ("8 mph", "8 in", False),
    ("8 dollars", "8 in", False),
    ("8 cents", "8 in", False),
    ("8^\\circ", "8 in", False),
    ("8 °C", "8 in", False),
    ("8 in", "8 degrees", False),
    ("8\\,\\text{K}", "8 in", False),
    ("t = 8 hours", "8 in", False),
    ("8 hours", "t = 8 in", False),
    ("8 hours, 2", "8 in, 2", False),
    ("8 hours", "8", True),
    ("8", "8 hours", True),
    ("8 hours", "8 in total", True),
    ("8 hours", "8 in the box", True),
    ("8 hours", "8 in each row", True),
    ("8", "8 in each row", True),
    ("8 hours", "8 hours in total", True),
    ("8 apples", "8 in", True),
    ("\\$8", "8 in", True),
    ("8 in", "8\\text{ inches}", True),
    # degrees, an angle's or a temperature's, against a unit of another kind differ (math 1.1.19: "8^\\circ"
    # against "8 cm", "8 hours", "8 kg" or "8 dollars" scored 1, both units dropped); against a bare number, a
    # dollar amount read as one or a count noun nothing states another unit, and radians still convert
    ("8 cm", "8^\\circ", False),
    ("8 hours", "8^\\circ", False),
    ("8^\\circ", "8 hours", False),
    ("8°", "8 cm", False),
    ("8 inches", "8 °C", False),
    ("8 °C", "8 inches", False),
    ("8 hours", "8 degrees Celsius", False),
    ("8 dollars", "8^\\circ", False),
    ("8 m", "8^\\circ", False),
    ("8\\,\\text{m}", "8^\\circ", False),
    ("8^\\circ", "8\\,\\text{K}", False),
    ("90^\\circ", "90 min", False),
    ("x = 8^\\circ", "8 cm", False),
    ("(8^\\circ, 2)", "(8 cm, 2)", False),
    ("8^\\circ", "8", True),
    ("8", "8^\\circ", True),
    ("8^\\circ", "8 degrees", True),
    ("180^\\circ", "\\pi", True),
    ("\\frac{\\pi}{2}", "90^\\circ", True),
    ("8^\\circ C", "8 °C", True),
    ("8^\\circ", "8 °C", True),
    ("8 degrees", "8 °F", True),
    ("8 °F", "8 degrees Fahrenheit", True),
    ("\\$8", "8^\\circ", True),
    ("8 apples", "8^\\circ", True),
    ("(8^\\circ, 2)", "(8, 2)", True),
    # ... and one number in two temperature scales is two temperatures (scored 1, the scale dropped); they
    # are not converted (0 °C and 32 °F were and are unequal)
    ("8 °C", "8 °F", False),
    ("8^\\circ C", "8^\\circ F", False),
    ("8 degrees Celsius", "8 degrees Fahrenheit", False),
    ("-8 °C", "-8 °F", False),
    ("8 ^\\circ C", "8 ^\\circ K", False),
    # a preposition before a quantity that restates the gold ("in 8 hours" scored 0): the "in" there is no inch
    ("8 hours", "in 8 hours", True),
    ("in 8 hours", "8 hours", True),
    ("8 hours", "In 8 hours.", True),
    ("8 hours", "\\text{in } 8 \\text{ hours}", True),
    ("8 hours", "after 8 hours", True),
    ("8 hours", "within 8 hours", True),
    ("8 hours", "for 8 hours", True),
    ("480 minutes", "in 8 hours", True),
    ("8", "in 8 hours", True),
    ("8 minutes", "in 8 hours", False),
    ("8 in", "in 8 hours", False),
    ("in 8 hours", "8 in", False),
    # a percentage against a unit differs (scored 1, read as a bare 8): a ratio is no length nor time; against
    # a bare number, a count noun or a dollar amount it is left to the other rules
    ("8 in", "8\\%", False),
    ("8\\%", "8 in", False),
    ("8 cm", "8\\%", False),
    ("8\\%", "8 hours", False),
    ("12.5\\%", "12.5 cm", False),
    ("8\\%", "8^\\circ", False),
    ("x = 8\\%", "8 hours", False),
    ("8\\%, 2", "8 cm, 2", False),
    ("8\\%", "8", True),
    ("0.08", "8\\%", True),
    ("8\\%", "8 apples", True),
    ("8\\%", "\\$8", True),
    # radians are an angle's unit (math 1.1.19 as first extended: "8 rad" against "8^\\circ" scored 1, the word
    # dropped and the bare 8 read in degrees, though 8 rad is about 458.4 degrees; against "8 in", "8 °C" or
    # "8\\%" 1, and "\\pi rad" against "180^\\circ" 0): against degrees the degrees convert, as they do
    # against "\\pi", and against a unit of another kind they differ; against a bare number or radians they
    # are the number
    ("8^\\circ", "8 rad", False),
    ("8 rad", "8^\\circ", False),
    ("8 radians", "8^\\circ", False),
    ("8\\,\\text{rad}", "8^\\circ", False),
    ("8 \\text{ radians}", "8°", False),
    ("8 rad", "8 degrees", False),
    ("8 rad", "8 in", False),
    ("8\\%", "8 rad", False),
    ("8 rad", "8 °C", False),
    ("8 rad, 2", "8^\\circ, 2", False),
    ("(8 rad, 2)", "(8^\\circ, 2)", False),
    ("\\pi rad", "180^\\circ", True),
    ("180^\\circ", "\\pi \\text{ rad}", True),
    ("(\\pi rad, 2)", "(180^\\circ, 2)", True),
    ("\\pi \\text{ radians}", "\\pi", True),
    ("\\pi rad", "90^\\circ", False),
    ("\\frac{\\pi}{2} \\text{ radians}", "90^\\circ", True),
    ("0 rad", "0^\\circ", True),
    ("8 rad", "8", True),
    ("8", "8 radians", True),
    ("8 rad", "8 radians", True),
    ("8 rad, 2", "8, 2", True),
    ("8 rad", "8 cm", False),
    ("8 rad", "8 hours", False),
    # kelvin in words is a temperature (it was a count noun, dropped: "8 kelvin" against "8 °C", "8^\\circ",
    # "8 in" or "8\\%" scored 1), as "8\\,\\text{K}" is, and a plain "8 K" is kelvin against it (scored 0);
    # against degrees kelvin or a bare number it is the number
    ("8 °C", "8 kelvin", False),
    ("8 kelvin", "8 °C", False),
    ("8 kelvins", "8 °F", False),
    ("8 Kelvin", "8^\\circ C", False),
    ("8 kelvin", "8^\\circ", False),
    ("8 kelvin", "8 in", False),
    ("8\\%", "8 kelvin", False),
    ("8 kelvin", "8 rad", False),
    ("8 kelvin, 2", "8 °C, 2", False),
    ("(8 kelvin, 2)", "(8 °C, 2)", False),
    ("8 kelvin", "8 K", True),
    ("8 K", "8 kelvins", True),
    ("8 kelvin", "8\\,\\text{K}", True),
    ("8 kelvin", "8 ^\\circ K", True),
    ("8 kelvin", "8", True),
    ("8 kelvin", "8 cm", False),
    ("8 K", "8 °C", False),
    ("8\\,\\text{K}", "8 °C", False),
    ("8 K", "8^\\circ", False),
    ("8 K", "8", False),
    # a list item's temperature keeps its scale (two scales, or a scale against a unit, scored 1 as one 8)
    ("8 °C, 2", "8 °F, 2", False),
    ("8 °C, 2", "8 cm, 2", False),
    ("8 °C, 2", "8, 2", True),
    ("8 °C, 2", "8^\\circ, 2", True),
    # a tuple's or an interval's components drop their unit words as a whole value does, their units kept
    # where both state one ("(30 degrees, 2)" against "(30^\\circ, 2)" or "(30, 2)" scored 0, though "30
    # degrees" is "30"; the words were read as variables)
    ("(30^\\circ, 2)", "(30 degrees, 2)", True),
    ("(30 degrees, 2)", "(30, 2)", True),
    ("(\\frac{\\pi}{6}, 2)", "(30 degrees, 2)", True),
    ("[30 degrees, 60 degrees]", "[30^\\circ, 60^\\circ]", True),
    ("(8 °C, 2)", "(8, 2)", True),
    ("(8 in, 2)", "(8, 2)", True),
    ("(8 apples, 2)", "(8, 2)", True),
    ("(8 cm, 2)", "(8, 2)", True),
    ("(30 degrees, 2)", "(30 cm, 2)", False),
    ("(30 degrees, 2)", "(31, 2)", False),
    ("(8 cm, 2)", "(8 in, 2)", False),
    ("(8 hours, 2)", "(8 apples, 2)", False),
    ("(8 hours, 2)", "(8 x, 2)", False),
    ("(3 \\text{ thousand}, 2)", "(3, 2)", False),
    ("(5\\,\\text{m}, 2 hours)", "(5 m, 2 hours)", True),
    ("(5\\,\\text{m}, 2 hours)", "(5\\,\\text{s}, 2 hours)", False),
    ("(5\\,\\text{m}, 2 hours)", "(5 m, 2 minutes)", False),
    # ... but a run of two or three letters that names no unit is a product of variables, kept: "2 xy" is
    # 2xy, not 2 (stripped, "(x+y, 2xy)" against "(x + y, 2 xy)" or "(x + y, 2\\cdot xy)" scored 0, and
    # "(x + y, 2 xy)" against "(x+y, 2)" 1)
    ("(x+y, 2xy)", "(x + y, 2 xy)", True),
    ("(x+y, 2xy)", "(x + y, 2\\cdot xy)", True),
    ("(1, 2ab)", "(1, 2 \\times ab)", True),
    ("(1, 2AB)", "(1, 2 AB)", True),
    ("(3 xy, 4)", "(3xy, 4)", True),
    ("[0, 2ab]", "[0, 2 ab]", True),
    ("(x+y, 2)", "(x + y, 2 xy)", False),
    ("(1, 2)", "(1, 2 ab)", False),
    ("(1, 3)", "(1, 3 xyz)", False),
    ("(2, 3)", "(2 xy, 3 xy)", False),
    # a unit word of two or three letters is still one ("(\\sqrt{2} cm, 3)" is "(\\sqrt{2}, 3)")
    ("(\\sqrt{2}, 3)", "(\\sqrt{2} cm, 3)", True),
    ("(3, 4)", "(3 ft, 4 ft)", True),
    ("(8 hrs, 2)", "(8, 2)", True),
    ("(1, 2)", "(1 rad, 2)", True),
    ("(30 deg, 2)", "(30^\\circ, 2)", True),
    # a preposition before a quantity in an upright symbol, and "at" (scored 0)
    ("8 hours", "in 8\\,\\text{h}", True),
    ("in 8\\,\\text{h}", "480 minutes", True),
    ("8 hours", "at 8 hours", True),
    ("at 8\\,\\text{h}", "8 hours", True),
    ("8 minutes", "in 8\\,\\text{h}", False),
    ("8 hours", "at least 8 hours", False),
    ("8 in", "at 8 hours", False),
    # a tuple's components and a list's items that keep their units convert as a whole answer does
    ("(1 hour, 2)", "(60 minutes, 2)", True),
    ("(1\\,\\text{h}, 2)", "(60 minutes, 2)", True),
    ("(1 hour, 2)", "60 minutes, 2", True),
    ("[1 hour, 2 hours]", "[60 minutes, 120 minutes]", True),
    ("1 hour, 2 km", "60 minutes, 2000 m", True),
    ("1 hour, 2 km", "2000 m, 60 minutes", True),
    ("x = 1 hour, y = 2 km", "x = 60 minutes, y = 2000 m", True),
    ("2 km^2, 3", "2000000 m^2, 3", True),
    ("5 m, 2", "5 meters, 2", True),
    ("(1 hour, 2)", "(1, 2)", True),
    ("(1 hour, 2)", "(1 minute, 2)", False),
    ("(1 hour, 2)", "(60, 2)", False),
    ("(1 hour, 2)", "(2, 60 minutes)", False),
    ("(1 hour, 2)", "(60 minutes, 3)", False),
    ("[1 hour, 2 hours]", "(60 minutes, 120 minutes)", False),
    ("1 hour, 2 km", "60 minutes, 2 m", False),
    ("x = 1 hour, y = 2 km", "y = 60 minutes, x = 2000 m", False),
    ("2 km^2, 3", "2000 m, 3", False),
    ("(15th Day, 2)", "(360 hours, 2)", False),
    # ... a typeset rate in a list too
    ("5 \\text{ m}/\\text{s}, 2", "18 km/h, 2", True),
    ("5 \\text{ m}/\\text{s}, 2", "2, 18 km/h", True),
    ("(5 \\text{ m}/\\text{s}, 2)", "(18 km/h, 2)", True),
    ("5 \\text{ m}/\\text{s}, 2", "5, 2", True),
    ("5 \\text{ m}/\\text{s}, 2", "5 km/h, 2", False),
    ("5 \\text{ m}/\\text{s}, 2", "6, 2", False),
    ("5 \\text{ m}/\\text{x}, 2", "5, 2", False),
    ("\\pm 5 \\text{ m}", "5 hours, -5 hours", False),  # a sign joined to its number
    ("\\pm 5 \\text{ m}", "5 meters, -5 meters", True),
    ("15th Day, 2", "15 hours, 2", False),  # an ordinal: the 15th day is no 15 hours either
    # ... past the 1,000 characters the ordinal pattern reads (an answer it may not read may hold one: two
    # quantities are not converted equal there, but units that differ still differ)
    (",".join(["(5\\,\\text{m}, 2)"] * 60), ",".join(["(5 hours, 2)"] * 60), False),
    (",".join(["(5\\,\\text{m}, 2)"] * 60), ",".join(["(5 meters, 2)"] * 60), True),
    (
        ", ".join(f"t_{{{i}}} = 3 hours" for i in range(60)),
        ", ".join(f"t_{{{i}}} = 3 minutes" for i in range(60)),
        False,
    ),
    ("$f(x)=1$", "f(x) = 1 \\text{ for all } x \\in \\mathbb{Q}_{>0}", True),
    ("$f(x)=1$", "f(x) = x \\text{ for all } x \\in \\mathbb{Q}_{>0}", False),
    ("7,4", "7 \\text{ stuffed goats and } 4 \\text{ toy helicopters}", True),
    ("7,4", "7 \\text{ stuffed goats and } 3 \\text{ toy helicopters}", False),
    ("5.4 \\text{ square units}", "\\dfrac{27}{5}", True),
    ("864 \\mbox{ inches}^2", "864", True),
    ("2.653 \\ \\mathrm{m}", "2.65", True),
    # a one-letter unit is dropped with its power: 5 m^2 is 5, not 25
    ("5", "5\\text{m}^2", True),
    ("25", "5\\text{m}^2", False),
    ("2", "2\\text{ m}^{3}", True),
    ("8", "2\\text{ m}^{3}", False),
    # a power after a number (not after a unit word) is a power: 2 ^2 is 4
    ("4", "2 ^{2}", True),
    ("2", "2 ^{2}", False),
    ("15th Day", "15", True),
    ("15th Day", "16", False),
    # words that change the value are not units
    ("5", "5 \\text{ thousand}", False),
    ("5", "5 \\text{ thousand dollars}", False),
    ("5", "5 \\text{ squared}", False),
    ("5", "5 \\text{ is not the answer}", False),
    # a one-letter roman e after a number is Euler's number, not a unit
    ("2\\mathrm{e}", "2", False),
    # an italic or bold letter is a variable or a vector, never a unit (typeset upright): 3x, not 3
    ("3", "3\\mathit{x}", False),
    ("3x", "3\\mathit{x}", True),
    ("3", "3\\boldsymbol{v}", False),
    ("2", "2\\mathbf{x}", False),
    ("2", "2\\mathrm{m}", True),
    # --- degrees ---------------------------------------------------------------------------
    ("$45^{\\circ}$", "45", True),
    ("45", "45^\\circ", True),
    ("\\frac{\\pi}{6}", "30^\\circ", True),
    ("\\frac{\\pi}{4}", "45", False),
    ("30^\\circ", "\\frac{\\pi}{3}", False),
    # --- inequalities in solved form <-> intervals ------------------------------------------
    ("(-\\infty,-5)", "k < -5", True),
    ("(-\\infty,-5)", "k > -5", False),
    ("(-\\infty,-5)", "k \\leq -5", False),
    ("(3,4]", "3 < \\lambda \\leq 4", True),
    ("[\\frac{1}{2}, 8]", "0.5 \\leq x \\leq 8", True),
    ("a \\leqslant -2 \\text{ or } a = 1", "(-\\infty, -2] \\cup \\{1\\}", True),
    ("4 < m \\leq 8 \\text{ or } 10 \\leq m < 12", "(4, 8] \\cup [10, 12)", True),
    ("a \\geq 0", "[0, 1)", False),
    # an unsolved inequality is never turned into its solution set
    ("(-2,2)", "x^2 < 4", False),
    # set-builder notation and membership
    ("\\{x|-1 < x < 1\\}", "(-1, 1)", True),
    ("\\{x|-1 < x < 1\\}", "(-1, 2)", False),
    ("x \\in [-2,7]", "[-2, 7]", True),
    ("x \\in [-2,7]", "[-2, 6]", False),
    # interval end brackets matter
    (
        "\\left[- \\frac{3\\pi}{8}, \\frac{\\pi}{8}\\right]",
        "\\left( -\\dfrac{3\\pi}{8}, \\dfrac{\\pi}{8} \\right)",
        False,
    ),
    # unions compare piece by piece, in any order
    ("(-\\infty, 0) \\cup (1, +\\infty)", "(1, \\infty) \\cup (-\\infty, 0)", True),
    ("(-\\infty, 0) \\cup (1, +\\infty)", "(-\\infty, 1) \\cup (2, \\infty)", False),
    # --- vectors, approximations, infinity words -------------------------------------------
    ("\\begin{pmatrix} -7 \\\\ 16 \\\\ 5 \\end{pmatrix}", "(-7,16,5)", True),
    ("\\begin{pmatrix} -7 \\\\ 16 \\\\ 5 \\end{pmatrix}", "(-7,16,7)", False),
    ("\\begin{pmatrix} 1/5 \\\\ -18/5 \\end{pmatrix}", "\\begin{pmatrix} 0.2 \\\\ -3.6 \\end{pmatrix}", True),
    ("\\frac{1 + \\sqrt{97}}{8} \\approx 1.36", "\\dfrac{1 + \\sqrt{97}}{8}", True),
    ("\\frac{1 + \\sqrt{97}}{8} \\approx 1.36", "\\dfrac{1 + \\sqrt{97}}{10}", False),
    # an answer given as an approximation is its value: "\approx 3.14", "x \approx 3.14" (not the
    # answer "x"), "approximately 3.14", "about 3.14"
    ("3.14", "\\approx 3.14", True),
    ("3.14", "\\approx 3.15", False),
    ("3.14", "≈ 3.14", True),
    ("3.14", "x \\approx 3.14", True),
    ("x = 3.14", "x \\approx 3.14", True),
    ("x = 3.14", "y \\approx 3.14", False),
    ("3.14", "approximately 3.14", True),
    ("3.14", "approx. 3.14", True),
    ("3.14", "about 3.14", True),
    ("3.14", "roughly 3.15", False),
    ("\\pi", "\\approx 3.14", True),
    ("\\pi", "\\approx 3.15", False),
    ("0.5", "\\sim 0.5", True),
    # a repeating decimal is the exact rational it denotes
    ("\\frac{1}{3}", "0.\\overline{3}", True),
    ("0.\\overline{3}", "1/3", True),
    ("\\frac{1}{6}", "0.1\\overline{6}", True),
    ("\\frac{1}{7}", "0.\\overline{142857}", True),
    ("-\\frac{4}{3}", "-1.\\overline{3}", True),
    ("\\frac{23}{11}", "2.\\overline{09}", True),
    ("\\frac{1}{3}", "0.\\dot{3}", True),
    ("\\frac{1}{3}", "0.\\overline{33}", True),
    ("\\frac{1}{3}", "0.\\overline{4}", False),
    ("0.333", "0.\\overline{3}", True),  # as 0.333 against 1/3: the gold rounds it
    ("0.34", "0.\\overline{3}", False),
    # a whole number in words is that number, with its units too ("three apples")
    ("3", "three", True),
    ("12", "Twelve", True),
    ("21", "twenty-one", True),
    ("105", "one hundred and five", True),
    ("2500", "two thousand five hundred", True),
    ("3", "three apples", True),
    ("4", "three", False),
    ("3", "three times", False),
    ("one-to-one", "one-to-one", True),
    ("1", "one-to-one", False),
    # an answer that shows its arithmetic states its result: "5 + 3 = 8" is 8
    ("8", "5 + 3 = 8", True),
    ("6", "2 \\times 3 = 6", True),
    ("\\frac{1}{2}", "\\frac{2}{4} = \\frac{1}{2}", True),
    ("9", "5 + 3 = 8", False),
    # a temperature's degree sign and scale are its unit: "10°C" is 10
    ("10", "10^\\circ \\text{C}", True),
    ("10", "10°C", True),
    ("-5", "-5^{\\circ}\\mathrm{F}", True),
    ("10^\\circ C", "10", True),
    ("11", "10^\\circ \\text{C}", False),
    ("10", "10^\\circ x", False),
    # the empty set in any spelling
    ("\\emptyset", "\\varnothing", True),
    ("\\{\\}", "\\emptyset", True),
    ("\\left\\{ \\right\\}", "\\varnothing", True),
    ("\\emptyset", "\\text{no solution}", True),
    ("\\text{no real solutions}", "\\emptyset", True),
    ("\\emptyset", "\\{0\\}", False),
    ("\\varnothing", "0", False),
    # an AMC-style answer, the choice's label and its value: the value, or the label against a label
    ("12", "\\textbf{(C)}\\ 12", True),
    ("12", "\\textbf{(B)}\\ 13", False),
    ("\\textbf{(C)}", "\\textbf{(C)}\\ 12", True),
    ("\\textbf{(C)}", "\\textbf{(B)}\\ 12", False),
    ("\\textbf{(C)}\\ 12", "C", True),
    ("\\textbf{(C)}\\ 12", "(D)", False),
    ("\\textbf{(C)}\\ 12", "12", True),
    ("\\textbf{(C)}\\ 12", "13", False),
    ("\\textbf{(C)}\\ 12", "\\text{(B) } 12", False),
    ("\\text{(C)}\\ \\frac{1}{2}", "0.5", True),
    ("$\\text{infinitely many}$", "\\infty", True),
    ("$\\text{infinitely many}$", "0", False),
    # --- number bases are not dropped ------------------------------------------------------
    ("221_3", "221_5", False),
    ("221_3", "221_{3}", True),
    # --- math-verify (symbolic) ------------------------------------------------------------
    ("(x+1)^2", "x^2+2x+1", True),
    ("x-1", "1-x", False),
    ("\\frac{1-p^{2}}{3}", "\\frac{-p^2+1}{3}", True),
    ("\\frac{1-p^{2}}{3}", "(-p^2+2)/3", False),
    ("4", "4\\sqrt(2)", False),
    ("3*x-1*y+13=0", "3x+4y+14=0", False),
    # an unparsable formula never falls back to a number found inside it
    ("1-\\frac{1}{\\mathrm{e}}", "1+\\frac{1}{\\mathrm{e}}", False),
    # --- text answers ----------------------------------------------------------------------
    ("line segment, circle", "\\text{line segment and circle}", True),
    ("line segment, circle", "\\text{line segment and equilateral triangle}", False),
    # --- plain-text spellings (math 1.1.0): pi, sqrt, Python powers, E-notation, mixed numbers ----
    ("\\frac{\\pi}{2}", "pi/2", True),
    ("\\frac{\\pi}{3}", "pi/2", False),
    ("2\\pi", "2pi", True),
    ("\\sqrt{2}", "sqrt2", True),
    ("\\sqrt{3}", "sqrt2", False),
    ("3\\sqrt{5}", "3sqrt5", True),
    ("\\sqrt{x}", "sqrt x", True),
    ("x^2", "x**2", True),
    ("x^3", "x**2", False),
    ("1024", "2**10", True),
    ("5000", "5e3", True),
    ("5001", "5e3", False),
    ("0.00012", "1.2e-4", True),
    ("\\frac{3}{2}", "1 1/2", True),
    ("-\\frac{3}{2}", "-1 1/2", True),
    ("\\frac{1}{2}", "1 1/2", False),
    ("11/2", "1 1/2", False),
    ("spin", "spin", True),
    # --- digits separated by spaces (math 1.1.1) -------------------------------------------------
    # a space as the thousands separator (SI style) groups digits: 12 345 is 12345, 10 000 is 10000
    ("12345", "12 345", True),
    ("10000", "10 000", True),
    ("1000000", "1 000 000", True),
    ("-1234.5", "-1 234.5", True),
    ("5000", "5 000 \\text{ meters}", True),
    # ... and never the sum or product the parser makes of them (12 345 was 357, 10 000 was 0)
    ("357", "12 345", False),
    ("0", "10 000", False),
    ("7", "3 4", False),
    ("9", "2 3 4", False),
    ("0", "1 0", False),
    # --- a product sign ends a function's unparenthesised argument (math 1.1.3) -----------------
    # \cos t \cdot \ln(\cos t) is cos(t) ln(cos t), as \sin x \cos x is cos(x) sin(x); the parser
    # read cos(t ln(cos t)), so a correct derivative (HardVerify item 225) did not match
    (
        "\\frac{1}{2} \\cdot \\cot t \\cdot \\ln (\\cos t) \\cdot e^{-\\sec^2 t}",
        "\\dfrac{\\cos t \\cdot \\ln(\\cos t)}{2 e^{\\sec^2 t} \\sin t}",
        True,
    ),
    ("\\sin x \\cdot \\cos x", "\\frac{\\sin 2x}{2}", True),
    ("\\sin^2 x \\times y", "y \\sin^2(x)", True),
    ("\\ln \\theta \\cdot 2", "2\\ln(\\theta)", True),
    # ... so \sin x \cdot y is no longer sin(xy) (both sides were read that way, and matched)
    ("\\sin x \\cdot y", "\\sin(x y)", False),
    ("\\sin(x y)", "\\sin x \\cdot y", False),
    # ... and a wrong factor still shows
    (
        "\\frac{1}{2} \\cdot \\cot t \\cdot \\ln (\\cos t) \\cdot e^{-\\sec^2 t}",
        "\\dfrac{1}{2} \\cot t \\cdot \\ln(\\cos t) \\cdot e^{-\\sec^2 t + 1}",
        False,
    ),
    # --- the integer parameter of a periodic solution family is a dummy (math 1.1.3) -----------
    # k\pi and n\pi are the same set of solutions (HardVerify items 45 and 204)
    ("x = k\\pi", "n\\pi", True),
    (
        "\\frac{\\pi}{6}+k\\pi, \\frac{5\\pi}{6}+k\\pi",
        "\\frac{5 \\pi}{6}+n \\pi, \\frac{\\pi}{6}+n \\pi",
        True,
    ),
    ("\\frac{\\pi}{4}+\\frac{k\\pi}{2}", "\\frac{\\pi}{4}+\\frac{m\\pi}{2}", True),
    (
        "[k\\pi - \\frac{5\\pi}{12}, k\\pi + \\frac{\\pi}{12}]",
        "[-\\frac{5\\pi}{12} + n\\pi, \\frac{\\pi}{12} + n\\pi]",
        True,
    ),
    ("(x, y) = (k\\pi, 2k\\pi)", "(x, y) = (n\\pi, 2n\\pi)", True),
    # ... renaming is not rescaling: 2n\pi is every other solution of k\pi
    ("x = k\\pi", "2n\\pi", False),
    ("\\frac{\\pi}{4}+k\\pi", "\\frac{\\pi}{4}+2m\\pi", False),
    # ... one letter for the whole answer: two letters vary independently, a different set
    ("(k\\pi, 2k\\pi)", "(n\\pi, 2m\\pi)", False),
    ("x = k\\pi, y = 2k\\pi", "x = n\\pi, y = 2m\\pi", False),
    ("[k\\pi, k\\pi + \\frac{\\pi}{2}]", "[n\\pi, m\\pi + \\frac{\\pi}{2}]", False),
    # ... and only a family a + b k with b a rational multiple of pi, never a label or a variable
    ("k = 3", "n = 3", False),
    ("2k+1", "2n+1", False),
    ("n^2\\pi", "k^2\\pi", False),
    ("k\\pi", "x\\pi", False),
    ("x + k\\pi", "x + n\\pi", False),
    # --- a set less a finite set of points (math 1.1.3) ------------------------------------------
    # \{x | x < 3/2\} - \{-6\} is the union of intervals with -6 cut out (HardVerify item 128)
    ("\\{x | x < \\frac{3}{2}\\} - \\{-6\\}", "(-\\infty, -6) \\cup (-6, \\dfrac{3}{2})", True),
    ("(-\\infty, -6) \\cup (-6, \\dfrac{3}{2})", "\\{x \\mid x < \\frac{3}{2}\\} \\setminus \\{-6\\}", True),
    ("\\{x \\mid 0 \\leq x \\leq 3\\} \\setminus \\{0, 1, 5\\}", "(0, 1) \\cup (1, 3]", True),
    ("[0, 2] - \\{2\\}", "[0, 2)", True),
    # ... computed exactly: the point is removed, not the interval kept or closed around it
    ("\\{x | x < \\frac{3}{2}\\} - \\{-6\\}", "(-\\infty, -6) \\cup (-6, \\dfrac{1}{2})", False),
    ("\\{x | x < \\frac{3}{2}\\} - \\{-6\\}", "(-\\infty, \\dfrac{3}{2})", False),
    ("\\{x | x < \\frac{3}{2}\\} - \\{-6\\}", "(-\\infty, -6] \\cup [-6, \\dfrac{3}{2})", False),
    ("\\{x \\mid 0 \\leq x \\leq 3\\} \\setminus \\{0, 1, 5\\}", "[0, 1) \\cup (1, 3]", False),
    # ... and A \cup B - C is left alone: whether the union or the difference comes first is convention
    ("(0, 1) \\cup (2, 3) - \\{2.5\\}", "(0, 1) \\cup (2, 2.5) \\cup (2.5, 3)", False),
    # --- an equation against the value of the one variable the answer leaves out (math 1.1.5) --
    # xy = 6 fixes y = 6/x; y + 1 = -(2x-1)^2 fixes y; rho sin(theta) = sqrt 3 fixes rho (HardVerify
    # items 125, 138, 155); either side may be the equation
    ("xy = 6", "\\dfrac{6}{x}", True),
    ("y + 1 = - (2x - 1)^2.", "-4x^2 + 4x - 2", True),
    ("\\rho\\sin\\theta = \\sqrt{3}", "\\sqrt{3} \\csc \\theta", True),
    ("x + y = 1", "1 - x", True),
    ("\\frac{6}{x}", "xy = 6", True),
    # ... only the right value: a slip in the constant or the factor fails
    ("y + 1 = - (2x - 1)^2.", "-4x^2 + 4x - 1", False),
    ("xy = 6", "6x", False),
    ("x + y = 1", "1 + x", False),
    ("\\frac{6}{x}", "xy = 7", False),
    # ... only where the equation fixes the variable: linearly (y^2 = 4x has two branches) with a
    # coefficient that is not zero
    ("y^2 = 4x", "2\\sqrt{x}", False),
    ("y \\cdot 0 + x = 1", "1", False),
    # ... and only for exactly one missing variable, and no variable the equation lacks
    ("x + y + z = 1", "1 - x", False),
    ("xy = 6", "\\frac{6}{t}", False),
    # --- an ordering chain (math 1.1.5) -----------------------------------------------------------
    # b < a < d < c is the list b, a, d, c in its written order (HardVerify item 168), and the
    # chain c > d > a > b; a chain of constants of any length
    ("b < a < d < c", "b, a, d, c", True),
    ("b, a, d, c", "b < a < d < c", True),
    ("b < a < d < c", "c > d > a > b", True),
    ("a < x < b", "b > x > a", True),
    ("\\sqrt{2} < 1.5 < \\sqrt{3}", "\\sqrt{2}, \\frac{3}{2}, \\sqrt{3}", True),
    # ... in that order only, every term, as a bare list
    ("b < a < d < c", "c, d, a, b", False),
    ("b < a < d < c", "b, a, c, d", False),
    ("b < a < d < c", "b, a, d", False),
    ("b < a < d < c", "\\{b, a, d, c\\}", False),
    ("b < a < d < c", "x = b, y = a, z = d, w = c", False),
    ("b < a < d < c", "a < b < c < d", False),
    ("a < x < b", "b > a > x", False),
    # ... of strict relations all one way
    ("b < a < d < c", "b \\leq a \\leq d \\leq c", False),
    ("b < a > c", "b, a, c", False),
    # ... and never a solved-form inequality, which is a set of values, not an order
    ("a < x < b", "a, x, b", False),
    ("1 < x < 2", "1, x, 2", False),
    # --- an ellipsis is not parsed (math 1.1.5): the parser dropped \ldots and read \cdots as "\cdot s"
    ("1 + 2 + \\ldots + 10", "13", False),
    ("a_1 + a_2 + \\ldots + a_n", "a_1 + a_2 + a_n", False),
    ("x_1 x_2 \\ldots x_n", "x_1 x_2 x_n", False),
    ("2 \\cdot 3 \\cdots n", "6sn", False),
    ("1 + 2 + … + n", "n + 3", False),
    ("1 + 2 + \\dots + n", "n + 3", False),
    # ... it compares as written
    ("a_1 + a_2 + \\ldots + a_n", "a_1+a_2+\\ldots+a_n", True),
    ("1, 2, \\ldots, 10", "1, 2, \\ldots, 10", True),
    # --- a sum a_k + a_{k-1} + \ldots + a_0 written the other way round (math 1.1.5) --------------
    # the same terms from one end to the other in the same step (HardVerify item 141)
    (
        " \\alpha_p = \\frac{n - (a_k + a_{k-1} + \\ldots + a_0)}{p-1} ",
        "\\frac{n - (a_0 + a_1 + a_2 + \\cdots + a_k)}{p - 1}",
        True,
    ),
    ("a_1 + a_2 + \\cdots + a_n", "a_n + \\cdots + a_2 + a_1", True),
    ("a_1 + a_2 + \\cdots + a_n", "a_1 + \\cdots + a_n", True),
    ("(a_1 + \\cdots + a_n)^2", "(a_n + \\ldots + a_1)^2", True),
    ("x_1 + x_2 + \\cdots + x_n, n", "n, x_n + \\cdots + x_1", True),
    # ... what surrounds the sum still counts (the data's wrong answer divides by p)
    (
        " \\alpha_p = \\frac{n - (a_k + a_{k-1} + \\ldots + a_0)}{p-1} ",
        "\\frac{n - (a_0 + a_1 + a_2 + \\cdots + a_k)}{p}",
        False,
    ),
    ("(a_1 + \\cdots + a_n)^2", "a_1^2 + \\cdots + a_n^2", False),
    # ... other ends, another step, another letter, or a step that leads away from the last term
    ("\\frac{a_1 + \\cdots + a_n}{n}", "\\frac{a_1 + \\cdots + a_{n-1}}{n}", False),
    ("\\frac{a_1 + \\cdots + a_n}{n}", "\\frac{a_0 + \\cdots + a_n}{n}", False),
    ("a_0 + a_2 + \\cdots + a_{2k}", "a_0 + a_1 + \\cdots + a_{2k}", False),
    ("\\frac{a_1 + \\cdots + a_n}{n}", "\\frac{b_1 + \\cdots + b_n}{n}", False),
    ("a_0 + a_1 + \\cdots + a_k", "a_k + a_{k+1} + \\cdots + a_0", False),
    ("a_5 + a_6 + \\cdots + a_1", "a_1 + \\cdots + a_5", False),
    # ... and only a sum that is a whole group: here the minus sign binds a_1 alone
    ("n - (a_1 + a_2 + \\cdots + a_n)", "n - a_1 + a_2 + \\cdots + a_n", False),
    ("2(a_1 + \\cdots + a_n)", "2 a_n + \\cdots + 2a_1", False),
    # --- an identity on a domain only, decided at sample points (math 1.1.15) ------------------------
    # 2 arcsin sqrt(a) is arccos(1 - 2a) for 0 <= a <= 1, where both are real (HardVerify item 178)
    ("2 \\arcsin \\sqrt{a}", "\\arccos\\left(1 - 2a\\right)", True),
    ("\\arcsin x", "\\arctan\\frac{x}{\\sqrt{1-x^2}}", True),
    ("\\arccos x", "\\frac{\\pi}{2} - \\arcsin x", True),
    # ... another function, one equal on part of the real domain only, or real where the other is not
    ("2 \\arcsin \\sqrt{a}", "\\arccos\\left(1 - 3a\\right)", False),
    ("\\arccos x", "\\frac{\\pi}{2} + \\arcsin x", False),
    ("2\\arctan x", "\\arcsin\\frac{2x}{1+x^2}", False),  # equal for |x| <= 1 only
    ("\\arcsin(\\sin x)", "x", False),  # equal for |x| <= pi/2 only
    ("2\\ln x", "\\ln x^2", False),  # ln x^2 is real for negative x too
    ("\\sqrt{x}\\sqrt{x-1}", "\\sqrt{x(x-1)}", False),  # they differ in sign for negative x
    ("|x|", "x", False),
    # ... a difference in the twelfth digit is a difference (values compared to 30 digits, not floats')
    ("x^2", "x^2 + 10^{-12}x", False),
    ("\\lfloor x \\rfloor", "x", False),
]


@pytest.mark.parametrize(("gold", "pred", "equivalent"), CASES)
def test_check(gold: str, pred: str, equivalent: bool) -> None:
    result = check(gold, pred)
    assert isinstance(result, Check)
    assert result.equivalent is equivalent, result


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        # garbage on either side is a plain "not equivalent"
        ("", "5"),
        ("5", ""),
        ("}", "{"),
        ("\\frac{", "\\frac{"),
        ("\\begin{pmatrix}", "1"),
        ("((((((", "))))))"),
        ("\\sqrt[", "2"),
        ("x = = = 1", "1"),
        ("1/0", "2/0"),
        ("\\text{" * 200, "1"),
    ],
)
def test_never_raises_on_bad_input(gold: str, pred: str) -> None:
    result = check(gold, pred)
    assert isinstance(result, Check)


def test_reports_method_and_gold_parsed() -> None:
    # quick path
    assert check("0.5", "1/2") == Check(True, "rational", True)
    # list rule
    assert check("1,-2", "-2, 1").method == "set"
    assert check("(1,1), (3,2)", "(3, 2), (1, 1)").method == "tuple_set"
    # symbolic rule
    assert check("(x+1)^2", "x^2+2x+1") == Check(True, "math_verify", True)
    # an empty gold parses to nothing
    assert check("", "5").gold_parsed is False


def test_gold_is_first() -> None:
    """math-verify is asymmetric on purpose: a gold inequality accepts its interval, not vice versa."""
    assert check("1 < x < 2", "(1, 2)").equivalent


def test_sample_points_skip_values_too_large_to_evaluate() -> None:
    """At x = 3.1, sin(e^(e^(e^x))) would need pi to billions of digits (a worker's whole deadline): a value
    that large is undefined at that point, on both sides alike, and the other points decide."""
    cache: dict[str, Any] = {}
    gold = parse_item("\\sin(e^{e^{e^{x}}})", cache)
    assert agree_at_samples(gold, parse_item("\\sin(\\exp(\\exp(\\exp(x))))", cache))
    assert not agree_at_samples(gold, parse_item("\\sin(e^{e^{e^{x}}}) + x", cache))


def test_sample_points_compare_relative_to_the_values() -> None:
    """Values compare relative to their size, with no absolute floor: below 1, x^2000 + 10^-40 is x^2000
    to 30 digits absolute, and not to 30 relative ones. (check itself accepts that pair: Math-Verify's
    numeric comparison chops the difference, as it does 1/2004! against 1/2006!; the rule here must not.)"""
    cache: dict[str, Any] = {}
    gold = parse_item("x^{2000}", cache)
    assert not agree_at_samples(gold, parse_item("x^{2000} + 10^{-40}", cache))
    assert agree_at_samples(gold, parse_item("(x^{1000})^2", cache))
