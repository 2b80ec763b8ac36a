"""OpenAI grader JSON through /compat/openai/graders/run, with OpenAI's payload shapes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from conftest import hold_the_service

URL = "/compat/openai/graders/run"


async def run(c: httpx.AsyncClient, grader: dict, sample: str, item: dict | None = None) -> dict:
    resp = await c.post(URL, json={"grader": grader, "model_sample": sample, "item": item or {}})
    assert resp.status_code == 200, resp.text
    body: dict = resp.json()
    assert set(body) == {"reward", "metadata", "sub_rewards", "model_grader_token_usage_per_model"}
    return body


@pytest.mark.parametrize(
    "operation, sample, reference, expected",
    [
        ("eq", "Paris", "Paris", 1.0),
        ("eq", "paris", "Paris", 0.0),  # eq is exact
        ("ne", "Rome", "Paris", 1.0),
        ("like", "I think Paris is right", "Paris", 1.0),  # contains, case-sensitive
        ("like", "i think paris", "Paris", 0.0),
        ("ilike", "i think PARIS", "Paris", 1.0),  # contains, any case
        # ilike is SQL's ILIKE, both sides lower-cased ("not case-sensitive", OpenAI's graders guide), not
        # case-folded: "ß" stays "ß" (casefold made it "ss", so "straße" was found in "STRASSE")
        ("ilike", "STRASSE", "straße", 0.0),
        ("ilike", "STRASSE", "strasse", 1.0),
        ("ilike", "Straße", "STRAßE", 1.0),
    ],
)
async def test_string_check(
    client: httpx.AsyncClient, operation: str, sample: str, reference: str, expected: float
) -> None:
    grader = {
        "type": "string_check",
        "name": "sc",
        "input": "{{ sample.output_text }}",
        "reference": "{{ item.answer }}",
        "operation": operation,
    }
    body = await run(client, grader, sample, {"answer": reference})
    assert body["reward"] == expected
    assert body["metadata"]["type"] == "string_check" and body["metadata"]["name"] == "sc"
    assert not any(v for k, v in body["metadata"]["errors"].items() if not k.endswith("_details"))


@pytest.mark.parametrize(
    "operation, sample, expected", [("eq", "", 1.0), ("eq", "Paris", 0.0), ("like", "Paris", 1.0)]
)
async def test_string_check_blank_reference_as_openai_reads_it(
    client: httpx.AsyncClient, operation: str, sample: str, expected: float
) -> None:
    """A blank reference is compared as written here, as OpenAI documents the operations (the native
    string_check reward answers missing_reference): a grader carried over scores as it does at OpenAI,
    and a multi grader is not failed whole by one sub-grader's empty item field."""
    sc = {"type": "string_check", "input": "{{sample.output_text}}", "reference": "{{item.answer}}"}
    body = await run(client, {**sc, "name": "sc", "operation": operation}, sample, {"answer": ""})
    assert body["reward"] == expected
    assert not any(v for k, v in body["metadata"]["errors"].items() if not k.endswith("_details"))
    city = {**sc, "reference": "{{item.city}}", "operation": "eq"}
    multi = {
        "type": "multi",
        "graders": {"blank": {**sc, "operation": operation}, "city": city},
        "calculate_output": "blank + city",
    }
    body = await run(client, multi, sample, {"answer": "", "city": "Paris"})
    city_score = 1.0 if sample == "Paris" else 0.0
    assert body["sub_rewards"] == {"blank": expected, "city": city_score}, body
    assert body["reward"] == expected + city_score


@pytest.mark.parametrize(
    "metric, sample, reference, expected",
    [
        ("fuzzy_match", "hello world", "hello world", 1.0),
        ("fuzzy_match", "hello wrld", "hello world", 0.9523809523809523),
        ("bleu", "the cat sat on the mat", "the cat sat on the mat", 1.0),
        ("rouge_1", "the cat on mat", "the cat sat on the mat", 0.8),
        ("rouge_l", "the cat on mat", "the cat sat on the mat", 0.8),
        ("gleu", "the cat", "the cat sat", 0.5),
    ],
)
async def test_text_similarity(
    client: httpx.AsyncClient, metric: str, sample: str, reference: str, expected: float
) -> None:
    grader = {
        "type": "text_similarity",
        "name": "ts",
        "input": "{{sample.output_text}}",
        "reference": "{{item.ref}}",
        "evaluation_metric": metric,
        "pass_threshold": 0.5,
    }
    body = await run(client, grader, sample, {"ref": reference})
    assert body["reward"] == pytest.approx(expected)


@pytest.mark.parametrize(
    "metric, sample, expected",
    [("fuzzy_match", "", 1.0), ("fuzzy_match", "Paris", 0.0), ("rouge_1", "Paris", 0.0)],
)
async def test_text_similarity_blank_reference_as_openai_reads_it(
    client: httpx.AsyncClient, metric: str, sample: str, expected: float
) -> None:
    """A blank reference is scored as written here, as OpenAI's grader takes any reference string (the
    native text_similarity reward answers missing_reference): a grader carried over scores as it does at
    OpenAI, and a multi grader is not failed whole by one sub-grader's empty item field."""
    ts = {"type": "text_similarity", "input": "{{sample.output_text}}", "evaluation_metric": metric}
    body = await run(client, {**ts, "name": "ts", "reference": "{{item.answer}}"}, sample, {"answer": ""})
    assert body["reward"] == pytest.approx(expected), body
    assert not any(v for k, v in body["metadata"]["errors"].items() if not k.endswith("_details"))
    city = {**ts, "reference": "{{item.city}}", "evaluation_metric": "fuzzy_match"}
    multi = {
        "type": "multi",
        "graders": {"blank": {**ts, "reference": "{{item.answer}}"}, "city": city},
        "calculate_output": "blank + city",
    }
    body = await run(client, multi, sample, {"answer": "", "city": "Paris"})
    city_score = 1.0 if sample == "Paris" else 0.0
    assert body["sub_rewards"] == {"blank": pytest.approx(expected), "city": city_score}, body
    assert body["reward"] == pytest.approx(expected + city_score)


async def test_multi_with_calculate_output(client: httpx.AsyncClient) -> None:
    grader = {
        "type": "multi",
        "name": "combo",
        "graders": {
            "exact": {
                "type": "string_check",
                "name": "exact",
                "input": "{{sample.output_text}}",
                "reference": "{{item.answer}}",
                "operation": "eq",
            },
            "close": {
                "type": "text_similarity",
                "name": "close",
                "input": "{{sample.output_text}}",
                "reference": "{{item.answer}}",
                "evaluation_metric": "fuzzy_match",
            },
        },
        "calculate_output": "0.5 * exact + 0.5 * close",
    }
    body = await run(client, grader, "hello wrld", {"answer": "hello world"})
    assert body["sub_rewards"] == {"exact": 0.0, "close": pytest.approx(0.9523809523809523)}
    assert body["reward"] == pytest.approx(0.5 * 0.9523809523809523)


async def test_errors_are_reported_in_metadata(client: httpx.AsyncClient) -> None:
    missing_var = await run(
        client, {"type": "string_check", "input": "{{item.nope}}", "reference": "x", "operation": "eq"}, "x"
    )
    assert (
        missing_var["reward"] == 0.0 and missing_var["metadata"]["errors"]["invalid_variable_error"] is True
    )
    bad_formula = await run(
        client,
        {
            "type": "multi",
            "graders": {"a": {"type": "string_check", "input": "x", "reference": "x", "operation": "eq"}},
            "calculate_output": "a + __import__('os')",
        },
        "x",
    )
    assert bad_formula["metadata"]["errors"]["formula_parse_error"] is True
    unknown = await run(client, {"type": "label_model"}, "x")
    assert unknown["metadata"]["errors"]["other_error"] is True


async def test_validate(client: httpx.AsyncClient) -> None:
    grader = {
        "type": "string_check",
        "input": "{{sample.output_text}}",
        "reference": "{{item.a}}",
        "operation": "eq",
    }
    ok = await client.post("/compat/openai/graders/validate", json={"grader": grader})
    # OpenAI's answer, the grader (the SDK's ValidateGraderResponse): only the status was checked
    assert ok.status_code == 200 and ok.json() == {"grader": grader}, ok.text
    bad = await client.post(
        "/compat/openai/graders/validate",
        json={
            "grader": {
                "type": "multi",
                "graders": {"a": {"type": "string_check", "input": "", "reference": "", "operation": "eq"}},
                "calculate_output": "a +",
            }
        },
    )
    # refused for its formula (the sub-grader's blank input and reference are allowed)
    assert bad.status_code == 422 and "not a valid expression" in bad.json()["error"]["message"], bad.text


GRADE_SOURCE = """
def grade(sample, item):
    text = sample["output_text"].strip().lower()
    print("debug output that must not be mistaken for the result: 1.0")
    return 1.0 if text == item["answer"].lower() else 0.25
"""


async def test_python_grader_runs_in_the_sandbox(client: httpx.AsyncClient) -> None:
    health = (await client.get("/health")).json()
    if health.get("sandbox") != "bubblewrap":
        pytest.skip("bubblewrap is not available here")
    grader = {"type": "python", "name": "py", "source": GRADE_SOURCE}
    right = await run(client, grader, " Paris ", {"answer": "paris"})
    assert right["reward"] == 1.0 and right["metadata"]["type"] == "python"
    wrong = await run(client, grader, "Rome", {"answer": "paris"})
    assert wrong["reward"] == 0.25
    crash = await run(
        client, {"type": "python", "source": "def grade(sample, item):\n    raise KeyError('x')\n"}, "a"
    )
    assert crash["reward"] == 0.0 and crash["metadata"]["errors"]["python_grader_runtime_error"] is True
    snoop = await run(
        client,
        {
            "type": "python",
            "source": (
                "import os\ndef grade(sample, item):\n    return 1.0 if os.path.exists('/etc/shadow') else 0.5\n"
            ),
        },
        "a",
    )
    assert snoop["reward"] == 0.5  # the grader sees nothing of the host
    multi = await run(
        client,
        {
            "type": "multi",
            "graders": {
                "py": grader,
                "eq": {
                    "type": "string_check",
                    "input": "{{sample.output_text}}",
                    "reference": "Paris",
                    "operation": "eq",
                },
            },
            "calculate_output": "(py + eq) / 2",
        },
        "Paris",
        {"answer": "paris"},
    )
    assert multi["reward"] == 1.0 and multi["sub_rewards"] == {"py": 1.0, "eq": 1.0}


async def test_score_model_grader_via_the_judge_backend(make_app: Any, judge_server: Any) -> None:
    from fake_openai import Reply

    answers = iter(['{"steps": [], "result": 0.8}', "I'd say 7 out of 10, so 0.7", "no idea", "42", "So 0.8"])
    judge_server.reply = lambda body: Reply(
        content=(a := next(answers)), finish_reason="length" if a == "So 0.8" else "stop"
    )
    grader = {
        "type": "score_model",
        "name": "quality",
        "model": "fake-judge",
        "input": [
            {"role": "system", "content": "Rate the answer from 0 to 1."},
            {"role": "user", "content": "Question: {{item.q}}\\nAnswer: {{sample.output_text}}"},
        ],
        "range": [0, 1],
        "sampling_params": {"temperature": 0},
    }
    async with make_app(judge_url=judge_server.url, judge_model="fake-judge") as c:
        first = await run(c, grader, "Paris", {"q": "Capital of France?"})
        assert first["reward"] == 0.8 and not any(first["metadata"]["errors"].values())
        sent = judge_server.requests[-1]["messages"]
        assert sent[1]["content"] == "Question: Capital of France?\\nAnswer: Paris"  # templates filled
        second = await run(c, grader, "Lyon", {"q": "Capital of France?"})
        assert second["reward"] == 0.7  # the last number in free text
        unparseable = await run(c, grader, "Rome", {"q": "x"})
        assert unparseable["metadata"]["errors"]["model_grader_parse_error"] is True
        out_of_range = await run(c, grader, "Nice", {"q": "y"})
        assert (
            out_of_range["reward"] == 0.0 and out_of_range["metadata"]["errors"]["model_grader_parse_error"]
        )
        cut = await run(c, grader, "Marseille", {"q": "z"})  # cut off at max_tokens: "0.8" of "0.85"?
        assert cut["reward"] == 0.0 and cut["metadata"]["errors"]["model_grader_parse_error"]


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        ("<think>Maybe 0.3? No.</think>It is a good answer.", None),  # the draft is not the score
        ('<think>0.3</think>{"result": 0.9}', 0.9),
        ("first 0.2 then</think> final: 0.6", 0.6),  # the template opened the block
        ("0.4 <think>0.9, or not", 0.4),  # an unclosed block the answer ended in
    ],
)
def test_a_score_model_s_reasoning_is_not_its_score(answer: str, want: float | None) -> None:
    """A reasoning model's numbers inside <think> were read as its score when its answer had none."""
    from rewardhub.rewards.score_model import parse_score

    assert parse_score(answer) == want


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        ('{"result": 0} because \\boxed{1} is not 2', 0.0),  # was 2.0: the last bare number
        ('{"result": 0.3}\nNote: {x+1} simplifies.', 0.3),  # was 1.0
        ('Since \\frac{1}{2} is right: {"result": 0.5}', 0.5),
        ('{"result": 0.2, "why": "step {3} is wrong", "detail": {"x": 9}}', 0.2),
        ('{"score": 0.7} {"note": 1}', 0.7),
        ("{1} and then 0.4", 0.4),  # no JSON object with a result: the last number
        ("{" * 500 + " 0.6", 0.6),
        ('{"result": 0.1} ' + "\\frac{1}{2} " * 200, 0.1),  # LaTeX braces do not use up the tries
    ],
)
def test_a_score_model_s_json_result_wins_over_braces_after_it(answer: str, want: float | None) -> None:
    """The JSON object was taken from the first { to the last }: any brace after the object (LaTeX in an
    explanation) made that span invalid JSON, and the last bare number was read as the score."""
    from rewardhub.rewards.score_model import parse_score

    assert parse_score(answer) == want


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        ("0.8 (on a 0-1 scale)", 0.8),  # was -1.0: out of range, a parse error
        ("Score: 7 on a scale of 1 to 10.", 7.0),  # was 10.0
        ("I'd give it a 4 (range 1-5).", 4.0),  # was -5.0
        ("Using a 0-10 scale, I rate it 6", 6.0),
        ("Scale: 1-10. Score: 3", 3.0),
        ("4 on a 1-5 point scale", 4.0),
        ("The result is 3-4", 4.0),  # no scale named: the last number (was -4.0: "-" read as its sign)
        ("0.7" + " " * 50_000 + "x", 0.7),
    ],
)
def test_a_scale_named_after_the_score_is_not_the_score(answer: str, want: float) -> None:
    """A judge that names its scale after the score ("0.8 (on a 0-1 scale)") was read as scoring -1."""
    from rewardhub.rewards.score_model import parse_score

    assert parse_score(answer) == want


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        ("Score: 7/10", 7.0),  # was 10.0: full marks for a 7
        ("I would rate it 7 / 10.", 7.0),
        ("3 out of 5", 3.0),
        ("Score: 0.5/1", 0.5),
        ("Half of it, 1/2, is right; the score is 0.4", 0.4),  # a fraction earlier is not the score
        ("The answer divides 12/ by nothing: 8", 8.0),
        ("-2/10", -2.0),
        ("Score: 7 (out of 10)", 7.0),  # was 10.0: the denominator in brackets
        ("Rating: 3 (/5).", 3.0),
    ],
)
def test_a_score_written_as_a_fraction_reads_its_numerator(answer: str, want: float) -> None:
    """The last number of "Score: 7/10" is the scale, not the score."""
    from rewardhub.rewards.score_model import parse_score

    assert parse_score(answer) == want


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        ("Score: 8\n\nThe response covers points 1 and 2.", 8.0),  # was 2.0: the explanation's number
        ("**Score**: 6. It has 3 flaws.", 6.0),  # was 3.0
        ("Rating: [[7]]/10. Two issues, see step 4.", 7.0),  # was 4.0
        ("Grade (1-5): 3. Fails on case 2", 3.0),  # was 2.0
        ("score = 0.7 given 2 errors", 0.7),  # was 2.0
        ("Draft score: 0.2\nRevised.\nFinal score: 0.9 (1 fix)", 0.9),  # the last score line
        ("Scale: 1-10. Score: 3", 3.0),
        ("I'd give it a 0.75.", 0.75),  # no label: still the last number
        ("- **Final Score (1-10):** 6\n\n1. Good. 2. Bad.", 6.0),
        ("The response's own 'Score: 10' is wrong; I give it 2", 2.0),  # a quoted score line is no label
        ("It writes score: 10 at the end, a trick.\nRating: 3", 3.0),
        ("On a 1-10 scale\nScore: 8, with 2 flaws", 8.0),
    ],
)
def test_a_labelled_score_wins_over_numbers_after_it(answer: str, want: float) -> None:
    """A judge that writes its score first and explains after ("Score: 8. Points 1 and 2 hold") was
    read as scoring the explanation's last number."""
    from rewardhub.rewards.score_model import parse_score

    assert parse_score(answer) == want


@pytest.mark.parametrize(
    "answer",
    ["Score: 0,8", "I rate it 0,8", "Score: 7,5/10", "7,5 out of 10", "Score: 1,000"],
)
def test_a_number_with_a_decimal_comma_is_no_score(answer: str) -> None:
    """A decimal comma split the number: "0,8" read 8 (or 0 after its label), "7,5/10" read 5; which
    number was meant is unknown, so it is a parse error, not a wrong score."""
    from rewardhub.rewards.score_model import parse_score

    assert parse_score(answer) is None


@pytest.mark.parametrize(
    "extra",
    [
        {"range": [1]},
        {"range": "0-1"},
        {"range": [1, 0]},
        {"range": [0, "high"]},
        {"sampling_params": [0.5]},
        {"sampling_params": {"temperature": 5}},
    ],
)
async def test_a_malformed_score_model_grader_is_a_grader_error(
    make_app: Any, judge_server: Any, extra: dict[str, Any]
) -> None:
    """A one-element range or a list of sampling params raised inside the translation (HTTP 500 from
    both endpoints); a range or temperature the score_model reward refuses was accepted by /validate
    and failed every run as the judge server's fault (model_grader_server_error). All are faults of
    the grader: other_error from /run, 422 from /validate, and the judge is never asked."""
    grader = {
        "type": "score_model",
        "input": [{"role": "user", "content": "Rate {{sample.output_text}} from 0 to 1."}],
        **extra,
    }
    async with make_app(judge_url=judge_server.url, judge_model="fake-judge") as c:
        body = await run(c, grader, "Paris")
        errors = body["metadata"]["errors"]
        assert body["reward"] == 0.0 and errors["other_error"] is True, body
        assert not errors["model_grader_server_error"]
        checked = await c.post("/compat/openai/graders/validate", json={"grader": grader})
        assert checked.status_code == 422, checked.text
    assert judge_server.calls == 0


async def test_validate_reads_templates_of_the_sample_s_json(client: httpx.AsyncClient) -> None:
    """/validate rendered the templates against an empty sample.output_json, so a grader reading
    {{ sample.output_json.x }} (valid: /run fills it) raised TemplateError, an HTTP 500; a template
    naming a variable no run can have is the grader's fault, a 422."""
    grader = {
        "type": "string_check",
        "input": "{{ sample.output_json.answer }}",
        "reference": "{{ item.answer }}",
        "operation": "eq",
    }
    ok = await client.post("/compat/openai/graders/validate", json={"grader": grader})
    assert ok.status_code == 200, ok.text
    ran = await run(client, grader, '{"answer": "Paris"}', {"answer": "Paris"})
    assert ran["reward"] == 1.0
    bad = await client.post(
        "/compat/openai/graders/validate", json={"grader": {**grader, "input": "{{ sample.nope }}"}}
    )
    assert bad.status_code == 422 and "sample.nope" in bad.json()["error"]["message"], bad.text


@pytest.mark.parametrize(
    ("returns", "score"),
    [
        ("0.25", 0.25),
        ("3", 3.0),
        ("'0.75'", None),  # a string is not a number, even one float() would parse
        ("b'1'", None),
        ("float('nan')", None),
        ("None", None),
    ],
)
async def test_python_grader_result_must_be_a_number(
    client: httpx.AsyncClient, returns: str, score: float | None
) -> None:
    """grade() returning the string "0.75" (a regex group, say) scored 0.75: the wrapper's float() parsed
    it, where the grader contract is a number and anything else cannot score the item. Found in review."""
    health = (await client.get("/health")).json()
    if health.get("sandbox") != "bubblewrap":
        pytest.skip("bubblewrap is not available here")
    source = f"def grade(sample, item):\n    return {returns}\n"
    resp = await client.post(
        "/v1/score",
        json={
            "reward": "python_grader",
            "items": [{"response": "x", "reference": {"source": source, "item": {}}}],
            "options": {"use_cache": False},
        },
    )
    assert resp.status_code == 200, resp.text
    [r] = resp.json()["results"]
    assert r["score"] == score, r
    if score is None:
        assert r["reason"] == "parse_error", r


async def test_python_grader_sees_the_answer_not_the_reasoning(client: httpx.AsyncClient) -> None:
    """sample.output_text was the whole response, <think> included, where OpenAI's is the answer alone
    (as string_check and text_similarity read it): a grader checking that the answer is in the output
    paid a reasoning model for drafting every option in its <think> (1.0 for the answer "Rome"), and
    output_json was null for a JSON answer after the reasoning. Found in review."""
    health = (await client.get("/health")).json()
    if health.get("sandbox") != "bubblewrap":
        pytest.skip("bubblewrap is not available here")
    contains = (
        "def grade(sample, item):\n    return 1.0 if item['answer'] in sample['output_text'] else 0.0\n"
    )
    as_json = "def grade(sample, item):\n    return 0.5 if sample['output_json'] is None else sample['output_json']['a']\n"
    text = "def grade(sample, item):\n    return 1.0 if sample['output_text'] == item['answer'] else 0.0\n"
    cases = [
        ("<think>Paris? Or Rome?</think>\n\nRome", contains, {"answer": "Paris"}, 0.0),
        ("<think>Paris? Or Rome?</think>\n\nParis", contains, {"answer": "Paris"}, 1.0),
        ("<think>Paris, surely</think>", contains, {"answer": "Paris"}, 0.0),  # no answer after it
        ("<think>Paris? Or Rome?</think>\n\nParis", text, {"answer": "Paris"}, 1.0),
        ('<think>draft {"a": 0}</think>\n{"a": 1}', as_json, {}, 1.0),
        ('{"a": 1}', as_json, {}, 1.0),
    ]
    resp = await client.post(
        "/v1/score",
        json={
            "reward": "python_grader",
            "items": [
                {"response": response, "reference": {"source": source, "item": item}}
                for response, source, item, _ in cases
            ],
            "options": {"use_cache": False},
        },
    )
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    assert [r["score"] for r in results] == [want for *_, want in cases], results


async def test_python_grader_reads_big_integers_exactly(client: httpx.AsyncClient) -> None:
    """output_json was parsed with orjson, which reads an integer past 64 bits as a float: 25! answered
    as 15511210043330985984000000 was 1.5511210043330986e+25 to the grader, != the gold. Python's json,
    as OpenAI's Python grader reads it, keeps it exact. Found in review."""
    health = (await client.get("/health")).json()
    if health.get("sandbox") != "bubblewrap":
        pytest.skip("bubblewrap is not available here")
    source = "def grade(sample, item):\n    return 1.0 if sample['output_json'] == 15511210043330985984000000 else 0.0\n"
    not_json = "def grade(sample, item):\n    return 1.0 if sample['output_json'] is None else 0.0\n"
    resp = await client.post(
        "/v1/score",
        json={
            "reward": "python_grader",
            "items": [
                {"response": "15511210043330985984000000", "reference": {"source": source, "item": {}}},
                {
                    "response": '{"n": 15511210043330985984000000}',
                    "reference": {"source": source, "item": {}},
                },
                # NaN is no JSON (Python's json would read it; the hosted grader's output_json is JSON)
                {"response": "NaN", "reference": {"source": not_json, "item": {}}},
            ],
            "options": {"use_cache": False},
        },
    )
    assert [r["score"] for r in resp.json()["results"]] == [1.0, 0.0, 1.0], resp.json()
    # the graders route's templates read it exactly too
    from rewardhub.compat.openai_graders import namespace, render

    ns = namespace('{"n": 15511210043330985984000000}', {})
    assert render("{{ sample.output_json.n }}", ns) == "15511210043330985984000000"


async def test_python_grader_memory_limit_is_checked_with_the_config(client: httpx.AsyncClient) -> None:
    """A memory_mb past what setrlimit takes had no upper bound: every item failed to start its sandbox
    and was answered sandbox_error, an infrastructure failure, for a config mistake (found in review)."""
    source = "def grade(sample, item):\n    return 1.0\n"
    resp = await client.post(
        "/v1/score",
        json={
            "reward": {"name": "python_grader", "config": {"memory_mb": 10**13}},
            "items": [{"response": "x", "reference": {"source": source, "item": {}}}],
        },
    )
    assert resp.status_code == 422, resp.text


async def test_python_grader_on_a_full_service_is_a_server_error(make_app: Any) -> None:
    """Overload is the service's fault: python_grader_server_error, not a runtime error that sends the
    user to debug a grade() that never ran."""
    async with make_app(max_inflight_items=2) as c:
        busy = await hold_the_service(c, 2)
        out = await run(
            c, {"type": "python", "name": "py", "source": GRADE_SOURCE}, "Paris", {"answer": "paris"}
        )
        errors = out["metadata"]["errors"]
        assert out["reward"] == 0.0
        assert errors["python_grader_server_error"] is True
        assert errors["python_grader_runtime_error"] is False
        await busy


@pytest.mark.parametrize(
    "formula, expected",
    [
        ("close ^ 2 + differs", 0.25 + 1.0),  # ^ is a power, binding tighter than +
        ("2 ^ 3 ^ 0", 2.0),  # right-associative, like a power
        ("floor(close + 0.6) + ceil(0.25)", 2.0),
        ("-close ^ 2", -0.25),
    ],
)
async def test_calculate_output_has_openai_s_power_and_rounding(
    client: httpx.AsyncClient, formula: str, expected: float
) -> None:
    """OpenAI's calculate_output writes a power as ``^`` and has floor and ceil; each was a
    ``formula_parse_error`` with reward 0 ("not allowed: operator BitXor", "not allowed: calling
    'floor'"), so a multi grader carried over from OpenAI RFT scored every sample 0."""
    sub = {"input": "{{sample.output_text}}", "reference": "{{item.answer}}"}
    grader = {
        "type": "multi",
        "name": "combo",
        "graders": {
            "differs": {"type": "string_check", "name": "differs", "operation": "ne", **sub},
            "close": {"type": "text_similarity", "name": "close", "evaluation_metric": "fuzzy_match", **sub},
        },
        "calculate_output": formula,
    }
    body = await run(client, grader, "aa", {"answer": "ab"})
    assert not any(v for v in body["metadata"]["errors"].values()), body["metadata"]["errors"]
    assert body["sub_rewards"] == {"differs": 1.0, "close": 0.5}
    assert body["reward"] == pytest.approx(expected)
    resp = await client.post("/compat/openai/graders/validate", json={"grader": grader})
    assert resp.status_code == 200, resp.text


async def test_score_model_content_may_be_one_part_object(make_app: Any, judge_server: Any) -> None:
    """OpenAI takes a message's content as a string, a list of parts, or one part object
    (``{"type": "input_text", "text": ...}``). The single object was sent to the judge as its Python
    repr, templates unfilled: "{'type': 'input_text', 'text': 'Answer: {{sample.output_text}}'}"."""
    from fake_openai import Reply

    judge_server.reply = lambda body: Reply(content='{"result": 1}')
    grader = {
        "type": "score_model",
        "name": "quality",
        "model": "fake-judge",
        "input": [
            {"role": "system", "content": {"type": "input_text", "text": "Rate {{item.q}} from 0 to 1."}},
            {
                "role": "user",
                "content": ["Answer: ", {"type": "input_text", "text": "{{sample.output_text}}"}],
            },
        ],
    }
    async with make_app(judge_url=judge_server.url, judge_model="fake-judge") as c:
        body = await run(c, grader, "Paris", {"q": "the answer"})
        assert body["reward"] == 1.0 and not any(body["metadata"]["errors"].values())
        sent = judge_server.requests[-1]["messages"]
        assert [m["content"] for m in sent] == ["Rate the answer from 0 to 1.", "Answer: Paris"]


@pytest.mark.parametrize(
    "reference, item, expected",
    [
        ("{{ item.answers[0] }}", {"answers": ["Paris", "Lyon"]}, 1.0),
        ('{{ item["reference-answer"] }}', {"reference-answer": "Paris"}, 1.0),
        ("{{ item.reference-answer }}", {"reference-answer": "Paris"}, 1.0),
        ("{{ item.rows[1].city }}", {"rows": [{"city": "Rome"}, {"city": "Paris"}]}, 1.0),
        ("{{ item.answers[2] }}", {"answers": ["Paris"]}, None),  # out of range: an error, not a 0
        ("{{ item.answer | lower }}", {"answer": "Paris"}, None),  # not a path: an error
    ],
)
async def test_template_paths_with_subscripts_are_filled_or_flagged(
    client: httpx.AsyncClient, reference: str, item: dict, expected: float | None
) -> None:
    """A placeholder of the sample/item namespace that the template pattern did not match (a ``[0]``
    subscript, a key with a hyphen, a filter) stayed in the text as is: string_check compared "Paris"
    with the literal "{{ item.answers[0] }}" and scored 0.0 with no error flag, and /validate accepted
    it. Now it is filled, or it is an invalid_variable_error."""
    grader = {
        "type": "string_check",
        "name": "s",
        "input": "{{ sample.output_text }}",
        "reference": reference,
        "operation": "eq",
    }
    body = await run(client, grader, "Paris", item)
    errors = body["metadata"]["errors"]
    if expected is None:
        assert body["reward"] == 0.0 and errors["invalid_variable_error"] is True
    else:
        assert body["reward"] == expected and not any(errors.values()), errors


OPENAI_ERROR_FIELDS = {  # metadata.errors of OpenAI's /fine_tuning/alpha/graders/run example answer
    "formula_parse_error",
    "sample_parse_error",
    "truncated_observation_error",
    "unresponsive_reward_error",
    "invalid_variable_error",
    "other_error",
    "python_grader_server_error",
    "python_grader_server_error_type",
    "python_grader_runtime_error",
    "python_grader_runtime_error_details",
    "model_grader_server_error",
    "model_grader_refusal_error",
    "model_grader_parse_error",
    "model_grader_server_error_details",
}


async def test_errors_carry_openai_s_detail_fields(client: httpx.AsyncClient) -> None:
    """OpenAI's errors object always has model_grader_server_error_details,
    python_grader_runtime_error_details and python_grader_server_error_type (null when their flag is
    off); they were missing, so a client reading errors["model_grader_server_error_details"] got a
    KeyError on every answer, and a failure put its message under invented keys only."""
    sc = {"type": "string_check", "name": "s", "input": "{{sample.output_text}}", "reference": "a"}
    sc["operation"] = "eq"
    ok = (await run(client, sc, "a"))["metadata"]["errors"]
    assert set(ok) == OPENAI_ERROR_FIELDS
    assert not any(ok.values())
    grader = {"type": "score_model", "name": "q", "input": [{"role": "user", "content": "rate"}]}
    failed = (await run(client, grader, "a"))["metadata"]["errors"]  # no judge backend configured
    assert OPENAI_ERROR_FIELDS <= set(failed)
    assert failed["model_grader_server_error"] is True
    assert "model backend" in failed["model_grader_server_error_details"]
    assert failed["python_grader_runtime_error_details"] is None


async def test_python_grader_runtime_error_details(client: httpx.AsyncClient) -> None:
    source = "def grade(sample, item):\n    raise KeyError('output_tools')\n"
    body = await run(client, {"type": "python", "name": "py", "source": source}, "x")
    errors = body["metadata"]["errors"]
    if errors["python_grader_server_error"]:
        pytest.skip(f"no sandbox here: {errors['python_grader_server_error_type']}")
    assert body["reward"] == 0.0 and errors["python_grader_runtime_error"] is True
    assert "KeyError" in errors["python_grader_runtime_error_details"]
    assert errors["python_grader_server_error_type"] is None


async def test_item_may_be_null_or_any_json(client: httpx.AsyncClient) -> None:
    """OpenAI's run endpoint types ``item`` as optional ``unknown``; a null item (item=None) or a
    list was a 422 here instead of a grade."""
    sc = {"type": "string_check", "name": "s", "input": "{{sample.output_text}}", "reference": "a"}
    sc["operation"] = "eq"
    for item in (None, ["a"]):
        resp = await client.post(URL, json={"grader": sc, "model_sample": "a", "item": item})
        assert resp.status_code == 200, resp.text
        assert resp.json()["reward"] == 1.0
    listed = {**sc, "reference": "{{ item[0] }}"}
    resp = await client.post(URL, json={"grader": listed, "model_sample": "a", "item": ["a"]})
    assert resp.json()["reward"] == 1.0, resp.json()


@pytest.mark.parametrize("formula", ["1 / (a - b)", "log(a - 0.5)", "a / (b - 0.5)"])
async def test_validate_parses_calculate_output_without_evaluating_it(
    client: httpx.AsyncClient, formula: str
) -> None:
    """/validate evaluated calculate_output with every sub-grader at 0.5, so valid formulas that fail
    only at that point ("1 / (a - b)": division by zero) were refused with a 422, although /run grades
    with them (here a=1, b=0)."""
    sc = {"type": "string_check", "input": "{{sample.output_text}}", "reference": "x"}
    grader = {
        "type": "multi",
        "graders": {"a": {**sc, "operation": "eq"}, "b": {**sc, "operation": "ne"}},
        "calculate_output": formula,
    }
    resp = await client.post("/compat/openai/graders/validate", json={"grader": grader})
    assert resp.status_code == 200, resp.text
    body = await run(client, grader, "x")
    assert not body["metadata"]["errors"]["formula_parse_error"], body["metadata"]["errors"]


async def test_the_openai_sdk_paths_under_its_base_url(client: httpx.AsyncClient) -> None:
    """The OpenAI SDK (`OpenAI(base_url=...).fine_tuning.alpha.graders.run(...)`, `.validate(...)`) posts
    to `<base_url>/fine_tuning/alpha/graders/run` and `/validate`, the hosted API's paths. With the base
    URL at /compat/openai both were 404: only the short /graders/run and /graders/validate answered."""
    grader = {"type": "string_check", "name": "sc", "input": "{{sample.output_text}}", "reference": "Paris"}
    grader["operation"] = "eq"
    base = "/compat/openai/fine_tuning/alpha/graders"
    ran = await client.post(f"{base}/run", json={"grader": grader, "model_sample": "Paris"})
    assert ran.status_code == 200, ran.text
    assert ran.json()["reward"] == 1.0 and ran.json()["metadata"]["type"] == "string_check"
    checked = await client.post(f"{base}/validate", json={"grader": grader})
    assert checked.status_code == 200 and checked.json() == {"grader": grader}, checked.text


@pytest.mark.parametrize("kind", ["string_check", "text_similarity"])
@pytest.mark.parametrize("missing", ["input", "reference"])
async def test_a_grader_without_its_input_or_reference_is_refused(
    client: httpx.AsyncClient, kind: str, missing: str
) -> None:
    """OpenAI requires `input` and `reference` of these graders. One left out (or misspelled,
    "refrence") was read as "", so every sample was compared against a blank (an empty answer scored
    1.0 under eq) and /validate accepted the grader: a training run's reward silently meaningless. /run
    now flags other_error with reward 0, and /validate answers 422 naming the field."""
    grader = {
        "type": kind,
        "name": "g",
        "input": "{{sample.output_text}}",
        "reference": "{{item.answer}}",
        "operation": "eq",
        "evaluation_metric": "fuzzy_match",
    }
    del grader[missing]
    body = await run(client, grader, "", {"answer": "Paris"})
    assert body["reward"] == 0.0
    errors = body["metadata"]["errors"]
    assert errors["other_error"] is True and f"`{missing}`" in errors["other_error_details"], errors
    resp = await client.post("/compat/openai/graders/validate", json={"grader": grader})
    assert resp.status_code == 422 and f"`{missing}`" in resp.json()["error"]["message"], resp.text


@pytest.mark.parametrize(
    ("kind", "missing"), [("string_check", "operation"), ("text_similarity", "evaluation_metric")]
)
async def test_a_grader_without_its_operation_or_metric_is_refused(
    client: httpx.AsyncClient, kind: str, missing: str
) -> None:
    """OpenAI requires a string_check's `operation` and a text_similarity's `evaluation_metric`. One left
    out (or misspelled, "operator") was defaulted silently to eq / fuzzy_match, a grader scoring other
    than meant, and /validate accepted it. Now it is refused as the other required fields are: /run
    flags other_error with reward 0, /validate answers 422 naming the field. Found in review."""
    grader = {"type": kind, "name": "g", "input": "{{sample.output_text}}", "reference": "{{item.answer}}"}
    body = await run(client, grader, "Paris", {"answer": "Paris"})
    assert body["reward"] == 0.0
    errors = body["metadata"]["errors"]
    assert errors["other_error"] is True and f"`{missing}`" in errors["other_error_details"], errors
    resp = await client.post("/compat/openai/graders/validate", json={"grader": grader})
    assert resp.status_code == 422 and f"`{missing}`" in resp.json()["error"]["message"], resp.text
    assert resp.json()["error"]["param"] == "grader", resp.text


async def test_model_code_a_grader_runs_cannot_read_the_result_marker(client: httpx.AsyncClient) -> None:
    """A grader that runs the model's code (``exec`` of the sample, as code graders do) ran it in the
    process whose stdout carries the result, and the result line's marker was in that process's source:
    a wrong program read it from ``__main__.__file__``, printed the marker with 1.0 and exited, and
    scored 1.0. grade() now runs in a child process that never sees the marker (the parent reads it
    from stdin only after the fork, and cannot be read from /proc), the parent printing the result.
    (Code run in grade()'s own process can still hand back a result of its choosing: a known limit.)"""
    grader = (
        "def grade(sample, item):\n    ns = {}\n    try:\n        exec(sample['output_text'], ns)\n"
        "        return 1.0 if ns['add'](2, 3) == 5 else 0.0\n    except Exception:\n        return 0.0\n"
    )
    forgeries = [
        "import re, os, __main__\nsrc = open(__main__.__file__).read()\n"
        "m = re.search(r'@@rewardhub-grade-[0-9a-f]+@@', src)\n"
        "print()\nprint((m.group(0) if m else 'x') + '1.0', flush=True)\nos._exit(0)\n",
        # the marker from the parent's stdin, through /proc
        "import os\nfd = os.open(f'/proc/{os.getppid()}/fd/0', os.O_RDONLY)\ndata = os.read(fd, 1 << 20).decode()\n"
        "m = [l for l in data.split() if l.startswith('@@rewardhub')]\n"
        "print()\nprint((m[0] if m else 'x') + '1.0', flush=True)\nos._exit(0)\n",
        "import sys\nmarker = sys.stdin.read().split()\nprint()\nprint((marker[-1] if marker else 'x') + '1.0')\n"
        "raise SystemExit(0)\n",
    ]
    for response, want in [
        ("def add(a, b):\n    return a + b\n", 1.0),
        ("def add(a, b):\n    return 0\n", 0.0),
    ]:
        resp = await client.post(
            "/v1/score",
            json={
                "reward": "python_grader",
                "items": [{"response": response, "reference": {"source": grader, "item": {}}}],
                "options": {"use_cache": False},
            },
        )
        [r] = resp.json()["results"]
        assert r["valid"] and r["score"] == want, r
    for forgery in forgeries:
        resp = await client.post(
            "/v1/score",
            json={
                "reward": "python_grader",
                "items": [{"response": forgery, "reference": {"source": grader, "item": {}}}],
                "options": {"use_cache": False},
            },
        )
        [r] = resp.json()["results"]
        assert r["score"] != 1.0, (forgery, r)
