"""``exact_match``: the normalisations and the references that SQuAD's normalisation would empty."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from conftest import score_results
from reward_calls import score_text
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import ScoreContext
from rewardhub.rewards.exact_match import ExactMatchReward

REWARD = ExactMatchReward(runtime=None)  # type: ignore[arg-type]  # text rewards don't use the runtime


@pytest.mark.parametrize(
    ("response", "reference", "score"),
    [
        # SQuAD normalisation: case, punctuation and articles dropped
        ("The Eiffel Tower!", "eiffel tower", 1.0),
        # the option letter A against itself, bracketed or with a full stop
        ("A", "A", 1.0),
        ("(A).", "A", 1.0),
        # a response cut off inside its reasoning has no answer: it is not the letter A (it was 1.0, as the
        # reference "A" and the empty answer both normalised to nothing)
        ("<think>Options A and B: A looks", "A", 0.0),
        # ... nor is an empty response, or another article
        ("", "A", 0.0),
        ("An", "A", 0.0),
        ("<think>x</think>", "The", 0.0),
        # a reference of punctuation only is compared with its punctuation
        ("", "?", 0.0),
        ("?", "?", 1.0),
        # one of several references that normalises to nothing is not matched by an empty answer
        ("", ["B", "a"], 0.0),
        ("a", ["B", "a"], 1.0),
    ],
)
async def test_squad_table(response: str, reference: Any, score: float) -> None:
    assert (await score_text(REWARD, response, reference)).score == score


@pytest.mark.parametrize(
    ("response", "reference"),
    [
        ("Ocean’s Eleven", "Ocean's Eleven"),  # a curly apostrophe
        ("“Paris”", "Paris"),  # curly quotes
        ("東京。", "東京"),  # the CJK full stop
        ("¿Qué?", "qué"),
    ],
)
async def test_squad_drops_unicode_punctuation(response: str, reference: str) -> None:
    """SQuAD's script drops string.punctuation, ASCII only, and NFKC leaves the curly apostrophe and
    quotes models write, so "Ocean’s Eleven" was not the reference "Ocean's Eleven" and scored 0. Found
    in review."""
    assert (await score_text(REWARD, response, reference)).score == 1.0


@pytest.mark.parametrize(
    "reference",
    [
        {"answer": 42.0},  # a float column, as pandas reads integers with gaps: it was "420" after squad
        [41, 42.0],
        {"answers": [42.0]},
    ],
)
async def test_a_numeric_reference_is_its_number(reference: Any) -> None:
    """A whole float reference was written "42.0", which SQuAD's normalisation reads as "420", so the
    answer "42" scored 0. Found in review."""
    out = await score_text(
        REWARD, "The answer is <answer>42</answer>", reference, extract="<answer>(.*?)</answer>"
    )
    assert (out.score, out.reason) == (1.0, None)


@pytest.mark.parametrize(
    ("config", "response", "reference", "score"),
    [
        ({"normalize": "whitespace"}, "  Paris   France ", "paris france", 1.0),
        ({"normalize": "whitespace", "case_sensitive": True}, "paris", "Paris", 0.0),
        # compatibility forms fold (NFKC), as squad's do: full-width letters and digits (CJK output), a
        # ligature (they were 0.0); a no-break space is a space
        ({"normalize": "whitespace"}, "Ｐａｒｉｓ", "paris", 1.0),
        ({"normalize": "whitespace"}, "４２", "42", 1.0),
        ({"normalize": "whitespace"}, "ﬁsh\u00a0soup", "Fish soup", 1.0),
        ({"normalize": "whitespace", "case_sensitive": True}, "Ｐａｒｉｓ", "Paris", 1.0),
        # ... keeping the case where it counts
        ({"normalize": "whitespace", "case_sensitive": True}, "ｐａｒｉｓ", "Paris", 0.0),
        # squad folds case fully, as whitespace does ("ß" is "ss"; lower() left it, 0.0 under squad alone)
        ({}, "STRASSE", "Straße", 1.0),
        # squad reads CJK text as f1's tokens (MLQA's EM for Chinese): a space between CJK characters is
        # no difference (it was 0.0, with F1 1.0), the characters themselves are
        ({}, "東京 タワー", "東京タワー", 1.0),
        ({}, "東京tower", "東京 Tower", 1.0),
        ({}, "東京", "東京タワー", 0.0),
        ({}, "京東", "東京", 0.0),
        ({"normalize": "whitespace"}, "STRASSE", "Straße", 1.0),
        # the capital dotted I (Turkish) is i ignoring case: casefold wrote "i" and a combining dot above,
        # so "İstanbul" was not "istanbul" in any normalisation (0.0)
        ({}, "İstanbul", "istanbul", 1.0),
        ({}, "İZMİR", "Izmir", 1.0),
        ({"normalize": "whitespace"}, "İstanbul", "ISTANBUL", 1.0),
        ({"normalize": "none"}, "İstanbul", "istanbul", 1.0),
        ({"normalize": "whitespace", "case_sensitive": True}, "İstanbul", "Istanbul", 0.0),
        # none compares as written, ignoring case unless case_sensitive (as the README says)
        ({"normalize": "none"}, "Ｐａｒｉｓ", "Paris", 0.0),
        ({"normalize": "none"}, "PARIS", "Paris", 1.0),
        ({"normalize": "none", "case_sensitive": True}, "PARIS", "Paris", 0.0),
        ({"normalize": "none"}, "Paris ", "Paris", 0.0),
        # the newlines R1 and Qwen3 put after </think> are no part of the answer (it was 0.0)
        ({"normalize": "none"}, "<think>Lyon?</think>\n\nParis", "Paris", 1.0),
        ({"normalize": "none"}, "\n\nParis", "Paris", 0.0),
        ({"extract": "<answer>(.*?)</answer>"}, "<answer>A</answer>", "A", 1.0),
        # an empty <answer> is not the letter A
        ({"extract": "<answer>(.*?)</answer>"}, "<answer></answer>", "A", 0.0),
    ],
)
async def test_config_table(config: dict[str, Any], response: str, reference: Any, score: float) -> None:
    assert (await score_text(REWARD, response, reference, **config)).score == score


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
    """An extract pattern comes from the caller as the regex reward's does: ``(.)*`` keeps a backtrack
    entry and the group's span for every character, and on the event loop grew the service by 172 MB on
    a 1 MB response (483 MB on 5 MB, then a timeout). A long text is matched in a CPU worker under the
    regex reward's 64 MB cap: past it the item is resource_limit; an ordinary pattern still reads its
    answer there, and a catastrophic one times out there as on the event loop."""
    opts = {"use_cache": False}
    text = "a" * 1_000_000
    res = await score_results(
        client, "exact_match", [{"response": text, "reference": "a"}], options=opts, extract="(.)*"
    )
    assert (res[0]["valid"], res[0]["reason"]) == (False, "resource_limit"), res[0]
    assert "64 MB" in res[0]["details"]["message"]
    long = "<think>" + "<answer>7</answer> " * 20_000 + "</think>" + "x " * 200_000 + "<answer>42</answer> y"
    items = [
        {"response": long, "reference": "42"},
        {"response": long, "reference": "7"},
        {"response": "x " * 200_000},
    ]
    res = await score_results(client, "exact_match", items, options=opts, extract="<answer>(.*?)</answer>")
    assert [(r["score"], r["details"].get("extracted")) for r in res[:2]] == [(1.0, "42"), (0.0, "42")], res
    assert (res[2]["valid"], res[2]["reason"]) == (False, "missing_reference"), res[2]
    res = await score_results(
        client,
        "exact_match",
        [{"response": "x" * 300_000, "reference": "x"}],
        options=opts,
        extract="(x+x+)+y",
    )
    assert (res[0]["valid"], res[0]["reason"]) == (False, "timeout"), res[0]
    res = await score_results(
        client,
        "exact_match",
        [{"response": "x " * 200_000, "reference": "x"}],
        options=opts,
        extract="<a>(.*)</a>",
    )
    assert (res[0]["score"], res[0]["reason"]) == (0.0, "no_answer"), res[0]
