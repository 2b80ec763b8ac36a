"""``regex``: search/fullmatch scoring, group-vs-reference comparison, and the ReDoS guard."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from conftest import score_results
from reward_calls import score_text
from rewardhub.errors import InvalidRequest
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards import patterns
from rewardhub.rewards.base import ScoreContext
from rewardhub.rewards.exact_match import ExactMatchReward
from rewardhub.rewards.json_schema import JsonSchemaReward
from rewardhub.rewards.patterns import (
    BATCH_BUDGET_S,
    BATCH_WALL_CAP_S,
    MATCH_TIMEOUT_S,
    MatchBudget,
    PatternTimeout,
)
from rewardhub.rewards.regex_match import RegexReward

NO_CACHE = {"use_cache": False}
REWARD = RegexReward(runtime=None)  # type: ignore[arg-type]  # text rewards don't use the runtime


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
    out = await score_text(REWARD, response, **config)
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
        # a whole float is its integer (it was "7.0", and "7" scored 0); another float is its text
        ("#### 7", {"answer": 7.0}, 1.0, None),
        ("#### 7.5", [7.5], 1.0, None),
        # the comparison is exact (no case folding)
        ("#### Paris", "paris", 0.0, None),
        # no match at all: nothing to compare
        ("the answer is 42", "42", 0.0, Reason.NO_ANSWER),
    ],
)
async def test_compare_group_to_reference(
    response: str, reference: Any, score: float, reason: Reason | None
) -> None:
    out = await score_text(
        REWARD, response, reference, pattern=r"####\s*(\S+)", compare_group_to_reference=True
    )
    assert (out.score, out.reason) == (score, reason)


@pytest.mark.parametrize(
    ("response", "score", "extracted"),
    [
        # the final answer after the reasoning, not the draft inside it (it was 0.0: the draft came first)
        ("<think>Maybe #### 41? Recheck: 6*7 = 42.</think>\n#### 42", 1.0, "42"),
        # a response cut off inside its reasoning has no answer (it was 1.0 on the draft)
        ("<think>So far #### 42 \nnow let me verify the", 0.0, None),
        # a draft in the reasoning and a wrong final answer
        ("<think>#### 42</think>#### 41", 0.0, "41"),
        # no reasoning: the first match, as before
        ("#### 42 then #### 41", 1.0, "42"),
    ],
)
async def test_compare_searches_the_answer_outside_the_reasoning(
    response: str, score: float, extracted: str | None
) -> None:
    """compare_group_to_reference searched the whole response, so the first "#### n" a reasoning model
    drafted inside <think> was compared, not its answer, and a rollout cut off in its reasoning was
    scored on a draft. Found in review. A search reads the answer outside the reasoning now, as
    exact_match's extract does."""
    out = await score_text(REWARD, response, "42", pattern=r"####\s*(\S+)", compare_group_to_reference=True)
    assert (out.score, out.details["extracted"]) == (score, extracted)


DIGITS, WORD = r"####\s*(\d+)", r"####\s*(\S+)"


@pytest.mark.parametrize(
    ("pattern", "response", "reference", "score"),
    [
        # \d matches full-width digits (Unicode, as re's does), so the group was "１２", which no reference
        # "12" equalled (0.0, where exact_match and f1 fold the forms: NFKC)
        (DIGITS, "#### １２", "12", 1.0),
        (DIGITS, "#### 12", "１２", 1.0),
        (DIGITS, "#### １２", "13", 0.0),
        # compatibility forms of letters too, and an invisible format character is none, as elsewhere
        (WORD, "#### Ｐａｒｉｓ", "Paris", 1.0),
        (WORD, "#### 1\u200b2", "12", 1.0),
        # ... but case still counts (the comparison is exact but for the forms)
        (WORD, "#### Ｐａｒｉｓ", "paris", 0.0),
        # digits of another script are other characters (NFKC keeps them), as in exact_match
        (DIGITS, "#### ١٢", "12", 0.0),
    ],
)
async def test_compare_folds_compatibility_forms(
    pattern: str, response: str, reference: str, score: float
) -> None:
    """The compared group and the references are read after NFKC (:func:`.text.fold_forms`), as the other
    text rewards compare: \\d and \\w are Unicode, so "#### １２" matched ``#### (\\d+)`` and then equalled no
    reference "12". Found in review."""
    out = await score_text(REWARD, response, reference, pattern=pattern, compare_group_to_reference=True)
    assert (out.score, out.reason) == (score, None), out
    assert out.details["extracted"] == response.removeprefix("#### ")  # shown as written


async def test_fullmatch_compare_still_reads_the_whole_response() -> None:
    """A fullmatch pattern describes the whole response, its reasoning included."""
    out = await score_text(
        REWARD,
        "<think>hmm</think>\n#### 42",
        "42",
        pattern=r"<think>.*?</think>\s*####\s*(\S+)",
        mode="fullmatch",
        compare_group_to_reference=True,
    )
    assert out.score == 1.0


async def test_unmatched_optional_group_is_no_answer() -> None:
    out = await score_text(
        REWARD, "answer", "1", pattern=r"answer(?: (\d+))?", compare_group_to_reference=True
    )
    assert (out.score, out.reason) == (0.0, Reason.NO_ANSWER)


@pytest.mark.parametrize(
    ("response", "score"),
    [("<answer>42</answer>", 1.0), ("so \\boxed{42}", 1.0), ("so \\boxed{41}", 0.0)],
)
async def test_compare_reads_the_group_of_the_alternative_that_matched(response: str, score: float) -> None:
    """A pattern of alternatives takes either answer form; a boxed answer is captured by group 2, and
    group 1 alone (None) scored a correct boxed answer 0 as no_answer."""
    out = await score_text(
        REWARD,
        response,
        "42",
        pattern=r"<answer>(.*?)</answer>|\\boxed\{(.*?)\}",
        compare_group_to_reference=True,
    )
    assert (out.score, out.reason) == (score, None)


async def test_compare_without_reference_is_invalid() -> None:
    out = await score_text(REWARD, "#### 42", None, pattern=r"#### (\d+)", compare_group_to_reference=True)
    assert (out.score, out.reason) == (None, Reason.MISSING_REFERENCE)


BLANK_GROUP = {"pattern": r"####\s*(\S*)", "compare_group_to_reference": True}  # "####" captures ""


@pytest.mark.parametrize(
    "reference",
    [
        # a blank string, or one of spaces (the comparison strips both sides)
        "",
        "  ",
        # a list of blanks, an answer object with a blank answer, a SQuAD row whose only text is blank
        [""],
        {"answer": ""},
        {"answers": [""]},
        {"answers": {"text": [""], "answer_start": [0]}},
        # a SQuAD v2 unanswerable row: regex has no abstention to score, so no reference (as before)
        {"answers": {"text": [], "answer_start": []}},
    ],
)
async def test_a_blank_reference_is_missing_not_matched_by_an_empty_group(reference: Any) -> None:
    """An empty group equalled a blank reference, so "####" with nothing after it scored 1.0: a policy
    rewarded for saying nothing. Found in review. A blank reference is missing_reference, as in
    exact_match and f1 (the same reading of the reference, answer_references)."""
    out = await score_text(REWARD, "####", reference, **BLANK_GROUP)
    assert (out.score, out.reason) == (None, Reason.MISSING_REFERENCE)


async def test_a_blank_among_real_references_is_dropped() -> None:
    """["", "42"] let an empty group match its blank; the blank is dropped, "42" still matches."""
    empty = await score_text(REWARD, "####", ["", "42"], **BLANK_GROUP)
    assert (empty.score, empty.reason, empty.details["reference"]) == (0.0, None, ["42"])
    assert (await score_text(REWARD, "#### 42", ["", "42"], **BLANK_GROUP)).score == 1.0


async def test_the_squad_answers_column_alone_is_read() -> None:
    """A SQuAD row's answers column on its own, as exact_match and f1 read it (it was missing_reference)."""
    out = await score_text(REWARD, "#### 42", {"text": ["42"], "answer_start": [7]}, **BLANK_GROUP)
    assert (out.score, out.reason) == (1.0, None)


async def test_plain_mode_ignores_the_reference() -> None:
    out = await score_text(REWARD, "abc", None, pattern="b")
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
async def test_redos_pattern_times_out_quickly(monkeypatch: pytest.MonkeyPatch, mode: str, n: int) -> None:
    # The wall clock patterns.py reads is this thread's CPU time: a host slow enough to reach the wall-clock
    # cap (test_the_wall_clock_still_caps_a_call) would stop the second item, and the test accepted that
    # whenever the call took that long, which left it nothing to check on such a host.
    monkeypatch.setattr(
        patterns, "time", SimpleNamespace(thread_time=time.thread_time, perf_counter=time.thread_time)
    )
    cfg = REWARD.parse_config({"pattern": "(x+x+)+y", "mode": mode})
    items = [ScoreItem(response="x" * n), ScoreItem(response="xxy")]
    cpu0 = time.thread_time()
    outs = await REWARD.score(items, cfg, ScoreContext(deadline_s=5))
    # without the match timeout this search runs for hours; it runs on this thread, so its CPU time
    # shows how long it searched, which a loaded host cannot stretch as it does the wall clock
    assert time.thread_time() - cpu0 < 3
    # the catastrophic item is invalid (not the model's fault) ...
    assert (outs[0].score, outs[0].reason) == (None, Reason.TIMEOUT)
    # ... and the next item of the batch is still scored: the one match spent a quarter of the call's
    # CPU budget, whatever the load
    assert outs[1].score == 1.0, outs[1]


class _Clocks:
    """Stand-ins for the clocks patterns.py reads, advanced by hand: a match on a loaded host."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.wall = 0.0
        self.time = SimpleNamespace(thread_time=lambda: self.cpu, perf_counter=lambda: self.wall)

    def match(self, cpu_s: float, wall_s: float, times_out: bool) -> Any:
        def run(text: str, timeout: float) -> str:
            self.cpu += cpu_s
            self.wall += wall_s
            if times_out:
                raise TimeoutError("regex time out")
            return text

        return run


def test_a_timed_out_match_on_a_loaded_host_leaves_the_rest_of_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """regex stops a match at its timeout in CPU time; the budget was charged in wall time, so on a host
    giving the loop a fifth of a core one catastrophic match (0.5 s of CPU, 2.5 s of wall) spent all of
    the call's 2 s and every later item was a spurious timeout. Found in review. The budget is charged in
    the thread's CPU time now: 1.5 s is left for the items after it."""
    clocks = _Clocks()
    monkeypatch.setattr(patterns, "time", clocks.time)
    budget = MatchBudget()
    with pytest.raises(PatternTimeout, match="ran past"):
        budget.run("(x+x+)+y", clocks.match(MATCH_TIMEOUT_S, 5 * MATCH_TIMEOUT_S, times_out=True), "x" * 5000)
    assert budget.run("y", clocks.match(0.001, 0.005, times_out=False), "xxy") == "xxy"
    assert budget.left_s == pytest.approx(BATCH_BUDGET_S - MATCH_TIMEOUT_S - 0.001)


def test_the_wall_clock_still_caps_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Charged in CPU time, the budget alone would let a host slow enough stall the loop for any time;
    past BATCH_WALL_CAP_S of wall time the call's remaining matches are timeouts however much CPU is left."""
    clocks = _Clocks()
    monkeypatch.setattr(patterns, "time", clocks.time)
    budget = MatchBudget()
    slow = BATCH_WALL_CAP_S / 4
    for _ in range(4):  # 0.04 s of CPU, the whole cap of wall time
        assert budget.run("y", clocks.match(0.01, slow, times_out=False), "xxy") == "xxy"
    with pytest.raises(PatternTimeout, match="wall-clock cap"):
        budget.run("y", clocks.match(0.01, slow, times_out=False), "xxy")


async def test_the_reward_scores_past_a_catastrophic_match_on_a_loaded_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same through the reward and the real engine: the wall clock patterns.py reads runs five times
    as fast as the thread's CPU time, as it would on a host giving the loop a fifth of a core."""
    # Five times the thread's CPU time exactly, not the real wall clock plus four times it: a real wall
    # clock stretched by this host's own load could reach the cap, and the test then checked nothing.
    slowed = SimpleNamespace(
        thread_time=time.thread_time, perf_counter=lambda: patterns.WALL_CAP_FACTOR * time.thread_time()
    )
    monkeypatch.setattr(patterns, "time", slowed)
    cfg = REWARD.parse_config({"pattern": "(x+x+)+y"})
    outs = await REWARD.score(
        [ScoreItem(response="x" * 5000), ScoreItem(response="xxy")], cfg, ScoreContext(deadline_s=5)
    )
    assert (outs[0].score, outs[0].reason) == (None, Reason.TIMEOUT)
    # 0.5 s of CPU reads as 2.5 s of wall: past the old wall budget (2 s), well within the cap (10 s)
    assert outs[1].score == 1.0, outs[1]


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
    cpu0 = time.thread_time()
    [out] = await REWARD.score([ScoreItem(response="x" * 5000)], cfg, ScoreContext(deadline_s=0.05))
    assert out.reason == Reason.TIMEOUT
    # the match got the deadline's 0.05 s, not the default 0.5 s (a clock bound could not tell them apart
    # on a loaded host); and the call still ended (not the backtracking's hours): this thread's CPU time,
    # which load does not stretch
    assert "ran past 0.05s" in str(out.details), out
    assert time.thread_time() - cpu0 < 3


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
    "pattern",
    [
        "(?:" * 200 + "a" + ")" * 200,
        "(" * 400 + "a" + ")" * 400,
        "(?=" * 60 + "a" + ")" * 60,
        "(?V1)" + "(?:[[a]--[b]]" * 60 + ")" * 60,
        # version 1's nested sets recurse too (some seven frames a level): 200 of them were a 500
        "(?V1)" + "[" * 200 + "a" + "]" * 200,
        "(?V1)" + "(?:" * 30 + "[" * 30 + "a" + "]" * 30 + ")" * 30,
    ],
)
def test_a_pattern_nested_too_deep_is_rejected(pattern: str) -> None:
    """The engine's compiler recurses a few Python frames for every level of groups: "(?:" * 200 raised
    RecursionError out of the config's validation, an HTTP 500 for a caller's bad config. Found in review.
    Past MAX_NESTING (50) levels the pattern is a 422, wherever a caller's pattern goes."""
    with pytest.raises(InvalidRequest, match="nests groups"):
        REWARD.parse_config({"pattern": pattern})
    with pytest.raises(InvalidRequest, match="nests groups"):
        ExactMatchReward(runtime=None).parse_config({"extract": pattern})  # type: ignore[arg-type]


async def test_a_pattern_nested_within_the_bound_is_accepted() -> None:
    pattern = "(" * patterns.MAX_NESTING + "a" + ")" * patterns.MAX_NESTING
    out = await score_text(REWARD, "ab", pattern=pattern)
    assert out.score == 1.0
    sets = "(?V1)" + "[" * patterns.MAX_NESTING + "a" + "]" * patterns.MAX_NESTING
    assert (await score_text(REWARD, "ab", pattern=sets)).score == 1.0


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
    assert (await score_text(REWARD, response, pattern=pattern)).score == score


@pytest.mark.parametrize(
    "pattern",
    [
        "(?fi)" + "[\u0100-\uffff]" * 300,
        "x(?if:" + "[a-\uffff]" * 300 + ")",
        "(?f)(?i)" + "(?:[\u0100-\uffff]{2}){150}",
    ],
)
async def test_a_big_pattern_with_full_case_folding_is_rejected(pattern: str) -> None:
    """With full case folding (``(?fi)``) the engine folds every code point of each character class it
    lays out: 19,000 classes of the BMP, within the size bound, took 15 s to compile on the event loop (a
    config's pattern; a JSON Schema's in a reference, per item), where ``(?i)`` alone takes 0.2 s. Found in
    review. Such a pattern may have MAX_FULLCASE_UNITS units, wherever a caller's pattern goes; a small
    one, and a big one without the flag, still compile."""
    with pytest.raises(InvalidRequest, match="full case folding"):
        REWARD.parse_config({"pattern": pattern})
    with pytest.raises(InvalidRequest, match="full case folding"):
        ExactMatchReward(runtime=None).parse_config({"extract": pattern})  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="not a valid JSON Schema"):
        JsonSchemaReward(runtime=None).parse_config({"schema": {"pattern": pattern}})  # type: ignore[arg-type]
    out = await score_text(JsonSchemaReward(runtime=None), '"x"', {"pattern": pattern})  # type: ignore[arg-type]
    assert (out.score, out.reason) == (None, Reason.PARSE_ERROR), out
    assert (await score_text(REWARD, "STRASSE", pattern="(?fi)^straße$")).score == 1.0
    assert (await score_text(REWARD, "x", pattern=pattern.replace("f", ""))).score == 0.0


@pytest.mark.parametrize(
    ("pattern", "response", "score"),
    [
        (r"(?V1)^[[a-z]--[aeiou]]+$", "rhythm", 1.0),  # a set difference: consonants only
        (r"(?V1)^[[a-z]--[aeiou]]+$", "rhyme", 0.0),
        (r"(?V1)^[\w&&\p{Greek}]+$", "λόγος", 1.0),  # a set intersection
        (r"(?V1)^[\w&&\p{Greek}]+$", "logos", 0.0),
        (r"^[[a]+$", "[a[", 1.0),  # version 0 still reads "[" in a set as the character
    ],
)
async def test_a_version_1_pattern_compiles(pattern: str, response: str, score: float) -> None:
    """The engine's version was pinned to 0 at compile, so every pattern that turns on version 1 with
    (?V1), the `regex` syntax of set operations, was a 422 ("VERSION0 and VERSION1 flags are mutually
    incompatible"), in regex and in exact_match's and f1's extract alike."""
    assert (await score_text(REWARD, response, pattern=pattern)).score == score
    extract = {"extract": r"(?V1)<answer>([[\w]--[\d]]+)</answer>"}
    out = await score_text(ExactMatchReward(runtime=None), "<answer>Paris</answer>", "paris", **extract)  # type: ignore[arg-type]
    assert out.score == 1.0


@pytest.mark.parametrize(
    ("config", "match"),
    [
        # a version 1 set ends at its outer "]": scanned as version 0, the ")" inside it closed the group
        # and the repeat multiplied one character
        ({"pattern": r"(?V1)(?:a{1000}[[x])]){1000}"}, "expands to about"),
        # version 1 folds case fully wherever it ignores case: the (?fi) bound
        ({"pattern": "(?V1)" + "[\u0100-\uffff]" * 300, "ignorecase": True}, "full case folding"),
        ({"pattern": "(?V1i)" + "[\u0100-\uffff]" * 300}, "full case folding"),
        ({"pattern": "(?V0)(?V1)x"}, "not a valid regular expression"),
    ],
)
def test_a_version_1_pattern_keeps_the_compile_bounds(config: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidRequest, match=match):
        REWARD.parse_config(config)
    REWARD.parse_config({"pattern": "(?V1)" + "[\u0100-\uffff]" * 300})  # without ignorecase: plain folding


async def test_a_long_match_is_bounded_in_memory(client: httpx.AsyncClient) -> None:
    """``(.)*`` keeps a backtrack entry and the group's span for every character it repeats over: on a
    1 MB response it grew the service process by 164 MB and scored 1.0 (on 5 MB by 160-450 MB, stopped
    only by its 0.5 s). A long response is matched in a CPU worker, where the match may add 64 MB
    (``MATCH_MEMORY_BYTES``): past that the item is resource_limit, invalid, and the service holds none
    of it. The same response with a pattern that keeps nothing per character still matches there, a
    group is compared there, and a catastrophic one times out there as it does on the event loop."""
    text = "a" * 1_000_000
    res = await score_results(client, "regex", [{"response": text}], options=NO_CACHE, pattern="(.)*")
    assert (res[0]["valid"], res[0]["reason"]) == (False, "resource_limit"), res[0]
    assert "64 MB" in res[0]["details"]["message"]
    res = await score_results(client, "regex", [{"response": text}], options=NO_CACHE, pattern="^a+$")
    assert (res[0]["score"], res[0]["valid"]) == (1.0, True), res[0]
    res = await score_results(
        client,
        "regex",
        [{"response": "x " * 200_000 + "#### 42", "reference": "42"}],
        options=NO_CACHE,
        pattern=r"#### (\S+)",
        compare_group_to_reference=True,
    )
    assert (res[0]["score"], res[0]["details"]["extracted"]) == (1.0, "42"), res[0]
    res = await score_results(
        client, "regex", [{"response": "x" * 300_000}], options=NO_CACHE, pattern="(x+x+)+y"
    )
    assert (res[0]["valid"], res[0]["reason"]) == (False, "timeout"), res[0]
