"""The ``tool_call`` reward through the real app: response formats, matching rules, partial credit, and
the invalid/zero distinctions (a bad reference is invalid, a response without calls is a valid 0)."""

from __future__ import annotations

import functools
import json
import re
import sys
from typing import Any, SupportsIndex

import httpx
import pytest

from conftest import score_results
from rewardhub.rewards import tool_call

WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 3}}
TIME = {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}


def hermes(*calls: dict[str, Any]) -> str:
    return "I will look it up.\n" + "\n".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls)


def as_written(value: Any) -> str:
    """An argument's value as the XML call forms (Qwen3-Coder, GLM, MiniMax) write it: a string as it is
    (raw text), any other value as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


async def score(
    client: httpx.AsyncClient, items: list[dict[str, Any]], **config: Any
) -> list[dict[str, Any]]:
    return await score_results(client, "tool_call", items, options={"use_cache": False}, **config)


async def test_the_formats_a_response_may_call_tools_in(client: httpx.AsyncClient) -> None:
    openai = {
        "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps(WEATHER["arguments"])},
    }
    responses = [
        hermes(WEATHER),  # Hermes / Qwen blocks
        json.dumps(WEATHER),  # a bare call object
        "```json\n" + json.dumps([WEATHER]) + "\n```",  # a fenced list
        json.dumps({"tool_calls": [openai]}),  # OpenAI's shape, arguments as a JSON string
        '<think>maybe <tool_call>{"name": "get_time", "arguments": {}}</tool_call></think>' + hermes(WEATHER),
        json.dumps({"name": "get_weather", "parameters": WEATHER["arguments"]}),
        "[TOOL_CALLS] " + json.dumps([WEATHER]),  # Mistral's marker
    ]
    results = await score(client, [{"response": r, "reference": [WEATHER]} for r in responses])
    assert [r["score"] for r in results] == [1.0] * len(responses), results
    assert all(r["components"]["exact"] == 1.0 and r["components"]["calls"] == 1.0 for r in results)


async def test_arguments_are_compared_as_json_values(client: httpx.AsyncClient) -> None:
    def with_args(**changes: Any) -> str:
        return hermes({"name": "get_weather", "arguments": {**WEATHER["arguments"], **changes}})

    responses = [
        hermes(
            {"name": "get_weather", "arguments": {"days": 3.0, "unit": "celsius", "city": "Paris"}}
        ),  # order, 3.0
        with_args(days=4),
        with_args(city="paris"),
        with_args(days=True),  # true is not a number
        hermes({"name": "get_wether", "arguments": WEATHER["arguments"]}),
    ]
    results = await score(client, [{"response": r, "reference": WEATHER} for r in responses])
    assert [r["score"] for r in results] == [1.0, 0.0, 0.0, 0.0, 0.0]
    normalized = await score(
        client, [{"response": with_args(city=" PARIS "), "reference": WEATHER}], string_match="normalized"
    )
    assert normalized[0]["score"] == 1.0


async def test_normalized_strings_compare_canonically_equivalent_spellings(client: httpx.AsyncClient) -> None:
    """``string_match: normalized`` folds case and whitespace and also Unicode's canonical spellings: an
    accented letter as one code point (NFC, "Montr\u00e9al") equals it as a letter and a combining accent
    (NFD, "Montre\u0301al", what macOS file names and some tokenizers' output hold); they scored 0.
    Compatibility forms stay distinct: "m\u00b2" (superscript two) is not "m2", and exact mode is exact."""
    ref = {"name": "book", "arguments": {"city": "Montr\u00e9al", "area": "m\u00b2", "who": "\u00c9LODIE"}}

    def call(**args: str) -> dict[str, Any]:
        return {
            "response": hermes({"name": "book", "arguments": {**ref["arguments"], **args}}),
            "reference": ref,
        }

    items = [
        call(city="Montre\u0301al"),  # decomposed
        call(city="MONTRE\u0301AL ", who="e\u0301lodie"),  # decomposed and another case
        call(area="m2"),  # a compatibility equivalent: another value
    ]
    normalized = await score(client, items, string_match="normalized")
    assert [r["score"] for r in normalized] == [1.0, 1.0, 0.0], normalized
    exact = await score(client, items[:1])
    assert exact[0]["score"] == 0.0


async def test_a_whole_float_equals_the_integer_it_is_without_bfcl_s_types(client: httpx.AsyncClient) -> None:
    """The rule for an integer written as a float, outside reference_format bfcl: 5.0 equals 5, both ways,
    in every form a call is read in, and a tool schema in the reference (omit_defaults) does not change it.
    JSON has one number type (RFC 8259), so the reference's 5 says nothing of a type: serialisers write one
    float as 5.0 (Python) or 5 (JavaScript), and JSON Schema's "integer" takes 5.0 (a number whose
    fraction is zero); a reference written by one serialiser and a call by another must not score 0 for
    one value. A float that is no integer (5.5) is
    another value. (BFCL's checker, a Python type check against the declared type, fails 5.0 for an
    integer parameter: reference_format bfcl does so; tests/rewards/test_tool_call_bfcl.py.)"""
    ref = {"name": "get_weather", "arguments": {"city": "Paris", "days": 5}}
    float_ref = {"name": "get_weather", "arguments": {"city": "Paris", "days": 5.0}}
    tool = {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"days": {"type": "integer"}, "city": {}}},
    }
    cases = [
        (ref, hermes({"name": "get_weather", "arguments": {"city": "Paris", "days": 5.0}}), 1.0),
        (ref, '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\", \\"days\\": 5.0}"}', 1.0),
        (ref, "[get_weather(city='Paris', days=5.0)]", 1.0),
        (
            ref,
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
            "<parameter=days>\n5.0\n</parameter>\n</function>\n</tool_call>",
            1.0,
        ),
        (float_ref, hermes(ref), 1.0),
        (
            {"calls": [ref], "tools": [tool]},
            hermes({**ref, "arguments": {"city": "Paris", "days": 5.0}}),
            1.0,
        ),
        (ref, hermes({"name": "get_weather", "arguments": {"city": "Paris", "days": 5.5}}), 0.0),
        (ref, hermes({"name": "get_weather", "arguments": {"city": "Paris", "days": 5.01}}), 0.0),
    ]
    results = await score(
        client, [{"response": r, "reference": ref} for ref, r, _ in cases], omit_defaults=True
    )
    assert [r["score"] for r in results] == [want for _, _, want in cases], results


async def test_an_integer_equals_only_a_number_that_rounds_to_it(client: httpx.AsyncClient) -> None:
    """Two integers are equal only when equal (ids, timestamps); the float tolerance, relative to the value,
    let a float within 1e-6 of a 10-digit id equal it: 1700000500.0 or 1700000123.5 for the id 1700000000
    scored 1.0 where the integer 1700000500 scores 0."""
    order = {"name": "cancel_order", "arguments": {"order_id": 1700000000, "amount": 19.99}}

    def with_args(**changes: Any) -> str:
        return hermes({"name": "cancel_order", "arguments": {**order["arguments"], **changes}})

    responses = [
        with_args(order_id=1700000000.0),  # the same number written as a float
        with_args(order_id=1.7e9),
        with_args(order_id=1700000500),
        with_args(order_id=1700000500.0),  # another integer, written as a float
        with_args(order_id=1700000123.5),
        with_args(amount=19.99000001),  # a float within the tolerance
        with_args(amount=20),
    ]
    results = await score(client, [{"response": r, "reference": order} for r in responses])
    assert [r["score"] for r in results] == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    coerced = await score(
        client, [{"response": with_args(order_id="1700000500.0"), "reference": order}], coerce_types=True
    )
    assert coerced[0]["score"] == 0.0
    # a float written as an integer still equals it when it rounds to that integer
    near = {"name": "set_temp", "arguments": {"value": 21.0000001}}
    results = await score(
        client,
        [
            {"response": hermes({"name": "set_temp", "arguments": {"value": 21}}), "reference": near},
            {"response": hermes({"name": "set_temp", "arguments": {"value": 22}}), "reference": near},
        ],
    )
    assert [r["score"] for r in results] == [1.0, 0.0]


async def test_parallel_calls_in_any_order_or_strictly(client: httpx.AsyncClient) -> None:
    item = {"response": hermes(TIME, WEATHER), "reference": {"calls": [WEATHER, TIME]}}
    assert (await score(client, [item]))[0]["score"] == 1.0
    one_block = {
        "response": f"<tool_call>{json.dumps([TIME, WEATHER])}</tool_call>",
        "reference": [WEATHER, TIME],
    }
    assert (await score(client, [one_block]))[0]["score"] == 1.0
    assert (await score(client, [item], order="strict"))[0]["score"] == 0.0


async def test_partial_credit_per_argument_and_per_call(client: httpx.AsyncClient) -> None:
    one_wrong = {"name": "get_weather", "arguments": {**WEATHER["arguments"], "days": 5}}
    items = [
        {"response": hermes(one_wrong), "reference": [WEATHER]},  # 2 of 3 keys right
        {"response": hermes(WEATHER), "reference": [WEATHER, TIME]},  # a call missing
        {"response": hermes(WEATHER, TIME, TIME), "reference": [WEATHER, TIME]},  # a call extra
        {"response": hermes({"name": "get_weather", "arguments": {"city": "Paris"}}), "reference": [WEATHER]},
    ]
    results = await score(client, items, mode="partial")
    assert [r["score"] for r in results] == pytest.approx([2 / 3, 1 / 2, 2 / 3, 1 / 3])
    assert [r["components"]["exact"] for r in results] == [0.0] * 4
    assert results[1]["components"]["name_f1"] == pytest.approx(2 / 3)  # P 1, R 1/2
    exact = await score(client, items, mode="exact")
    assert [r["score"] for r in exact] == [0.0] * 4


async def test_no_call_is_a_valid_zero_and_a_bad_reference_is_invalid(client: httpx.AsyncClient) -> None:
    items = [
        {"response": "The weather in Paris is sunny.", "reference": [WEATHER]},  # no call: 0, no_answer
        {"response": "<tool_call>{not json}</tool_call>", "reference": [WEATHER]},  # broken: 0, format
        {"response": '<tool_call>{"arguments": {}}</tool_call>', "reference": [WEATHER]},  # no name: format
        {"response": "<tool_call>[]</tool_call>", "reference": [WEATHER]},  # an empty list: no call made
        {"response": '{"tool_calls": []}', "reference": [WEATHER]},
        {"response": "No tool is needed: 4.", "reference": []},  # "call no tool", none called: 1
        {"response": hermes(TIME), "reference": []},  # a call where none was wanted: 0
        {"response": hermes(WEATHER), "reference": "get the weather"},  # not a call reference: invalid
        {"response": hermes(WEATHER)},  # no reference: invalid
        {"response": "<tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>", "reference": [WEATHER]},
        {
            "response": hermes({"name": "get_weather", "arguments": {"a": [[[[[[[[[[[]]]]]]]]]]]}}),
            "reference": [WEATHER],
        },
    ]
    results = await score(client, items)
    assert [(r["score"], r["valid"], r["reason"]) for r in results] == [
        (0.0, True, "no_answer"),
        (0.0, True, "format"),
        (0.0, True, "format"),
        (0.0, True, "no_answer"),
        (0.0, True, "no_answer"),
        (1.0, True, None),
        (0.0, True, None),
        (None, False, "parse_error"),
        (None, False, "missing_reference"),
        (0.0, True, "format"),  # nested past the parser's recursion limit: broken call JSON, not a crash
        (0.0, True, None),  # nested, within bounds: compared, wrong
    ]


async def test_the_reward_is_listed_with_its_config(client: httpx.AsyncClient) -> None:
    rewards = {r["name"]: r for r in (await client.get("/v1/rewards")).json()["rewards"]}
    assert "tool_call" in rewards
    bad = await client.post(
        "/v1/score",
        json={
            "reward": {"name": "tool_call", "config": {"mode": "fuzzy"}},
            "items": [{"response": "x", "reference": []}],
        },
    )
    assert bad.status_code == 422 and "mode" in bad.json()["error"]["message"]


async def test_hostile_numbers_and_nesting_score_their_item_not_crash_the_batch(
    client: httpx.AsyncClient,
) -> None:
    deep = "[" * 900 + "]" * 900
    items = [
        {"response": hermes(WEATHER), "reference": [WEATHER]},
        # an integer past a float's range against a float: compared, not equal (float() overflowed)
        {
            "response": '<tool_call>{"name": "f", "arguments": {"x": ' + "9" * 400 + "}}</tool_call>",
            "reference": [{"name": "f", "arguments": {"x": 1.5}}],
        },
        # arguments as a JSON string nested past the limit the call JSON itself has
        {
            "response": "<tool_call>"
            + json.dumps({"name": "f", "arguments": '{"x": ' + deep + "}"})
            + "</tool_call>",
            "reference": [{"name": "f", "arguments": {"x": []}}],
        },
        {
            "response": "<tool_call>"
            + json.dumps({"name": "f", "arguments": '{"x": ' + "[" * 5000 + "]" * 5000 + "}"})
            + "</tool_call>",
            "reference": [{"name": "f", "arguments": {"x": []}}],
        },
    ]
    results = await score(client, items)
    assert [(r["score"], r["valid"], r["reason"]) for r in results] == [
        (1.0, True, None),
        (0.0, True, None),
        (0.0, True, "format"),
        (0.0, True, "format"),
    ]


@pytest.mark.timeout(30)
async def test_a_response_of_unclosed_tool_call_tags_is_read_in_linear_time(
    client: httpx.AsyncClient,
) -> None:
    """The blocks were found with a lazy ``<tool_call>(.*?)</tool_call>`` search, which from each opener
    without a closer scans to the end: a degenerate output repeating the tag (1 MB, the largest field)
    took ~16 s, on the event loop. (The timeout is a hang guard: this takes milliseconds.)"""
    looping = "<tool_call>\n" * 87_000
    results = await score(client, [{"response": looping, "reference": [WEATHER]}])
    assert [(r["score"], r["reason"]) for r in results] == [(0.0, "no_answer")]


@pytest.mark.timeout(60)
async def test_the_call_limit_counts_the_calls_of_list_blocks_too(client: httpx.AsyncClient) -> None:
    """The 256-call limit was checked on the blocks and on each block's list, not on their total: 256
    blocks of 256 calls (under 1 MB) against 256 reference calls paired 16.7 million calls, for minutes on
    the event loop. (The timeout is a hang guard.)"""
    block = "<tool_call>" + json.dumps([{"name": "a"}] * 256, separators=(",", ":")) + "</tool_call>"
    items = [
        {"response": block * 256, "reference": [{"name": "a"}] * 256},
        {"response": block, "reference": [{"name": "a"}] * 256},  # at the limit: scored
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(0.0, "format"), (1.0, None)]
    assert "more than 256 tool calls" in results[0]["details"]["error"]


async def test_a_last_call_without_its_closing_tag_is_read(client: httpx.AsyncClient) -> None:
    """A rollout stopped at ``</tool_call>`` as a stop string (vLLM leaves the stop string out of the
    text, as agent loops that run the tool at once set it up) ends in an unclosed block: it scored 0,
    no_answer, however right the call. A tail that is not whole call JSON (cut mid-call) is still ignored."""
    unclosed = f"<think>Paris, 3 days.</think>\n<tool_call>\n{json.dumps(WEATHER)}\n"
    cut = '<tool_call>\n{"name": "get_weather", "argu'
    items = [
        {"response": unclosed, "reference": [WEATHER]},
        {"response": hermes(TIME) + f"\n<tool_call>\n{json.dumps(WEATHER)}", "reference": [WEATHER, TIME]},
        {"response": cut, "reference": [WEATHER]},
        {"response": hermes(WEATHER) + "\n" + cut, "reference": [WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (0.0, "no_answer"),
        (1.0, None),
    ]


async def test_partial_credit_pairs_calls_for_the_best_total(client: httpx.AsyncClient) -> None:
    """Parallel calls of one function were paired greedily, best pair first: a tie taken the wrong way
    left the other call unpaired with anything it matches. Here each predicted call has one wrong argument
    against the reference call it pairs best with (2 of 6 values wrong: 2/3); greedy pairing gave 1/3."""

    def flight(origin: str, destination: str, date: str) -> dict[str, Any]:
        return {
            "name": "search_flights",
            "arguments": {"origin": origin, "destination": destination, "date": date},
        }

    reference = [flight("SFO", "JFK", "2025-03-01"), flight("SFO", "BOS", "2025-03-02")]
    response = hermes(flight("SFO", "JFK", "2025-03-02"), flight("LAX", "JFK", "2025-03-01"))
    results = await score(client, [{"response": response, "reference": reference}], mode="partial")
    assert results[0]["score"] == pytest.approx(2 / 3)


async def test_big_batches_are_paired_in_the_cpu_workers(client: httpx.AsyncClient) -> None:
    """Pairing is pure Python (predicted x reference calls, each pair its arguments) and ran on the event
    loop whatever the batch: an item of 256 calls against 256 took ~0.8 s, and one request of them held
    the service for minutes, under no deadline. A big batch now runs in the CPU workers, each item under
    the request's deadline; a small one is still scored inline, with the same results."""
    calls = [
        {"name": "search", "arguments": {"q": f"query {i}", "k": i, "tags": ["a", "b"]}} for i in range(256)
    ]
    big = {"response": f"<tool_call>{json.dumps(calls)}</tool_call>", "reference": calls[::-1]}
    small = [
        {"response": hermes(WEATHER, TIME), "reference": [TIME, WEATHER]},
        {"response": hermes({**WEATHER, "arguments": {"city": "Paris"}}), "reference": [WEATHER]},
        {"response": "no call", "reference": [WEATHER]},
    ]

    async def run(items: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
        body = {"reward": {"name": "tool_call", "config": {"mode": "partial"}}, "items": items}
        r = await client.post("/v1/score", json={**body, "options": {"use_cache": False, **options}})
        assert r.status_code == 200, r.text
        results: list[dict[str, Any]] = r.json()["results"]
        return results

    def seen(results: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r["score"], r["reason"], r["components"], r["details"]) for r in results]

    inline = await run(small)
    assert [r["score"] for r in inline] == pytest.approx([1.0, 1 / 3, 0.0])
    in_workers = await run([*small, big])  # the same items, paired in the workers
    assert seen(in_workers[:3]) == seen(inline)
    assert in_workers[3]["score"] == 1.0 and in_workers[3]["components"]["calls"] == 256.0
    late = await run([big, big], timeout_s=0.02)
    assert [(r["valid"], r["reason"]) for r in late] == [(False, "timeout")] * 2, late


async def test_big_responses_are_read_in_the_cpu_workers(client: httpx.AsyncClient) -> None:
    """Reading the calls is linear but pure Python (every nested value is visited for the depth bound):
    a 1 MB response of nested arrays took ~1 s on the event loop, and a request of them a minute. A batch
    of big responses is now read in the CPU workers too, under the request's deadline."""
    heavy = {"response": json.dumps([[]] * 250_000), "reference": [WEATHER]}  # no call: no_answer
    small = {"response": hermes(WEATHER), "reference": [WEATHER]}

    async def run(items: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
        body = {"reward": {"name": "tool_call"}, "items": items}
        r = await client.post("/v1/score", json={**body, "options": {"use_cache": False, **options}})
        assert r.status_code == 200, r.text
        results: list[dict[str, Any]] = r.json()["results"]
        return results

    assert [(r["score"], r["reason"]) for r in await run([heavy, small])] == [(0.0, "no_answer"), (1.0, None)]
    late = await run([heavy, heavy], timeout_s=0.02)
    assert [(r["valid"], r["reason"]) for r in late] == [(False, "timeout")] * 2, late


async def test_mistral_v11_calls_are_read(client: httpx.AsyncClient) -> None:
    """Mistral's tokenizers from v11 on (Mistral Small 3.1+, Magistral, Devstral) write each call as
    ``[TOOL_CALLS]name[ARGS]{arguments}`` (``[ARGS]`` gone when control tokens are skipped, a
    ``[CALL_ID]id`` before it in some versions), not a JSON list after one marker: such calls scored 0,
    no_answer."""
    weather, time_ = json.dumps(WEATHER["arguments"]), json.dumps(TIME["arguments"])
    responses = [
        f"[TOOL_CALLS]get_weather[ARGS]{weather}[TOOL_CALLS]get_time[ARGS]{time_}",
        f"Let me check.[TOOL_CALLS]get_weather{weather}[TOOL_CALLS]get_time{time_}",
        f"[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{time_}[TOOL_CALLS]get_weather[CALL_ID]z9y8x7w6v[ARGS]{weather}",
        "[TOOL_CALLS] " + json.dumps([WEATHER, TIME]),  # the older list form still
        "[TOOL_CALLS]```json\n" + json.dumps([WEATHER, TIME]) + "\n```",  # and fenced
    ]
    results = await score(client, [{"response": r, "reference": [WEATHER, TIME]} for r in responses])
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * len(responses), results
    wrong = [
        f"[TOOL_CALLS]get_weather[ARGS]{weather}[TOOL_CALLS]get_time[ARGS]" + '{"tz": "UTC"}',
        "[TOOL_CALLS]get_weather[ARGS]{not json",
    ]
    results = await score(client, [{"response": r, "reference": [WEATHER, TIME]} for r in wrong])
    assert [(r["score"], r["reason"]) for r in results] == [(0.0, None), (0.0, "format")]


async def test_a_json_answer_that_is_no_call_satisfies_call_no_tool(client: httpx.AsyncClient) -> None:
    """Without call tags or a [TOOL_CALLS] marker, a JSON answer with no call in it (a structured answer,
    a list of numbers) is no call, as prose is: it scored 0 (format) against "call no tool". JSON shaped
    like a call but broken is still format."""
    items = [
        {"response": '{"answer": 4, "unit": "apples"}', "reference": []},
        {"response": "```json\n[1, 2, 3]\n```", "reference": []},
        {"response": '{"answer": 4}', "reference": [WEATHER]},
        {"response": '{"name": "", "arguments": {}}', "reference": []},  # a call without a name: format
        {"response": '[{"function": {"arguments": "{}"}}]', "reference": []},
        {"response": "[TOOL_CALLS] [1, 2]", "reference": []},  # after the call marker: a broken call
        {"response": '{"arguments": {"city": "Paris"}}', "reference": []},  # a call missing its name
        {"response": '{"function_call": {"name": "get_time", "arguments": "{}"}}', "reference": []},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (0.0, "no_answer"),
        (0.0, "format"),
        (0.0, "format"),
        (0.0, "format"),
        (0.0, "format"),
        (0.0, None),  # a call in OpenAI's legacy shape: read, and wrong
    ]


async def test_a_call_in_a_fence_without_json_tag_is_read(client: httpx.AsyncClient) -> None:
    """Only a ```json fence was looked into: a call in a bare ``` fence (or one tagged otherwise), as
    models without a tool template often write it, scored 0, no_answer."""
    items = [
        {"response": f"I'll check the weather.\n```\n{json.dumps(WEATHER)}\n```", "reference": [WEATHER]},
        {
            "response": f"```tool_code\n{json.dumps([WEATHER, TIME])}\n```\nDone.",
            "reference": [WEATHER, TIME],
        },
        {"response": "```python\nprint({'a': 1})\n```", "reference": []},  # code, no call
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None), (1.0, None), (1.0, None)]


async def test_llama_calls_after_the_python_tag_or_between_semicolons_are_read(
    client: httpx.AsyncClient,
) -> None:
    """Llama 3.1/3.2 call a tool with ``{"name": ..., "parameters": {...}}``, prefixed by
    ``<|python_tag|>`` when special tokens are kept, and several calls separated by ``;`` (what vLLM's
    llama3_json parser reads): both scored 0, no_answer, however right the calls."""
    weather = json.dumps({"name": "get_weather", "parameters": WEATHER["arguments"]})
    time_ = json.dumps({"name": "get_time", "parameters": TIME["arguments"]})
    items = [
        {"response": "<|python_tag|>" + weather, "reference": [WEATHER]},
        {"response": f"{weather}; {time_}", "reference": [WEATHER, TIME]},
        {"response": f"<|python_tag|>{time_};{weather}", "reference": [WEATHER, TIME]},
        {"response": f"{weather}; {weather}", "reference": [WEATHER]},  # a duplicate still costs
        {"response": '{"answer": 4}; {"unit": "apples"}', "reference": []},  # no call in them: no call
        {"response": "<|python_tag|>" + '{"answer": 4}', "reference": []},  # after the tag: a broken call
        {"response": f"{weather}; and more text", "reference": [WEATHER]},  # not a call sequence: no call
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, None),
        (1.0, None),
        (0.0, "format"),
        (0.0, "no_answer"),
    ], results


async def test_llama_calls_one_a_line_are_read(client: httpx.AsyncClient) -> None:
    """Llama 3.x also writes its parallel calls one a line, without the ``;`` (vLLM's llama3_json parser
    reads every call object in the answer, and lists ``"\\n"`` among the separators it streams): such an
    answer was no JSON value and no ``;`` sequence, so no call (0, no_answer) however right."""
    weather = json.dumps({"name": "get_weather", "parameters": WEATHER["arguments"]})
    time_ = json.dumps({"name": "get_time", "parameters": TIME["arguments"]})
    items = [
        {"response": f"{weather}\n{time_}", "reference": [WEATHER, TIME]},
        {"response": f"<|python_tag|>{weather}\n{time_}<|eot_id|>", "reference": [WEATHER, TIME]},
        {"response": f"{weather};\n{time_}\n{weather}", "reference": [WEATHER, TIME, WEATHER]},
        {"response": '{"answer": 4}\n{"unit": "apples"}', "reference": []},  # no call in them: no call
        {"response": f"{weather}\nand more text", "reference": [WEATHER]},  # prose after it: no call
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, "no_answer"),
    ], results


async def test_json_calls_before_the_end_of_turn_token_are_read(client: httpx.AsyncClient) -> None:
    """A rollout decoded with its special tokens kept (as the native forms read here need) ends with the
    model's end-of-turn token: Llama's ``<|python_tag|>{...}<|eom_id|>`` (or ``<|eot_id|>``), Mistral's
    ``[TOOL_CALLS][...]</s>``, a Qwen JSON answer's ``<|im_end|>``. Such a call was no whole JSON, so no
    call (0, no_answer) however right; the end-of-turn tokens after the JSON (a few) are now dropped.
    A token between two values, or prose before it, still is no call."""
    weather = json.dumps({"name": "get_weather", "parameters": WEATHER["arguments"]})
    items = [
        {"response": f"<|python_tag|>{weather}<|eom_id|>", "reference": [WEATHER]},
        {"response": f"{weather}<|eot_id|>", "reference": [WEATHER]},
        {"response": f"[TOOL_CALLS][{json.dumps(WEATHER)}]</s>", "reference": [WEATHER]},
        {
            "response": f"{json.dumps([WEATHER, TIME])}\n<|im_end|>\n<|endoftext|>",
            "reference": [WEATHER, TIME],
        },
        {"response": "[get_weather(city='Paris', unit='celsius', days=3)]<|eot_id|>", "reference": [WEATHER]},
        {"response": f"{weather}<|eot_id|>{weather}", "reference": [WEATHER]},
        {"response": f"Sure: {weather}<|eot_id|>", "reference": [WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * 5 + [(0.0, "no_answer")] * 2, (
        results
    )


async def test_the_call_after_a_marker_is_read_whatever_text_follows(client: httpx.AsyncClient) -> None:
    """After Mistral's ``[TOOL_CALLS]`` (or Llama's ``<|python_tag|>``) the model has committed to a
    call, and may go on writing (``[TOOL_CALLS] [{...}]\\nextra trailing data``, one of vLLM's mistral
    parser's own cases): vLLM reads the JSON value at the marker and leaves the rest as content, the
    call made. Such an answer was no whole JSON, so no call (0, no_answer) however right. Without a
    marker, JSON and then prose is still no call; after one, a value that is no call is a broken one."""
    weather = json.dumps({"name": "get_weather", "parameters": WEATHER["arguments"]})
    items = [
        {"response": f"[TOOL_CALLS] {json.dumps([WEATHER])}\nextra trailing data", "reference": [WEATHER]},
        {"response": f"<|python_tag|>{weather} I have called the tool.<|eot_id|>", "reference": [WEATHER]},
        {"response": f"{weather} I have called the tool.", "reference": [WEATHER]},  # no marker: no call
        {"response": "[TOOL_CALLS] [1, 2] and then text", "reference": []},  # after the marker: broken
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (0.0, "no_answer"),
        (0.0, "format"),
    ], results


async def test_a_block_of_one_call_per_line_is_read(client: httpx.AsyncClient) -> None:
    """ToolRL (and the RLLA data it trains on: ToolACE, Hammer, xLAM) writes parallel calls as one
    ``<tool_call>`` block with one JSON call per line; such a block was broken call JSON, 0 format,
    however right the calls."""
    weather = json.dumps({"name": "get_weather", "parameters": WEATHER["arguments"]})
    time_ = json.dumps({"name": "get_time", "parameters": TIME["arguments"]})
    items = [
        {
            "response": f"<think>two calls</think>\n<tool_call>\n{weather}\n{time_}\n</tool_call>",
            "reference": [WEATHER, TIME],
        },
        {"response": f"<tool_call>\n{time_}\n{weather}\n", "reference": [WEATHER, TIME]},  # unclosed, last
        {"response": f"<tool_call>\n{weather}\n{weather}\n</tool_call>", "reference": [WEATHER]},
        {"response": f"<tool_call>\n{weather}\nnot json\n</tool_call>", "reference": [WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (0.0, None),
        (0.0, "format"),
    ], results


async def test_a_reference_in_tool_call_blocks_is_read(client: httpx.AsyncClient) -> None:
    """Function-calling data keeps the expected answer as the assistant's text: ``<tool_call>`` blocks
    (Hermes function-calling data, ToolRL's ground truth after its ``<think>``). Such a reference was not
    JSON, so every item was invalid (parse_error); its calls are now the reference."""
    weather = json.dumps({"name": "get_weather", "parameters": WEATHER["arguments"]})
    time_ = json.dumps({"name": "get_time", "parameters": TIME["arguments"]})
    toolrl = f"<think>...</think>\n<tool_call>\n{weather}\n{time_}\n</tool_call>"
    items = [
        {"response": hermes(WEATHER, TIME), "reference": toolrl},
        {"response": hermes(WEATHER), "reference": toolrl},
        {"response": hermes(WEATHER), "reference": hermes(WEATHER)},
        {"response": hermes(WEATHER), "reference": "<tool_call>{not json}</tool_call>"},
        {"response": hermes(WEATHER), "reference": "<response>It is sunny.</response>"},
    ]
    results = await score(client, items)
    assert [(r["score"], r["valid"], r["reason"]) for r in results] == [
        (1.0, True, None),
        (0.0, True, None),
        (1.0, True, None),
        (None, False, "parse_error"),
        (None, False, "parse_error"),
    ], results


async def test_a_block_of_a_python_literal_call_is_read(client: httpx.AsyncClient) -> None:
    """Hermes 2 Pro's prompt and its function-calling data write a call as a Python dict,
    ``{'arguments': {...}, 'name': ...}`` (its own reader falls back to ``ast.literal_eval``): such a
    block was broken call JSON (0 format), and such a reference parse_error. Python values with no JSON
    equal (a set, bytes, an infinite float) are still broken calls."""
    literal = "<tool_call>\n{'arguments': {'city': 'Paris', 'unit': 'celsius', 'days': 3}, 'name': 'get_weather'}\n</tool_call>"
    items = [
        {"response": literal, "reference": [WEATHER]},
        {"response": hermes(WEATHER), "reference": literal},
        {"response": literal.replace("'days': 3", "'days': True"), "reference": [WEATHER]},
        {
            "response": '<tool_call>{"name": "f", "arguments": {"x": True, "y": None}}</tool_call>',
            "reference": [{"name": "f", "arguments": {"x": True, "y": None}}],
        },
        {
            "response": "<tool_call>{'name': 'f', 'arguments': {'x': {1, 2}}}</tool_call>",
            "reference": [WEATHER],
        },
        {
            "response": "<tool_call>{'name': 'f', 'arguments': {'x': 1e999}}</tool_call>",
            "reference": [WEATHER],
        },
        {"response": "<tool_call>" + "-" * 100_000 + "1</tool_call>", "reference": [WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (0.0, None),
        (1.0, None),  # a Python literal without a quote of its own
        (0.0, "format"),
        (0.0, "format"),
        (0.0, "format"),
    ], results


async def test_a_closing_tag_quoted_in_a_json_string_does_not_end_its_block(
    client: httpx.AsyncClient,
) -> None:
    """A call whose string argument holds ``</tool_call>`` (a file or prompt written that quotes the tag)
    was cut at that closer, its JSON broken: 0 format, however right. A block of JSON cut inside a string
    now ends at the first closer after its JSON, when the text up to it is JSON (escaped quotes read as
    JSON reads them; a stop string's missing closer as before); a block that is no JSON past the closer
    (a Python literal with a lone double quote, prose) still ends at the first one."""
    quoted = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    write = {"name": "write_file", "arguments": {"path": "demo.md", "content": "Call it so:\n" + quoted}}
    said = {"name": "note", "arguments": {"text": 'He wrote "</tool_call>" and a \\ then "done".'}}
    lone = {"name": "say", "arguments": {"text": 'he said "hi'}}
    literal = "<tool_call>{'name': 'say', 'arguments': {'text': 'he said \"hi'}}</tool_call>\n"
    items = [
        {"response": hermes(write, TIME), "reference": [write, TIME]},
        {"response": hermes(said), "reference": [said]},
        {"response": hermes(write).removesuffix("\n</tool_call>"), "reference": [write]},  # a stop string
        {"response": literal + hermes(TIME), "reference": [lone, TIME]},
        {
            "response": '<tool_call>{"name": "f", "arguments": {"x": "a</tool_call> then prose',
            "reference": [TIME],
        },
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, "format"),
    ], results
    assert results[0]["details"]["calls"] == [write, TIME]


@pytest.mark.timeout(60)
async def test_closing_tags_quoted_in_json_strings_are_read_in_linear_time(client: httpx.AsyncClient) -> None:
    """A block cut inside a JSON string is read on past its closer, but never twice over the same text:
    blocks each cut in a string whose scan finds no JSON end (1 MB of them, a string never closed, escaped
    quotes) are read in one pass, each item scored in the CPU workers under the default deadline, none
    timing out. (The timeout is a hang guard.)"""
    responses = [
        '<tool_call>{"a": "</tool_call>' * 30_000,
        '<tool_call>["' + '</tool_call><tool_call>["\\"x' * 35_000,
        '<tool_call>{"' + "</tool_call>" * 80_000,
        ('<tool_call>{"a": "x</tool_call>' + '\\"' * 20) * 14_000,
    ]
    results = await score(client, [{"response": r, "reference": [WEATHER]} for r in responses])
    assert [r["reason"] for r in results] == ["format"] * len(responses), results


async def test_reasoning_and_tool_output_tags_quoted_in_a_json_string_do_not_cut_the_call(
    client: httpx.AsyncClient,
) -> None:
    """A call whose JSON string quotes ``</think>``, ``<think>`` or ``<tool_response>`` (a note on the
    chat format, a template or a prompt written to a file) was cut there by the reasoning/tool-output
    filter before its blocks were read: no call (0, no_answer), or the call's string cut short, or a later
    block lost. A tag inside a JSON string of a ``<tool_call>`` block of the answer is now the string's
    text; a real reasoning block still ends at its closer, its drafted calls no call of the answer."""
    closer = {"name": "note", "arguments": {"text": "close with </think> here"}}
    opener = {"name": "note", "arguments": {"text": "Qwen3 starts with <think> and then reasons"}}
    both = {"name": "write_file", "arguments": {"path": "t.txt", "content": "<think>\nplan\n</think>\nok"}}
    output = {"name": "note", "arguments": {"text": "tools answer in <tool_response>42</tool_response>"}}
    unclosed = {"name": "note", "arguments": {"text": "a <tool_response> tag"}}
    draft = f"<tool_call>\n{json.dumps(WEATHER)}\n</tool_call>"
    draft_quoting = f"<tool_call>\n{json.dumps(closer)}\n</tool_call>"
    items = [
        {"response": hermes(closer), "reference": [closer]},
        {"response": hermes(opener), "reference": [opener]},
        {"response": hermes(both, TIME), "reference": [both, TIME]},
        {"response": hermes(output), "reference": [output]},
        {"response": hermes(TIME, unclosed), "reference": [TIME, unclosed]},
        {"response": hermes(closer).removesuffix("\n</tool_call>"), "reference": [closer]},  # a stop string
        {"response": hermes(TIME).removesuffix("\n</tool_call>") + output_of("{}"), "reference": [TIME]},
        {"response": "<think>\nI note it.\n</think>\n\n" + hermes(closer), "reference": [closer]},
        # drafted calls in real reasoning (opened in the response or in the prompt) are no call
        {"response": f"<think>\nMaybe {draft} no.\n</think>\n\n" + hermes(closer), "reference": [closer]},
        {"response": f"Maybe {draft} no.\n</think>\n\n" + hermes(output), "reference": [output]},
        {"response": f"<think>\nDraft: {draft_quoting} no.\n</think>\nIt is 4.", "reference": []},
        {"response": f"Draft: {draft_quoting} no.\n</think>\nIt is 4.", "reference": []},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * len(items), results
    assert results[3]["details"]["calls"] == [output]
    assert results[0]["details"]["calls"] == [closer]


@pytest.mark.timeout(60)
async def test_tags_quoted_in_json_strings_of_blocks_are_read_in_linear_time(
    client: httpx.AsyncClient,
) -> None:
    """A block's JSON strings are read past the reasoning and tool-output tags they quote, but never twice
    over the same text: 1 MB of blocks whose strings never close, each before a tag, or one string
    holding them all, is scored in the CPU workers under the default deadline. (A hang guard.)"""
    responses = [
        '<tool_call>{"a": "</think>' * 38_000,
        '<tool_call>{"a": "<tool_response>' * 30_000,
        '<tool_call>{"name": "f", "arguments": {"a": "' + "<think></think><tool_response>" * 25_000,
        ('<tool_call>{"a": "x</think>' + '\\"' * 20) * 14_000,
        '<tool_call>{"a": "</think>"' * 35_000,  # (no closer: each block's JSON read to its end)
        '<tool_call>{"a": "b"}<tool_response>' * 28_000,
        "<tool_call>\n<function=f>\n</think>" * 30_000 + "</tool_call>",  # (XML: each block to that closer)
        '<minimax:tool_call>\n<invoke name="f">\n</think>' * 22_000 + "</minimax:tool_call>",
    ]
    results = await score(client, [{"response": r, "reference": [WEATHER]} for r in responses])
    assert [r["score"] for r in results] == [0.0] * len(responses), results


class CountingText(str):
    """A response that counts what the scans of it read: a ``find`` reads from its start to the end of
    what it found, or to its end when it finds nothing (the regex reads are counted by ``counting``)."""

    read = 0

    def find(self, sub: str, start: SupportsIndex | None = None, end: SupportsIndex | None = None) -> int:
        lo = 0 if start is None else int(start)
        hi = len(self) if end is None else min(int(end), len(self))
        found = str.find(self, sub, lo, hi)
        CountingText.read += max(0, (found + len(sub) if found >= 0 else hi) - lo)
        return found


class CountingPattern:
    """A compiled pattern whose ``match`` counts what it read into :class:`CountingText` (to the end of
    its match, or to ``endpos`` when it finds none)."""

    def __init__(self, pattern: re.Pattern[str]):
        self.pattern = pattern

    def match(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        found = self.pattern.match(text, pos, endpos)
        CountingText.read += (found.end() if found else min(endpos, len(text))) - pos
        return found


HERMES_QUOTING = '<tool_call>{"name": "a", "arguments": {"x": "<think>"}}</tool_call>\n'


@pytest.mark.parametrize(
    "response",
    [
        # blocks without a string, one quote far after them: each block's scan looked for it
        HERMES_QUOTING + "<tool_call>{</tool_call>" * 4_000 + "x" * 96_000 + '"',
        # a string never closed cuts the budget; each opener after it read the rest of it, uncharged
        "x" * 96_000 + '<tool_call>{"' + "<tool_call>{" * 8_000 + "y" * 96_000 + "<think>",
        # blocks each with a string never closed, each before a tag; unclosed quotes alone
        '<tool_call>{"a": "<think>' * 4_000,
        '<tool_call>{"' * 8_000 + "<think>",
        ('<tool_call>{"a": "x</think>' + '\\"' * 20) * 4_000,
        # blocks cut in a string at their first closer (read on past it)
        '<tool_call>{"a": "</tool_call>' * 4_000,
        '<tool_call>["' + '</tool_call><tool_call>["\\"x' * 4_000,
        '<tool_call>{"' + "</tool_call>" * 8_000,
        '<tool_call>{"a": "x</tool_call>" </tool_call>' * 4_000 + "x" * 96_000 + '"',
        # blocks cut in a string whose longer block, up to a far closer, is no JSON: each read on from its
        # first closer, and read the quote-free tail again (uncharged) up to that far closer
        "x" * 48_000 + '<tool_call>{"v</tool_call>"' * 60 + "y" * 48_000 + "</tool_call>",
    ],
)
def test_the_scans_past_json_strings_read_the_response_a_bounded_number_of_times(
    response: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scans that read a ``<tool_call>`` block's JSON past its strings (its reasoning tags quoted,
    its ``</tool_call>`` quoted) share one budget of the response's length, so that together they read
    it a bounded number of times. Two reads were left off it: the quote looked for past the closer a
    block ends at, and a window holding no quote and no closer (charged to the cursor at its start).
    Many blocks before one far quote, or many openers after a string never closed, each read the rest
    anew: hundreds of times the response, seconds for 1 MB. A longer block that is no JSON left the
    text from its strings' end to its far closer off it, which the blocks opening there read again
    (the reads growing as the text's length to the power 1.5). Counted, not timed: the reads, not the
    host's speed, are what grows with the text (a longer block's JSON read counted whole: its copy and
    its parse read at most that)."""
    monkeypatch.setattr(tool_call, "_JSON_STRING_REST", CountingPattern(tool_call._JSON_STRING_REST))
    json_block = tool_call._json_block

    def counting_json_block(block: str) -> bool:
        CountingText.read += len(block)
        return json_block(block)

    monkeypatch.setattr(tool_call, "_json_block", counting_json_block)
    CountingText.read = 0
    text = CountingText(response)
    tool_call._model_output(text, quoted=True)
    tool_call._blocks(text, quoted=True)
    assert CountingText.read <= 8 * len(response)


@pytest.mark.parametrize(
    ("after_opener", "budget", "end", "charged"),
    [
        # the closer after the strings: the scan charged up to the end of the last string it read
        ('{"x": 1}</tool_call>', None, 19, 4),
        # a closer before any string: it ends there, nothing charged (the reading goes on from it)
        ('{}</tool_call> "', None, 13, 0),
        # a closer quoted in a string is read past, to the one after the JSON's strings
        ('{"a": "</tool_call>"}</tool_call>', None, 32, 20),
        # no closer after it: the end of its JSON value (a stop string's), the budget spent
        ('{"a": 1} tail', None, 19, "all"),
        # a string never closed: no end, charged to the end of the text
        ('{"a', None, -1, 3),
        # the budget's window cut short, no quote and no closer in it, or none after a string: no end,
        # the whole window charged (charging the cursor alone let each later block read it again)
        ("{" + "x" * 50, 20, -1, 20),
        ('{"a"' + "x" * 50, 30, -1, 30),
        # no JSON at all: nothing read
        ("<function=f>", None, -1, 0),
    ],
)
def test_a_json_block_s_strings_end_where_json_reads_them_and_charge_what_they_read(
    after_opener: str, budget: int | None, end: int, charged: int | str
) -> None:
    """Where the scan past a ``<tool_call>`` block's JSON strings ends (positions in the whole text,
    the opener's 11 characters first) and what it takes off the budget its blocks share: the JSON's
    strings read as JSON reads them (:func:`_quoted_block_end` reads them from the first quote on)."""
    text = "<tool_call>" + after_opener
    left = [len(text) if budget is None else budget]
    initial = left[0]
    assert tool_call._json_strings_end(text, len("<tool_call>"), left) == end
    assert initial - left[0] == (initial if charged == "all" else charged)


async def test_pythonic_calls_are_read(client: httpx.AsyncClient) -> None:
    """Llama 3.2 (1B/3B) and Llama 4, ToolACE and BFCL's prompting mode write calls as a Python list,
    ``[get_weather(city="Paris"), get_time(tz="UTC")]`` (vLLM's pythonic parser): such a response was no
    call (0, no_answer) and such a reference (ToolACE's data) parse_error."""
    pythonic = '[get_weather(city="Paris", unit="celsius", days=3), get_time(tz="Europe/Paris")]'
    items = [
        {"response": pythonic, "reference": [WEATHER, TIME]},
        {"response": "```python\n" + pythonic + "\n```", "reference": [WEATHER, TIME]},
        {"response": hermes(WEATHER), "reference": "[get_weather(city='Paris', unit='celsius', days=3)]"},
        {
            "response": "[math.factorial(number=5)]",
            "reference": [{"name": "math.factorial", "arguments": {"number": 5}}],
        },
        {"response": '[get_weather(city="Paris", unit="celsius", days=4)]', "reference": [WEATHER]},
        {"response": '[get_weather("Paris")]', "reference": [WEATHER]},  # positional: a broken call
        {"response": "[1] No tool is needed: it is 4.", "reference": []},
        {"response": "[x + 1 for x in range(3)]", "reference": []},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, None),
        (0.0, "format"),
        (1.0, None),
        (1.0, None),
    ], results


async def test_a_call_in_openai_legacy_function_call_shape_is_read(client: httpx.AsyncClient) -> None:
    """OpenAI's legacy assistant message, ``{"function_call": {"name", "arguments"}}``, was taken for a
    call attempt but never read: 0 format however right the call."""
    legacy = {
        "role": "assistant",
        "content": None,
        "function_call": {**WEATHER, "arguments": json.dumps(WEATHER["arguments"])},
    }
    items = [
        {"response": json.dumps(legacy), "reference": [WEATHER]},
        {"response": json.dumps({"tool_call": WEATHER}), "reference": [WEATHER]},
        {"response": json.dumps(legacy), "reference": [TIME]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None), (1.0, None), (0.0, None)], results


async def test_arguments_under_langchain_anthropic_and_gemini_keys_are_read(
    client: httpx.AsyncClient,
) -> None:
    """LangChain's tool calls (``{"name", "args", "id"}``, also Gemini's ``functionCall``) and Anthropic's
    ``tool_use`` blocks (``{"name", "input"}``) hold the arguments under another key: read as a call without
    arguments, a wrong call scored 1.0 against a reference in the same shape (both sides empty), and a
    right one 0 against a reference in ``arguments``; Gemini's ``{"functionCall": {...}}`` was no call."""
    right, wrong = WEATHER["arguments"], {**WEATHER["arguments"], "city": "Rome"}
    langchain = {"name": "get_weather", "args": right, "id": "call_1", "type": "tool_call"}
    anthropic = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": right}
    items = [
        {"response": json.dumps([{**langchain, "args": wrong}]), "reference": [langchain]},
        {"response": json.dumps([langchain]), "reference": [WEATHER]},
        {"response": json.dumps({**anthropic, "input": wrong}), "reference": [anthropic]},
        {"response": json.dumps(anthropic), "reference": [WEATHER]},
        {
            "response": json.dumps({"functionCall": {"name": "get_weather", "args": right}}),
            "reference": [WEATHER],
        },
        {
            "response": json.dumps({"functionCall": {"name": "get_weather", "args": wrong}}),
            "reference": [WEATHER],
        },
    ]
    results = await score(client, items)
    assert [r["score"] for r in results] == [0.0, 1.0, 0.0, 1.0, 1.0, 0.0], results
    assert results[0]["details"]["calls"] == [{"name": "get_weather", "arguments": wrong}]


async def test_an_openai_message_with_null_tool_calls_calls_no_tool(client: httpx.AsyncClient) -> None:
    """The OpenAI SDK's message dump (``ChatCompletionMessage.model_dump()``) writes ``"tool_calls": null``
    and ``"function_call": null`` for a turn without calls: as a reference it was parse_error (invalid),
    as a JSON response a broken call (0 format); it is "call no tool", as ``"tool_calls": []`` is."""
    message = {"role": "assistant", "content": "It is sunny.", "tool_calls": None, "function_call": None}
    items = [
        {"response": "It is sunny.", "reference": message},
        {"response": hermes(WEATHER), "reference": message},
        {"response": json.dumps(message), "reference": []},
        {"response": json.dumps(message), "reference": [WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (0.0, None),
        (1.0, None),
        (0.0, "no_answer"),
    ], results


async def test_a_call_inside_a_tool_s_output_is_not_the_model_s(client: httpx.AsyncClient) -> None:
    """A multi-turn rollout's text (verl, a Hermes/Qwen transcript) holds the tools' output between the
    model's turns: a <tool_call> written in that output (a page, a file read back) counted as a call the
    model made, so the model could be credited for, or charged with, what a tool returned."""
    page = '<tool_response>\n{"html": "<tool_call>{\\"name\\": \\"get_weather\\", \\"arguments\\": {}}</tool_call>"}'
    transcript = hermes(WEATHER) + "\n" + page + "\n</tool_response>\nIt is sunny."
    unclosed = hermes(WEATHER) + "\n" + page  # a transcript cut inside the tool's output
    injected = "I do not need a tool.\n" + page + "\n</tool_response>"
    results = await score(
        client, [{"response": r, "reference": [WEATHER]} for r in (transcript, unclosed, injected)]
    )
    assert [r["score"] for r in results] == [1.0, 1.0, 0.0], results
    assert results[2]["reason"] == "no_answer"


def qwen3_coder(*calls: dict[str, Any]) -> str:
    """Calls as Qwen3-Coder writes them: one ``<tool_call>`` block of XML each, every value on its own line."""

    return "\n".join(
        f"<tool_call>\n<function={c['name']}>\n"
        + "".join(f"<parameter={k}>\n{as_written(v)}\n</parameter>\n" for k, v in c["arguments"].items())
        + "</function>\n</tool_call>"
        for c in calls
    )


async def test_qwen3_coder_xml_calls_are_read(client: httpx.AsyncClient) -> None:
    """Qwen3-Coder (vLLM's qwen3_coder parser) writes each call as XML in its ``<tool_call>`` block,
    ``<function=f><parameter=x>value</parameter></function>``: such a block was broken call JSON, 0
    format, however right the call. Values are raw text; one that is a JSON number, boolean, null,
    object or array is that value (there is no schema), any other (even one in quotes) the text."""
    nested = {
        "name": "f",
        "arguments": {"q": "a < b\n  and c", "opts": {"k": [1, 2]}, "flag": True, "n": None},
    }
    unclosed_param = (
        "<tool_call>\n<function=get_time>\n<parameter=tz>\nEurope/Paris\n</function>\n</tool_call>"
    )
    items = [
        {
            "response": "<think>weather, then time</think>\n" + qwen3_coder(WEATHER, TIME),
            "reference": [WEATHER, TIME],
        },
        {"response": qwen3_coder(nested), "reference": [nested]},  # multi-line text, JSON values
        {"response": unclosed_param, "reference": [TIME]},  # a </parameter> left out (vLLM reads it too)
        {
            "response": "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
            "reference": [{"name": "get_time"}],
        },
        {
            "response": qwen3_coder(WEATHER) + "\n<tool_call>\n" + json.dumps(TIME) + "\n</tool_call>",
            "reference": [WEATHER, TIME],
        },
        {"response": hermes(WEATHER), "reference": qwen3_coder(WEATHER)},  # a reference in the XML form
        {
            "response": qwen3_coder(TIME) + "\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPa",
            "reference": [TIME],
        },
        {
            "response": qwen3_coder({**WEATHER, "arguments": {**WEATHER["arguments"], "days": "3"}}),
            "reference": [WEATHER],
        },
        {
            "response": '<tool_call>\n<function=f>\n<parameter=x>\n"3"\n</parameter>\n</function>\n</tool_call>',
            "reference": [{"name": "f", "arguments": {"x": '"3"'}}],
        },
        {
            "response": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</tool_call>",
            "reference": [WEATHER],
        },
        {
            "response": "<tool_call>\n<function=get weather>\n</function>\n</tool_call>",
            "reference": [WEATHER],
        },
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),  # a Hermes JSON block beside it reads as before
        (1.0, None),
        (1.0, None),  # a last call cut off (no </function>, no </tool_call>) is no call
        (1.0, None),  # "3" on its line is the number 3
        (1.0, None),  # a value in quotes is the text, quotes and all
        (0.0, None),  # a function without its </function>, its block closed: read (days and unit missing)
        (0.0, "format"),  # not a function name
    ], results
    assert results[1]["details"]["calls"] == [nested]


@pytest.mark.timeout(60)
async def test_qwen3_coder_calls_are_read_in_linear_time(client: httpx.AsyncClient) -> None:
    """Degenerate outputs of the XML form (1 MB, the largest field) are read in one pass: openers
    without closers, and a function of 50,000 parameters none of which is closed (a search for each
    one's closer to the end of the text, or a lazy regex, is quadratic: minutes). Read in the CPU
    workers under the default item deadline, each scores; none times out. (The timeout is a hang guard.)"""
    openers = "<tool_call>\n<function=f>\n<parameter=x>\n" * 25_000
    params = "<tool_call>\n<function=f>\n" + "<parameter=x>\n1\n" * 50_000 + "</function>\n</tool_call>"
    params_unclosed = "<tool_call>\n<function=f>\n" + "<parameter=x>\n1\n" * 50_000
    reference = [{"name": "f", "arguments": {"x": 1}}]
    results = await score(
        client, [{"response": r, "reference": reference} for r in (openers, params, params_unclosed)]
    )
    assert [(r["score"], r["reason"]) for r in results] == [
        (0.0, "no_answer"),
        (1.0, None),
        (0.0, "no_answer"),
    ], results


async def test_reasoning_tags_in_a_qwen3_coder_or_glm_value_do_not_cut_the_call(
    client: httpx.AsyncClient,
) -> None:
    """A Qwen3-Coder or GLM call whose raw-text value holds ``</think>``, ``<think>`` or ``<tool_response>``
    (a coding agent writing a reasoning parser, a chat template) was cut there by the reasoning filter:
    no call (0, no_answer). Such a block now ends at its first ``</tool_call>``, the tags in it its text;
    a ``<tool_call>`` merely named in real reasoning still takes no reasoning with it."""
    code = {"name": "write_file", "arguments": {"path": "p.py", "content": 'text.split("</think>")[-1]'}}
    glm_note = {"name": "note", "arguments": {"text": "<think>plan</think> then <tool_response>"}}
    mention = "I should answer in <tool_call> tags; maybe <function=get_time> first?\n</think>\n\n"
    items = [
        {"response": qwen3_coder(code), "reference": [code]},
        {"response": "<think>\nwrite it\n</think>\n" + qwen3_coder(code, TIME), "reference": [code, TIME]},
        {"response": glm(glm_note), "reference": [glm_note]},
        {"response": mention + qwen3_coder(code), "reference": [code]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * len(items), results


async def test_reasoning_tags_in_a_minimax_or_dsml_value_do_not_cut_the_call(
    client: httpx.AsyncClient,
) -> None:
    """A MiniMax-M2 or DeepSeek DSML call whose raw-text value holds ``</think>`` or ``<think>`` (code that
    strips a reasoning block, a template written) was cut there by the reasoning filter: no call (0,
    no_answer) or a broken one (format). Such a block now ends at its own closer, the tags in it its
    value's; its reasoning before it is still no answer."""
    code = {"name": "write_file", "arguments": {"path": "p.py", "content": 'text.split("</think>")[-1]'}}
    note = {"name": "note", "arguments": {"text": "the model opens <think> first"}}
    items = [
        {"response": minimax(code), "reference": [code]},
        {"response": "<think>\nwrite it\n</think>\n" + minimax(note, code), "reference": [note, code]},
        {"response": dsml(code), "reference": [code]},
        {"response": "<think>plan</think>" + dsml(note, block="tool_calls"), "reference": [note]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * len(items), results


def qwen3_coder_bare(*calls: dict[str, Any]) -> str:
    """Calls as Qwen3-Coder writes them when it leaves out the ``<tool_call>`` block around them."""
    return qwen3_coder(*calls).replace("<tool_call>\n", "").replace("\n</tool_call>", "")


async def test_qwen3_coder_calls_without_their_block_are_read(client: httpx.AsyncClient) -> None:
    """Qwen3-Coder at times writes its ``<function=f>...</function>`` calls without the ``<tool_call>``
    block around them, and vLLM's qwen3_coder parser reads them in a text that has no block: such calls
    scored 0, no_answer, however right. They are read as in a block, the text around them prose; a last
    one cut off is no call, and a text with a ``<tool_call>`` block is read by its blocks only."""
    ship = {"name": "ship", "arguments": {"zip": "94103", "n": 2}}
    items = [
        {"response": "I'll check.\n" + qwen3_coder_bare(WEATHER, TIME), "reference": [WEATHER, TIME]},
        {
            "response": "<think>t</think>" + qwen3_coder_bare(WEATHER) + "\nLet me know.",
            "reference": [WEATHER],
        },
        {
            "response": qwen3_coder_bare(TIME) + "\n<function=get_weather>\n<parameter=city>\nPa",
            "reference": [TIME],
        },  # a last call cut off: no call
        {"response": "<function=get_weather>\n<parameter=city>\nPa", "reference": [WEATHER]},
        {
            "response": qwen3_coder_bare({"name": "ship", "arguments": {"zip": 94103, "n": 2}}),
            "reference": [ship],
        },
        {
            "response": qwen3_coder_bare({**WEATHER, "arguments": {**WEATHER["arguments"], "days": 4}}),
            "reference": [WEATHER],
        },
        {
            "response": "<function=get_time>\n<parameter=tz>\nUTC\n" + qwen3_coder_bare(WEATHER),
            "reference": [WEATHER],
        },  # a function without its </function> before another
        {"response": "<function=get_weather>\nParis\n</function>", "reference": [WEATHER]},
        {"response": hermes(WEATHER) + "\n" + qwen3_coder_bare(TIME), "reference": [WEATHER]},  # blocks only
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, "no_answer"),
        (1.0, None),  # 94103 is also the string "94103"
        (0.0, None),
        (0.0, "format"),
        (0.0, "format"),  # text in the call that is no parameter
        (1.0, None),
    ], results


async def test_a_json_call_whose_argument_holds_qwen3_coder_xml_is_read_as_json(
    client: httpx.AsyncClient,
) -> None:
    """A JSON call whose string argument holds Qwen3-Coder's XML (a file written, a prompt quoted) was
    read as Qwen3-Coder functions without their block, 0 format however right the call: the bare form is
    read only when its first ``<function=`` starts a line, as the model writes it."""
    write = {"name": "write_file", "arguments": {"path": "t.xml", "content": "<function=f>\nx\n</function>"}}
    items = [
        {"response": json.dumps(write), "reference": [write]},
        {"response": "```json\n" + json.dumps(write, indent=2) + "\n```", "reference": [write]},
        {"response": "I'll check.\n  " + qwen3_coder_bare(TIME), "reference": [TIME]},  # indented: read
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * 3, results


@pytest.mark.timeout(60)
async def test_qwen3_coder_calls_without_their_block_are_read_in_linear_time(
    client: httpx.AsyncClient,
) -> None:
    """1 MB of Qwen3-Coder functions without a ``<tool_call>`` block (openers that never close, a
    function of 60,000 parameters, more than 256 calls) is read in one pass (a lazy regex, or a search
    for each opener's closer to the end of the text, is quadratic); read in the CPU workers under the
    default item deadline, each scores, none times out. (The timeout is a hang guard.)"""
    responses = [
        "<function=f>\n<parameter=x>\n" * 38_000,
        "<function=f>\n" * 70_000,
        "<function=f" * 90_000,
        "<function=f>\n" + "<parameter=x>\n1\n" * 60_000 + "</function>",
        "<function=f></function>" * 40_000,  # over 256 calls
    ]
    reference = [{"name": "f", "arguments": {"x": 1}}]
    results = await score(client, [{"response": r, "reference": reference} for r in responses])
    assert [(r["score"], r["reason"]) for r in results] == [
        (0.0, "format"),
        (0.0, "format"),
        (0.0, "format"),
        (1.0, None),
        (0.0, "format"),
    ], results


def glm(*calls: dict[str, Any], sep: str = "\n") -> str:
    """Calls as GLM-4.5/4.6 write them (``sep=""``: GLM-4.7, no newline after the name)."""

    return "\n".join(
        f"<tool_call>{c['name']}{sep}"
        + "".join(
            f"<arg_key>{k}</arg_key>\n<arg_value>{as_written(v)}</arg_value>\n"
            for k, v in c["arguments"].items()
        )
        + "</tool_call>"
        for c in calls
    )


async def test_glm_calls_are_read(client: httpx.AsyncClient) -> None:
    """GLM-4.5/4.6 (vLLM's glm45 parser) write a call as its name, then ``<arg_key>``/``<arg_value>``
    pairs, in a ``<tool_call>`` block: such a block was broken call JSON, 0 format, however right the
    call. Values that are JSON are that value (a quoted string unquoted, as GLM's reader does), others
    the text; a GLM block without its ``</tool_call>`` is no call (nothing else marks its end)."""
    nested = {
        "name": "f",
        "arguments": {"code": "if a < b:\n    x = 1", "opts": {"k": [1, 2]}, "flag": False},
    }
    items = [
        {"response": "<think>two</think>\n" + glm(WEATHER, TIME), "reference": [WEATHER, TIME]},
        {"response": glm(WEATHER, TIME, sep=""), "reference": [WEATHER, TIME]},  # GLM-4.7
        {"response": glm(nested), "reference": [nested]},
        {
            "response": "<tool_call>get_time\n</tool_call>",
            "reference": [{"name": "get_time"}],
        },  # no arguments
        {
            "response": glm(TIME) + "\n" + hermes(WEATHER),
            "reference": [WEATHER, TIME],
        },  # a Hermes block beside it
        {"response": hermes(WEATHER), "reference": glm(WEATHER)},  # a reference in GLM's form
        {
            "response": '<tool_call>f\n<arg_key>x</arg_key><arg_value>"Paris"</arg_value>\n</tool_call>',
            "reference": [{"name": "f", "arguments": {"x": "Paris"}}],
        },
        {
            "response": glm(TIME)
            + "\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n",
            "reference": [TIME],
        },
        {
            "response": "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris\n</tool_call>",
            "reference": [WEATHER],
        },
        {
            "response": "<tool_call>get_weather\n<arg_key>city</arg_key>\nParis\n</tool_call>",
            "reference": [WEATHER],
        },
        {
            "response": "<tool_call>I will check the weather</tool_call>",
            "reference": [WEATHER],
        },  # prose: as before
        {"response": "<tool_call>null</tool_call>", "reference": [WEATHER]},  # a JSON literal: as before
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),  # the unclosed last one is no call
        (0.0, "format"),  # an <arg_value> without its closer
        (0.0, "format"),  # a value without its tags
        (0.0, "format"),
        (0.0, "format"),
    ], results
    assert results[2]["details"]["calls"] == [nested]


async def test_an_xml_value_that_reads_as_json_also_equals_the_string_it_spells(
    client: httpx.AsyncClient,
) -> None:
    """The XML forms carry no types: ``<parameter=zip>\n94103\n</parameter>`` is what Qwen3-Coder's
    template writes for the string "94103" (strings raw, others as JSON) and vLLM's parsers read it by
    the tool's schema. It was read as the number 94103 only, so a right call to a string parameter that
    spells a number, a boolean or JSON (a zip code, an id, a year, a JSON payload) scored 0 against its
    reference. Such a value now equals the reference's string it spells too, and still its value; a
    Hermes JSON call keeps its types (the number 94103 is no "94103")."""
    want = {
        "name": "ship",
        "arguments": {"zip": "94103", "year": "2024", "gift": "true", "payload": '{"a": 1}', "n": 2},
    }
    texts = {"zip": 94103, "year": 2024, "gift": True, "payload": {"a": 1}, "n": 2}
    typed = {"name": "ship", "arguments": texts}
    glm_block = "<tool_call>ship\n" + "".join(
        f"<arg_key>{k}</arg_key>\n<arg_value>{json.dumps(v)}</arg_value>\n" for k, v in texts.items()
    )
    items = [
        {"response": qwen3_coder(typed), "reference": [want]},
        {"response": glm_block + "</tool_call>", "reference": [want]},
        {"response": qwen3_coder(typed), "reference": [typed]},  # still the values they are
        {"response": hermes(want), "reference": qwen3_coder(typed)},  # an XML reference: either way too
        {"response": hermes(typed), "reference": [want]},  # JSON keeps its types
        {
            "response": qwen3_coder({"name": "ship", "arguments": {**texts, "zip": 94104}}),
            "reference": [want],
        },
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, None),
        (0.0, None),
    ], results
    partial = await score(client, items[4:], mode="partial")
    assert [r["score"] for r in partial] == [0.2, 0.8], partial


@pytest.mark.timeout(60)
async def test_glm_calls_are_read_in_linear_time(client: httpx.AsyncClient) -> None:
    """1 MB of GLM pairs whose values never close, and of pairs that do (50,000 of them), is read in one
    pass: a lazy ``<arg_key>(.*?)</arg_key>\\s*<arg_value>(.*?)</arg_value>`` search, or a find of each
    closer to the end of the text, is quadratic. Read in the CPU workers under the default item
    deadline, each scores; none times out. (The timeout is a hang guard.)"""
    unclosed = "<tool_call>f\n" + "<arg_key>x</arg_key><arg_value>1" * 30_000 + "</tool_call>"
    pairs = "<tool_call>f\n" + "<arg_key>x</arg_key><arg_value>1</arg_value>" * 20_000 + "</tool_call>"
    keys = "<tool_call>f\n" + "<arg_key>x" * 100_000 + "</tool_call>"
    reference = [{"name": "f", "arguments": {"x": 1}}]
    results = await score(client, [{"response": r, "reference": reference} for r in (unclosed, pairs, keys)])
    assert [(r["score"], r["reason"]) for r in results] == [(0.0, "format"), (1.0, None), (0.0, "format")], (
        results
    )


DS_CALLS, DS_CALLS_END = "<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>"
DS_CALL, DS_SEP, DS_END = (
    "<\uff5ctool\u2581call\u2581begin\uff5c>",
    "<\uff5ctool\u2581sep\uff5c>",
    "<\uff5ctool\u2581call\u2581end\uff5c>",
)


def deepseek_v3(*calls: dict[str, Any]) -> str:
    """Calls as DeepSeek V3/R1 write them: the type, the name, and the arguments in a ```json fence."""
    body = "\n".join(
        f"{DS_CALL}function{DS_SEP}{c['name']}\n```json\n{json.dumps(c['arguments'])}\n```{DS_END}"
        for c in calls
    )
    return f"{DS_CALLS}{body}{DS_CALLS_END}"


def deepseek_v31(*calls: dict[str, Any]) -> str:
    """Calls as DeepSeek V3.1 writes them: the name, then the arguments' JSON."""
    body = "".join(f"{DS_CALL}{c['name']}{DS_SEP}{json.dumps(c['arguments'])}{DS_END}" for c in calls)
    return f"{DS_CALLS}{body}{DS_CALLS_END}"


async def test_deepseek_calls_are_read(client: httpx.AsyncClient) -> None:
    """DeepSeek V3/R1 and V3.1 call tools between special tokens (vLLM's deepseek_v3/deepseek_v31
    parsers; the bars full-width, the spaces U+2581): such calls scored 0, no_answer (or format, when the
    fenced JSON was read as a bare answer), however right."""
    v31_cut = (
        f"{DS_CALLS}{DS_CALL}get_time{DS_SEP}{json.dumps(TIME['arguments'])}{DS_END}{DS_CALL}get_weather{DS_SEP}"
        + '{"city": "Pa'
    )
    items = [
        {
            "response": "<think>Paris</think>I'll check." + deepseek_v3(WEATHER, TIME),
            "reference": [WEATHER, TIME],
        },
        {"response": deepseek_v31(WEATHER, TIME), "reference": [WEATHER, TIME]},
        {
            "response": deepseek_v31(TIME)[: -len(DS_END + DS_CALLS_END)],
            "reference": [TIME],
        },  # stopped at the end token
        {"response": v31_cut, "reference": [TIME]},  # a last call cut mid-JSON: no call
        {
            "response": f"{DS_CALLS}{DS_CALL}get_time{DS_SEP}{DS_END}{DS_CALLS_END}",
            "reference": [{"name": "get_time"}],
        },
        {"response": deepseek_v31({**WEATHER, "arguments": {"city": "Lyon"}}), "reference": [WEATHER]},
        {
            "response": f"{DS_CALLS}{DS_CALL}get_weather{DS_SEP}{{not json}}{DS_END}{DS_CALLS_END}",
            "reference": [WEATHER],
        },
        {"response": f"{DS_CALLS}{DS_CALL}get weather{DS_END}{DS_CALLS_END}", "reference": [WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, None),
        (0.0, "format"),
        (0.0, "format"),  # no separator, no function name
    ], results


def harmony(call: dict[str, Any], start: bool = True, to_first: bool = False) -> str:
    """A call as gpt-oss writes it in the harmony format."""
    to = f"to=functions.{call['name']}"
    header = (
        f" {to}<|channel|>commentary json" if to_first else f"<|channel|>commentary {to} <|constrain|>json"
    )
    return (
        ("<|start|>assistant" if start else "")
        + header
        + f"<|message|>{json.dumps(call['arguments'])}<|call|>"
    )


async def test_gpt_oss_harmony_calls_are_read(client: httpx.AsyncClient) -> None:
    """gpt-oss calls a function with a harmony message addressed to it (vLLM's openai parser), when the
    text keeps its special tokens: such calls scored 0, no_answer, however right. A message from a tool
    (its output, in a transcript) is no call, nor is a message without a recipient."""
    analysis = "<|channel|>analysis<|message|>Need weather to=functions.get_time maybe.<|end|>"
    tool_output = (
        '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"temp": 20}<|end|>'
    )
    final = "<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>"
    items = [
        {"response": analysis + harmony(WEATHER), "reference": [WEATHER]},
        {"response": harmony(WEATHER, start=False), "reference": [WEATHER]},  # the completion's first message
        {"response": harmony(WEATHER, start=False, to_first=True), "reference": [WEATHER]},
        {"response": harmony(WEATHER) + harmony(TIME, to_first=True), "reference": [WEATHER, TIME]},
        {"response": harmony(WEATHER)[: -len("<|call|>")], "reference": [WEATHER]},  # stopped at <|call|>
        {"response": analysis + harmony(WEATHER) + tool_output + final, "reference": [WEATHER]},
        {"response": analysis + final, "reference": []},  # no message to a function: no call
        {"response": harmony(TIME), "reference": [WEATHER]},
        {
            "response": "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{bad}<|call|>",
            "reference": [WEATHER],
        },
        {
            "response": "<|channel|>commentary to=functions.get_weather json<|message|>" + '{"city": "Pa',
            "reference": [WEATHER],
        },
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),  # the tool's own message is not the model's call
        (1.0, None),
        (0.0, None),
        (0.0, "format"),
        (0.0, "no_answer"),  # cut mid-JSON before its <|call|>: no call
    ], results


async def test_a_gpt_oss_python_tool_message_is_no_call(client: httpx.AsyncClient) -> None:
    """gpt-oss runs code with its built-in python tool, a harmony message ``to=python`` whose content is
    the code, not JSON; a transcript with one before the function calls scored 0, format (the code read as
    a call's broken arguments), however right the calls. Such a message is no function call (vLLM's
    parser reads only messages to ``functions.``); a built-in tool given JSON (``browser.search``) is
    read as before."""
    python = (
        "<|start|>assistant<|channel|>analysis to=python code<|message|>print(2 ** 10)<|call|>"
        "<|start|>python to=assistant<|channel|>analysis<|message|>1024<|end|>"
    )
    search = {"name": "browser.search", "arguments": {"query": "weather Paris"}}
    browse = (
        '<|start|>assistant<|channel|>analysis to=browser.search code<|message|>{"query": "weather Paris"}'
        "<|call|><|start|>browser.search to=assistant<|channel|>analysis<|message|>sunny<|end|>"
    )
    items = [
        {"response": python + harmony(WEATHER), "reference": [WEATHER]},
        {"response": python, "reference": [WEATHER]},
        {"response": browse + harmony(WEATHER), "reference": [search, WEATHER]},
        {
            "response": harmony(WEATHER) + "<|start|>assistant<|channel|>commentary to=functions.get_time"
            " <|constrain|>json<|message|>print(1)<|call|>",
            "reference": [WEATHER, TIME],
        },  # a function's broken arguments: format, as before
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (0.0, "no_answer"),
        (1.0, None),
        (0.0, "format"),
    ], results


async def test_a_call_in_gpt_oss_reasoning_or_a_tool_s_output_is_none(client: httpx.AsyncClient) -> None:
    """gpt-oss reasons in its harmony ``analysis`` messages, not a ``<think>`` block: a call drafted there
    (a ``<tool_call>`` block, a fenced JSON call, a MiniMax block) scored as the model's call, however
    the final answer went, as did one quoted in a tool's output. Both are now no call; a call sent
    ``to=`` a recipient on the analysis channel (gpt-oss's built-in tools) still is one."""
    draft = json.dumps(TIME)
    reasoning = [
        f"Maybe <tool_call>{draft}</tool_call>? No.",
        f"Plan:\n```json\n{draft}\n```\nNo need.",
        '<minimax:tool_call>\n<invoke name="get_time">\n</invoke>\n</minimax:tool_call>',
    ]
    final = "<|start|>assistant<|channel|>final<|message|>It is noon.<|return|>"
    tool_output = (
        "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
        f"<tool_call>{draft}</tool_call><|end|>"
    )
    search = {"name": "browser.search", "arguments": {"query": "time"}}
    browse = (
        '<|start|>assistant<|channel|>analysis to=browser.search code<|message|>{"query": "time"}<|call|>'
    )
    items = [
        *(
            {"response": f"<|channel|>analysis<|message|>{r}<|end|>" + final, "reference": []}
            for r in reasoning
        ),
        {
            "response": f"<|channel|>analysis<|message|>{reasoning[0]}<|end|>" + harmony(WEATHER),
            "reference": [WEATHER],
        },
        {
            "response": f"<|channel|>analysis<|message|>{reasoning[1]}",
            "reference": [TIME],
        },  # cut mid-reasoning
        {"response": harmony(WEATHER) + tool_output + final, "reference": [WEATHER]},
        {"response": browse + harmony(WEATHER), "reference": [search, WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, "no_answer"),
        (1.0, None),
        (1.0, None),
    ], results


@pytest.mark.timeout(60)
async def test_special_token_calls_are_read_in_linear_time(client: httpx.AsyncClient) -> None:
    """1 MB of openers that never close (DeepSeek's call token, harmony's message token and headers) is
    read in one pass: a lazy regex or a search for each opener's end to the end of the text is quadratic.
    Read in the CPU workers under the default item deadline, each scores; none times out. (The timeout is
    a hang guard.)"""
    responses = [
        DS_CALL * 35_000,
        (DS_CALL + "f" + DS_SEP) * 20_000,
        "<|message|>" * 90_000,
        "<|channel|>commentary to=functions.f json" + "<|message|>{" * 80_000,
        "<|channel|>commentary to=functions.f<|message|>{}<|call|>" * 15_000,  # over 256 calls
    ]
    results = await score(client, [{"response": r, "reference": [WEATHER]} for r in responses])
    assert [(r["score"], r["reason"]) for r in results] == [
        (0.0, "no_answer"),
        (0.0, "no_answer"),
        (0.0, "no_answer"),
        (0.0, "no_answer"),
        (0.0, "format"),
    ], results


KIMI_SECTION, KIMI_SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
KIMI_CALL, KIMI_ARGS, KIMI_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"


def kimi(*calls: dict[str, Any], prefix: str = "functions.") -> str:
    """Calls as Kimi-K2 writes them: each one's id (``functions.NAME:INDEX``), then its arguments' JSON."""
    body = "".join(
        f"{KIMI_CALL}{prefix}{c['name']}:{i}{KIMI_ARGS}{json.dumps(c['arguments'])}{KIMI_END}"
        for i, c in enumerate(calls)
    )
    return f"{KIMI_SECTION}{body}{KIMI_SECTION_END}"


async def test_kimi_k2_calls_are_read(client: httpx.AsyncClient) -> None:
    """Kimi-K2 calls tools between special tokens (vLLM's kimi_k2 parser), each call's id
    ``functions.NAME:INDEX`` before its JSON: such calls scored 0, no_answer, however right. The name is
    the id without ``functions.`` (absent in some outputs) and the index; a dotted name stays whole: the
    id is ``functions.{func_name}:{idx}`` (Moonshot's tool_call_guidance), ``browser.search`` the tool's
    name (vLLM's earlier parser kept only ``search``, see :func:`.tool_formats.kimi_calls`)."""
    search = {"name": "browser.search", "arguments": {"query": "weather Paris"}}
    spaced = (
        f"{KIMI_SECTION}\n{KIMI_CALL} functions.get_weather:0 {KIMI_ARGS} "
        f"{json.dumps(WEATHER['arguments'])} {KIMI_END}\n{KIMI_SECTION_END}"
    )
    cut = (
        kimi(TIME)[: -len(KIMI_SECTION_END)]
        + f"{KIMI_CALL}functions.get_weather:1{KIMI_ARGS}"
        + '{"city": "Pa'
    )
    items = [
        {
            "response": "<think>weather, then time</think>I'll check." + kimi(WEATHER, TIME),
            "reference": [WEATHER, TIME],
        },
        {"response": kimi(WEATHER, TIME, prefix=""), "reference": [WEATHER, TIME]},  # no functions.
        {"response": spaced, "reference": [WEATHER]},
        {
            "response": kimi(TIME)[: -len(KIMI_END + KIMI_SECTION_END)],
            "reference": [TIME],
        },  # stopped at the end token
        {"response": cut, "reference": [TIME]},  # a last call cut mid-JSON: no call
        {"response": kimi(search), "reference": [search]},
        {"response": kimi({**WEATHER, "arguments": {"city": "Lyon"}}), "reference": [WEATHER]},
        {
            "response": f"{KIMI_SECTION}{KIMI_CALL}functions.get_weather:0{KIMI_ARGS}{{not json}}{KIMI_END}",
            "reference": [WEATHER],
        },
        {"response": f"{KIMI_SECTION}{KIMI_CALL}functions.get_weather:0{KIMI_END}", "reference": [WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, None),
        (0.0, "format"),
        (0.0, "format"),  # no arguments token
    ], results
    assert results[0]["details"]["calls"] == [WEATHER, TIME]


async def test_kimi_k2_call_id_without_index_is_no_call(client: httpx.AsyncClient) -> None:
    """A Kimi-K2 call whose id lacks its ``:INDEX`` (``functions.invalid.0``) was read as a call named
    ``invalid.0``: a wrong call (0.0), a second call beside the right one (partial credit cut), or a
    right one (``functions.get_time``) rewarded though vLLM's kimi_k2 parser makes no call of it. vLLM
    passes such a call over and reads the others (its test_invalid_funcall_id_skipped); so does the
    reward."""

    def call(call_id: str, arguments: dict[str, Any], end: str = KIMI_END) -> str:
        return f"{KIMI_CALL}{call_id}{KIMI_ARGS}{json.dumps(arguments)}{end}"

    shanghai = {"name": "valid", "arguments": {"city": "Shanghai"}}
    vllm_case = f"Help. {KIMI_SECTION}{call('functions.invalid.0', {'city': 'Beijing'})}"
    vllm_case += f"{call('functions.valid:1', shanghai['arguments'])}{KIMI_SECTION_END}"
    items = [
        {"response": vllm_case, "reference": [shanghai]},
        {
            "response": f"{KIMI_SECTION}{call('functions.get_time', TIME['arguments'])}{KIMI_SECTION_END}",
            "reference": [TIME],
        },
        {
            "response": f"{KIMI_SECTION}{call('get_time', TIME['arguments'])}{KIMI_SECTION_END}",
            "reference": [TIME],
        },
        {  # a last call stopped at its end token, its id without the index: no call either
            "response": f"{KIMI_SECTION}{call('functions.get_time:0', TIME['arguments'])}"
            + call("functions.get_weather", WEATHER["arguments"], end=""),
            "reference": [TIME],
        },
    ]
    results = await score(client, items, mode="partial")
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (0.0, "no_answer"),
        (0.0, "no_answer"),
        (1.0, None),
    ], results
    assert results[0]["details"]["calls"] == [shanghai]


@pytest.mark.timeout(60)
async def test_kimi_k2_calls_are_read_in_linear_time(client: httpx.AsyncClient) -> None:
    """1 MB of Kimi call tokens that never close, and of calls cut before their arguments, is read in one
    pass (a lazy regex, or a search for each opener's end to the end of the text, is quadratic); read in
    the CPU workers under the default item deadline, each scores, none times out. (The timeout is a hang
    guard.)"""
    responses = [
        KIMI_CALL * 50_000,
        (KIMI_CALL + "functions.f:0" + KIMI_ARGS) * 17_000,
        f"{KIMI_CALL}functions.f:0{KIMI_ARGS}{{}}{KIMI_END}" * 13_000,  # over 256 calls
    ]
    results = await score(client, [{"response": r, "reference": [WEATHER]} for r in responses])
    assert [(r["score"], r["reason"]) for r in results] == [
        (0.0, "no_answer"),
        (0.0, "no_answer"),  # one call, never closed, its JSON not whole: no call
        (0.0, "format"),
    ], results


MINIMAX, MINIMAX_END = "<minimax:tool_call>", "</minimax:tool_call>"


def minimax(*calls: dict[str, Any]) -> str:
    """Calls as MiniMax-M2 writes them: one block of invokes, each value raw text (others as JSON)."""

    invokes = "".join(
        f'<invoke name="{c["name"]}">\n'
        + "".join(f'<parameter name="{k}">{as_written(v)}</parameter>\n' for k, v in c["arguments"].items())
        + "</invoke>\n"
        for c in calls
    )
    return f"{MINIMAX}\n{invokes}{MINIMAX_END}"


async def test_minimax_m2_calls_are_read(client: httpx.AsyncClient) -> None:
    """MiniMax-M2 (vLLM's minimax_m2 parser) writes its calls as ``<invoke name="f">`` elements in a
    ``<minimax:tool_call>`` block, values raw text: such calls scored 0, no_answer, however right. Values
    are read as Qwen3-Coder's are (a JSON number, boolean, null, object or array is that value and also
    the string it spells), stripped as vLLM strips them; a last block cut off is no call."""
    nested = {
        "name": "f",
        "arguments": {"q": "a < b\n  and c", "opts": {"k": [1, 2]}, "flag": True, "n": None},
    }
    ship = {"name": "ship", "arguments": {"zip": "94103", "n": 2}}
    quoted = (
        f"{MINIMAX}\n<invoke name='get_time'>\n<parameter name=tz>\nEurope/Paris\n</parameter>\n"
        f"</invoke>\n{MINIMAX_END}"
    )
    items = [
        {
            "response": "<think>weather, then time</think>" + minimax(WEATHER, TIME),
            "reference": [WEATHER, TIME],
        },
        {"response": minimax(TIME) + "\nand\n" + minimax(WEATHER), "reference": [WEATHER, TIME]},
        {"response": minimax(nested), "reference": [nested]},
        {"response": quoted, "reference": [TIME]},  # other quotes, none, a value on its own line
        {"response": minimax({"name": "ship", "arguments": {"zip": 94103, "n": 2}}), "reference": [ship]},
        {"response": minimax(TIME)[: -len(MINIMAX_END)], "reference": [TIME]},  # stopped at the closer
        {
            "response": minimax(TIME) + f'{MINIMAX}\n<invoke name="get_weather">\n<parameter name="city">Pa',
            "reference": [TIME],
        },  # a last block cut off: no call
        {
            "response": minimax({**WEATHER, "arguments": {**WEATHER["arguments"], "days": 4}}),
            "reference": [WEATHER],
        },
        {
            "response": f'{MINIMAX}\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n{MINIMAX_END}',
            "reference": [WEATHER],
        },
        {"response": f"{MINIMAX}\nI will check the weather.\n{MINIMAX_END}", "reference": [WEATHER]},
        {"response": f"{MINIMAX}\n{MINIMAX_END}", "reference": [WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),  # 94103 is also the string "94103"
        (1.0, None),
        (1.0, None),
        (0.0, None),
        (0.0, "format"),  # an invoke without its </invoke>
        (0.0, "format"),  # text that is no invoke
        (0.0, "no_answer"),  # an empty block calls nothing
    ], results
    assert results[2]["details"]["calls"] == [nested]


@pytest.mark.timeout(60)
async def test_minimax_m2_calls_are_read_in_linear_time(client: httpx.AsyncClient) -> None:
    """1 MB of MiniMax blocks and invokes that never close, and of an invoke of 40,000 parameters none
    of which is closed, is read in one pass (a lazy regex, or a search for each opener's closer to the
    end of the text, is quadratic); read in the CPU workers under the default item deadline, each
    scores, none times out. (The timeout is a hang guard.)"""
    responses = [
        f"{MINIMAX}\n" * 50_000,
        f'{MINIMAX}<invoke name="f">' * 28_000,
        f'{MINIMAX}<invoke name="f">' + '<parameter name="x">1' * 40_000 + f"</invoke>{MINIMAX_END}",
        f'{MINIMAX}<invoke name="f"></invoke>{MINIMAX_END}' * 15_000,  # over 256 calls
    ]
    reference = [{"name": "f", "arguments": {"x": 1}}]
    results = await score(client, [{"response": r, "reference": reference} for r in responses])
    assert [(r["score"], r["reason"]) for r in results] == [
        (0.0, "no_answer"),
        (0.0, "no_answer"),
        (0.0, "format"),  # parameters without their closer
        (0.0, "format"),
    ], results


DSML = "\uff5cDSML\uff5c"  # ｜DSML｜, the bars full-width


def dsml(*calls: dict[str, Any], block: str = "function_calls") -> str:
    """Calls as DeepSeek V3.2 writes them: a DSML block of invokes, each parameter saying whether its
    value is a string (written as it is) or not (written as JSON); V4's block is ``tool_calls``."""

    def parameter(k: str, v: Any) -> str:
        text, string = (v, "true") if isinstance(v, str) else (json.dumps(v), "false")
        return f'<{DSML}parameter name="{k}" string="{string}">{text}</{DSML}parameter>'

    invokes = "\n".join(
        f'<{DSML}invoke name="{c["name"]}">\n'
        + "\n".join(parameter(k, v) for k, v in c["arguments"].items())
        + f"\n</{DSML}invoke>"
        for c in calls
    )
    return f"\n\n<{DSML}{block}>\n{invokes}\n</{DSML}{block}>"


async def test_deepseek_v32_dsml_calls_are_read(client: httpx.AsyncClient) -> None:
    """DeepSeek V3.2 (vLLM's deepseek_v32 parser) writes its calls as DSML invokes, each parameter's
    ``string="true"``/``"false"`` saying whether its value is raw text or JSON: such calls scored 0,
    no_answer, however right. A value is read as its parameter says (a string as written, spaces and
    all; another as JSON), so the string "94103" is no 94103, and the number 94103 no "94103"."""
    nested = {
        "name": "f",
        "arguments": {"code": "  if a < b:\n    x = 1", "opts": {"k": [1, 2]}, "flag": True, "n": None},
    }
    zip_text = {"name": "ship", "arguments": {"zip": "94103"}}
    zip_number = {"name": "ship", "arguments": {"zip": 94103}}
    cut = (
        dsml(TIME)
        + f'\n<{DSML}function_calls>\n<{DSML}invoke name="get_weather">\n<{DSML}parameter name="city"'
    )
    items = [
        {
            "response": "<think>weather, then time</think>I'll check." + dsml(WEATHER, TIME),
            "reference": [WEATHER, TIME],
        },
        {"response": dsml(nested), "reference": [nested]},
        {"response": dsml(zip_text), "reference": [zip_text]},
        {"response": dsml(zip_text), "reference": [zip_number]},  # declared a string
        {"response": dsml(zip_number), "reference": [zip_text]},  # declared not one
        {
            "response": dsml(TIME)[: -len(f"</{DSML}function_calls>")],
            "reference": [TIME],
        },  # stopped at the closer
        {"response": cut, "reference": [TIME]},  # a last block cut off: no call
        {
            "response": dsml({**WEATHER, "arguments": {**WEATHER["arguments"], "city": "Lyon"}}),
            "reference": [WEATHER],
        },
        {
            "response": f'<{DSML}function_calls>\n<{DSML}invoke name="get_weather">\n</{DSML}function_calls>',
            "reference": [WEATHER],
        },
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, None),
        (0.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, None),
        (0.0, "format"),  # an invoke without its closer
    ], results
    assert results[1]["details"]["calls"] == [nested]
    coerced = await score(client, items[3:5], coerce_types=True)
    assert [r["score"] for r in coerced] == [1.0, 1.0], coerced


@pytest.mark.timeout(60)
async def test_deepseek_v32_dsml_calls_are_read_in_linear_time(client: httpx.AsyncClient) -> None:
    """1 MB of DSML blocks and invokes that never close, and of an invoke of 20,000 parameters none of
    which is closed, is read in one pass (a lazy regex, or a search for each opener's closer to the end
    of the text, is quadratic); read in the CPU workers under the default item deadline, each scores,
    none times out. (The timeout is a hang guard.)"""
    block, block_end = f"<{DSML}function_calls>", f"</{DSML}function_calls>"
    invoke = f'<{DSML}invoke name="f">'
    responses = [
        block * 38_000,
        (block + invoke) * 19_000,
        block
        + invoke
        + f'<{DSML}parameter name="x" string="false">1' * 20_000
        + f"</{DSML}invoke>{block_end}",
        f"{block}{invoke}</{DSML}invoke>{block_end}" * 10_000,  # over 256 calls
    ]
    reference = [{"name": "f", "arguments": {"x": 1}}]
    results = await score(client, [{"response": r, "reference": reference} for r in responses])
    assert [(r["score"], r["reason"]) for r in results] == [
        (0.0, "no_answer"),
        (0.0, "no_answer"),
        (0.0, "format"),  # parameters without their closer
        (0.0, "format"),
    ], results


async def test_deepseek_v4_dsml_calls_are_read(client: httpx.AsyncClient) -> None:
    """DeepSeek V4 (vLLM's deepseek_v4 parser) writes V3.2's DSML invokes in a ``<｜DSML｜tool_calls>``
    block: such calls scored 0, no_answer, however right. They are read as V3.2's are, a cut-off last
    block no call and an invoke without its closer a broken one."""
    zip_text = {"name": "ship", "arguments": {"zip": "94103"}}
    v4 = functools.partial(dsml, block="tool_calls")
    items = [
        {"response": "<think>weather, then time</think>" + v4(WEATHER, TIME), "reference": [TIME, WEATHER]},
        {"response": v4(zip_text), "reference": [zip_text]},
        {"response": v4(zip_text), "reference": [{"name": "ship", "arguments": {"zip": 94103}}]},
        {
            "response": v4(TIME) + f'\n<{DSML}tool_calls>\n<{DSML}invoke name="get_weather">',
            "reference": [TIME],
        },
        {
            "response": f'<{DSML}tool_calls>\n<{DSML}invoke name="get_time">\n</{DSML}tool_calls>',
            "reference": [TIME],
        },
        {"response": "<think>" + v4(TIME) + "</think>No tool is needed.", "reference": [TIME]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (0.0, None),  # declared a string
        (1.0, None),
        (0.0, "format"),
        (0.0, "no_answer"),  # a call in the reasoning is none
    ], results


async def test_an_invoke_parameter_without_its_closer_is_a_broken_call(client: httpx.AsyncClient) -> None:
    """A MiniMax-M2 or DSML parameter without its ``</parameter>`` scored as if closed at the next tag, a
    right call; vLLM's parsers read a value only up to its closer (the value runs on over the next
    parameter, or the parameter is dropped), so the tool gets other arguments. It is a broken call
    now, format; Qwen3-Coder's, which its parser reads on to the next parameter, is read as before."""
    unclosed_minimax = minimax(WEATHER).replace("Paris</parameter>", "Paris", 1)
    unclosed_last = minimax(TIME).replace("Europe/Paris</parameter>", "Europe/Paris", 1)
    unclosed_dsml = dsml(TIME).replace(f"Europe/Paris</{DSML}parameter>", "Europe/Paris", 1)
    unclosed_v4 = dsml(WEATHER, block="tool_calls").replace(f"Paris</{DSML}parameter>", "Paris", 1)
    unclosed_qwen = qwen3_coder(WEATHER).replace("Paris\n</parameter>\n", "Paris\n", 1)
    assert unclosed_minimax != minimax(WEATHER) and unclosed_qwen != qwen3_coder(WEATHER)
    assert unclosed_dsml != dsml(TIME) and unclosed_last != minimax(TIME)
    items = [
        {"response": unclosed_minimax, "reference": [WEATHER]},
        {"response": unclosed_last, "reference": [TIME]},
        {"response": unclosed_dsml, "reference": [TIME]},
        {"response": unclosed_v4, "reference": [WEATHER]},
        {"response": unclosed_qwen, "reference": [WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (0.0, "format"),
        (0.0, "format"),
        (0.0, "format"),
        (0.0, "format"),
        (1.0, None),
    ], results


async def test_a_json_call_whose_argument_quotes_a_special_token_form_is_read_as_json(
    client: httpx.AsyncClient,
) -> None:
    """A JSON call whose string argument quotes Kimi-K2's, MiniMax-M2's, DSML's, DeepSeek's or gpt-oss's
    calls (a file written, a prompt quoted) was read in that form, its quotes and newlines still JSON
    escapes, and scored 0, format, however right the call: a form whose reading fails gives way to the
    answer's JSON calls. A broken call of the form, in an answer that is no JSON call, is still format."""
    quoted = [
        kimi(TIME),
        minimax(TIME),
        dsml(TIME),
        deepseek_v31(TIME),
        harmony(TIME),
    ]
    items = []
    for text in quoted:
        write = {"name": "write_file", "arguments": {"path": "prompt.txt", "content": "Example:\n" + text}}
        openai = {
            "type": "function",
            "function": {"name": "write_file", "arguments": json.dumps(write["arguments"])},
        }
        items += [
            {"response": json.dumps(write, ensure_ascii=False), "reference": [write]},
            {"response": "```json\n" + json.dumps(write, ensure_ascii=False) + "\n```", "reference": [write]},
            {"response": json.dumps({"tool_calls": [openai]}, ensure_ascii=False), "reference": [write]},
        ]
    broken = f"{KIMI_SECTION}{KIMI_CALL}functions.get_time:0{KIMI_ARGS}{{not json}}{KIMI_END}"
    items.append({"response": broken + '\n{"answer": 3}', "reference": [TIME]})
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * (len(items) - 1) + [
        (0.0, "format")
    ], results


async def test_coerce_types_equates_the_ways_a_value_is_written(client: httpx.AsyncClient) -> None:
    """Models and parsers write one value in several ways: a number or boolean as a string (a schema-less
    XML parser, a model quoting everything), an object or array as its JSON text (arguments encoded one
    level too many). With ``coerce_types`` these compare equal; without it (the default) they do not."""
    ref = {
        "name": "search",
        "arguments": {"k": 10, "ratio": 3.5, "exact": True, "filters": {"lang": ["en", "fr"]}, "ids": [1, 2]},
    }
    written = {
        "name": "search",
        "arguments": {
            "k": "10",
            "ratio": "3.50",
            "exact": "True",
            "filters": '{"lang": ["en", "fr"]}',
            "ids": "[1, 2]",
        },
    }
    items = [
        {"response": hermes(written), "reference": [ref]},
        {"response": hermes(ref), "reference": [written]},  # either side may be the string
        {
            "response": hermes({**ref, "arguments": {**ref["arguments"], "k": 10.0}}),
            "reference": [ref],
        },  # 1 = 1.0
        {
            "response": hermes({**written, "arguments": {**written["arguments"], "k": "11"}}),
            "reference": [ref],
        },
        {
            "response": hermes({**written, "arguments": {**written["arguments"], "exact": "yes"}}),
            "reference": [ref],
        },
        {
            "response": hermes({**written, "arguments": {**written["arguments"], "exact": 1}}),
            "reference": [ref],
        },  # 1 is no bool
        {
            "response": hermes({**written, "arguments": {**written["arguments"], "k": "0x0a"}}),
            "reference": [ref],
        },
        {
            "response": hermes({**written, "arguments": {**written["arguments"], "ids": "[1, 2"}}),
            "reference": [ref],
        },
        {"response": glm(ref), "reference": [written]},  # GLM's parsed values against a stringly reference
        {
            "response": hermes({"name": "f", "arguments": {"rows": ['{"a": "1"}', {"b": "2"}]}}),
            "reference": [{"name": "f", "arguments": {"rows": [{"a": 1}, {"b": 2}]}}],  # nested too
        },
    ]
    coerced = await score(client, items, coerce_types=True)
    assert [r["score"] for r in coerced] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0], coerced
    strict = await score(client, items)
    assert [r["score"] for r in strict] == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], strict
    partial = await score(client, items[:1], coerce_types=True, mode="partial")
    assert partial[0]["score"] == 1.0
    assert partial[0]["details"]["calls"] == [written]  # the calls as the response wrote them


async def test_null_as_absent_treats_a_null_argument_as_not_given(client: httpx.AsyncClient) -> None:
    """BFCL and OpenAI-style optional parameters are often written out as ``null`` (by the model or in the
    reference); with ``null_as_absent`` such an argument counts as not given, on either side, so it is
    neither missing nor extra. Without it (the default) null is a value of its own."""
    with_null = {"name": "get_weather", "arguments": {**WEATHER["arguments"], "country": None}}
    items = [
        {"response": hermes(with_null), "reference": [WEATHER]},  # a null extra in the response
        {"response": hermes(WEATHER), "reference": [with_null]},  # a null in the reference
        {
            "response": hermes({"name": "get_time", "arguments": {"tz": None}}),
            "reference": [{"name": "get_time"}],
        },
        {
            "response": hermes({**WEATHER, "arguments": {**WEATHER["arguments"], "city": None}}),
            "reference": [WEATHER],
        },
    ]
    absent = await score(client, items, null_as_absent=True)
    assert [r["score"] for r in absent] == [1.0, 1.0, 1.0, 0.0], absent
    present = await score(client, items)
    assert [r["score"] for r in present] == [0.0, 0.0, 0.0, 0.0], present
    partial = await score(client, items, null_as_absent=True, mode="partial")
    assert [r["score"] for r in partial] == pytest.approx(
        [1.0, 1.0, 1.0, 2 / 3]
    )  # a null city is a missing one


async def test_a_reference_in_a_model_s_native_form_is_read(client: httpx.AsyncClient) -> None:
    """SFT and RL data often keep the expected calls as the assistant's text in its own chat template:
    DeepSeek's, Kimi's or gpt-oss's special tokens, MiniMax or DSML invokes, Qwen3-Coder's functions, a
    fenced JSON call, Mistral's markers. Only ``<tool_call>`` blocks and pythonic calls were read, every
    other such reference invalid (parse_error); a reference is now read as a response is. Prose, and a
    broken call, are still no reference."""
    both = [WEATHER, TIME]
    references = [
        deepseek_v3(WEATHER, TIME),
        deepseek_v31(WEATHER, TIME),
        kimi(WEATHER, TIME),
        "<|channel|>analysis<|message|>weather, then time<|end|>" + harmony(WEATHER) + harmony(TIME),
        minimax(WEATHER, TIME),
        dsml(WEATHER, TIME),
        dsml(WEATHER, TIME, block="tool_calls"),
        qwen3_coder_bare(WEATHER, TIME),
        "<think>weather, then time</think>```json\n" + json.dumps(both) + "\n```",
        "".join(f"[TOOL_CALLS]{c['name']}[ARGS]{json.dumps(c['arguments'])}" for c in both),
        "<|python_tag|>"
        + "; ".join(json.dumps({"name": c["name"], "parameters": c["arguments"]}) for c in both),
    ]
    items = [{"response": hermes(TIME, WEATHER), "reference": r} for r in references]
    items += [
        {"response": hermes(WEATHER), "reference": deepseek_v31(TIME)},
        {"response": hermes(WEATHER), "reference": "It is sunny in Paris."},
        {"response": hermes(WEATHER), "reference": kimi(WEATHER).replace('"Paris"', "Paris")},
        {"response": "No tool is needed.", "reference": "<tool_call>[]</tool_call>"},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * len(references) + [
        (0.0, None),
        (None, "parse_error"),
        (None, "parse_error"),  # a broken call
        (1.0, None),  # call no tool
    ], results


async def test_a_qwen3_coder_call_closed_by_its_block_alone_is_read(client: httpx.AsyncClient) -> None:
    """Qwen3-Coder at times leaves out a call's ``</function>`` and closes its ``</tool_call>``; vLLM's
    parser reads the function to the block's end, and the tool gets the call, but such a block scored 0,
    format. The block's end now ends its last function; one cut off before ``</tool_call>``, or a
    function left open before another, is still no whole call."""
    open_end = qwen3_coder(WEATHER).replace("</function>\n", "")
    two = qwen3_coder(TIME, WEATHER).replace("</function>\n", "")
    inside = (
        qwen3_coder(TIME)
        .replace("</function>\n", "")
        .replace(
            "<tool_call>\n",
            "<tool_call>\n"
            + (qwen3_coder(WEATHER).replace("<tool_call>\n", "").replace("\n</tool_call>", "\n")),
        )
    )
    items = [
        {"response": "I'll check.\n" + open_end, "reference": [WEATHER]},
        {"response": two, "reference": [WEATHER, TIME]},  # one such block a call
        {"response": open_end.removesuffix("</tool_call>"), "reference": [WEATHER]},  # cut off
        {"response": inside, "reference": [WEATHER, TIME]},  # two in one block, the last left open
        {"response": inside.replace("</function>", "", 1), "reference": [WEATHER, TIME]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (0.0, "no_answer"),
        (1.0, None),
        (0.0, "format"),  # a function left open before another
    ], results


async def test_glm_values_are_read_as_vllm_reads_them(client: httpx.AsyncClient) -> None:
    """vLLM's glm45/glm47 parsers strip a value (`` Paris `` is "Paris") and skip GLM-4.7's literal
    ``\\n`` (two characters) between the tags; such a call was read with the spaces, a wrong argument, or
    as broken (format), though the tool got the right call."""
    spaced = glm(WEATHER).replace("<arg_value>Paris</arg_value>", "<arg_value>  Paris \n</arg_value>")
    literal = (
        glm(TIME, sep="")
        .replace("</arg_key>\n", "</arg_key>\\n")
        .replace("</arg_value>\n", "</arg_value>\\n")
    )
    assert spaced != glm(WEATHER) and "\\n<arg_value>" in literal
    items = [
        {"response": spaced, "reference": [WEATHER]},
        {"response": literal, "reference": [TIME]},
        {"response": glm(TIME).replace("</arg_key>\n", "</arg_key>\\t"), "reference": [TIME]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (0.0, "format"),  # other text between the tags
    ], results


async def test_every_turn_s_calls_count_in_a_transcript_of_a_thinking_model(
    client: httpx.AsyncClient,
) -> None:
    """A multi-turn rollout of a thinking model reasons before each call (Qwen3, MiniMax-M2's
    interleaved thinking): the text was read after its last ``</think>`` only, so every turn's calls but
    the last's were dropped, a right trajectory scored as a missing call. Each turn's reasoning is now
    dropped and its calls kept; a call in a reasoning block, or in a tool's output, still counts for
    nothing, and a single response reads as before."""

    def output(text: str) -> str:
        return f"\n<tool_response>\n{text}\n</tool_response>\n"

    qwen3 = "<think>weather first</think>\n" + hermes(WEATHER) + output("sunny") + "<think>now time</think>\n"
    qwen3 += hermes(TIME)
    opened_in_prompt = "weather first</think>\n" + hermes(WEATHER) + output("sunny") + "now time</think>\n"
    opened_in_prompt += hermes(TIME)
    interleaved = "<think>weather</think>" + minimax(WEATHER) + output("sunny") + "<think>time</think>"
    interleaved += minimax(TIME)
    draft = f"<think>maybe {hermes(TIME)}? No.</think>" + hermes(WEATHER) + output("</think> sunny") + "Done."
    items = [
        {"response": qwen3, "reference": [WEATHER, TIME]},
        {"response": opened_in_prompt, "reference": [WEATHER, TIME]},
        {"response": interleaved, "reference": [WEATHER, TIME]},
        {"response": draft, "reference": [WEATHER]},  # a draft in the reasoning, a </think> in the output
        {"response": "<think>" + hermes(WEATHER) + "</think>It is sunny.", "reference": []},
        {
            "response": hermes(WEATHER) + output("sunny") + "<think>then " + hermes(TIME),
            "reference": [WEATHER],
        },
        {
            "response": "Let me see.<think>weather</think>" + json.dumps(WEATHER),
            "reference": [WEATHER],
        },  # as before
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * len(items), results


K3_TOOLS, K3_TOOLS_END = "<|open|>tools<|sep|>", "<|close|>tools<|sep|>"


def kimi_k3(*calls: dict[str, Any]) -> str:
    """Calls as Kimi K3 writes them: a ``tools`` channel of XTML calls, each argument typed (a string as
    written, another as JSON)."""

    def argument(k: str, v: Any) -> str:
        kind, text = (
            ("string", v)
            if isinstance(v, str)
            else ("object" if isinstance(v, dict) else "number", json.dumps(v))
        )
        return f'<|open|>argument key="{k}" type="{kind}"<|sep|>{text}<|close|>argument<|sep|>'

    body = "".join(
        f'<|open|>call tool="{c["name"]}" index="{i}"<|sep|>'
        + "".join(argument(k, v) for k, v in c["arguments"].items())
        + "<|close|>call<|sep|>"
        for i, c in enumerate(calls, 1)
    )
    return f"<|open|>response<|sep|>Checking.<|close|>response<|sep|>{K3_TOOLS}{body}{K3_TOOLS_END}"


async def test_kimi_k3_calls_are_read(client: httpx.AsyncClient) -> None:
    """Kimi K3 (vLLM's kimi_k3 parser) writes its calls as XTML in a ``tools`` channel, each argument
    saying its type: such calls scored 0, no_answer, however right. A ``string`` argument is its text as
    written (the string "94103" is no 94103), another its JSON; a call in the ``think`` channel is none,
    a last call cut off is no call, and a call without its closer in a closed channel a broken one."""
    nested = {"name": "f", "arguments": {"code": "  if a < b:\n    x = 1\n", "opts": {"k": [1, 2]}, "n": 2.5}}
    zip_text = {"name": "ship", "arguments": {"zip": "94103"}}
    think = "<|open|>think<|sep|>maybe " + kimi_k3(TIME) + "<|close|>think<|sep|>"
    cut = kimi_k3(TIME).removesuffix(K3_TOOLS_END) + '<|open|>call tool="get_weather"<|sep|><|open|>argument'
    items = [
        {"response": think + kimi_k3(WEATHER, TIME), "reference": [TIME, WEATHER]},
        {"response": kimi_k3(nested), "reference": [nested]},
        {"response": kimi_k3(zip_text), "reference": [zip_text]},
        {"response": kimi_k3(zip_text), "reference": [{"name": "ship", "arguments": {"zip": 94103}}]},
        {
            "response": "reasoning in the prompt's channel" + think.removeprefix("<|open|>think<|sep|>"),
            "reference": [],
        },
        {"response": cut, "reference": [TIME]},
        {"response": kimi_k3(TIME).replace("<|close|>call<|sep|>", ""), "reference": [TIME]},
        {"response": kimi_k3(WEATHER), "reference": kimi_k3(WEATHER)},  # a reference in the same form
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, "format"),
        (1.0, None),
    ], results
    assert results[1]["details"]["calls"] == [nested]


def spaced(text: str) -> str:
    """``text`` as vLLM's detokenizer writes it with special tokens kept and spaces_between_special_tokens
    on (its default): each XTML token and each run of text between them joined by one space."""
    return " ".join(piece for piece in re.split(r"(<\|(?:open|close|sep)\|>)", text) if piece)


async def test_kimi_k3_markers_with_spaces_inside_are_read(client: httpx.AsyncClient) -> None:
    """A rollout generated with K3's special tokens kept and vLLM's spaces_between_special_tokens on (its
    default) has a space beside each token, ``<|open|> tools <|sep|> <|open|> call tool="f" ...``: its
    calls scored 0, no_answer, however right, and a call drafted in its spaced ``think`` channel was no
    reasoning. vLLM's kimi_k3 parser reads whitespace inside a marker (``\\s*``); so does the reward now.
    A value's text stays as written, as that parser reads it: a string argument has the spaces too."""
    typed = {"name": "plan", "arguments": {"days": 3, "opts": {"k": [1, 2]}}}
    think = "<|open|>think<|sep|>maybe " + kimi_k3(TIME) + "<|close|>think<|sep|>"
    items = [
        {"response": spaced(kimi_k3(typed)), "reference": [typed]},
        {"response": spaced(think + kimi_k3(typed)), "reference": [typed]},
        {"response": spaced(kimi_k3(typed)), "reference": kimi_k3(typed)},  # a reference without spaces
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * len(items), results
    normalized = await score(
        client, [{"response": spaced(kimi_k3(TIME)), "reference": [TIME]}], string_match="normalized"
    )
    assert [(r["score"], r["reason"]) for r in normalized] == [(1.0, None)], normalized
    assert normalized[0]["details"]["calls"] == [{"name": "get_time", "arguments": {"tz": " Europe/Paris "}}]


@pytest.mark.timeout(60)
async def test_kimi_k3_calls_are_read_in_linear_time(client: httpx.AsyncClient) -> None:
    """1 MB of K3 channels, calls and arguments that never close (or of spaces inside markers) is read in
    one pass (a lazy regex, or a search for each opener's closer to the end of the text, is quadratic);
    each scores, none times out.
    (The timeout is a hang guard.)"""
    call = '<|open|>call tool="f"<|sep|>'
    responses = [
        K3_TOOLS + call * 35_000,
        K3_TOOLS + call + '<|open|>argument key="x" type="number"<|sep|>1' * 20_000,
        (K3_TOOLS + call + "<|close|>call<|sep|>" + K3_TOOLS_END) * 10_000,  # over 256 calls
        "<|open|>think<|sep|>" * 50_000,
        "<|sep|>" + " " * 1_000_000,  # a run of spaces no <|sep|> follows (the markers' spaces)
        spaced(K3_TOOLS) + " <|open|> call" * 70_000,
    ]
    results = await score(client, [{"response": r, "reference": [{"name": "f"}]} for r in responses])
    assert [(r["score"], r["reason"]) for r in results] == [
        (0.0, "no_answer"),
        (0.0, "no_answer"),
        (0.0, "format"),
        (0.0, "no_answer"),
        (0.0, "no_answer"),
        (0.0, "no_answer"),  # (an unclosed channel: its last call cut off)
    ], results


async def test_a_deepseek_v4_call_right_after_its_unclosed_reasoning_is_read(
    client: httpx.AsyncClient,
) -> None:
    """DeepSeek V4 may start its ``<｜DSML｜tool_calls>`` block without closing its ``<think>`` (vLLM's
    deepseek_v4 reasoning parser ends the reasoning there): the block was read as reasoning, no call.
    It now ends the reasoning; other forms in an unclosed reasoning block are still none, and many
    openers are read in one pass."""
    v4 = functools.partial(dsml, block="tool_calls")
    items = [
        {"response": "<think>The user wants the weather." + v4(WEATHER), "reference": [WEATHER]},
        {
            "response": "<think>weather" + v4(WEATHER) + output_of("sunny") + "<think>time" + v4(TIME),
            "reference": [WEATHER, TIME],
        },
        {"response": "<think>maybe " + dsml(WEATHER), "reference": [WEATHER]},  # V3.2's block: reasoning
        {"response": ("<think>" + f"<{DSML}tool_calls>") * 30_000, "reference": [WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (0.0, "no_answer"),
        (0.0, "no_answer"),
    ], results


def output_of(text: str) -> str:
    """A tool's output between the turns of a Hermes/Qwen transcript."""
    return f"\n<tool_response>\n{text}\n</tool_response>\n"


async def test_a_native_call_whose_argument_quotes_a_tool_call_block_is_read_in_its_form(
    client: httpx.AsyncClient,
) -> None:
    """A DSML, MiniMax, Kimi or DeepSeek call whose argument holds a ``<tool_call>`` block (a file or
    prompt written, a chat template quoted) was read by that block instead: the quoted call counted (or
    broke, format) and the real one was lost. The form whose call opens first is now the response's;
    a ``<tool_call>`` block after a mere mention of another form's tag is read as before."""
    quoted = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    write = {"name": "write_file", "arguments": {"path": "demo.txt", "content": "Example:\n" + quoted}}
    items = [
        {"response": dsml(write), "reference": [write]},
        {"response": dsml(write, block="tool_calls"), "reference": [write]},
        {"response": minimax(write), "reference": [write]},
        {"response": kimi(write), "reference": [write]},
        {"response": deepseek_v31(write), "reference": [write]},
        {"response": kimi_k3(write), "reference": [write]},
        {"response": f"I could write {MINIMAX} blocks, but:\n" + hermes(WEATHER), "reference": [WEATHER]},
        {
            "response": hermes({"name": "note", "arguments": {"text": dsml(TIME)}}),
            "reference": [{"name": "note", "arguments": {"text": dsml(TIME)}}],
        },
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * len(items), results


async def test_llama4_pythonic_calls_in_their_python_tokens_are_read(client: httpx.AsyncClient) -> None:
    """Llama 4 may wrap its pythonic calls in ``<|python_start|>...<|python_end|>`` (vLLM's
    llama4_pythonic parser drops the tokens): such a response was no call, 0 no_answer, however right."""
    pythonic = '[get_weather(city="Paris", unit="celsius", days=3), get_time(tz="Europe/Paris")]'
    items = [
        {"response": f"<|python_start|>{pythonic}<|python_end|>", "reference": [WEATHER, TIME]},
        {"response": f"<|python_start|>{pythonic}", "reference": [WEATHER, TIME]},  # stopped at the end token
        {"response": "<|python_start|>[get_weather(city=)]<|python_end|>", "reference": [WEATHER]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None), (1.0, None), (0.0, "no_answer")], (
        results
    )


async def test_a_glm_value_written_as_a_python_literal_is_that_value(client: httpx.AsyncClient) -> None:
    """vLLM's glm45 parser reads a value that is no JSON as a Python literal (``['a', 'b']``, ``True``,
    ``'Paris'``), as GLM at times writes them, and the tool gets that value; such a value was the text, a
    wrong argument. It is now that value (and the text, as other XML values are); a word is still text."""
    call = {
        "name": "f",
        "arguments": {"tags": ["a", "b"], "flag": True, "city": "Paris", "opts": {"k": None}},
    }
    glm_python = (
        "<tool_call>f\n<arg_key>tags</arg_key>\n<arg_value>['a', 'b']</arg_value>\n"
        "<arg_key>flag</arg_key>\n<arg_value>True</arg_value>\n"
        "<arg_key>city</arg_key>\n<arg_value>'Paris'</arg_value>\n"
        "<arg_key>opts</arg_key>\n<arg_value>{'k': None}</arg_value>\n</tool_call>"
    )
    items = [
        {"response": glm_python, "reference": [call]},
        {"response": glm(TIME), "reference": [TIME]},
        {"response": glm_python.replace("'Paris'", "Paris"), "reference": [call]},
        {"response": glm_python.replace("True", "Yes"), "reference": [call]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, None),
    ], results


@pytest.mark.timeout(120)
async def test_a_megabyte_of_glm_values_that_are_no_literal_is_read_within_the_deadline(
    client: httpx.AsyncClient,
) -> None:
    """Found in review: each GLM value is read as a Python literal up to 20,000 characters, but a value
    that is none is its text and the next one is read, so a megabyte of f-string values (which ast
    compiles expression by expression before refusing them) took 6 s, past the item's deadline: the
    item was a timeout, the worker held that long. Values are now read as literals up to a bound for the
    whole response; past it a value that is no JSON is its text. A literal value is still read."""
    value = "f'" + "{1}" * 6_000 + "'"
    n = 1_000_000 // (len(value) + 60)
    flood = (
        "<tool_call>f\n"
        + "".join(f"<arg_key>k{i}</arg_key>\n<arg_value>{value}</arg_value>\n" for i in range(n))
        + "</tool_call>"
    )
    literal = {"name": "f", "arguments": {"tags": ["a", "b"]}}
    glm_literal = "<tool_call>f\n<arg_key>tags</arg_key>\n<arg_value>['a', 'b']</arg_value>\n</tool_call>"
    resp = await client.post(
        "/v1/score",
        json={
            "reward": {"name": "tool_call"},
            "items": [
                {"response": flood, "reference": [{"name": "f"}]},
                {"response": glm_literal + " " * 200_000, "reference": [literal]},
            ],
            "options": {"use_cache": False, "timeout_s": 3.0},
        },
    )
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    assert [(r["score"], r["reason"]) for r in results] == [(0.0, None), (1.0, None)], results


M3 = "]<]minimax[>["


def minimax_m3(*calls: dict[str, Any]) -> str:
    """Calls as MiniMax-M3 writes them: each tag after its namespace token, each argument a tag of its
    name (a nested object nested tags, an array ``<item>`` tags, a boolean or number as JSON)."""

    def element(k: str, v: Any) -> str:
        if isinstance(v, dict):
            inner = "".join(element(kk, vv) for kk, vv in v.items())
        elif isinstance(v, list):
            inner = "".join(element("item", vv) for vv in v)
        else:
            inner = as_written(v)
        return f"{M3}<{k}>{inner}{M3}</{k}>\n"

    invokes = "".join(
        f'{M3}<invoke name="{c["name"]}">\n'
        + "".join(element(k, v) for k, v in c["arguments"].items())
        + f"{M3}</invoke>\n"
        for c in calls
    )
    return f"{M3}<tool_call>\n{invokes}{M3}</tool_call>"


async def test_minimax_m3_calls_are_read(client: httpx.AsyncClient) -> None:
    """MiniMax-M3 (vLLM's minimax_m3 parser) prefixes each tag with its namespace token and writes each
    argument as a tag of its name, nested objects as nested tags and arrays as ``<item>`` tags: such a
    response was read by its ``<tool_call>`` tag as a broken Hermes block, 0 format, however right. Its
    calls are now read, values as MiniMax-M2's are; a last block cut off is no call, a tag closing
    another a broken call."""
    nested = {"name": "f", "arguments": {"code": "if a < b:\n    x = 1", "opts": {"k": [1, 2], "flag": True}}}
    cut = minimax_m3(TIME) + f'{M3}<tool_call>\n{M3}<invoke name="get_weather">\n{M3}<city>Pa'
    items = [
        {
            "response": "<think>weather, then time</think>Checking." + minimax_m3(WEATHER, TIME),
            "reference": [TIME, WEATHER],
        },
        {"response": minimax_m3(nested), "reference": [nested]},
        {
            "response": minimax_m3({"name": "tag", "arguments": {"t": ["a"]}}),
            "reference": [{"name": "tag", "arguments": {"t": ["a"]}}],
        },
        {"response": cut, "reference": [TIME]},
        {"response": minimax_m3(TIME).replace(f"{M3}</tz>", f"{M3}</city>"), "reference": [TIME]},
        {"response": hermes(WEATHER), "reference": minimax_m3(WEATHER)},  # a reference in the same form
        {
            "response": ((M3 + "<tool_call>") + (M3 + '<invoke name="f">') + (M3 + "<a>") * 40_000),
            "reference": [TIME],
        },
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (1.0, None),
        (0.0, "format"),
        (1.0, None),
        (0.0, "no_answer"),  # nested past the bound, cut off: no call, read in one pass
    ], results
    assert results[1]["details"]["calls"] == [nested]
    assert "closes no open argument" in results[4]["details"]["error"]


async def test_minimax_m3_leaves_closed_without_the_namespace_token_are_read(
    client: httpx.AsyncClient,
) -> None:
    """MiniMax-M3 output mixes namespaced tags with a leaf argument's closer written without the token,
    ``]<]minimax[>[<query>AI news</query>]<]minimax[>[<sources>web</sources>...`` (MiniMax API clients
    are tested on such leaked text, and parsers that drop the token before reading the XML read it so):
    the argument stayed open, the next one nested in it, and the call was broken, 0 format, however
    right. A leaf whose text ends with its own plain closer is now closed there, unless its namespaced
    closer comes next (then the text is its value, an HTML value that ends with the same tag)."""
    search = {"name": "search", "arguments": {"query": "AI news", "sources": "web", "limit": 6}}
    mixed = (
        f'Checking.{M3}<tool_call>\n{M3}<invoke name="search">{M3}<query>AI news</query>'
        f"{M3}<sources>web</sources>{M3}<limit>6</limit>{M3}</invoke>\n{M3}</tool_call>"
    )
    nested = {"name": "f", "arguments": {"opts": {"k": 1, "tag": "x"}}}
    nested_mixed = (
        f'{M3}<tool_call>{M3}<invoke name="f">{M3}<opts>{M3}<k>1</k>\n{M3}<tag>x{M3}</tag>'
        f"{M3}</opts>{M3}</invoke>{M3}</tool_call>"
    )
    html = {"name": "page", "arguments": {"html": "<p>hi</p></html>"}}
    items = [
        {"response": mixed, "reference": [search]},
        {"response": nested_mixed, "reference": [nested]},
        {"response": minimax_m3(html), "reference": [html]},
    ]
    results = await score(client, items)
    assert [(r["score"], r["reason"]) for r in results] == [(1.0, None)] * len(items), results


async def test_an_anthropic_or_responses_api_turn_s_calls_are_read_past_its_text_blocks(
    client: httpx.AsyncClient,
) -> None:
    """Anthropic's assistant turn is a list of content blocks, a tool_use block for each call and, as a
    model nearly always writes one, a text block before them (a thinking block too); OpenAI's Responses API
    output lists reasoning and message items beside its function_call ones; Gemini's turn is parts, text
    beside functionCall. Each call block was read alone, but the text beside it was read as a call without a
    name: a response in that shape scored 0 (format), a message object ({"role", "content": [...]}) was no
    call (no_answer), and such a reference was parse_error. The blocks that are no call (a text, thinking,
    reasoning or message block, with none of a call's keys) are passed over; a turn of only text calls
    no tool."""
    weather = {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}
    time = {"type": "tool_use", "id": "toolu_02", "name": "get_time", "input": {"tz": "Europe/Paris"}}
    text = {"type": "text", "text": "I'll check the weather and the time."}
    thinking = {"type": "thinking", "thinking": "Two tools.", "signature": "c2ln"}
    ref = [{"name": "get_weather", "arguments": {"city": "Paris"}}, TIME]
    responses_api = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": json.dumps({"city": "Paris"}),
        },
        {
            "type": "function_call",
            "call_id": "call_2",
            "name": "get_time",
            "arguments": '{"tz": "Europe/Paris"}',
        },
    ]
    gemini = {
        "role": "model",
        "parts": [
            {"text": "Checking."},
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
            {"functionCall": {"name": "get_time", "args": {"tz": "Europe/Paris"}}},
        ],
    }
    cases = [
        ([text, weather, time], ref, 1.0),
        ({"role": "assistant", "content": [thinking, text, weather, time]}, ref, 1.0),
        (
            {"id": "msg_1", "type": "message", "role": "assistant", "content": [text, weather, time]},
            ref,
            1.0,
        ),
        (responses_api, ref, 1.0),
        (gemini, ref, 1.0),
        ([text, weather], ref, 0.0),  # (a call missing)
        (hermes(*ref), [text, weather, time], 1.0),  # the reference in Anthropic's shape
        (hermes(*ref), {"role": "assistant", "content": [text, time, weather]}, 1.0),
        ("No tool is needed.", {"role": "assistant", "content": [text]}, 1.0),  # only text: call no tool
    ]
    items = [
        {"response": r if isinstance(r, str) else json.dumps(r), "reference": want} for r, want, _ in cases
    ]
    results = await score(client, items)
    assert [(r["valid"], r["score"]) for r in results] == [(True, s) for _, _, s in cases], results
    only_text = await score(
        client, [{"response": json.dumps({"role": "assistant", "content": [text]}), "reference": ref}]
    )
    assert (only_text[0]["score"], only_text[0]["reason"]) == (0.0, "no_answer")
    # (a lone block that is no call is no turn: a reference {"text": ...} stays parse_error, not "no tool")
    lone = await score(client, [{"response": hermes(TIME), "reference": {"type": "text", "text": "x"}}])
    assert (lone[0]["valid"], lone[0]["reason"]) == (False, "parse_error")
