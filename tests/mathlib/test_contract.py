"""The worker-process contract of check(), and the scanners it is built on."""

from __future__ import annotations

from typing import Any

import pytest

import rewardhub.mathlib.equivalence as equivalence
import rewardhub.mathlib.symbolic as symbolic
from rewardhub.mathlib import check
from rewardhub.mathlib.scan import find_top_level, match_brace, outer_brackets, split_top_level


class SoftTimeout(BaseException):
    """Stands in for the pool's SIGALRM soft timer, which derives from BaseException."""


def test_soft_timeout_in_verify_propagates(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(gold: Any, pred: Any) -> bool:
        raise SoftTimeout

    monkeypatch.setattr(equivalence, "mv_verify", boom)
    with pytest.raises(SoftTimeout):
        check("(x+1)^2", "x^2+2x+1")


def test_soft_timeout_in_parse_propagates(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any, **kwargs: Any) -> list[Any]:
        raise SoftTimeout

    monkeypatch.setattr(symbolic, "parse", boom)
    with pytest.raises(SoftTimeout):
        check("(x+1)^2", "x^2+2x+1")


def test_ordinary_errors_are_a_false_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(gold: Any, pred: Any) -> bool:
        raise RuntimeError("sympy bug")

    monkeypatch.setattr(equivalence, "mv_verify", broken)
    assert check("(x+1)^2", "x^2+2x+1").equivalent is False


def test_math_verify_timeouts_are_disabled_and_gold_goes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    import math_verify

    real_parse, real_verify = math_verify.parse, math_verify.verify

    def spy_parse(*args: Any, **kwargs: Any) -> Any:
        seen.setdefault("parsing_timeout", []).append(kwargs.get("parsing_timeout", "missing"))
        return real_parse(*args, **kwargs)

    def spy_verify(gold: Any, pred: Any, **kwargs: Any) -> Any:
        seen["timeout_seconds"] = kwargs.get("timeout_seconds", "missing")
        seen["order"] = (str(gold), str(pred))
        return real_verify(gold, pred, **kwargs)

    monkeypatch.setattr(symbolic, "parse", spy_parse)
    monkeypatch.setattr(symbolic, "verify", spy_verify)
    assert check("(y+1)^2", "y^2+2*y+1").equivalent
    assert set(seen["parsing_timeout"]) == {None}
    assert seen["timeout_seconds"] is None
    assert seen["order"] == ("(y + 1)**2", "y**2 + 2*y + 1")


@pytest.mark.parametrize(
    ("text", "seps", "parts"),
    [
        # brackets of every kind protect commas
        ("(1, 2), [3, 4), \\{5, 6\\}", (",",), ["(1, 2)", " [3, 4)", " \\{5, 6\\}"]),
        # word separators need their spaces; "order" does not contain the separator " or "
        ("1 or 2 and order", (" or ", " and "), ["1", "2", "order"]),
        # a command separator does not match a longer command
        ("A \\cupdot B \\cup C", ("\\cup",), ["A \\cupdot B ", " C"]),
    ],
)
def test_split_top_level(text: str, seps: tuple[str, ...], parts: list[str]) -> None:
    assert split_top_level(text, seps) == parts


@pytest.mark.parametrize(
    ("text", "result"),
    [
        # one group
        ("(1, 2]", ("(", "1, 2", "]")),
        ("\\{1, 2\\}", ("\\{", "1, 2", "\\}")),
        # two groups side by side are not one group
        ("(1, 2), (3, 4)", None),
        # not bracketed
        ("x + (1)", None),
    ],
)
def test_outer_brackets(text: str, result: tuple[str, str, str] | None) -> None:
    assert outer_brackets(text) == result


def test_match_brace_and_find_top_level() -> None:
    # escaped braces are not grouping
    assert match_brace("{a\\}b}c", 0) == 5
    # unbalanced
    assert match_brace("{{a}", 0) == -1
    # the scan limit
    assert match_brace("{aaaa}", 0, end=3) == -1
    # top-level only
    assert find_top_level("f(x=1) = 2", "=") == 7
