"""The text rewards end to end: one mixed batch through POST /v1/score on the real app."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from rewardhub.rewards.base import registered

PERSON = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}

# (item, expected score); every item names its own reward, so one request mixes them all.
CASES: list[tuple[dict[str, Any], float | None]] = [
    # f1: P=1/2, R=1 -> 2/3
    ({"reward": "f1", "response": "cat sat on mat", "reference": "the cat sat"}, 2 / 3),
    # exact_match and f1 read the answer outside the reasoning (found in review: the whole text was
    # compared, so a reasoning model's correct answer scored 0, and f1 counted the draft's tokens)
    ({"reward": "exact_match", "response": "<think>Lyon? No.</think>Paris", "reference": "Paris"}, 1.0),
    ({"reward": "exact_match", "response": "Paris<think>or was it Lyon", "reference": "Paris"}, 1.0),
    ({"reward": "f1", "response": "<think>the dog ran</think>the cat sat", "reference": "cat sat"}, 1.0),
    # ... with an extract pattern too (found in review: the pattern searched the whole text, so a response
    # cut off in its reasoning, or one that gave no answer after it, was scored on a draft)
    (
        {
            "reward": {"name": "exact_match", "config": {"extract": "<answer>(.*?)</answer>"}},
            "response": "<think>Is it <answer>Paris</answer>? Let me check the",
            "reference": "Paris",
        },
        0.0,
    ),
    (
        {
            "reward": {"name": "exact_match", "config": {"extract": "<answer>(.*?)</answer>"}},
            "response": "<think>draft <answer>Lyon</answer></think><answer>Paris</answer>",
            "reference": "Paris",
        },
        1.0,
    ),
    (
        {
            "reward": {"name": "f1", "config": {"extract": "<answer>(.*?)</answer>"}},
            "response": "<think>draft <answer>cat sat</answer></think>I cannot tell.",
            "reference": "cat sat",
        },
        0.0,
    ),
    # string_check and text_similarity read the answer outside the reasoning too, as the hosted graders read
    # output_text (found in review: 'like' found the reference in the reasoning's drafts, 'eq' failed a
    # correct answer, the similarity counted the reasoning's words)
    (
        {"reward": "string_check", "response": "<think>Lyon? No.</think>Paris", "reference": "Paris"},
        1.0,
    ),
    # ... without the newlines R1 and Qwen3 put after </think> (found in review: "</think>\n\nParis" was not
    # eq "Paris", and was ne it)
    (
        {"reward": "string_check", "response": "<think>Lyon? No.</think>\n\nParis", "reference": "Paris"},
        1.0,
    ),
    (
        {
            "reward": {"name": "string_check", "config": {"operation": "ne"}},
            "response": "<think>Lyon? No.</think>\n\nParis",
            "reference": "Paris",
        },
        0.0,
    ),
    # ... while a response without reasoning is compared exactly, as the hosted grader does
    ({"reward": "string_check", "response": "\nParis", "reference": "Paris"}, 0.0),
    (
        {
            "reward": {"name": "string_check", "config": {"operation": "ilike"}},
            "response": "<think>Is it paris? No.</think>It is Lyon",
            "reference": "Paris",
        },
        0.0,
    ),
    (
        {
            "reward": {"name": "text_similarity", "config": {"metric": "rouge_1"}},
            "response": "<think>the dog ran far away</think>the cat sat",
            "reference": "the cat sat",
        },
        1.0,
    ),
    # multiple_choice: 'answer is (B)'
    ({"reward": "multiple_choice", "response": "The answer is (B).", "reference": "B"}, 1.0),
    # regex: the first group against the reference
    (
        {
            "reward": {
                "name": "regex",
                "config": {"pattern": r"####\s*(\S+)", "compare_group_to_reference": True},
            },
            "response": "so #### 42",
            "reference": "42",
        },
        1.0,
    ),
    # format: the default think_answer preset, trailing text fails strict
    ({"reward": "format", "response": "<think>a</think><answer>b</answer> extra"}, 0.0),
    # json_schema: the schema from the reference, the JSON from a ```json block
    ({"reward": "json_schema", "response": '```json\n{"age": 3}\n```', "reference": {"schema": PERSON}}, 1.0),
    # length: DAPO, 90 tokens on the 80..100 ramp -> -0.5
    (
        {
            "reward": {
                "name": "length",
                "config": {"mode": "dapo_overlong", "max_length": 100, "cache_length": 20},
            },
            "response": "...",
            "metadata": {"completion_tokens": 90},
        },
        -0.5,
    ),
    # length: cosine, a correct answer at L_max/2 -> 0.75
    (
        {
            "reward": {"name": "length", "config": {"mode": "cosine", "max_length": 10, "unit": "chars"}},
            "response": "x" * 5,
            "metadata": {"correct": True},
        },
        0.75,
    ),
    # repetition: token ids [5]*5, bigrams -> -0.75
    (
        {
            "reward": {"name": "repetition", "config": {"unit": "token_ids", "ngram_size": 2}},
            "response": "five five five",
            "metadata": {"completion_ids": [5, 5, 5, 5, 5]},
        },
        -0.75,
    ),
    # length without its token count: invalid, not an HTTP error
    (
        {
            "reward": {
                "name": "length",
                "config": {"mode": "dapo_overlong", "max_length": 100, "cache_length": 20},
            },
            "response": "...",
        },
        None,
    ),
]


async def test_mixed_batch_of_text_rewards(client: httpx.AsyncClient) -> None:
    items = [{"id": str(i), **item} for i, (item, _) in enumerate(CASES)]
    resp = await client.post("/v1/score", json={"items": items, "options": {"use_cache": False}})
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    assert [r["id"] for r in results] == [str(i) for i in range(len(CASES))]
    for (item, expected), result in zip(CASES, results, strict=True):
        name = item["reward"] if isinstance(item["reward"], str) else item["reward"]["name"]
        assert result["reward"] == name
        assert result["reward_version"] == registered()[name].version
        if expected is None:
            assert (result["valid"], result["reason"]) == (False, "missing_reference"), result
        else:
            assert result["score"] == pytest.approx(expected), result
    assert resp.json()["metrics"]["invalid_reasons"] == {"missing_reference": 1}


async def test_second_request_is_served_from_cache(client: httpx.AsyncClient) -> None:
    items = [{"id": str(i), **item} for i, (item, _) in enumerate(CASES)]
    first = (await client.post("/v1/score", json={"items": items})).json()["results"]
    second = (await client.post("/v1/score", json={"items": items})).json()["results"]
    for a, b in zip(first, second, strict=True):
        # valid results come back cached and identical; invalid ones are never cached
        assert b["cached"] is a["valid"]
        assert {**a, "cached": None, "latency_ms": None} == {**b, "cached": None, "latency_ms": None}


@pytest.mark.parametrize(
    ("reward", "param"),
    [
        ({"name": "regex", "config": {"pattern": "("}}, "pattern"),
        ({"name": "length", "config": {"mode": "dapo_overlong", "max_length": 10, "cache_length": 10}}, None),
        ({"name": "json_schema", "config": {"schema": {"type": "person"}}}, "schema"),
        ({"name": "repetition", "config": {"max_penalty": 1}}, "max_penalty"),
    ],
)
async def test_bad_config_is_a_422(
    client: httpx.AsyncClient, reward: dict[str, Any], param: str | None
) -> None:
    resp = await client.post("/v1/score", json={"reward": reward, "items": [{"response": "x"}]})
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["type"] == "invalid_request"
    if param is not None:
        assert error["param"] == f"reward.config.{param}"


async def test_catalog_lists_the_text_rewards(client: httpx.AsyncClient) -> None:
    resp = await client.get("/v1/rewards")
    assert resp.status_code == 200
    by_name = {r["name"]: r for r in resp.json()["rewards"]}
    for name in ("f1", "multiple_choice", "regex", "format", "json_schema", "length", "repetition"):
        assert by_name[name]["version"] == registered()[name].version
        assert by_name[name]["config_schema"]["type"] == "object"
    assert by_name["length"]["reads"] == ["response", "reference", "metadata"]
    assert "schema" in by_name["json_schema"]["config_schema"]["properties"]


async def score_via_http(
    client: httpx.AsyncClient, reward: str, response: str, reference: Any, **config: Any
) -> dict[str, Any]:
    item = {"reward": {"name": reward, "config": config}, "response": response, "reference": reference}
    resp = await client.post("/v1/score", json={"items": [item], "options": {"use_cache": False}})
    assert resp.status_code == 200, resp.text
    [result] = resp.json()["results"]
    return result  # type: ignore[no-any-return]


SQUAD_ANSWERS = {"text": ["Denver Broncos", "the Broncos"], "answer_start": [177, 249]}


# a SQuAD row from `datasets`, and its answers column alone, as a trainer passes a column
@pytest.mark.parametrize("reference", [{"answers": SQUAD_ANSWERS}, SQUAD_ANSWERS])
@pytest.mark.parametrize(
    ("reward", "response", "score"),
    [
        ("exact_match", "The Broncos.", 1.0),
        ("exact_match", "Carolina Panthers", 0.0),
        ("f1", "the Broncos", 1.0),
        ("f1", "the Denver Broncos won", 0.8),  # "denver broncos won" against "denver broncos"
        ("f1", "Carolina Panthers", 0.0),
    ],
)
async def test_hugging_face_squad_reference_layout(
    client: httpx.AsyncClient, reference: dict[str, Any], reward: str, response: str, score: float
) -> None:
    """A SQuAD row from `datasets` holds its answers as {"text": [...], "answer_start": [...]}: it was a
    missing reference, so a SQuAD data set passed as is scored nothing (the answers column alone was, until
    found in review, still one)."""
    result = await score_via_http(client, reward, response, reference)
    assert (result["score"], result["reason"]) == (pytest.approx(score), None), result


UNANSWERABLE_ROWS = [
    {"answers": {"text": [], "answer_start": []}},  # a SQuAD v2 row from `datasets`
    {"text": [], "answer_start": []},  # ... its answers column alone, as a trainer passes a column
]


@pytest.mark.parametrize("reward", ["exact_match", "f1"])
@pytest.mark.parametrize("reference", UNANSWERABLE_ROWS)
@pytest.mark.parametrize(
    ("response", "config", "score", "reason"),
    [
        # an abstention: a blank answer (the official SQuAD v2 script's), or a no-answer phrase
        ("", {}, 1.0, None),
        ("<think>The passage never says.</think>\n\n", {}, 1.0, None),
        ("<think>The passage never says.</think>\n\nUnanswerable.", {}, 1.0, None),
        ("No answer", {}, 1.0, None),
        ("<answer>unanswerable</answer>", {"extract": "<answer>(.*?)</answer>"}, 1.0, None),
        # any real answer is wrong
        ("Denver Broncos", {}, 0.0, None),
        ("It is unanswerable, but maybe Denver", {}, 0.0, None),
        # cut off inside its reasoning: blank because it never answered, not an abstention
        ("<think>The passage says", {}, 0.0, "no_answer"),
        # the phrases are the config's
        ("Cannot be answered.", {"no_answer_phrases": ["cannot be answered"]}, 1.0, None),
        ("unanswerable", {"no_answer_phrases": ["cannot be answered"]}, 0.0, None),
        # compared as squad compares answers: a space between CJK characters is no difference (it was 0.0)
        ("无法 回答", {"no_answer_phrases": ["无法回答"]}, 1.0, None),
        ("答えられません", {"no_answer_phrases": ["答え られ ません"]}, 1.0, None),
        ("无法", {"no_answer_phrases": ["无法回答"]}, 0.0, None),
    ],
)
async def test_squad_v2_unanswerable_row(
    client: httpx.AsyncClient,
    reward: str,
    reference: dict[str, Any],
    response: str,
    config: dict[str, Any],
    score: float,
    reason: str | None,
) -> None:
    """A SQuAD v2 unanswerable question (no answer texts) was a missing reference, so SQuAD v2 could not be
    trained on as is; an abstention now scores 1 and an answer 0. Found in review."""
    result = await score_via_http(client, reward, response, reference, **config)
    assert (result["score"], result["reason"]) == (score, reason), result
    assert result["details"]["unanswerable"] is True
    if reward == "f1":  # all or nothing: precision and recall are the score, as in SQuAD v2's F1
        assert result["components"] == {"precision": score, "recall": score}


@pytest.mark.parametrize("reward", ["exact_match", "f1"])
@pytest.mark.parametrize("reference", ["", "  ", [""], {"answer": ""}, {"answers": [""]}])
async def test_a_blank_reference_is_missing(client: httpx.AsyncClient, reward: str, reference: Any) -> None:
    """A blank reference was matched by an empty answer (1.0): a data error that rewards a policy for saying
    nothing. It is missing_reference unless the config reads it as SQuAD v2's unanswerable question."""
    result = await score_via_http(client, reward, "", reference)
    assert (result["valid"], result["reason"]) == (False, "missing_reference"), result
    assert "empty_reference_unanswerable" in result["details"]["message"]  # what to set, if it is meant
    opted = {"empty_reference_unanswerable": True}
    assert (await score_via_http(client, reward, "", reference, **opted))["score"] == 1.0
    assert (await score_via_http(client, reward, "Paris", reference, **opted))["score"] == 0.0


@pytest.mark.parametrize("reward", ["exact_match", "f1"])
async def test_a_blank_among_answers_is_dropped(client: httpx.AsyncClient, reward: str) -> None:
    """A blank reference among real ones let an empty answer score 1.0; it is dropped, as the SQuAD v2
    script drops it."""
    reference = ["", "Paris"]
    assert (await score_via_http(client, reward, "", reference))["score"] == 0.0
    assert (await score_via_http(client, reward, "Paris", reference))["score"] == 1.0


@pytest.mark.parametrize("reward", ["exact_match", "f1"])
async def test_a_no_answer_phrase_must_have_words(client: httpx.AsyncClient, reward: str) -> None:
    resp = await client.post(
        "/v1/score",
        json={
            "reward": {"name": reward, "config": {"no_answer_phrases": ["The"]}},
            "items": [{"response": "x"}],
        },
    )
    assert resp.status_code == 422, resp.text
    assert "empty after SQuAD normalisation" in resp.json()["error"]["message"]


@pytest.mark.parametrize("operation", ["eq", "ne", "like", "ilike"])
@pytest.mark.parametrize("reference", ["", " \n", "\u200b", " \ufeff\u200d\n"])
async def test_string_check_blank_reference_is_missing(
    client: httpx.AsyncClient, operation: str, reference: str
) -> None:
    """A blank reference was compared as written: like/ilike scored 1.0 for every response and eq 1.0 for
    an empty one, so a row whose gold was lost rewarded a policy for saying nothing. It is
    missing_reference, as for exact_match, f1 and regex, whatever the response; and, as for them, so is
    one of invisible characters (a zero-width space: found in review, ne scored every response 1.0)."""
    for response in ("", "Paris", reference):
        result = await score_via_http(client, "string_check", response, reference, operation=operation)
        assert (result["valid"], result["reason"]) == (False, "missing_reference"), result
        assert "compare_blank_reference" in result["details"]["message"]  # what to set, if it is meant


@pytest.mark.parametrize(
    ("operation", "response", "score"),
    [
        ("eq", "", 1.0),
        ("eq", "Paris", 0.0),
        ("ne", "Paris", 1.0),
        ("like", "Paris", 1.0),
        ("ilike", "x", 1.0),
    ],
)
async def test_string_check_compares_a_blank_reference_when_asked(
    client: httpx.AsyncClient, operation: str, response: str, score: float
) -> None:
    """compare_blank_reference keeps OpenAI's semantics (the /compat/openai graders route sets it)."""
    config = {"operation": operation, "compare_blank_reference": True}
    result = await score_via_http(client, "string_check", response, "", **config)
    assert (result["score"], result["reason"]) == (score, None), result
