"""The verbalized-confidence parser and the last-tag reader of the ``calibration`` reward."""

from __future__ import annotations

import pytest

from rewardhub.rewards.confidence import last_tag, parse_confidence


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("0.8", 0.8),  # decimal in [0, 1]
        (" 0.8 \n", 0.8),  # surrounding whitespace ignored
        (".25", 0.25),  # no leading zero
        ("1", 1.0),  # 1 is a probability, not 1 %
        ("0", 0.0),
        ("1.0", 1.0),
        ("1e-1", 0.1),  # scientific notation
        ("+0.5", 0.5),
        ("-0", 0.0),  # negative zero is zero
        ("80%", 0.8),  # percentage
        ("80 %", 0.8),  # a space before % is allowed
        ("12.5%", 0.125),
        ("0%", 0.0),
        ("100%", 1.0),
        ("1e1%", 0.1),
        ("80", 0.8),  # a bare whole number 2..100 is a percentage
        ("2", 0.02),
        ("100", 1.0),
        ("080", 0.8),  # digits only, leading zero
        # leading zeros are read by value, however many (found in review: "0100" was out of range while "080"
        # was 80 %, as the whole number allowed 3 digits in all)
        ("0100", 1.0),
        ("00080", 0.8),
        ("002", 0.02),
        ("0" * 5000 + "50", 0.5),
        ("00", 0.0),  # 0 and 1 stay probabilities with leading zeros too
        ("01", 1.0),
        ("00.5", 0.5),
        # the number's parts at their boundaries (the patterns are possessive: same strings accepted)
        ("1.", 1.0),  # a decimal, not a whole number
        ("0.5e0", 0.5),
        ("5e-1 %", 0.005),
        ("1.e-1", 0.1),
        ("50\t%", 0.5),
        ("1 \t/\t 2", 0.5),
        (".5/1.", 0.5),
        # a fraction "x/y" is x/y (algorithms.md §3.3: accept "0.8/1")
        ("0.8/1", 0.8),
        ("85/100", 0.85),
        ("8 / 10", 0.8),
        ("0/1", 0.0),
        ("1/1", 1.0),
    ],
)
def test_readable(content: str, expected: float) -> None:
    parsed = parse_confidence(content)
    assert parsed.error is None
    assert parsed.value == expected


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("high", "not a number"),
        ("0.8 (fairly)", "not a number"),
        ("NaN", "not a number"),
        ("nan%", "not a number"),
        ("inf", "not a number"),
        ("0.8/", "not a number"),
        ("/1", "not a number"),
        ("0.8/1/2", "not a number"),
        ("80%/100", "not a number"),
        ("3/0", "out of range"),  # no fraction with a zero denominator
        ("0/0", "out of range"),
        ("5/4", "out of range"),
        ("-1/2", "out of range"),
        ("1/-2", "out of range"),
        ("1e400/1e400", "out of range"),
        ("1.5", "out of range"),  # a decimal above 1 is not a percentage
        ("-0.2", "out of range"),
        ("150%", "out of range"),
        ("-5%", "out of range"),
        ("101", "out of range"),  # whole number above 100
        ("100.0", "out of range"),  # not a bare whole number: a decimal, > 1
        ("1e400", "out of range"),  # overflows to inf
        ("٠.٥", "not a number"),  # non-ASCII digits are text
        ("0101", "out of range"),  # leading zeros read by value: 101
        ("0" * 5000 + "101", "out of range"),
        ("1" * 100_000, "out of range"),  # a long run of digits is a huge number, refused
        ("1" * 100_000 + "%", "out of range"),
        ("1" * 100_000 + "/", "not a number"),
        ("1" * 100_000 + "x", "not a number"),
        ("1" * 100_000 + "e", "not a number"),
        ("1.5.", "not a number"),
        ("1e", "not a number"),
        ("e5", "not a number"),
        (".", "not a number"),
        ("+-1", "not a number"),
        ("1 %%", "not a number"),
        ("1/ 2/", "not a number"),
    ],
)
def test_format_failures(content: str, why: str) -> None:
    parsed = parse_confidence(content)
    assert parsed.value is None
    assert parsed.error is not None and parsed.error.startswith(why), parsed.error


def test_last_complete_tag_wins() -> None:
    text = "<c>0.9</c> then <c>0.3</c> and a dangling <c>0.5"
    assert last_tag(text, "c") == "0.3"
    assert last_tag("<c></c>", "c") == ""
    assert last_tag("no tags", "c") is None
    assert last_tag("</c> only a close", "c") is None
