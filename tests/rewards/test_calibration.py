"""``calibration`` (RLCR) through the real app: exact scores on varied formats, options and invalid items."""

from __future__ import annotations

import math
import uuid
from typing import Any

import httpx
import pytest

from rewardhub.rewards import text_similarity

EM = {"verifier": "exact_match"}


async def score(
    c: httpx.AsyncClient, items: list[dict[str, Any]], config: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    body = {"reward": {"name": "calibration", "config": EM if config is None else config}, "items": items}
    resp = await c.post("/v1/score", json=body)
    assert resp.status_code == 200, resp.text
    results: list[dict[str, Any]] = resp.json()["results"]
    return results


def rlcr(correct: bool, q: float) -> float:
    """algorithms.md §3.1 (paper form): R = 1[y ≡ y*] − (q − 1[y ≡ y*])²."""
    c = 1.0 if correct else 0.0
    return c - (q - c) ** 2


# (response, correct?, q) for format-valid responses; reference is "Paris"
VALID: list[tuple[str, bool, float]] = [
    ("<answer>Paris</answer><confidence>0.8</confidence>", True, 0.8),
    ("<answer>Paris</answer> <confidence> 80 </confidence>", True, 0.8),  # whole number = percentage
    ("<answer>Paris</answer><confidence>80%</confidence>", True, 0.8),
    ("<answer>Paris</answer><confidence>85/100</confidence>", True, 0.85),  # a fraction
    ("<answer>Lyon</answer><confidence>.25</confidence>", False, 0.25),
    ("<answer>Lyon</answer><confidence>1e-1</confidence>", False, 0.1),
    ("<answer>Lyon</answer><confidence>0</confidence>", False, 0.0),  # confidently (and rightly) unsure
    ("<answer>Lyon</answer><confidence>1</confidence>", False, 1.0),  # confidently wrong: -1
    ("<answer>the Paris.</answer><confidence>100</confidence>", True, 1.0),  # exact_match normalises
    # leading zeros read by value (found in review: "0100" was out of range while "080" was 80 %)
    ("<answer>Paris</answer><confidence>0100</confidence>", True, 1.0),
    ("<answer>Lyon</answer><confidence>00080</confidence>", False, 0.8),
    # prose after the confidence is fine while it gives no new answer
    ("<answer>Paris</answer><confidence>0.7</confidence> I hope so.", True, 0.7),
    # two confidence tags: the last wins
    ("<answer>Paris</answer><confidence>0.9</confidence> wait <confidence>0.3</confidence>", True, 0.3),
    # tags inside <think> don't count: only the text after the last </think> is read
    (
        "<think><answer>Lyon</answer><confidence>1</confidence></think>"
        "<answer>Paris</answer><confidence>0.6</confidence>",
        True,
        0.6,
    ),
    # a <think> the response ends in (never closed) is reasoning too: its tags don't count
    (
        "<answer>Paris</answer><confidence>0.6</confidence>"
        "<think>or is it <answer>Lyon</answer><confidence>1</confidence>",
        True,
        0.6,
    ),
]


@pytest.mark.parametrize(("response", "correct", "q"), VALID)
async def test_valid_formats(client: httpx.AsyncClient, response: str, correct: bool, q: float) -> None:
    [r] = await score(client, [{"response": response, "reference": "Paris"}])
    c = 1.0 if correct else 0.0
    assert r["valid"] and r["reason"] is None
    assert r["score"] == rlcr(correct, q)
    assert r["components"] == {"correct": c, "confidence": q, "brier": (q - c) ** 2, "format_ok": 1.0}


FORMAT_FAILURES: list[tuple[str, str]] = [
    ("<answer>Paris</answer>", "no <confidence> tag"),
    ("<answer>Paris</answer><confidence></confidence>", "unreadable confidence: empty"),
    ("<answer>Paris</answer><confidence>1.5</confidence>", "unreadable confidence: out of range"),
    ("<answer>Paris</answer><confidence>-0.2</confidence>", "unreadable confidence: out of range"),
    ("<answer>Paris</answer><confidence>150%</confidence>", "unreadable confidence: out of range"),
    ("<answer>Paris</answer><confidence>high</confidence>", "unreadable confidence: not a number"),
    ("<answer>Paris</answer><confidence>0.8 (fairly)</confidence>", "unreadable confidence: not a number"),
    ("<answer>Paris</answer><confidence>NaN</confidence>", "unreadable confidence: not a number"),
    ("Paris <confidence>0.8</confidence>", "no <answer> tag"),
    ("<answer>  </answer><confidence>0.8</confidence>", "the <answer> tag is empty"),
    # invisible characters are no answer either (found in review: str.strip keeps them, so a zero-width
    # space went to the verifier as an answer, scored wrong: with format_weight it earned the weight that
    # marks a well-formed response, and a group verifier counted it as a vote)
    ("<answer>\u200b</answer><confidence>0</confidence>", "the <answer> tag is empty"),
    ("<answer> \ufeff\u2060\u00ad </answer><confidence>0.8</confidence>", "the <answer> tag is empty"),
    ("<think><answer>Paris</answer><confidence>0.8</confidence></think> Paris", "no <answer> tag"),
    # reasoning cut off before </think>: a draft answer and confidence inside it are not the response's
    ("<think>Maybe <answer>Paris</answer><confidence>0.8</confidence>", "no <answer> tag"),
    # the confidence is about the final answer, so it comes after it (RLCR's format: answer, analysis,
    # confidence); found in review: a confidence stated for a first answer was credited to a revised one
    ("<confidence>0.9</confidence><answer>Paris</answer>", "the <confidence> tag comes before the <answer>"),
    (
        "<answer>Lyon</answer><confidence>0.1</confidence> no, <answer>Paris</answer>",
        "the <confidence> tag comes before the <answer>",
    ),
    ("<answer>Paris <confidence>1</confidence></answer>", "the <confidence> tag comes before the <answer>"),
    # a revision the response opened and never closed: the earlier, closed tag is no longer its final
    # word (found in review: "... actually <confidence>0.2" was scored at the retracted 0.9)
    (
        "<answer>Paris</answer><confidence>0.9</confidence> actually <confidence>0.2",
        "the last <confidence> tag is not closed",
    ),
    (
        "<answer>Lyon</answer><confidence>0.5</confidence> no: <answer>Paris",
        "the last <answer> tag is not closed",
    ),
]


@pytest.mark.parametrize(("response", "error"), FORMAT_FAILURES)
async def test_format_failures_score_zero(client: httpx.AsyncClient, response: str, error: str) -> None:
    [r] = await score(client, [{"response": response, "reference": "Paris"}])
    assert (r["score"], r["valid"], r["reason"]) == (0.0, True, "format")
    assert r["details"]["format_error"].startswith(error), r["details"]
    assert r["components"]["format_ok"] == 0.0
    assert r["components"]["correct"] is None and r["components"]["brier"] is None


async def test_batch_mixes_valid_and_failures(client: httpx.AsyncClient) -> None:
    items = [{"response": resp, "reference": "Paris"} for resp, _, _ in VALID] + [
        {"response": resp, "reference": "Paris"} for resp, _ in FORMAT_FAILURES
    ]
    results = await score(client, items)
    assert [r["score"] for r in results] == [rlcr(c, q) for _, c, q in VALID] + [0.0] * len(FORMAT_FAILURES)


async def test_brier_only_and_format_weight(client: httpx.AsyncClient) -> None:
    items = [
        {"response": "<answer>Paris</answer><confidence>0.8</confidence>", "reference": "Paris"},
        {"response": "<answer>Lyon</answer><confidence>0.8</confidence>", "reference": "Paris"},
        {"response": "<answer>Lyon</answer><confidence>bad</confidence>", "reference": "Paris"},
    ]
    brier = await score(client, items, {**EM, "scoring": "brier"})  # algorithms.md §3.2: 1 − (acc − conf)²
    assert [r["score"] for r in brier] == [1 - (0.8 - 1) ** 2, 1 - 0.8**2, 0.0]
    weighted = await score(client, items, {**EM, "format_weight": 0.5})
    assert [r["score"] for r in weighted] == [rlcr(True, 0.8) + 0.5, rlcr(False, 0.8) + 0.5, 0.0]
    # an invisible answer is no well-formed response: no format weight (it had 0.5 as a wrong answer at q = 0)
    zwsp = {"response": "<answer>\u200b</answer><confidence>0</confidence>", "reference": "Paris"}
    [blank] = await score(client, [zwsp], {**EM, "format_weight": 0.5})
    assert (blank["score"], blank["reason"], blank["components"]["format_ok"]) == (0.0, "format", 0.0)


async def test_log_score(client: httpx.AsyncClient) -> None:
    def item(answer: str, q: str) -> dict[str, Any]:
        return {"response": f"<answer>{answer}</answer><confidence>{q}</confidence>", "reference": "Paris"}

    items = [
        item("Paris", "0.8"),
        item("Lyon", "0.8"),
        item("Lyon", "1"),
        item("Paris", "0"),
        item("Paris", "1"),
    ]
    results = await score(client, items, {**EM, "scoring": "log"})
    lam = 1 / abs(math.log(0.01))  # default ε = 0.01, λ = 1/|ln ε|
    expected = [
        1 + lam * math.log(0.8),  # correct: p = q
        lam * math.log(0.2),  # wrong: p = 1 - q
        lam * math.log(0.01),  # wrong at q = 1: p = 0 floored at ε -> exactly -1
        1 + lam * math.log(0.01),  # correct at q = 0: 1 - 1 = 0
        1.0,  # correct at q = 1: ln 1 = 0
    ]
    assert [r["score"] for r in results] == pytest.approx(expected, abs=1e-15)
    assert results[2]["score"] == pytest.approx(-1.0, abs=1e-15)
    custom = await score(client, items[:1], {**EM, "scoring": "log", "log_epsilon": 0.1, "log_scale": 0.4})
    assert custom[0]["score"] == pytest.approx(1 + 0.4 * math.log(0.8))
    # λ = 1/|ln ε| given explicitly (the bound itself) is accepted
    edge = await score(client, items[3:4], {**EM, "scoring": "log", "log_scale": lam})
    assert edge[0]["score"] == pytest.approx(0.0, abs=1e-15)


async def test_math_verifier_by_default(client: httpx.AsyncClient) -> None:
    items = [
        # the answer tag's content goes to math re-wrapped in <answer>, so \frac{1}{2} is read whole
        {"response": "<answer>\\frac{1}{2}</answer><confidence>0.7</confidence>", "reference": "0.5"},
        {"response": "<answer>\\boxed{3}</answer><confidence>0.4</confidence>", "reference": "3"},
        {"response": "<answer>x = 4</answer><confidence>0.9</confidence>", "reference": "5"},
    ]
    results = await score(client, items, {})
    assert [r["score"] for r in results] == pytest.approx(
        [rlcr(True, 0.7), rlcr(True, 0.4), rlcr(False, 0.9)]
    )
    assert results[0]["details"]["verifier"]["extracted"] == "\\frac{1}{2}"
    assert results[0]["reward_version"].startswith("1.0.8+")  # includes the verifier's version


@pytest.mark.parametrize(
    "verifier",
    [
        {"name": "composite", "config": {"components": [{"reward": "math"}]}},
        {"name": "noisy_corrected", "config": {"reward": "math", "fp_rate": 0.1, "fn_rate": 0.1}},
    ],
)
async def test_math_inside_a_wrapper_still_gets_the_tagged_answer(
    client: httpx.AsyncClient, verifier: dict[str, Any]
) -> None:
    """verifier_input auto looked only at the verifier itself: a composite or noisy_corrected around math
    has no `extraction` setting, so math got the bare answer and fell back to its last number ("2" of
    \\frac{1}{2}, "2" of (1, 2)): right answers silently scored wrong. Found in review."""
    items = [
        {"response": "<answer>\\frac{1}{2}</answer><confidence>0.7</confidence>", "reference": "0.5"},
        {"response": "<answer>(1, 2)</answer><confidence>0.6</confidence>", "reference": "(1, 2)"},
        {"response": "<answer>x = 4</answer><confidence>0.9</confidence>", "reference": "5"},
    ]
    results = await score(client, items, {"verifier": verifier, "correct_threshold": 0.5})
    assert [r["components"]["correct"] for r in results] == [1.0, 1.0, 0.0], results
    assert [r["score"] for r in results] == pytest.approx(
        [rlcr(True, 0.7), rlcr(True, 0.6), rlcr(False, 0.9)]
    )


@pytest.mark.parametrize("name", ["exact_match", "f1"])
async def test_a_verifier_s_extract_pattern_finds_the_answer(client: httpx.AsyncClient, name: str) -> None:
    """An exact_match or f1 verifier with an `extract` pattern written for the response
    ('<answer>(.*?)</answer>') got the bare answer tag content under verifier_input auto: its pattern
    found nothing (no_answer), so every answer, right or wrong, silently scored correct 0. Found in review."""
    verifier = {"name": name, "config": {"extract": "<answer>(.*?)</answer>"}}
    items = [
        {"response": "<answer>Paris</answer><confidence>0.8</confidence>", "reference": "Paris"},
        {"response": "<answer>Lyon</answer><confidence>0.3</confidence>", "reference": "Paris"},
    ]
    results = await score(client, items, {"verifier": verifier})
    assert [r["components"]["correct"] for r in results] == [1.0, 0.0], results
    assert [r["score"] for r in results] == [rlcr(True, 0.8), rlcr(False, 0.3)]
    assert [r["details"]["verifier"]["extracted"] for r in results] == ["Paris", "Lyon"]
    # the pattern is read against the response it was written for: another answer tag, or a phrase
    for tag, pattern in [("final", "<final>(.*?)</final>"), ("answer", r"[Aa]nswer: (\w+)")]:
        verifier = {"name": name, "config": {"extract": pattern}}
        text = f"Answer: Paris <{tag}>Paris</{tag}><confidence>0.8</confidence>"
        [r] = await score(
            client, [{"response": text, "reference": "Paris"}], {"verifier": verifier, "answer_tag": tag}
        )
        assert (r["components"]["correct"], r["score"]) == (1.0, rlcr(True, 0.8)), (pattern, r)


async def test_a_verifier_with_an_extract_mode_gets_the_bare_answer(client: httpx.AsyncClient) -> None:
    """verifier_input auto sent the response to every verifier whose `extract` setting is a string, meant
    for exact_match's and f1's patterns, but json_schema's, code's and sql's `extract` is a mode ("auto")
    that reads the JSON or the program from the answer: given the whole response it read the tags around
    it, so json_schema found no JSON and every answer scored correct 0. Found in review."""
    verifier = {"name": "json_schema", "config": {"schema": {"type": "object", "required": ["a"]}}}
    items = [
        {"response": '<answer>{"a": 1}</answer><confidence>0.8</confidence>'},
        {"response": '<answer>\n```json\n{"a": 2}\n```\n</answer>\n<confidence>0.7</confidence>'},
        {"response": '<answer>{"b": 1}</answer><confidence>0.6</confidence>'},
    ]
    results = await score(client, items, {"verifier": verifier})
    assert [r["components"]["correct"] for r in results] == [1.0, 1.0, 0.0], results
    assert [r["score"] for r in results] == pytest.approx(
        [rlcr(True, 0.8), rlcr(True, 0.7), rlcr(False, 0.6)]
    )


async def test_each_verifier_inside_a_composite_gets_the_text_it_reads(client: httpx.AsyncClient) -> None:
    """A composite of verifiers that read different texts (math: the tagged answer; exact_match without
    `extract`: the bare answer; one with `extract`: the response) got one text for all under
    verifier_input auto, the bare answer: math read "\\frac{1}{2}" by its last number, 2, and "(1, 2)" as
    2, so right answers scored wrong unless the user found a verifier_input that suited every part (none
    does). Each verifier now gets its own. Found in review."""
    tagged = {"name": "exact_match", "config": {"extract": "<answer>(.*?)</answer>"}}
    components = [{"reward": "math"}, {"reward": "exact_match"}, {"reward": tagged, "name": "tagged"}]
    verifier = {"name": "composite", "config": {"components": components}}
    items = [
        {
            "response": "<answer>\\frac{1}{2}</answer><confidence>0.7</confidence>",
            "reference": "\\frac{1}{2}",
        },
        {"response": "<answer>(1, 2)</answer><confidence>0.6</confidence>", "reference": "(1, 2)"},
        {"response": "<answer>x = 4</answer><confidence>0.9</confidence>", "reference": "5"},
    ]
    results = await score(client, items, {"verifier": verifier, "correct_threshold": 3})
    parts = results[0]["details"]["verifier"]["parts"]
    assert [parts[k]["details"]["extracted"] for k in ("math", "exact_match", "tagged")] == [
        "\\frac{1}{2}"
    ] * 3
    assert [r["components"]["correct"] for r in results] == [1.0, 1.0, 0.0], results
    assert [r["score"] for r in results] == pytest.approx(
        [rlcr(True, 0.7), rlcr(True, 0.6), rlcr(False, 0.9)]
    )
    # an explicit verifier_input is what every part gets
    [r] = await score(client, items[:1], {"verifier": verifier, "verifier_input": "answer_tagged"})
    assert (
        r["details"]["verifier"]["parts"]["exact_match"]["details"]["extracted"]
        == "<answer>\\frac{1}{2}</answer>"
    )


@pytest.mark.parametrize(
    "verifier",
    [
        {"name": "exact_match", "config": {"extract": "<answer>(.*?)</answer>"}},
        {"name": "f1", "config": {"extract": r"[Aa]nswer: (\w+)"}},
        "exact_match",
        "math",
    ],
)
async def test_after_think_false_reads_the_whole_response_everywhere(
    client: httpx.AsyncClient, verifier: str | dict[str, Any]
) -> None:
    """after_think false read the answer and the confidence in the reasoning, but a verifier given the
    response (an `extract` pattern) read only the text after it, as every verifier does: it found no
    answer there, and a right answer scored correct 0. The verifier now gets the text without the think
    tags. Found in review."""
    responses = [
        "<think>Answer: Paris <answer>Paris</answer><confidence>0.8</confidence>",  # cut off in reasoning
        "Answer: Paris <answer>Paris</answer><confidence>0.8</confidence></think>",  # all of it reasoning
        "<think>Answer: Lyon <answer>Lyon</answer><confidence>0.3</confidence></think> done",
    ]
    items = [{"response": r, "reference": "Paris"} for r in responses]
    results = await score(client, items, {"verifier": verifier, "after_think": False})
    assert [r["components"]["correct"] for r in results] == [1.0, 1.0, 0.0], results
    assert [r["score"] for r in results] == [rlcr(True, 0.8), rlcr(True, 0.8), rlcr(False, 0.3)]
    # by default the reasoning is not read: no answer tag outside it
    default = await score(client, items, {"verifier": verifier})
    assert [r["details"]["format_error"] for r in default] == ["no <answer> tag"] * 3


async def test_a_group_verifier_counts_the_answers_of_the_whole_group(client: httpx.AsyncClient) -> None:
    """With a group verifier (majority_vote: label-free calibration) only the format-valid members voted:
    of the answers 5, 5, 5, 7, 7, two 5s without a confidence tag were left out, the 7s won, and the 5
    that agrees with the group's majority was scored wrong. A format failure still scores 0."""
    group = f"cal-{uuid.uuid4().hex}"

    def member(answer: str, q: float | None) -> dict[str, Any]:
        tag = "" if q is None else f"<confidence>{q}</confidence>"
        return {"response": f"<answer>{answer}</answer>{tag}", "group": group}

    items = [member("5", None), member("5", None), member("5", 0.9), member("7", 0.8), member("7", 0.8)]
    config = {"verifier": {"name": "majority_vote", "config": {"equivalence": "string"}}}
    results = await score(client, items, config)
    assert [r["reason"] for r in results[:2]] == ["format", "format"]
    assert [r["components"]["correct"] for r in results] == [None, None, 1.0, 0.0, 0.0]
    assert [r["score"] for r in results] == pytest.approx(
        [0.0, 0.0, rlcr(True, 0.9), rlcr(False, 0.8), rlcr(False, 0.8)]
    )


async def test_an_empty_group_id_is_a_group_for_the_vote(client: httpx.AsyncClient) -> None:
    """The members without a readable confidence were sent to a group verifier if their group id was
    truthy, so under the group id "" (a group like any other: majority_vote and the serving layer test
    ``is None``) their answers did not vote and the lone 7 won. Found in review. (Scored directly: the
    serving layer remembers a group id across requests, and "" cannot be made unique.)"""
    from rewardhub.protocol import ScoreItem
    from rewardhub.rewards.base import ScoreContext

    reward = client.app.state.runtime.reward_registry().get("calibration")  # type: ignore[attr-defined]
    config = reward.parse_config({"verifier": {"name": "majority_vote", "config": {"equivalence": "string"}}})
    items = [
        ScoreItem(response="<answer>5</answer>", group=""),
        ScoreItem(response="<answer>5</answer>", group=""),
        ScoreItem(response="<answer>7</answer><confidence>0.8</confidence>", group=""),
    ]
    out = await reward.score(items, config, ScoreContext(deadline_s=10))
    assert [o.reason for o in out[:2]] == ["format", "format"]
    assert out[2].components["correct"] == 0.0, out[2]  # 5 has the votes
    assert out[2].score == pytest.approx(rlcr(False, 0.8))


async def test_verifier_invalid_makes_the_item_invalid(client: httpx.AsyncClient) -> None:
    items = [
        {"response": "<answer>Paris</answer><confidence>0.8</confidence>"},  # no reference
        {"response": "<answer>Paris</answer><confidence>0.8</confidence>", "reference": "Paris"},
    ]
    first, second = await score(client, items)
    assert (first["score"], first["valid"], first["reason"]) == (None, False, "missing_reference")
    assert "exact_match" in first["details"]["message"]
    assert second["score"] == rlcr(True, 0.8)


async def test_custom_tags(client: httpx.AsyncClient) -> None:
    config = {**EM, "answer_tag": "final", "confidence_tag": "p"}
    [r] = await score(client, [{"response": "<final>Paris</final><p>0.5</p>", "reference": "Paris"}], config)
    assert r["score"] == rlcr(True, 0.5)


@pytest.mark.parametrize(
    ("config", "status", "message"),
    [
        ({"scoring": "rlcr", "log_epsilon": 0.1}, 422, "log_epsilon applies to scoring 'log' only"),
        ({"answer_tag": "x", "confidence_tag": "x"}, 422, "must differ"),
        ({"answer_tag": "a b"}, 422, "not a tag name"),
        ({"verifier": "nope"}, 404, "unknown reward 'nope'"),
        (
            {"verifier": {"name": "math", "config": {"extraction": ["psychic"]}}},
            422,
            "calibration: reward.config.verifier.config.extraction.0:",
        ),
        ({"scoring": "log", "log_epsilon": 0}, 422, "log_epsilon"),
        # λ·|ln ε| > 1: a correct answer at q = 0 (1 + 0.5·ln 0.1 = -0.15) would score below a wrong one
        # at q = 0 (0), so the policy could gain by answering wrongly on purpose (algorithms.md §3.5)
        ({"scoring": "log", "log_epsilon": 0.1, "log_scale": 0.5}, 422, "log_scale"),
        ({"scoring": "log", "log_scale": 1.0}, 422, "log_scale"),
    ],
)
async def test_config_errors(
    client: httpx.AsyncClient, config: dict[str, Any], status: int, message: str
) -> None:
    body = {"reward": {"name": "calibration", "config": config}, "items": [{"response": "x"}]}
    resp = await client.post("/v1/score", json=body)
    assert resp.status_code == status, resp.text
    assert message in resp.json()["error"]["message"], resp.json()


async def test_verifier_timeout_propagates(client: httpx.AsyncClient) -> None:
    tower = "2^{2^{2^{2^{2^{2}}}}}"  # SymPy hangs on it; the math worker is killed at the deadline
    item = {"response": f"<answer>{tower}</answer><confidence>0.5</confidence>", "reference": "4"}
    body = {"reward": "calibration", "items": [item], "options": {"timeout_s": 0.5, "use_cache": False}}
    resp = await client.post("/v1/score", json=body)
    [r] = resp.json()["results"]
    assert (r["score"], r["valid"], r["reason"]) == (None, False, "timeout")
    assert r["details"]["message"].startswith("verifier 'math' could not score the answer")


async def test_a_verifier_s_stand_in_score_is_not_cached(make_app: Any, judge_server: Any) -> None:
    """A composite verifier that zeroes its failed judge (on_invalid: zero) gives a score for this
    request only (Outcome.transient). calibration built its own outcome from it without the flag, so
    its -0.81 for a 'wrong' answer was cached for 7 days, and served after the judge came back."""
    from fake_openai import always

    verifier = {
        "name": "composite",
        "config": {
            "components": [
                {"reward": "exact_match", "weight": 0.5},
                {"reward": {"name": "judge", "config": {"mode": "pointwise"}}, "weight": 0.5},
            ],
            "on_invalid": "zero",
        },
    }
    config = {"verifier": verifier, "correct_threshold": 0.75}
    item = {
        "prompt": "What is the capital of France?",
        "response": "<answer>Paris</answer><confidence>0.9</confidence>",
        "reference": "Paris",
    }
    async with make_app(judge_url=judge_server.url, judge_model="fake-judge", backend_max_retries=0) as c:
        judge_server.reply = always("boom", status=500)
        (down,) = await score(c, [item], config)
        assert down["valid"] and down["score"] == pytest.approx(rlcr(False, 0.9)), down
        judge_server.reply = always("Score: 5")
        (up,) = await score(c, [item], config)
        assert not up["cached"] and up["score"] == pytest.approx(rlcr(True, 0.9)), up
        (again,) = await score(c, [item], config)
        assert again["cached"] and again["score"] == up["score"]


async def test_a_verifier_this_server_lacks_is_not_cached_when_zeroed(
    make_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A verifier that this server cannot run (meteor without WordNet: ``unsupported``, transient) makes
    the item invalid; calibration dropped the transient flag, so a composite zeroing it cached its 0.0,
    served after WordNet was installed."""
    monkeypatch.setattr(text_similarity, "_wordnet_available", lambda: False)
    meteor = {"name": "text_similarity", "config": {"metric": "meteor"}}
    cal = {"name": "calibration", "config": {"verifier": meteor, "correct_threshold": 0.5}}
    reward = {"name": "composite", "config": {"components": [{"reward": cal, "on_invalid": "zero"}]}}
    item = {
        "response": "<answer>the cat sat</answer><confidence>0.9</confidence>",
        "reference": "the cat sat",
    }
    async with make_app() as c:
        for _ in range(2):
            resp = await c.post("/v1/score", json={"reward": reward, "items": [item]})
            assert resp.status_code == 200, resp.text
            [r] = resp.json()["results"]
            assert (r["score"], r["valid"], r["cached"]) == (0.0, True, False), r
