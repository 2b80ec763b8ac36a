"""``f1``: SQuAD token F1, max over references, with precision/recall components."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from conftest import score_results
from reward_calls import score_text
from rewardhub.errors import InvalidRequest
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import ScoreContext
from rewardhub.rewards.f1 import F1Reward, token_f1
from rewardhub.rewards.patterns import BATCH_BUDGET_S, MATCH_TIMEOUT_S

REWARD = F1Reward(runtime=None)  # type: ignore[arg-type]  # text rewards don't use the runtime


@pytest.mark.parametrize(
    ("response", "reference", "f1", "precision", "recall"),
    [
        # identical after SQuAD normalisation (article, case, punctuation dropped)
        ("The Cat sat!", "cat sat", 1.0, 1.0, 1.0),
        # 2 common of 4 predicted, 2 gold: P=1/2, R=1 -> 2*(1/2)/(3/2) = 2/3
        ("cat sat on mat", "cat sat", 2 / 3, 0.5, 1.0),
        # bag of tokens: 'cat' twice on the left counts once against one gold 'cat': P=1/2, R=1
        ("cat cat", "cat", 2 / 3, 0.5, 1.0),
        # 1 common of 1 predicted, 3 gold: P=1, R=1/3 -> 2*(1/3)/(4/3) = 1/2
        ("paris", "paris france europe", 0.5, 1.0, 1 / 3),
        # no overlap
        ("dog", "cat", 0.0, 0.0, 0.0),
        # case is folded fully: "STRASSE" is the token "straße" (lower() left "ß": 1/2 common, 0.5)
        ("DIE STRASSE", "die Straße", 1.0, 1.0, 1.0),
        # the capital dotted I is i ignoring case (casefold wrote "i" and a combining dot: 0.0)
        ("İstanbul İzmir", "istanbul izmir", 1.0, 1.0, 1.0),
        # a reference that SQuAD's normalisation empties ('a' is an article) keeps its articles, and so
        # does the response: 'the' is not the answer 'a' (it was 1.0: both normalised to nothing)
        ("the", "a", 0.0, 0.0, 0.0),
        # ... so the option letter A is matched by A, and partly by 'option A'
        ("(A)", "A", 1.0, 1.0, 1.0),
        ("Option A", "A", 2 / 3, 0.5, 1.0),
        # only the prediction is empty
        ("", "cat", 0.0, 0.0, 0.0),
        # only the gold is empty (punctuation only)
        ("cat", "...", 0.0, 0.0, 0.0),
        # Unicode punctuation is dropped too (it was 0.5: "ocean’s" was not the token "oceans")
        ("Ocean’s Eleven", "Ocean's Eleven", 1.0, 1.0, 1.0),
        # max over references: the second one matches fully
        ("cat sat", ["dog", "cat sat"], 1.0, 1.0, 1.0),
        # {"answers": [...]} form; best is 'new york' (P=1, R=1) over 'york'
        ("New York", {"answers": ["york", "new york"]}, 1.0, 1.0, 1.0),
        # {"answer": ...} form: P=1/2, R=1
        ("new york", {"answer": "york"}, 2 / 3, 0.5, 1.0),
    ],
)
async def test_f1_table(response: str, reference: Any, f1: float, precision: float, recall: float) -> None:
    out = await score_text(REWARD, response, reference)
    assert out.score == pytest.approx(f1)
    assert out.components["precision"] == pytest.approx(precision)
    assert out.components["recall"] == pytest.approx(recall)
    assert out.reason is None


@pytest.mark.parametrize(
    "response",
    [
        "<think>The options are A, B and C; A looks",  # cut off in its reasoning: no answer
        "",  # empty
        "An",  # an article, not the letter
    ],
)
async def test_a_reference_squad_normalises_to_nothing_is_not_matched_by_no_answer(response: str) -> None:
    """The option letter "A" is an article to SQuAD's normalisation, so the reference "A" had no tokens,
    and every response without tokens either (one cut off inside its <think>, an empty one) scored 1.0
    against it: a rollout rewarded for never closing its reasoning. Found in review."""
    assert (await score_text(REWARD, response, "A")).score == 0.0


def test_token_f1_direct() -> None:
    # 'a b c' vs 'b c d': 2 common, P=R=2/3, F1=2/3
    assert token_f1(["a", "b", "c"], ["b", "c", "d"]) == pytest.approx((2 / 3, 2 / 3, 2 / 3))


async def test_extract_pattern_scores_the_group() -> None:
    # extracted 'New York' vs 'new york city': P=1, R=2/3 -> F1 = 2*(2/3)/(5/3) = 0.8
    out = await score_text(
        REWARD,
        "I think <answer>Boston</answer>, no: <answer>New York</answer>",
        "new york city",
        extract=r"<answer>(.*?)</answer>",
    )
    assert out.score == pytest.approx(0.8)
    assert out.details["extracted"] == "New York"
    assert out.details["best_reference"] == "new york city"


async def test_extract_without_match_is_no_answer() -> None:
    out = await score_text(REWARD, "no tags here", "cat", extract=r"<answer>(.*?)</answer>")
    assert (out.score, out.reason) == (0.0, Reason.NO_ANSWER)


@pytest.mark.parametrize(
    "reference",
    [
        {"answer": 1969},  # a number in an answer object, as math reads it ([1969] already was)
        {"answers": [1969]},
    ],
)
async def test_number_in_an_answer_object_is_read(reference: Any) -> None:
    out = await score_text(REWARD, "It was 1969.", reference)
    # read, not missing_reference: 'it was 1969' vs '1969' is P=1/3, R=1, F1=0.5
    assert (out.score, out.reason) == (pytest.approx(0.5), None)


@pytest.mark.parametrize(
    "reference",
    [
        None,  # no reference at all
        {"gold": "cat"},  # an object without answers/answer
        [],  # an empty list
    ],
)
async def test_missing_reference_is_invalid(reference: Any) -> None:
    out = await score_text(REWARD, "cat", reference)
    assert out.score is None
    assert out.reason == Reason.MISSING_REFERENCE


async def test_extract_timeout_is_invalid_and_quick() -> None:
    # The 0.5 s per-match limit must stop it: not the item's deadline (600 s here), nor the hours the
    # pattern would backtrack. The match runs on this thread, so its CPU time shows how long it ran: a
    # loaded host stretches the wall clock (a 30 s wall bound was once at risk), never this thread's CPU
    # time past the time it actually matched.
    cpu0 = time.thread_time()
    [out] = await REWARD.score(
        [ScoreItem(response="x" * 5000, reference="x")],
        REWARD.parse_config({"extract": r"(x+x+)+y"}),
        ScoreContext(deadline_s=600),
    )
    assert (out.score, out.reason) == (None, Reason.TIMEOUT)
    assert time.thread_time() - cpu0 < 3


async def test_extract_matches_of_a_batch_share_one_budget() -> None:
    # past BATCH_BUDGET_S of extraction in one call, the remaining items are timeouts, not matched
    cfg = REWARD.parse_config({"extract": r"(x+x+)+y"})
    n = int(BATCH_BUDGET_S / MATCH_TIMEOUT_S) + 2
    items = [ScoreItem(response="x" * 5000, reference="x")] * n + [ScoreItem(response="xxy", reference="x")]
    outs = await REWARD.score(items, cfg, ScoreContext(deadline_s=5))
    assert [(o.score, o.reason) for o in outs] == [(None, Reason.TIMEOUT)] * (n + 1)
    assert "used up" in outs[-1].details["message"]


@pytest.mark.parametrize(
    "config",
    [
        {"extract": "("},  # does not compile
        {"normalize": "none"},  # unknown key (f1 always uses SQuAD normalisation)
    ],
)
def test_bad_config_is_rejected(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        REWARD.parse_config(config)


async def test_batch_keeps_order() -> None:
    cfg = REWARD.parse_config({})
    items = [
        ScoreItem(response="cat", reference="cat"),
        ScoreItem(response="dog"),
        ScoreItem(response="x", reference="y"),
    ]
    outs = await REWARD.score(items, cfg, ScoreContext(deadline_s=5))
    assert [o.score for o in outs] == [1.0, None, 0.0]


async def test_extract_match_honours_the_request_deadline() -> None:
    """A request's deadline shorter than the 0.5 s a match gets bounds the match (as regex's does): a
    catastrophic extract pattern ran its full 0.5 s on a 0.05 s deadline."""
    cfg = REWARD.parse_config({"extract": r"(x+x+)+y"})
    cpu = time.process_time()
    [out] = await REWARD.score(
        [ScoreItem(response="x" * 5000, reference="x")], cfg, ScoreContext(deadline_s=0.05)
    )
    assert (out.score, out.reason) == (None, Reason.TIMEOUT)
    assert "ran past 0.05s" in out.details["message"]
    assert time.process_time() - cpu < 0.3  # CPU time, 6x the deadline: the old 0.5 s is over it


async def test_a_long_extract_is_bounded_in_memory(client: httpx.AsyncClient) -> None:
    """As exact_match's: ``(.)*`` on a 1 MB response grew the service by 171 MB (scored); a long text is
    matched in a CPU worker under a 64 MB cap, resource_limit past it, and its extracted span is scored
    there as on the event loop (precision and recall kept)."""
    opts = {"use_cache": False}
    res = await score_results(
        client, "f1", [{"response": "a" * 1_000_000, "reference": "a"}], options=opts, extract="(.)*"
    )
    assert (res[0]["valid"], res[0]["reason"]) == (False, "resource_limit"), res[0]
    long = "x " * 200_000 + "<answer>the big cat</answer>"
    res = await score_results(
        client,
        "f1",
        [{"response": long, "reference": "big dog"}],
        options=opts,
        extract="<answer>(.*?)</answer>",
    )
    assert res[0]["score"] == pytest.approx(0.5), res[0]
    assert res[0]["components"] == {"precision": 0.5, "recall": 0.5}, res[0]
