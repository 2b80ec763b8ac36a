"""`text_similarity` (the OpenAI grader's metrics) through POST /v1/score on the real app."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from waiting import until


async def run(client: httpx.AsyncClient, metric: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    body = {"reward": {"name": "text_similarity", "config": {"metric": metric}}, "items": items}
    r = await client.post("/v1/score", json=body)
    assert r.status_code == 200, r.text
    results: list[dict[str, Any]] = r.json()["results"]
    return results


BLANK_REFERENCES: list[Any] = [
    "",
    " \n",
    "\u200b",
    [""],
    ["", " "],
    [],
    {"text": ""},
    {"text": "", "answer": " "},
]


@pytest.mark.parametrize("metric", ["fuzzy_match", "bleu", "gleu", "rouge_1", "rouge_l"])
async def test_a_blank_reference_is_no_reference(client: httpx.AsyncClient, metric: str) -> None:
    """Two empty texts are "identical": an empty response scored 1.0 against an empty reference (and any
    answer 0.0), a data error scored as full marks. It is missing_reference, as exact_match, f1, regex,
    string_check and multiple_choice say (it was parse_error, an unreadable row), with the setting that
    compares it anyway named; a list holding a non-text stays parse_error."""
    items = [{"response": r, "reference": ref} for r in ("", "Paris") for ref in BLANK_REFERENCES]
    res = await run(client, metric, [*items, {"response": "Paris"}, {"response": "a", "reference": [3]}])
    assert [(r["valid"], r["reason"]) for r in res] == [(False, "missing_reference")] * (len(items) + 1) + [
        (False, "parse_error")
    ]
    assert all("compare_blank_reference" in r["details"]["message"] for r in res[: len(items)])


@pytest.mark.parametrize(
    "metric, response, reference, expected",
    [
        ("fuzzy_match", "", "", 1.0),
        ("fuzzy_match", "Paris", "", 0.0),
        ("bleu", "", " ", 1.0),
        ("rouge_1", "Paris", "", 0.0),
        ("fuzzy_match", "Paris", {"text": ""}, 0.0),
    ],
)
async def test_compare_blank_reference_scores_it_as_written(
    client: httpx.AsyncClient, metric: str, response: str, reference: Any, expected: float
) -> None:
    """compare_blank_reference keeps OpenAI's semantics (the /compat/openai graders route sets it): the
    metric of the texts as written."""
    body = {
        "reward": {"name": "text_similarity", "config": {"metric": metric, "compare_blank_reference": True}},
        "items": [{"response": response, "reference": reference}],
    }
    r = await client.post("/v1/score", json=body)
    assert r.status_code == 200, r.text
    result = r.json()["results"][0]
    assert result["valid"] and result["score"] == pytest.approx(expected), result


@pytest.mark.parametrize("metric", ["fuzzy_match", "bleu", "rouge_1", "rouge_l"])
async def test_several_references_the_best_counts(client: httpx.AsyncClient, metric: str) -> None:
    """A list of acceptable answers (as `similarity` and `cosine` take) was refused as a missing
    reference; the best one counts, as does {"text": ...}."""
    answer = "the cat sat on the mat"
    res = await run(
        client,
        metric,
        [
            {"response": answer, "reference": ["stocks fell sharply today", answer]},
            {"response": answer, "reference": {"text": answer}},
            {"response": answer, "reference": ["stocks fell", 3]},
        ],
    )
    assert res[0]["valid"] and res[0]["score"] == pytest.approx(1.0)
    assert res[0]["details"]["best_reference"] == 1 and len(res[0]["details"]["scores"]) == 2
    assert res[1]["valid"] and res[1]["score"] == pytest.approx(1.0)
    assert not res[2]["valid"] and res[2]["reason"] == "parse_error"


@pytest.mark.parametrize("metric", ["fuzzy_match", "bleu", "rouge_l"])
async def test_a_blank_beside_real_references_is_dropped_its_place_kept(
    client: httpx.AsyncClient, metric: str
) -> None:
    """["Paris", ""] was parse_error where exact_match, regex and multiple_choice drop the blank; it is
    dropped, and best_reference and scores count positions in the list as written (null for the blank)."""
    answer = "the cat sat on the mat"
    res = await run(
        client,
        metric,
        [
            {"response": answer, "reference": ["", "stocks fell sharply today", answer]},
            {"response": answer, "reference": [answer, " "]},
            {"response": answer, "reference": ["", 3, answer]},
        ],
    )
    assert res[0]["valid"] and res[0]["score"] == pytest.approx(1.0), res[0]
    assert res[0]["details"]["best_reference"] == 2
    scores = res[0]["details"]["scores"]
    assert scores[0] is None and scores[1] < 1.0 and scores[2] == pytest.approx(1.0)
    assert res[1]["valid"] and res[1]["details"]["best_reference"] == 0
    assert res[1]["details"]["scores"][1] is None
    assert not res[2]["valid"] and res[2]["reason"] == "parse_error"  # a non-text stays unreadable


@pytest.mark.parametrize("metric", ["rouge_1", "rouge_2", "rouge_l"])
async def test_rouge_reads_non_ascii_words(client: httpx.AsyncClient, metric: str) -> None:
    """rouge-score's tokenizer keeps only [a-z0-9]: a Russian or Chinese answer had no words and scored
    0.0 against itself, a silent 0 for every non-English rollout. ASCII text reads as before."""
    res = await run(
        client,
        metric,
        [
            {"response": "Кошка сидит на коврике", "reference": "Кошка сидит на коврике"},
            {"response": "猫坐在垫子上", "reference": "猫坐在垫子上"},
            {"response": "猫坐在垫子上", "reference": "狗坐在地上"},
            {"response": "The cat, sat!", "reference": "the cat sat"},
        ],
    )
    assert [r["score"] for r in res[:2]] == [pytest.approx(1.0)] * 2
    assert 0.0 < res[2]["score"] < 1.0
    assert res[3]["score"] == pytest.approx(1.0)


@pytest.mark.parametrize("metric", ["rouge_1", "rouge_l"])
async def test_rouge_reads_words_as_exact_match_and_f1_normalise_them(
    client: httpx.AsyncClient, metric: str
) -> None:
    """Compatibility forms (NFKC: full-width letters, as CJK output writes them, a ligature), a zero-width
    space and full case folding ("STRASSE" is "straße") made other words: each pair scored 0.0 or 0.5
    where exact_match and f1 read them as one answer."""
    res = await run(
        client,
        metric,
        [
            {"response": "ＰＡＲＩＳ", "reference": "Paris"},
            {"response": "ﬁsh soup", "reference": "fish soup"},
            {"response": "Par\u200bis", "reference": "Paris"},
            {"response": "STRASSE", "reference": "Straße"},
            # casefold wrote "İ" as "i" and a combining dot above: another word than "istanbul"
            {"response": "İstanbul", "reference": "istanbul"},
        ],
    )
    assert [r["score"] for r in res] == [pytest.approx(1.0)] * 5, res


async def test_rouge_keeps_a_word_with_its_combining_marks(client: httpx.AsyncClient) -> None:
    """The word pattern's \\w was ``re``'s, which holds no combining mark: a Hindi word was cut at each
    vowel sign and a vowelled Arabic one at each haraka, so ROUGE counted fragments. Two different Hindi
    words shared fragments (0.4 for "किताब" against "कितना", not 0.0), and one word of two right scored
    0.57, not 2/3."""
    res = await run(
        client,
        "rouge_1",
        [
            {"response": "किताब", "reference": "कितना"},
            {"response": "नमस्ते दुनिया", "reference": "नमस्ते"},
            {"response": "مَرْحَبًا بِكُمْ", "reference": "مَرْحَبًا"},
        ],
    )
    assert [r["score"] for r in res] == [0.0, pytest.approx(2 / 3), pytest.approx(2 / 3)], res


async def test_rouge_reads_cjk_words_as_f1_does(client: httpx.AsyncClient) -> None:
    """ROUGE's CJK characters were a code point range: it held the katakana middle dot ・, punctuation,
    which was a word (0.89 for "東京・大阪" against "東京大阪", where "The cat, sat!" scores 1.0 against
    "the cat sat"), and not the ideographs past the BMP, which ran together into one word (0.0 for
    "𠀋𠀌" against "𠀋"). Each character of \\p{Han} or kana is a word, as f1 and bleu read them."""
    res = await run(
        client,
        "rouge_1",
        [
            {"response": "東京・大阪", "reference": "東京大阪"},
            {"response": "𠀋𠀌", "reference": "𠀋"},
        ],
    )
    assert [r["score"] for r in res] == [pytest.approx(1.0), pytest.approx(2 / 3)], res


async def test_long_texts_are_aligned_in_the_cpu_workers_not_on_the_event_loop(
    client: httpx.AsyncClient,
) -> None:
    """ROUGE-L aligns every word pair in pure Python, and ran on the event loop: 3,000 words against
    3,000 held the whole service for 3.6 s, and nothing bounded a request's total. Found in review. A big
    batch now runs in the CPU workers under the request's deadline."""
    import asyncio
    import random

    from rewardhub.rewards.text_similarity import similarity_score

    rng = random.Random(7)

    def text(n: int) -> str:
        return " ".join(f"w{rng.randint(0, 40)}" for _ in range(n))

    medium = {"response": text(1500), "reference": text(1500)}
    [r] = await run(client, "rouge_l", [medium])  # in the workers, the same value
    assert r["valid"] and r["score"] == pytest.approx(
        similarity_score("rouge_l", medium["response"], medium["reference"])
    )
    order: list[str] = []

    async def score_huge() -> httpx.Response:
        body = {
            "reward": {"name": "text_similarity", "config": {"metric": "rouge_l"}},
            "items": [{"response": text(8000), "reference": text(8000)}],
            "options": {"timeout_s": 1.0},
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

    resp, _ = await asyncio.gather(score_huge(), health())
    huge = resp.json()["results"][0]
    assert (huge["valid"], huge["reason"]) == (False, "timeout"), huge
    assert order == ["health", "score"]  # the event loop kept serving


@pytest.mark.parametrize("separator", ["\n", ""])
async def test_the_work_estimate_counts_the_words_rouge_aligns(
    client: httpx.AsyncClient, separator: str
) -> None:
    """The inline/worker split estimated ROUGE-L's words by counting spaces: words on separate lines, or
    CJK text (each character a word, no spaces at all), counted as one word, so 5,000 words against
    5,000 were aligned on the event loop (about 8 s holding the whole service). Found in review. The
    estimate now counts the words the tokenizer reads, and such an item runs in the CPU workers."""
    import random

    rng = random.Random(11)
    if separator:
        words = [f"w{rng.randint(0, 40)}" for _ in range(5000)]
    else:
        words = [chr(0x4E00 + rng.randrange(2000)) for _ in range(5000)]
    body = {
        "reward": {"name": "text_similarity", "config": {"metric": "rouge_l"}},
        "items": [{"response": separator.join(words), "reference": separator.join(reversed(words))}],
        "options": {"timeout_s": 1.0},
    }
    r = await client.post("/v1/score", json=body)
    assert r.status_code == 200, r.text
    [res] = r.json()["results"]
    assert (res["valid"], res["reason"]) == (False, "timeout"), res
