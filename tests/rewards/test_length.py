"""``length``: DAPO soft overlong punishment and the cosine length reward, units and correctness."""

from __future__ import annotations

import math
from typing import Any

import pytest

from reward_calls import score_item
from rewardhub.errors import InvalidRequest
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import ScoreContext
from rewardhub.rewards.length import LengthReward, cosine_length, dapo_overlong

REWARD = LengthReward(runtime=None)  # type: ignore[arg-type]  # text rewards don't use the runtime

DAPO = {"mode": "dapo_overlong", "max_length": 100, "cache_length": 20, "unit": "chars"}
COSINE = {"mode": "cosine", "max_length": 100, "unit": "chars"}


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (0, 0.0),  # empty: no punishment
        (80, 0.0),  # exactly L_max - L_cache: still none
        (81, -0.05),  # 1 into the 20-long ramp: (80 - 81) / 20
        (90, -0.5),  # half-way down the ramp: (80 - 90) / 20
        (100, -1.0),  # exactly L_max: the end of the ramp, (80 - 100) / 20
        (101, -1.0),  # over L_max: -1
        (5000, -1.0),  # far over: still -1
    ],
)
async def test_dapo_overlong(length: int, expected: float) -> None:
    # algorithms.md §4.3 (DAPO overlong reward shaping): 0 up to L_max − L_cache, then
    # ((L_max − L_cache) − |y|) / L_cache down to −1 at L_max, −1 past it
    out = await score_item(REWARD, ScoreItem(response="x" * length), **DAPO)
    assert out.score == pytest.approx(expected)
    assert out.components == {"length": float(length)}
    assert dapo_overlong(length, 100, 20) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("length", "correct", "expected"),
    [
        (0, True, 1.0),  # correct, empty: v_max of correct
        (25, True, 0.5 + 0.25 * (1 + math.cos(math.pi / 4))),  # 0.9267766952966369
        (50, True, 0.75),  # correct, L_max/2: the midpoint (cos(pi/2) = 0)
        (100, True, 0.5),  # correct, L_max: v_min of correct
        (200, True, 0.5),  # correct, beyond L_max: clamped, the cosine does not wrap
        (0, False, -1.0),  # wrong, empty: max_value_wrong = -1, the harshest
        (50, False, -0.75),  # wrong, L_max/2: the midpoint
        (100, False, -0.5),  # wrong, L_max: min_value_wrong
        (150, False, -0.5),  # wrong, beyond L_max: clamped
    ],
)
async def test_cosine(length: int, correct: bool, expected: float) -> None:
    # algorithms.md §5.4: R = v_min + ½(v_max − v_min)(1 + cos(π·min(|y|/L_max, 1))); correct (0.5, 1.0),
    # wrong (−0.5, −1.0), the bounds swapped so a short wrong answer scores lowest
    item = ScoreItem(response="x" * length, metadata={"correct": correct})
    out = await score_item(REWARD, item, **COSINE)
    assert out.score == pytest.approx(expected)
    assert out.details["correct"] is correct


def test_cosine_custom_bounds() -> None:
    # v_min=0, v_max=2 at L_max/4: 0 + 1 * (1 + cos(pi/4)) = 1.7071067811865475
    assert cosine_length(25, 100, 0.0, 2.0) == pytest.approx(1 + math.sqrt(2) / 2)


@pytest.mark.parametrize(
    ("reference", "metadata", "expected"),
    [
        (None, {"correct": True}, 1.0),  # metadata bool
        (None, {"correct": 0}, -1.0),  # metadata 0/1
        (None, {"correct": "false"}, -1.0),  # metadata string
        ({"correct": True}, None, 1.0),  # reference object
        ("true", None, 1.0),  # reference string
        ("false", None, -1.0),  # reference string
        ("42", {"correct": True}, 1.0),  # metadata wins: the reference is another reward's gold answer
    ],
)
async def test_correctness_sources(reference: Any, metadata: dict[str, Any] | None, expected: float) -> None:
    out = await score_item(REWARD, ScoreItem(response="", reference=reference, metadata=metadata), **COSINE)
    assert out.score == pytest.approx(expected)  # L = 0: v_max of correct / wrong


async def test_custom_correct_key() -> None:
    item = ScoreItem(response="", metadata={"is_right": True})
    out = await score_item(REWARD, item, **COSINE, correct_key="is_right")
    assert out.score == 1.0


@pytest.mark.parametrize(
    ("reference", "metadata", "reason"),
    [
        (None, None, Reason.MISSING_REFERENCE),  # no correctness anywhere
        (None, {"other": 1}, Reason.MISSING_REFERENCE),  # metadata without the key
        ("42", None, Reason.PARSE_ERROR),  # a gold answer is not a correctness flag
        # nor is one that reads like a flag: a BoolQ "yes", a math answer "1" or "0" (scored as right or
        # wrong whatever the response said); only the documented "true"/"false" strings are flags
        ("1", None, Reason.PARSE_ERROR),
        ("0", None, Reason.PARSE_ERROR),
        ("yes", None, Reason.PARSE_ERROR),
        ("No", None, Reason.PARSE_ERROR),
        ("correct", None, Reason.PARSE_ERROR),
        ({"correct": "maybe"}, None, Reason.PARSE_ERROR),  # not a boolean
        (None, {"correct": 2}, Reason.PARSE_ERROR),  # not 0/1
        (["true"], None, Reason.PARSE_ERROR),  # a list
    ],
)
async def test_cosine_bad_correctness_is_invalid(reference: Any, metadata: Any, reason: Reason) -> None:
    out = await score_item(REWARD, ScoreItem(response="x", reference=reference, metadata=metadata), **COSINE)
    assert (out.score, out.reason) == (None, reason)


@pytest.mark.parametrize(
    ("unit", "response", "metadata", "length"),
    [
        ("chars", "héllo", None, 5),  # code points, not bytes
        ("words", " a  b\nc\t", None, 3),  # whitespace-separated words
        ("tokens", "ignored", {"completion_tokens": 90}, 90),  # the trainer's count
    ],
)
async def test_units(unit: str, response: str, metadata: Any, length: int) -> None:
    out = await score_item(REWARD, ScoreItem(response=response, metadata=metadata), **{**DAPO, "unit": unit})
    assert out.details["length"] == length
    assert out.components["length"] == float(length)


async def test_tokens_with_custom_key() -> None:
    # 90 tokens: -0.5 on the 80..100 ramp
    item = ScoreItem(response="", metadata={"n": 90})
    out = await score_item(REWARD, item, **{**DAPO, "unit": "tokens", "token_count_key": "n"})
    assert out.score == pytest.approx(-0.5)


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        (None, Reason.MISSING_REFERENCE),  # no metadata
        ({"tokens": 5}, Reason.MISSING_REFERENCE),  # another key
        ({"completion_tokens": "5"}, Reason.PARSE_ERROR),  # a string
        ({"completion_tokens": -1}, Reason.PARSE_ERROR),  # negative
        ({"completion_tokens": True}, Reason.PARSE_ERROR),  # a bool is no count
        ({"completion_tokens": 5.0}, Reason.PARSE_ERROR),  # a float is no count
    ],
)
async def test_bad_token_count_is_invalid(metadata: Any, reason: Reason) -> None:
    out = await score_item(REWARD, ScoreItem(response="x", metadata=metadata), **{**DAPO, "unit": "tokens"})
    assert (out.score, out.reason) == (None, reason)
    assert "completion_tokens" in out.details["message"]


@pytest.mark.parametrize("config", [DAPO, COSINE])
async def test_token_count_past_the_float_range_is_invalid_alone(config: dict[str, Any]) -> None:
    """A count of 10**400 (JSON integers are unbounded) made ``float(length)`` or ``length / max_length``
    raise OverflowError out of the reward, so every item of the batch came back ``internal_error``.
    Found in review."""
    cfg = REWARD.parse_config({**config, "unit": "tokens"})
    items = [
        ScoreItem(response="x", metadata={"completion_tokens": 10**400, "correct": True}),
        ScoreItem(response="y", metadata={"completion_tokens": 10**308, "correct": True}),
        ScoreItem(response="z", metadata={"completion_tokens": 10, "correct": True}),
    ]
    huge, largest, fine = await REWARD.score(items, cfg, ScoreContext(deadline_s=5))
    assert (huge.score, huge.reason) == (None, Reason.PARSE_ERROR), huge
    assert "completion_tokens" in huge.details["message"]
    assert largest.score == (-1.0 if config is DAPO else 0.5) and largest.components == {"length": 1e308}
    assert fine.score is not None and fine.components == {"length": 10.0}


@pytest.mark.parametrize(
    "config",
    [
        {"max_length": 100, "cache_length": 20},  # mode is required
        {"mode": "dapo_overlong", "cache_length": 20},  # max_length is required
        {"mode": "dapo_overlong", "max_length": 100},  # dapo needs cache_length
        {"mode": "dapo_overlong", "max_length": 100, "cache_length": 100},  # cache_length == max_length
        {"mode": "dapo_overlong", "max_length": 100, "cache_length": 150},  # cache_length > max_length
        {"mode": "dapo_overlong", "max_length": 100, "cache_length": 0},  # cache_length must be positive
        {
            "mode": "dapo_overlong",
            "max_length": 100,
            "cache_length": 20,
            "min_value_correct": 0.1,
        },  # cosine-only
        {"mode": "cosine", "max_length": 100, "cache_length": 20},  # dapo-only
        {"mode": "cosine", "max_length": 0},  # max_length must be positive
        {"mode": "cosine", "max_length": 100, "unit": "bytes"},  # unknown unit
        {"mode": "linear", "max_length": 100},  # unknown mode
        {"mode": "cosine", "max_length": 100, "budget": 5},  # unknown key
        # not finite (found in review: accepted, then every item came back internal_error, not a 422)
        {"mode": "cosine", "max_length": 100, "min_value_correct": math.nan},
        {"mode": "cosine", "max_length": 100, "max_value_correct": math.inf},
        {"mode": "cosine", "max_length": 100, "min_value_wrong": -math.inf},
        {"mode": "cosine", "max_length": 100, "max_value_wrong": math.nan},
    ],
)
def test_bad_config_is_rejected(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        REWARD.parse_config(config)
