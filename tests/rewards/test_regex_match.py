"""``regex``: search/fullmatch scoring, group-vs-reference comparison, and the ReDoS guard."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rewardhub.errors import InvalidRequest
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, ScoreContext
from rewardhub.rewards.exact_match import ExactMatchReward
from rewardhub.rewards.json_schema import JsonSchemaReward
from rewardhub.rewards.patterns import BATCH_BUDGET_S, MATCH_TIMEOUT_S
from rewardhub.rewards.regex_match import RegexReward

REWARD = RegexReward(runtime=None)  # type: ignore[arg-type]  # text rewards don't use the runtime


async def score_one(response: str, reference: Any = None, **config: Any) -> Outcome:
    cfg = REWARD.parse_config(config)
    [out] = await REWARD.score(
        [ScoreItem(response=response, reference=reference)], cfg, ScoreContext(deadline_s=5)
    )
    return out


@pytest.mark.parametrize(
    ("config", "response", "score"),
    [
        # search: a match anywhere
        ({"pattern": r"\d+"}, "abc 123", 1.0),
        # search: no match
        ({"pattern": r"\d+"}, "abc", 0.0),
        # fullmatch: the whole response
        ({"pattern": r"\d+", "mode": "fullmatch"}, "123", 1.0),
        # fullmatch: a trailing space breaks it
        ({"pattern": r"\d+", "mode": "fullmatch"}, "123 ", 0.0),
        # case-sensitive by default
        ({"pattern": "yes"}, "YES", 0.0),
        # ignorecase
        ({"pattern": "yes", "ignorecase": True}, "YES", 1.0),
        # '.' matches newlines by default (dotall)
        ({"pattern": r"<a>.*</a>", "mode": "fullmatch"}, "<a>x\ny</a>", 1.0),
        # ... unless dotall is off
        ({"pattern": r"<a>.*</a>", "mode": "fullmatch", "dotall": False}, "<a>x\ny</a>", 0.0),
        # an R1-style format pattern
        (
            {"pattern": r"<think>.*?</think>\s*<answer>.*?</answer>", "mode": "fullmatch"},
            "<think>a</think>\n<answer>b</answer>",
            1.0,
        ),
    ],
)
async def test_match_table(config: dict[str, Any], response: str, score: float) -> None:
    out = await score_one(response, **config)
    assert out.score == score
    assert out.reason == (None if score else Reason.FORMAT)


@pytest.mark.parametrize(
    ("response", "reference", "score", "reason"),
    [
        # the group equals the reference after whitespace strip
        ("so #### 42", " 42 ", 1.0, None),
        # a different answer
        ("so #### 42", "43", 0.0, None),
        # one of several acceptable references
        ("#### 7", ["6", "7"], 1.0, None),
        # the {"answer": ...} form
        ("#### 7", {"answer": "7"}, 1.0, None),
        # the comparison is exact (no case folding)
        ("#### Paris", "paris", 0.0, None),
        # no match at all: nothing to compare
        ("the answer is 42", "42", 0.0, Reason.NO_ANSWER),
    ],
)
async def test_compare_group_to_reference(
    response: str, reference: Any, score: float, reason: Reason | None
) -> None:
    out = await score_one(response, reference, pattern=r"####\s*(\S+)", compare_group_to_reference=True)
    assert (out.score, out.reason) == (score, reason)


async def test_unmatched_optional_group_is_no_answer() -> None:
    out = await score_one("answer", "1", pattern=r"answer(?: (\d+))?", compare_group_to_reference=True)
    assert (out.score, out.reason) == (0.0, Reason.NO_ANSWER)


async def test_compare_without_reference_is_invalid() -> None:
    out = await score_one("#### 42", None, pattern=r"#### (\d+)", compare_group_to_reference=True)
    assert (out.score, out.reason) == (None, Reason.MISSING_REFERENCE)


async def test_plain_mode_ignores_the_reference() -> None:
    out = await score_one("abc", None, pattern="b")
    assert out.score == 1.0


@pytest.mark.parametrize(
    ("mode", "n"),
    [
        # search: exponential backtracking from every start position
        ("search", 5000),
        # fullmatch: anchored, the regex engine is only polynomial here, so a longer run is needed
        ("fullmatch", 50_000),
    ],
)
async def test_redos_pattern_times_out_quickly(mode: str, n: int) -> None:
    cfg = REWARD.parse_config({"pattern": "(x+x+)+y", "mode": mode})
    items = [ScoreItem(response="x" * n), ScoreItem(response="xxy")]
    t0 = time.perf_counter()
    outs = await REWARD.score(items, cfg, ScoreContext(deadline_s=5))
    elapsed = time.perf_counter() - t0
    assert elapsed < 30  # without the match timeout this search runs for hours
    # the catastrophic item is invalid (not the model's fault) ...
    assert (outs[0].score, outs[0].reason) == (None, Reason.TIMEOUT)
    # ... and the next item of the batch is still scored, while the call's budget lasts: regex times a
    # match by CPU time and the budget is wall time (it bounds the event loop's stall), so on a loaded
    # host the one catastrophic match can spend it all, and then the next item is a timeout too
    if elapsed < BATCH_BUDGET_S:
        assert outs[1].score == 1.0, outs[1]
    else:
        assert outs[1].score == 1.0 or "used up" in outs[1].details["message"], outs[1]


async def test_a_batch_shares_one_matching_budget() -> None:
    # each catastrophic item may run MATCH_TIMEOUT_S, but one call's matches stop at BATCH_BUDGET_S
    # together: the items after that are not run, so 4096 such items cannot stall the event loop
    cfg = REWARD.parse_config({"pattern": "(x+x+)+y"})
    n = int(BATCH_BUDGET_S / MATCH_TIMEOUT_S) + 2
    items = [ScoreItem(response="x" * 5000)] * n + [ScoreItem(response="xxy")]
    outs = await REWARD.score(items, cfg, ScoreContext(deadline_s=5))
    assert [(o.score, o.reason) for o in outs] == [(None, Reason.TIMEOUT)] * (n + 1)
    assert "used up" in outs[-1].details["message"]


async def test_short_deadline_shortens_the_match_budget() -> None:
    cfg = REWARD.parse_config({"pattern": "(x+x+)+y"})
    t0 = time.perf_counter()
    [out] = await REWARD.score([ScoreItem(response="x" * 5000)], cfg, ScoreContext(deadline_s=0.05))
    assert out.reason == Reason.TIMEOUT
    assert time.perf_counter() - t0 < 2.0  # not the backtracking's hours (0.4 s was tight on a loaded host)


@pytest.mark.parametrize(
    "config",
    [
        {},  # pattern is required
        {"pattern": ""},  # empty pattern
        {"pattern": "("},  # does not compile
        {"pattern": r"\d+", "compare_group_to_reference": True},  # comparison needs a group
        {"pattern": "a", "mode": "match"},  # unknown mode
        {"pattern": "a", "flags": "i"},  # unknown key
    ],
)
def test_bad_config_is_rejected(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        REWARD.parse_config(config)


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?:a{1000}){1000}",
        r"(?:a{1000,}){1000,}",
        r"(?:x|[a-z]{1000}){1000}",
        r"(?:(?:\d{100}){100}){100}",
    ],
)
def test_a_pattern_that_expands_past_the_bound_is_rejected(pattern: str) -> None:
    """The engine lays out the minimum count of a counted repeat, so nested ones multiply: the config
    validator's compile of "(?:a{3000}){3000}" (17 characters) took 6 s and 2.4 GB on the event loop,
    and one more level had the process killed for memory. Found in review. Such a pattern is a 422 before
    it is compiled, wherever a caller's pattern goes (regex, extract, a JSON Schema's pattern)."""
    with pytest.raises(InvalidRequest, match="expands to about"):
        REWARD.parse_config({"pattern": pattern})
    with pytest.raises(InvalidRequest, match="expands to about"):
        ExactMatchReward(runtime=None).parse_config({"extract": pattern})  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="not a valid JSON Schema"):
        JsonSchemaReward(runtime=None).parse_config({"schema": {"pattern": pattern}})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pattern", "response", "score"),
    [
        (r"(?:ab){1,5000}c", "ababc", 1.0),  # a large maximum is not laid out
        (r"^(?:\d{3}-){2}\d{4}$", "555-123-4567", 1.0),
        (r"[{]{3}\p{L}{2}", "{{{é", 0.0),
        (r"a{5000}", "a" * 5000, 1.0),
    ],
)
async def test_ordinary_counted_repeats_are_accepted(pattern: str, response: str, score: float) -> None:
    assert (await score_one(response, pattern=pattern)).score == score
