"""Invisible format characters (Unicode Cf: zero-width space, joiners, soft hyphen, BOM, word joiner)
through the real app: they render as nothing, so every reward that normalises text before comparing it
or splitting it into words drops them; the rewards that compare as written keep them.

Found in review: "Par\\u200bis" was another word than "Paris", so exact_match, f1, majority_vote and math
scored a correct answer with a stray zero-width space 0, and the repetition penalty's words could be
dodged by sprinkling zero-width spaces between repeats."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from rewardhub.rewards.text import drop_invisible, squad_normalize

ZWSP, ZWNJ, ZWJ, SHY, BOM, WJ = "\u200b", "\u200c", "\u200d", "\u00ad", "\ufeff", "\u2060"
LOOP = "wait let me check again " * 4


def _em(normalize: str) -> dict[str, Any]:
    return {"name": "exact_match", "config": {"normalize": normalize}}


# (item, expected score)
CASES: list[tuple[dict[str, Any], float]] = [
    ({"reward": "exact_match", "response": f"Par{ZWSP}is", "reference": "Paris"}, 1.0),
    ({"reward": "exact_match", "response": f"{BOM}Eiffel{SHY} Tower{WJ}", "reference": "eiffel tower"}, 1.0),
    ({"reward": "exact_match", "response": "Paris", "reference": f"Pa{ZWNJ}ris"}, 1.0),
    # a reference SQuAD would empty ("A") is compared with its articles kept, invisible characters dropped
    ({"reward": "exact_match", "response": f"A{ZWJ}", "reference": "A"}, 1.0),
    ({"reward": "exact_match", "response": f"Lyon{ZWSP}", "reference": "Paris"}, 0.0),
    ({"reward": _em("whitespace"), "response": f"New{ZWSP} York", "reference": "new york"}, 1.0),
    # normalize "none" compares as written
    ({"reward": _em("none"), "response": f"Par{ZWSP}is", "reference": "Paris"}, 0.0),
    ({"reward": "f1", "response": f"the cat{ZWSP} sat", "reference": "cat sat"}, 1.0),
    ({"reward": "f1", "response": f"ca{SHY}t dog", "reference": "cat"}, 2 / 3),
    ({"reward": "math", "response": f"so \\boxed{{4{ZWSP}2}}", "reference": "42"}, 1.0),
    ({"reward": "math", "response": "The answer is 42.", "reference": f"4{WJ}2"}, 1.0),
    # a zero-width space between repeats does not make them new words: 20 words, 18 trigrams, 5 unique
    ({"reward": "repetition", "response": LOOP}, -(1 - 5 / 18)),
    ({"reward": "repetition", "response": LOOP.replace("check", f"ch{ZWSP}eck", 2)}, -(1 - 5 / 18)),
    # string_check is OpenAI's grader, exact by definition
    ({"reward": "string_check", "response": f"Par{ZWSP}is", "reference": "Paris"}, 0.0),
]


async def test_invisible_characters_across_rewards(client: httpx.AsyncClient) -> None:
    items = [{"id": str(i), **item} for i, (item, _) in enumerate(CASES)]
    resp = await client.post("/v1/score", json={"items": items, "options": {"use_cache": False}})
    assert resp.status_code == 200, resp.text
    for (item, expected), result in zip(CASES, resp.json()["results"], strict=True):
        assert result["valid"], (item, result)
        assert result["score"] == pytest.approx(expected), (item, result)


async def test_majority_vote_counts_an_answer_with_a_zero_width_space_as_the_same(
    client: httpx.AsyncClient,
) -> None:
    group = f"g-{uuid.uuid4().hex}"
    answers = ["Paris", f"Par{ZWSP}is", f"{BOM}paris", "Lyon"]
    reward = {"name": "majority_vote", "config": {"equivalence": "string", "extraction": ["answer_tag"]}}
    items = [{"response": f"<answer>{a}</answer>", "group": group} for a in answers]
    resp = await client.post("/v1/score", json={"reward": reward, "items": items})
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    assert [r["score"] for r in results] == [1.0, 1.0, 1.0, 0.0]
    assert results[0]["details"]["votes"] == 3


# A text of invisible characters only is blank (text.blank), once they are dropped as much as before: a
# reference of a zero-width space is no reference (else an empty answer, which normalises alike, matched it)
# and an answer of one abstains on an unanswerable question.
UNANSWERABLE = {"answers": {"text": [], "answer_start": []}}
BLANK_CASES: list[tuple[dict[str, Any], float | None]] = [
    ({"reward": "exact_match", "response": "", "reference": ZWSP}, None),
    ({"reward": "f1", "response": "", "reference": f"{ZWSP}{BOM}"}, None),
    ({"reward": "exact_match", "response": "", "reference": ["Paris", ZWSP]}, 0.0),
    ({"reward": "f1", "response": WJ, "reference": ["Paris", SHY]}, 0.0),
    ({"reward": "exact_match", "response": ZWSP, "reference": UNANSWERABLE}, 1.0),
    ({"reward": "f1", "response": f" {BOM} ", "reference": UNANSWERABLE}, 1.0),
    (
        {
            "reward": {
                "name": "regex",
                "config": {"pattern": "<a>(.*)</a>", "compare_group_to_reference": True},
            },
            "response": f"<a>{ZWSP}</a>",
            "reference": ZWSP,
        },
        None,
    ),
]


async def test_a_text_of_invisible_characters_is_blank(client: httpx.AsyncClient) -> None:
    items = [{"id": str(i), **item} for i, (item, _) in enumerate(BLANK_CASES)]
    resp = await client.post("/v1/score", json={"items": items, "options": {"use_cache": False}})
    assert resp.status_code == 200, resp.text
    for (item, expected), result in zip(BLANK_CASES, resp.json()["results"], strict=True):
        if expected is None:
            assert (result["valid"], result["reason"]) == (False, "missing_reference"), (item, result)
        else:
            assert (result["valid"], result["score"]) == (True, expected), (item, result)


def test_visible_text_is_unchanged() -> None:
    text = "Ocean’s Eleven, 東京, кошка, 👍🏽 — x"
    assert drop_invisible(text) == text
    assert drop_invisible(f"a{ZWSP}b{ZWNJ}c{ZWJ}d{SHY}e{BOM}f{WJ}g\u200e") == "abcdefg"
    assert squad_normalize(f"The{ZWSP} Eiffel{SHY} Tower") == "eiffel tower"
