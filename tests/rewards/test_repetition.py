"""``repetition``: the n-gram repetition penalty over words or token ids."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

from reward_calls import score_item
from rewardhub.errors import InvalidRequest
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.repetition import RepetitionReward, repeated_fraction
from waiting import until

REWARD = RepetitionReward(runtime=None)  # type: ignore[arg-type]  # text rewards don't use the runtime


@pytest.mark.parametrize(
    ("ids", "n", "max_penalty", "expected"),
    [
        ([5, 5, 5, 5, 5], 2, -1.0, -0.75),  # algorithms.md §5.5: 4 bigrams, 1 unique -> (1 - 1/4) * -1
        ([5, 5, 5, 5, 5], 2, -0.5, -0.375),  # same, half the penalty
        ([1, 2, 3, 4], 2, -1.0, 0.0),  # no repeats
        ([1, 2, 1, 2, 1, 2], 2, -1.0, -0.6),  # 5 bigrams, 2 unique: (1 - 2/5) * -1
        ([1, 2, 1, 2, 1, 2], 3, -1.0, -0.5),  # 4 trigrams, 2 unique: (1 - 2/4) * -1
        ([7, 7, 7], 1, -1.0, -2 / 3),  # unigrams: 3 total, 1 unique
        ([1], 2, -1.0, 0.0),  # fewer tokens than n
        ([], 3, -1.0, 0.0),  # empty
    ],
)
async def test_token_ids(ids: list[int], n: int, max_penalty: float, expected: float) -> None:
    item = ScoreItem(response="ignored", metadata={"completion_ids": ids})
    out = await score_item(REWARD, item, unit="token_ids", ngram_size=n, max_penalty=max_penalty)
    assert out.score is not None
    assert out.score == pytest.approx(expected)
    assert math.copysign(1.0, out.score) == (1.0 if expected == 0 else -1.0)  # never -0.0


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        # trigrams: (the cat sat) (cat sat the) (sat the cat) (the cat sat): 4 total, 3 unique
        ("the cat sat the cat sat", -0.25),
        # case-folded words: the same
        ("The cat sat the CAT sat", -0.25),
        # ... the capital dotted I too: "İstanbul" is the word "istanbul" (it was another, 0.0)
        ("İstanbul is big istanbul is big", -0.25),
        # punctuation stays part of a word: 'sat.' differs from 'sat', 4 unique of 4
        ("the cat sat. the cat sat", 0.0),
        # two words: fewer than n = 3
        ("hello world", 0.0),
        # every trigram is 'a a a': 6 total, 1 unique -> (1 - 1/6) * -1
        ("a a a a a a a a", -5 / 6),
    ],
)
async def test_words(response: str, expected: float) -> None:
    out = await score_item(REWARD, ScoreItem(response=response))
    assert out.score == pytest.approx(expected)
    assert out.components["repetition"] == pytest.approx(-expected)


async def test_details() -> None:
    out = await score_item(
        REWARD,
        ScoreItem(response="x", metadata={"ids": [5, 5, 5, 5, 5]}),
        unit="token_ids",
        token_ids_key="ids",
        ngram_size=2,
    )
    assert out.details == {"ngrams": 4, "unique_ngrams": 1, "tokens": 5}


def test_repeated_fraction_direct() -> None:
    assert repeated_fraction([5, 5, 5, 5, 5], 2) == (0.75, 4, 1)


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        (None, Reason.MISSING_REFERENCE),  # no metadata
        ({"ids": [1, 2]}, Reason.MISSING_REFERENCE),  # another key
        ({"completion_ids": "1 2 3"}, Reason.PARSE_ERROR),  # not a list
        ({"completion_ids": [1, "2"]}, Reason.PARSE_ERROR),  # a string in the list
        ({"completion_ids": [1, True]}, Reason.PARSE_ERROR),  # a bool in the list
    ],
)
async def test_bad_token_ids_are_invalid(metadata: Any, reason: Reason) -> None:
    out = await score_item(REWARD, ScoreItem(response="a b c", metadata=metadata), unit="token_ids")
    assert (out.score, out.reason) == (None, reason)


@pytest.mark.parametrize(
    "config",
    [
        {"max_penalty": 0.5},  # a penalty must be <= 0
        {"ngram_size": 0},  # n >= 1
        {"unit": "chars"},  # unknown unit
        {"token_ids_key": ""},  # empty key
        {"n": 3},  # unknown key
        # not finite (found in review: -inf was accepted, then 0 · -inf made every text without repeats
        # internal_error, not a 422)
        {"max_penalty": -math.inf},
        {"max_penalty": math.nan},
    ],
)
def test_bad_config_is_rejected(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        REWARD.parse_config(config)


async def test_long_batches_are_counted_in_the_cpu_workers_not_on_the_event_loop(
    client: httpx.AsyncClient,
) -> None:
    """Counting n-grams is pure Python, about a microsecond a token, and ran on the event loop whatever
    the size: a batch of long-CoT rollouts (10 million tokens) held the whole service for 7 s, and a
    64 MB request of words at ngram_size 64 for about 16 s. Found in review. A big batch now runs in the CPU
    workers, each item under the request's deadline."""
    import asyncio
    import random

    rng = random.Random(5)
    base = " ".join(f"w{rng.randint(0, 300)}" for _ in range(150_000))  # about 750 kB, under a field's limit
    texts = [f"v{k} {base}" for k in range(16)]  # distinct items (identical ones are scored once)
    order: list[str] = []

    async def score_big() -> httpx.Response:
        body = {
            "reward": {"name": "repetition", "config": {"ngram_size": 64}},
            "items": [{"response": t} for t in texts],
        }
        resp = await client.post("/v1/score", json=body)
        order.append("score")
        return resp

    async def health() -> None:
        # while the work is in the CPU workers (a fixed 0.2 s: on a loaded host the request might not
        # have reached its scoring yet, and /health was answered before the loop had anything to hold)
        pool = client.app.state.runtime.cpu_pool  # type: ignore[attr-defined]
        await until(lambda: pool.stats().busy + pool.stats().queued_items > 0, "no work reached the workers")
        assert (await client.get("/health")).status_code == 200
        order.append("health")

    resp, _ = await asyncio.gather(score_big(), health())
    assert resp.status_code == 200, resp.text[:500]
    fraction, total, unique = repeated_fraction(texts[0].split(), 64)
    for r in resp.json()["results"]:
        assert r["score"] == pytest.approx(-fraction) and r["details"]["ngrams"] == total
    assert order == ["health", "score"]  # the event loop kept serving


async def test_a_text_of_one_letter_words_is_counted_in_the_cpu_workers(client: httpx.AsyncClient) -> None:
    """Whether a request is counted on the event loop was decided on its words taken as one per 8
    characters: prose, but a degenerate text of one-digit words ("1 0 1 1 0 ...") has one per 2, so 1 MB
    of it at ngram_size 8 (an estimate of 3.1 million of the 4 million units allowed, really 12.5
    million) held the event loop for 0.4 s where 0.1 s was meant. Found in review. Its words are counted
    now, and it goes to the workers; a short text still runs inline."""
    import random

    rng = random.Random(7)
    digits = " ".join(str(rng.randint(0, 9)) for _ in range(520_000))  # 1,040,000 characters
    pool = client.app.state.runtime.cpu_pool  # type: ignore[attr-defined]

    def done() -> int:  # items the CPU workers have counted (each slot keeps its own tally)
        return sum(slot.items_done for slot in pool._slots)

    for text, in_workers in ((digits, True), ("the cat sat the cat sat", False)):
        before = done()
        body = {
            "reward": {"name": "repetition", "config": {"ngram_size": 8}},
            "items": [{"response": text}],
            "options": {"use_cache": False},
        }
        resp = await client.post("/v1/score", json=body)
        assert resp.status_code == 200, resp.text[:500]
        [r] = resp.json()["results"]
        fraction, total, _ = repeated_fraction(text.split(), 8)
        assert r["score"] == pytest.approx(-fraction) and r["details"]["ngrams"] == total
        assert done() - before == (1 if in_workers else 0), text[:20]
    from rewardhub.rewards.repetition import runs_inline  # the decision itself (after: absent before)

    assert runs_inline(["the cat sat"], 8) and not runs_inline([digits], 8)
