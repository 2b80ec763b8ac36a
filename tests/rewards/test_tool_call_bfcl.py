"""``tool_call`` with BFCL's possible answers as references (``reference_format: "bfcl"``): each argument
any of its listed values, ``""`` among them when it may be left out, compared as BFCL's AST checker
compares them, on examples shaped as BFCL's simple, multiple, parallel and parallel_multiple items; and
``omit_defaults``: an argument equal to the default its tool's schema (in the reference) declares."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from conftest import score_results
from rewardhub.rewards.tool_call import bfcl_reference

# BFCL simple_0's shape: two required arguments and an optional one ("" among its values)
TRIANGLE = {"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def hermes(*calls: dict[str, Any]) -> str:
    return "\n".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls)


async def score(
    client: httpx.AsyncClient, items: list[dict[str, Any]], **config: Any
) -> list[dict[str, Any]]:
    return await score_results(
        client, "tool_call", items, options={"use_cache": False}, **{"reference_format": "bfcl", **config}
    )


async def test_a_simple_possible_answer_scores_as_bfcl_checks_it(client: httpx.AsyncClient) -> None:
    """BFCL's possible answers were a parse_error reference (invalid on every item). The optional argument
    may be left out or given one of its values; a wrong value, a wrong type, a missing required argument
    or an argument the possible answer does not list fails the call."""
    responses = [
        hermes(call("calculate_triangle_area", base=10, height=5)),  # optional left out
        hermes(call("calculate_triangle_area", base=10, height=5, unit="units")),  # optional given
        hermes(call("calculate_triangle_area", base=10, height=5, unit="Units")),  # standardised string
        "[calculate_triangle_area(base=10, height=5)]",  # BFCL's prompting (pythonic) mode
        hermes(call("calculate_triangle_area", base=10, height=5, unit="cm")),  # optional, wrong value
        hermes(call("calculate_triangle_area", base=9, height=5)),  # wrong value
        hermes(call("calculate_triangle_area", base="10", height=5)),  # wrong type: "10" is not 10
        hermes(call("calculate_triangle_area", base=True, height=5)),  # wrong type: true is not 1
        hermes(call("calculate_triangle_area", base=10)),  # a required argument missing
        hermes(call("calculate_triangle_area", base=10, height=5, color="red")),  # an extra, unknown one
        hermes(call("calc_triangle_area", base=10, height=5)),  # another function's name
        hermes(
            call("calculate_triangle_area", base=10, height=5),
            call("calculate_triangle_area", base=10, height=5),
        ),
    ]
    results = await score(client, [{"response": r, "reference": [TRIANGLE]} for r in responses])
    assert [(r["valid"], r["score"]) for r in results] == [(True, 1.0)] * 4 + [(True, 0.0)] * 8, results
    partial = await score(
        client, [{"response": r, "reference": [TRIANGLE]} for r in responses], mode="partial"
    )
    # (keys: those given and the required ones; the optional left out counts for nothing)
    assert [r["score"] for r in partial] == pytest.approx(
        [1, 1, 1, 1, 2 / 3, 1 / 2, 1 / 2, 1 / 2, 1 / 2, 2 / 3, 0, 1 / 2]
    )


async def test_bfcl_value_rules(client: httpx.AsyncClient) -> None:
    """Strings compared lowercased without spaces and , . / - _ * ^ (BFCL's standardisation), an integer
    for a float value, lists in order with their strings standardised, an object against an object whose
    keys list their values (an optional key left out, an unknown key extra), a list of such objects."""
    reference = [
        {
            "book_flight": {
                "date": ["April 1, 2024", "2024-04-01"],
                "price": [250.0],
                "stops": [["Paris", "Rome"]],
                "traveller": [{"name": ["Ada Lovelace"], "seat": ["window", ""]}],
                "bags": [[{"kind": ["cabin"], "kg": [8, ""]}]],
            }
        }
    ]
    right = {
        "date": "april 1 2024",
        "price": 250,
        "stops": ["paris", "ROME"],
        "traveller": {"name": "ada-lovelace"},
        "bags": [{"kind": "Cabin", "kg": 8}],
    }
    wrong = [
        {"date": "2024-04-02"},
        {"price": 250.5},
        {"stops": ["Rome", "Paris"]},  # a list is compared in order
        {"stops": ["Paris"]},
        {"traveller": {"name": "Ada Lovelace", "meal": "veg"}},  # a key the object does not list
        {"traveller": {"seat": "window"}},  # a required key missing
        {"bags": [{"kind": "hold"}]},
        {"bags": [{"kind": "cabin"}, {"kind": "cabin"}]},
    ]
    items = [{"response": hermes(call("book_flight", **right)), "reference": reference}]
    items += [
        {"response": hermes(call("book_flight", **{**right, **w})), "reference": reference} for w in wrong
    ]
    results = await score(client, items)
    assert [r["score"] for r in results] == [1.0] + [0.0] * len(wrong), results


async def test_multiple_parallel_and_parallel_multiple(client: httpx.AsyncClient) -> None:
    """multiple: one call of the right function among several offered; parallel: calls of one function
    matched in any order, each once; parallel_multiple: of several functions, in any order."""
    multiple = [{"get_stock_price": {"ticker": ["AAPL"], "exchange": ["NASDAQ", ""]}}]
    parallel = [
        {"get_weather": {"city": ["Paris", "Paris, France"], "unit": ["celsius", ""]}},
        {"get_weather": {"city": ["Tokyo"], "unit": ["celsius", ""]}},
    ]
    parallel_multiple = [
        {"get_weather": {"city": ["Paris"]}},
        {"get_weather": {"city": ["Tokyo"]}},
        {"get_time": {"tz": ["Europe/Paris"]}},
        {"get_time": {"tz": ["Asia/Tokyo"]}},
    ]
    cases = [
        (multiple, hermes(call("get_stock_price", ticker="AAPL")), 1.0),
        (multiple, hermes(call("get_company_news", ticker="AAPL")), 0.0),
        (parallel, hermes(call("get_weather", city="Tokyo"), call("get_weather", city="paris, france")), 1.0),
        (parallel, hermes(call("get_weather", city="Tokyo"), call("get_weather", city="Tokyo")), 0.0),
        (parallel, hermes(call("get_weather", city="Paris")), 0.0),
        (
            parallel_multiple,
            hermes(
                call("get_time", tz="Asia/Tokyo"),
                call("get_weather", city="Tokyo"),
                call("get_time", tz="Europe/Paris"),
                call("get_weather", city="Paris"),
            ),
            1.0,
        ),
        (
            parallel_multiple,
            hermes(
                call("get_time", tz="Asia/Tokyo"),
                call("get_weather", city="Tokyo"),
                call("get_weather", city="Paris"),
            ),
            0.0,
        ),
    ]
    results = await score(client, [{"response": r, "reference": ref} for ref, r, _ in cases])
    assert [r["score"] for r in results] == [want for _, _, want in cases], results
    partial = await score(
        client, [{"response": r, "reference": ref} for ref, r, _ in cases[2:5]], mode="partial"
    )
    assert [r["score"] for r in partial] == [1.0, 0.5, 0.5]
    strict = await score(client, [{"response": cases[2][1], "reference": parallel}], order="strict")
    assert strict[0]["score"] == 0.0  # (order strict: the Tokyo call first is paired with Paris)


async def test_the_shapes_a_possible_answer_is_read_in(client: httpx.AsyncClient) -> None:
    """The ground-truth list, it as JSON text, one call alone, BFCL's file line; [] calls no tool. Other
    references (a call object among them: the format is the config's, not guessed) are parse_error."""
    response = hermes(call("calculate_triangle_area", base=10, height=5))
    references: list[Any] = [
        [TRIANGLE],
        json.dumps([TRIANGLE]),
        TRIANGLE,
        {"id": "simple_0", "ground_truth": [TRIANGLE]},
        [],
        call("calculate_triangle_area", base=10, height=5),  # a call, not a possible answer
        {"calculate_triangle_area": {"base": 10, "height": [5]}},  # values not a list
        {"f": {"x": [1]}, "g": {"x": [1]}},  # one object, two functions
        "calculate_triangle_area(base=10, height=5)",
    ]
    results = await score(client, [{"response": response, "reference": ref} for ref in references])
    assert [(r["valid"], r["score"], r["reason"]) for r in results] == [(True, 1.0, None)] * 4 + [
        (True, 0.0, None)
    ] + [(False, None, "parse_error")] * 4, results
    none = await score(client, [{"response": "No tool fits.", "reference": []}])
    assert none[0]["score"] == 1.0


async def test_null_as_absent_and_the_default_format(client: httpx.AsyncClient) -> None:
    """A null optional argument is left out under null_as_absent (else a value of its own, not listed). The
    default reference format keeps its meaning: a possible answer is still parse_error, now saying which
    setting reads it, and a call reference scores as before."""
    null_unit = hermes(call("calculate_triangle_area", base=10, height=5, unit=None))
    assert [r["score"] for r in await score(client, [{"response": null_unit, "reference": [TRIANGLE]}])] == [
        0.0
    ]
    absent = await score(client, [{"response": null_unit, "reference": [TRIANGLE]}], null_as_absent=True)
    assert absent[0]["score"] == 1.0
    resp = await client.post(
        "/v1/score",
        json={
            "reward": {"name": "tool_call"},
            "items": [
                {"response": null_unit, "reference": [TRIANGLE]},
                {
                    "response": null_unit,
                    "reference": [call("calculate_triangle_area", base=10, height=5, unit=None)],
                },
            ],
            "options": {"use_cache": False},
        },
    )
    bfcl_shaped, calls = resp.json()["results"]
    assert (bfcl_shaped["valid"], bfcl_shaped["reason"]) == (False, "parse_error")
    assert 'reference_format: "bfcl"' in bfcl_shaped["details"]["message"], bfcl_shaped
    assert calls["score"] == 1.0


def test_bfcl_reference_reads_only_possible_answers() -> None:
    [only] = bfcl_reference([TRIANGLE]) or []
    assert (only.name, only.arguments) == ("calculate_triangle_area", TRIANGLE["calculate_triangle_area"])
    assert bfcl_reference({"f": {}}) is not None  # a function without arguments
    for other in ("not json", 3, [3], [{"": {"x": [1]}}], {"tool_calls": None}, [{"f": {"x": [1]}}, "g"]):
        assert bfcl_reference(other) is None, other


async def test_big_batches_read_possible_answers_in_the_cpu_workers(client: httpx.AsyncClient) -> None:
    """A batch past the inline bounds is read (its references with the config) and paired in the CPU
    workers: the same scores as inline."""
    reference = [{"search": {"q": [f"query {i}"], "k": [i, ""]}} for i in range(256)]
    calls = [call("search", q=f"Query {i}", k=i) for i in range(256)][::-1]
    big = {"response": hermes(*calls), "reference": reference}
    small = {"response": hermes(call("calculate_triangle_area", base=10, height=5)), "reference": [TRIANGLE]}
    results = await score(client, [small, big, {**big, "response": "x" * 200_001 + big["response"]}])
    assert [(r["score"], r["components"]["calls"]) for r in results] == [
        (1.0, 1.0),
        (1.0, 256.0),
        (1.0, 256.0),
    ]


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "default": 1},
            },
            "required": ["city"],
        },
    },
}


async def test_omit_defaults_reads_the_reference_tools_defaults(client: httpx.AsyncClient) -> None:
    """An argument given with its default value was an extra argument in exact mode (the reward could not
    know the default): with omit_defaults and the tools in the reference, an argument equal to its declared
    default counts as not given, on either side; another value, or another tool's, still counts."""
    reference = {"calls": [call("get_weather", city="Paris")], "tools": [WEATHER_TOOL]}
    given_default = {"calls": [call("get_weather", city="Paris", unit="celsius")], "tools": [WEATHER_TOOL]}
    cases = [
        (reference, hermes(call("get_weather", city="Paris", unit="celsius", days=1)), 1.0),
        (reference, "[get_weather(city='Paris', days=1.0)]", 1.0),  # (1.0 is the integer 1)
        (given_default, hermes(call("get_weather", city="Paris")), 1.0),  # the reference gives the default
        (reference, hermes(call("get_weather", city="Paris", unit="fahrenheit")), 0.0),
        (reference, hermes(call("get_weather", city="Paris", days=2)), 0.0),
        (reference, hermes(call("get_weather", city="Paris", region="EU")), 0.0),  # declared no default
        (json.dumps(reference), hermes(call("get_weather", city="Paris", unit="celsius")), 1.0),  # JSON text
        # bare {"name", "parameters"} tools, Anthropic's input_schema
        (
            {**reference, "tools": [WEATHER_TOOL["function"]]},
            hermes(call("get_weather", city="Paris", days=1)),
            1.0,
        ),
        (
            {
                **reference,
                "tools": [{"name": "get_weather", "input_schema": WEATHER_TOOL["function"]["parameters"]}],
            },
            hermes(call("get_weather", city="Paris", days=1)),
            1.0,
        ),
    ]
    items = [{"response": r, "reference": ref} for ref, r, _ in cases]
    results = await score(client, items, reference_format="calls", omit_defaults=True)
    assert [r["score"] for r in results] == [want for _, _, want in cases], results
    # off (the default), or no tools in the reference: an argument given is given
    off = await score(client, items[:3], reference_format="calls")
    assert [r["score"] for r in off] == [0.0, 0.0, 0.0]
    no_tools = await score(
        client,
        [{"response": cases[0][1], "reference": reference["calls"]}],
        reference_format="calls",
        omit_defaults=True,
    )
    assert no_tools[0]["score"] == 0.0
    partial = await score(client, items[:1], reference_format="calls", mode="partial")
    assert partial[0]["score"] == pytest.approx(1 / 3)


async def test_underscore_to_dot_reads_dotted_names_as_bfcl_s_fc_models_are_shown_them(
    client: httpx.AsyncClient,
) -> None:
    """BFCL shows its function-calling models (OpenAI, Mistral, Gemini... whose APIs refuse a '.' in a
    function name) each function with every '.' of its name written '_', and its checker then expects the
    possible answer's name so rewritten (its model flag underscore_to_dot): math.factorial is called
    math_factorial. The reward read the possible answer's name as written, so such a model's right call
    scored 0. With underscore_to_dot the possible answer's names are rewritten as BFCL rewrites them
    (every '.'), and only the rewritten name is the function's (the model was shown no other); off (BFCL's
    prompt-mode models, shown the names as they are), the name as written."""
    reference = [{"math.factorial": {"number": [5]}}]
    nested = [{"finance.loan.monthly_payment": {"principal": [1000]}}]
    underscored = hermes(call("math_factorial", number=5))
    dotted = "[math.factorial(number=5)]"
    cases = [
        (reference, underscored, 1.0),
        (reference, dotted, 0.0),
        (reference, hermes(call("math_factorial", number=6)), 0.0),
        (nested, hermes(call("finance_loan_monthly_payment", principal=1000)), 1.0),
        (nested, hermes(call("finance_loan.monthly_payment", principal=1000)), 0.0),
        ([TRIANGLE], hermes(call("calculate_triangle_area", base=10, height=5)), 1.0),  # no dot: as it is
    ]
    items = [{"response": r, "reference": ref} for ref, r, _ in cases]
    results = await score(client, items, underscore_to_dot=True)
    assert [r["score"] for r in results] == [want for _, _, want in cases], results
    off = await score(client, items[:2])
    assert [r["score"] for r in off] == [0.0, 1.0]
    partial = await score(client, items[2:3], underscore_to_dot=True, mode="partial")
    assert partial[0]["score"] == 0.0  # (its name is the function's, its one argument wrong)


async def test_an_empty_string_matches_the_optional_mark_only_for_a_string_argument(
    client: httpx.AsyncClient,
) -> None:
    """ "" in a possible answer's list marks the argument optional; BFCL's checker type-checks a given value
    against the parameter's type first, so a "" given passes only for a string parameter (whose listed
    strings "" is among) and fails for an integer, float, boolean, array or object one. The reward matched
    "" to the mark whatever the type, so a model writing n="" for an integer scored 1. The type is read from
    the listed values (the first that is not "" or null, as BFCL's get_possible_answer_type reads it; a
    possible answer carries no declared type): a list of them that says none ("" alone, or null and "")
    still takes "". An array parameter takes [] for the mark, as BFCL's list checker reads "" (an empty
    list among its standardised answers)."""
    reference = [
        {
            "f": {
                "n": [5, ""],
                "ratio": [2.5, ""],
                "flag": [True, ""],
                "tags": [["a"], ""],
                "point": [{"x": [1]}, ""],
                "unit": ["celsius", ""],
                "note": [""],
                "limit": [None, ""],
            }
        }
    ]
    cases = [
        ({"n": ""}, 0.0),
        ({"ratio": ""}, 0.0),
        ({"flag": ""}, 0.0),
        ({"tags": ""}, 0.0),
        ({"point": ""}, 0.0),
        ({"unit": ""}, 1.0),
        ({"unit": " - "}, 1.0),  # (standardised: nothing left, as "" is)
        ({"note": ""}, 1.0),  # (no type listed)
        ({"limit": ""}, 1.0),  # (null says no type)
        ({"tags": []}, 1.0),
        ({"n": 5, "tags": ["a"], "unit": "Celsius"}, 1.0),
        ({}, 1.0),
    ]
    items = [{"response": hermes(call("f", **args)), "reference": reference} for args, _ in cases]
    results = await score(client, items)
    assert [r["score"] for r in results] == [want for _, want in cases], results
    # (inside an object BFCL's dict checker compares without a type check: "" is the optional key's mark)
    nested = [{"g": {"point": [{"x": [1], "label": [3, ""]}]}}]
    inner = await score(
        client, [{"response": hermes(call("g", point={"x": 1, "label": ""})), "reference": nested}]
    )
    assert inner[0]["score"] == 1.0


async def test_a_float_is_no_value_of_an_integer_argument(client: httpx.AsyncClient) -> None:
    """BFCL's checker type-checks a given argument against the parameter's type before its value: a float
    (5.0) for an integer parameter is a type error, an integer for a float one is read as that float
    (Python's int-to-float). The reward compared numbers as values, so 5.0 for an argument listed [5]
    scored 1. The type is the listed values' (BFCL v4's possible answers list integers for integer
    parameters: about 2,000 such arguments, and only two float ones listed [0]); an array's items are
    checked so too (BFCL's nested type check), the values inside an object not (BFCL's dict checker
    compares them with ==)."""
    reference = [
        {
            "f": {
                "n": [5, ""],
                "ratio": [2.0, 2.5],
                "ids": [[1, 2]],
                "point": [{"x": [1], "y": [2.5, ""]}, ""],
            }
        }
    ]
    cases = [
        ({"n": 5, "ratio": 2, "ids": [1, 2]}, 1.0),  # an integer for a float: that float
        ({"n": 5.0, "ratio": 2, "ids": [1, 2]}, 0.0),
        ({"n": 5, "ratio": 2.5, "ids": [1.0, 2]}, 0.0),
        ({"n": 5, "ratio": 2.5, "ids": [1, 2], "point": {"x": 1.0}}, 1.0),  # (inside an object: ==)
    ]
    items = [{"response": hermes(call("f", **args)), "reference": reference} for args, _ in cases]
    items.append({"response": "[f(n=5.0, ratio=2.0, ids=[1, 2])]", "reference": reference})
    results = await score(client, items)
    assert [r["score"] for r in results] == [want for _, want in cases] + [0.0], results
    partial = await score(client, items[1:2], mode="partial")
    assert partial[0]["score"] == pytest.approx(2 / 3)


async def test_bfcl_numbers_compare_exactly_unless_a_tolerance_is_set(client: httpx.AsyncClient) -> None:
    """BFCL's checker compares a number with ``==`` (an integer for a float its float: 2 = 2.0). The
    reward's default float_tolerance, 1e-6, applied under reference_format bfcl too, so 2.5000001 for a
    listed 2.5 scored 1 where BFCL finds it wrong. Unset, bfcl compares numbers exactly; a tolerance set
    applies; the calls format keeps its default 1e-6."""
    reference = [{"f": {"x": [2.5], "n": [2.0, ""]}}]
    near = hermes(call("f", x=2.5000001))
    cases = [
        (near, 0.0),
        (hermes(call("f", x=2.5)), 1.0),
        (hermes(call("f", x=2.5, n=2)), 1.0),  # (an integer for a float: that float)
        (hermes(call("f", x=2.5, n=2.0000001)), 0.0),
    ]
    items = [{"response": r, "reference": reference} for r, _ in cases]
    results = await score(client, items)
    assert [r["score"] for r in results] == [want for _, want in cases], results
    tolerant = await score(client, items[:1], float_tolerance=1e-6)
    assert tolerant[0]["score"] == 1.0
    calls = await score(client, [{"response": near, "reference": call("f", x=2.5)}], reference_format="calls")
    assert calls[0]["score"] == 1.0


async def test_an_argument_listing_no_value_is_satisfied_by_none(client: httpx.AsyncClient) -> None:
    """Two of BFCL v4's possible answers list an argument with no value, []. Such a reference was
    parse_error (invalid). BFCL's checker reads it: a value given is in no list, and the argument left out
    is not optional ("" is not among its values), so no call matches it. Read so: 0 whatever the call, and
    in partial mode the argument a required key never matched."""
    reference = [{"f": {"x": [1], "y": []}}]
    responses = [
        hermes(call("f", x=1)),
        hermes(call("f", x=1, y="")),
        hermes(call("f", x=1, y=[])),
        hermes(call("f", x=1, y=None)),
    ]
    items = [{"response": r, "reference": reference} for r in responses]
    results = await score(client, items)
    assert [(r["valid"], r["score"]) for r in results] == [(True, 0.0)] * 4, results
    partial = await score(client, items[:2], mode="partial")
    assert [r["score"] for r in partial] == pytest.approx([1 / 2, 1 / 2])
    assert bfcl_reference(reference) is not None


async def test_values_inside_an_object_compare_as_python_does(client: httpx.AsyncClient) -> None:
    """BFCL's dict checker compares each value of an object argument with Python's == against the key's
    listed values (a string standardised first): true equals 1 and 1.0, and a list or object inside is
    compared as it is (its strings exact, an inner object's values not read as lists of acceptable ones).
    The reward compared them as JSON values (true never 1) and standardised and unpacked deeper, so BFCL's
    right answers scored 0 and its wrong ones 1. An argument's own value keeps BFCL's type check."""
    reference = [
        {
            "f": {
                "opts": [
                    {"verbose": [True], "level": [1, ""], "tags": [["a", "B"], ""], "inner": [{"k": [1]}, ""]}
                ]
            },
        }
    ]
    cases = [
        ({"verbose": 1}, 1.0),  # (True == 1)
        ({"verbose": 1.0, "level": True}, 1.0),
        ({"verbose": True, "tags": ["a", "B"]}, 1.0),
        ({"verbose": True, "tags": ["a", "b"]}, 0.0),  # (a list inside: its strings exact)
        ({"verbose": True, "inner": {"k": [1]}}, 1.0),
        ({"verbose": True, "inner": {"k": 1}}, 0.0),  # ({"k": 1} == {"k": [1]} is false)
        ({"verbose": 2}, 0.0),
        ({"verbose": "true"}, 0.0),
    ]
    items = [{"response": hermes(call("f", opts=opts)), "reference": reference} for opts, _ in cases]
    items.append({"response": hermes(call("g", flag=1)), "reference": [{"g": {"flag": [True]}}]})
    results = await score(client, items)
    assert [r["score"] for r in results] == [want for _, want in cases] + [0.0], results


async def test_parallel_calls_are_paired_in_bfcl_s_order(client: httpx.AsyncClient) -> None:
    """BFCL's parallel checker takes each possible answer's call in turn and pairs it with the first
    model call not yet paired that it accepts: where a call the first reference call accepts is also the
    only one a later one accepts, BFCL fails the item though another pairing matches them all. The reward
    took the best pairing, so it scored 1 what BFCL scores 0. Now paired as BFCL pairs them (the calls
    left paired for the best credit in partial mode)."""
    reference = [{"get_weather": {"city": ["Paris", "Tokyo"]}}, {"get_weather": {"city": ["Paris"]}}]
    paris_first = hermes(call("get_weather", city="Paris"), call("get_weather", city="Tokyo"))
    tokyo_first = hermes(call("get_weather", city="Tokyo"), call("get_weather", city="Paris"))
    items = [{"response": r, "reference": reference} for r in (paris_first, tokyo_first)]
    results = await score(client, items)
    assert [(r["score"], r["components"]["exact"]) for r in results] == [(0.0, 0.0), (1.0, 1.0)], results
    partial = await score(client, items, mode="partial")
    assert [r["score"] for r in partial] == pytest.approx([1 / 2, 1.0])


async def test_an_integer_item_is_no_value_of_an_array_listed_with_floats(client: httpx.AsyncClient) -> None:
    """BFCL reads an integer given for a float argument as that float, but its type check of an array's
    items does no such conversion: [2, 3.5] for a listed [2.0, 3.5] is a type error. The reward compared
    the items as numbers (2 = 2.0) and scored it 1. An array whose listed items are integers, or one
    listed both ways, still takes integers."""
    reference = [{"f": {"xs": [[2.0, 3.5]], "ns": [[1, 2], ""], "ys": [[1.5], [2], ""]}}]
    cases = [
        ({"xs": [2.0, 3.5]}, 1.0),
        ({"xs": [2, 3.5]}, 0.0),
        ({"xs": [2.0, 3.5], "ns": [1, 2]}, 1.0),
        ({"xs": [2.0, 3.5], "ys": [2]}, 1.0),  # (one listed array's items are integers)
        ({"xs": [2.0, 3.5], "ys": []}, 1.0),
    ]
    items = [{"response": hermes(call("f", **args)), "reference": reference} for args, _ in cases]
    results = await score(client, items)
    assert [r["score"] for r in results] == [want for _, want in cases], results


async def test_an_array_in_an_array_compares_as_python_does(client: httpx.AsyncClient) -> None:
    """BFCL's list checker standardises an array argument's own strings and compares the rest of each
    item with Python's == (its type check goes one level deep): an array that is an item is compared as
    it is, its strings exact and true = 1. The reward standardised and type-checked at every depth, so
    ["a", "b"] for a listed ["a", "B"] inside an array scored 1 and [true] for [1] scored 0."""
    reference = [{"f": {"grid": [[["a", "B"], [1]]], "names": [["Ada Lovelace"], ""]}}]
    cases = [
        ({"grid": [["a", "B"], [1]]}, 1.0),
        ({"grid": [["a", "B"], [True]]}, 1.0),
        ({"grid": [["a", "b"], [1]]}, 0.0),
        ({"grid": [["a", "B"], [1]], "names": ["ada-lovelace"]}, 1.0),  # (the array's own strings)
    ]
    items = [{"response": hermes(call("f", **args)), "reference": reference} for args, _ in cases]
    results = await score(client, items)
    assert [r["score"] for r in results] == [want for _, want in cases], results
