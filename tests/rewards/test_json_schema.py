"""``json_schema``: extraction, schema sources and precedence, validation, and the regex guard."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from reward_calls import score_text
from rewardhub.errors import InvalidRequest
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import ScoreContext
from rewardhub.rewards.json_schema import JsonSchemaReward, extract_json_text, validate_in_worker

REWARD = JsonSchemaReward(runtime=None)  # type: ignore[arg-type]  # text rewards don't use the runtime

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
GOOD = '{"name": "Ada", "age": 36}'


@pytest.mark.parametrize(
    ("response", "extract", "score", "parses"),
    [
        # the whole response is the JSON
        (GOOD, "auto", 1.0, 1.0),
        # surrounding whitespace is ignored
        (f"\n  {GOOD}\n", "whole", 1.0, 1.0),
        # auto takes the ```json block
        (f"Here you go:\n```json\n{GOOD}\n```\nDone.", "auto", 1.0, 1.0),
        # the last ```json block wins (the first is valid, the last is not)
        (f'```json\n{GOOD}\n```\nfixed:\n```json\n{{"name": 1}}\n```', "auto", 0.0, 1.0),
        # fenced mode without a block: format failure
        (GOOD, "fenced", 0.0, 0.0),
        # whole mode does not look inside fences
        (f"```json\n{GOOD}\n```", "whole", 0.0, 0.0),
        # an unclosed block is not a block; auto falls back to the whole text, which is not JSON
        (f"```json\n{GOOD}", "auto", 0.0, 0.0),
        # a block tagged with another language is not the JSON block
        (f"```python\n{GOOD}\n```", "fenced", 0.0, 0.0),
        # not JSON at all
        ("name: Ada", "auto", 0.0, 0.0),
        # NaN is not JSON
        ('{"name": "Ada", "age": NaN}', "auto", 0.0, 0.0),
        # a reasoning model's answer after its thinking, in every mode
        (f"<think>I'll write {{name, age}}</think>\n{GOOD}", "auto", 1.0, 1.0),
        (f"<think>draft</think>{GOOD}", "whole", 1.0, 1.0),
        # a ```json draft in the reasoning is not the answer, the bare JSON after it is
        (f'<think>\n```json\n{{"name": 1}}\n```\n</think>\n{GOOD}', "auto", 1.0, 1.0),
        (f"<think>\n```json\n{GOOD}\n```\n</think>\nno block here", "fenced", 0.0, 0.0),
        # a response cut off in its reasoning (a <think> that never closes) has no answer
        (f"<think>\n```json\n{GOOD}\n```\nor maybe", "auto", 0.0, 0.0),
        (f'```json\n{GOOD}\n```\n<think>\n```json\n{{"name": 1}}\n```\nhmm', "auto", 1.0, 1.0),
    ],
)
async def test_extraction_and_parsing(response: str, extract: str, score: float, parses: float) -> None:
    out = await score_text(REWARD, response, schema=PERSON, extract=extract)
    assert out.score == score
    assert out.components["parses"] == parses
    assert out.reason == (None if score else Reason.FORMAT)


def test_extract_json_text_direct() -> None:
    assert extract_json_text("a\n``` JSON \n[1]\n```\nb", "fenced") == "[1]"
    assert extract_json_text("no block", "fenced") is None


@pytest.mark.parametrize(
    ("doc", "error_path"),
    [
        # wrong type
        ('{"name": "Ada", "age": "36"}', "$.age"),
        # below the minimum
        ('{"name": "Ada", "age": -1}', "$.age"),
        # a required property missing
        ('{"name": "Ada"}', "$"),
        # an extra property
        ('{"name": "Ada", "age": 1, "x": 0}', "$"),
        # the wrong top-level type
        ("[1, 2]", "$"),
    ],
)
async def test_validation_failures(doc: str, error_path: str) -> None:
    out = await score_text(REWARD, doc, schema=PERSON)
    assert (out.score, out.reason) == (0.0, Reason.FORMAT)
    assert out.components == {"parses": 1.0, "valid": 0.0}
    assert out.details["errors"][0].startswith(error_path + ":")


async def test_partial_credit_for_parsing() -> None:
    # parses but fails: 0.5; does not parse: still 0; valid: 1
    assert (await score_text(REWARD, '{"name": 1}', schema=PERSON, partial_credit=True)).score == 0.5
    assert (await score_text(REWARD, "{", schema=PERSON, partial_credit=True)).score == 0.0
    assert (await score_text(REWARD, GOOD, schema=PERSON, partial_credit=True)).score == 1.0


async def test_max_errors_limits_details() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    out = await score_text(REWARD, '["a", "b", "c", "d"]', schema=schema, max_errors=2)
    assert out.details["errors"] == [
        "$[0]: 'a' is not of type 'integer'",
        "$[1]: 'b' is not of type 'integer'",
    ]


@pytest.mark.parametrize(
    ("reference", "score"),
    [
        ({"schema": PERSON}, 1.0),  # the wrapper form
        (PERSON, 1.0),  # the schema object itself
        (json.dumps(PERSON), 1.0),  # a JSON string of the schema
        (json.dumps({"schema": PERSON}), 1.0),  # a JSON string of the wrapper
        ({"schema": {"type": "array"}}, 0.0),  # a schema the response does not satisfy
        ({"schema": json.dumps(PERSON)}, 1.0),  # the wrapper with the schema as JSON text
        ({"schema": json.dumps({"type": "array"})}, 0.0),  # ... which is applied, not ignored
    ],
)
async def test_schema_from_reference(reference: Any, score: float) -> None:
    out = await score_text(REWARD, GOOD, reference)
    assert out.score == score


async def test_config_schema_wins_over_reference() -> None:
    # the reference would accept the object; the config demands an array
    out = await score_text(REWARD, GOOD, {"schema": PERSON}, schema={"type": "array"})
    assert out.score == 0.0
    # and the reference is not even read when the config has a schema
    out = await score_text(REWARD, GOOD, "not a schema", schema=PERSON)
    assert out.score == 1.0


@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        (None, Reason.MISSING_REFERENCE),  # no schema anywhere
        ("{not json", Reason.PARSE_ERROR),  # an unreadable string
        ([1, 2], Reason.PARSE_ERROR),  # a list is no schema
        ({"type": "person"}, Reason.PARSE_ERROR),  # fails the metaschema
        ({"$ref": "https://example.com/person.json"}, Reason.PARSE_ERROR),  # remote refs are never fetched
        ({"$schema": 5}, Reason.PARSE_ERROR),  # malformed $schema (jsonschema raises AttributeError)
        ({"schema": "{not json"}, Reason.PARSE_ERROR),  # the wrapper with unreadable JSON text
        ({"schema": '"object"'}, Reason.PARSE_ERROR),  # the wrapper with JSON text that is no schema
    ],
)
async def test_bad_reference_schema_is_invalid(reference: Any, reason: Reason) -> None:
    out = await score_text(REWARD, GOOD, reference)
    assert (out.score, out.reason) == (None, reason)


@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        # a dataset row whose schema column is empty: the wrapper holds nothing
        ({"schema": None}, Reason.MISSING_REFERENCE),
        ('{"schema": null}', Reason.MISSING_REFERENCE),
        ({"schema": None, "type": "string"}, Reason.MISSING_REFERENCE),
        ({"schema": ""}, Reason.MISSING_REFERENCE),
        ({"schema": " \n"}, Reason.MISSING_REFERENCE),
        ("", Reason.MISSING_REFERENCE),
        # the wrapper holding what is no schema
        ({"schema": 5}, Reason.PARSE_ERROR),
        ({"schema": [PERSON]}, Reason.PARSE_ERROR),
    ],
)
async def test_a_wrapper_without_a_schema_is_not_the_empty_schema(reference: Any, reason: Reason) -> None:
    """A top-level ``schema`` key holding neither an object nor a string (null, a number, a list) was not
    read as the wrapper, so the reference itself was the schema: ``{"schema": null}``, a row whose schema
    is missing, is a schema of one unknown keyword, which every JSON document satisfies (1.0 for any
    response that parses). Found in review. The wrapper is the wrapper whatever it holds (no JSON Schema
    keyword is called ``schema``): nothing in it, or a blank text, is a missing reference, and a number or
    list an unreadable one."""
    out = await score_text(REWARD, GOOD, reference)
    assert (out.score, out.reason) == (None, reason), out


@pytest.mark.parametrize(
    ("schema", "doc", "score"),
    [
        # local $defs references resolve
        (
            {"$defs": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/n"}},
            "[1, 2]",
            1.0,
        ),
        # boolean schemas
        (True, '"anything"', 1.0),
        # patternProperties (run through the guarded engine)
        (
            {"patternProperties": {"^n_": {"type": "integer"}}, "additionalProperties": False},
            '{"n_a": 1}',
            1.0,
        ),
        (
            {"patternProperties": {"^n_": {"type": "integer"}}, "additionalProperties": False},
            '{"n_a": "x"}',
            0.0,
        ),
        ({"patternProperties": {"^n_": {"type": "integer"}}, "additionalProperties": False}, '{"b": 1}', 0.0),
        # additionalProperties as a schema
        ({"properties": {"a": {}}, "additionalProperties": {"type": "string"}}, '{"a": 1, "b": "x"}', 1.0),
        ({"properties": {"a": {}}, "additionalProperties": {"type": "string"}}, '{"a": 1, "b": 2}', 0.0),
        # pattern
        ({"type": "string", "pattern": "^[a-z]+$"}, '"abc"', 1.0),
        ({"type": "string", "pattern": "^[a-z]+$"}, '"ab1"', 0.0),
        # ECMA-262 pattern syntax that Python's re does not read (Unicode classes, named groups)
        ({"type": "string", "pattern": "^\\p{L}+$"}, '"Zoë"', 1.0),
        ({"type": "string", "pattern": "^\\p{L}+$"}, '"Zoë2"', 0.0),
        ({"type": "string", "pattern": "^(?<year>\\d{4})-\\d{2}$"}, '"2024-05"', 1.0),
        ({"patternProperties": {"^\\p{Lu}": {"type": "integer"}}}, '{"Ölf": "x"}', 0.0),
        # a declared older draft: tuple-form items of draft-07
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "integer"}]},
            '["x"]',
            0.0,
        ),
        # 'format' is not asserted by default
        ({"type": "string", "format": "email"}, '"nope"', 1.0),
    ],
)
async def test_schema_features(schema: Any, doc: str, score: float) -> None:
    out = await score_text(REWARD, doc, schema=schema)
    assert out.score == score
    # the same schema from the item's reference
    assert (await score_text(REWARD, doc, {"schema": schema})).score == score


async def test_check_formats() -> None:
    schema = {"type": "string", "format": "email"}
    assert (await score_text(REWARD, '"nope"', schema=schema, check_formats=True)).score == 0.0
    assert (await score_text(REWARD, '"a@b.org"', schema=schema, check_formats=True)).score == 1.0


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "(x+x+)+y"},  # pattern on a value
        {"patternProperties": {"(x+x+)+y": {}}},  # pattern on a key
    ],
)
async def test_hostile_schema_pattern_times_out(schema: dict[str, Any]) -> None:
    doc = json.dumps("x" * 5000) if "pattern" in schema else json.dumps({"x" * 5000: 1})
    # The 0.5 s per-match limit must stop it: not the item's deadline (600 s here), nor the hours the
    # pattern would backtrack. The search runs on this thread, so its CPU time shows how long it ran:
    # a loaded host stretches the wall clock (a 30 s wall bound was once at risk), never this thread's
    # CPU time past the time it actually searched.
    cpu0 = time.thread_time()
    [out] = await REWARD.score(
        [ScoreItem(response=doc)], REWARD.parse_config({"schema": schema}), ScoreContext(deadline_s=600)
    )
    assert (out.score, out.reason) == (None, Reason.TIMEOUT)
    assert time.thread_time() - cpu0 < 3


async def test_many_slow_searches_share_one_budget() -> None:
    """Each search had its own 0.5 s limit and nothing bounded their sum: one document with 60 keys
    under a slow (not catastrophic) patternProperties pattern held the event loop for about 15 s, a
    request of many such items for as long as it liked. Found in review."""
    schema = {"type": "object", "patternProperties": {"^(a|aa)+$": {}}}
    doc = json.dumps({"a" * 29 + f"b{i}": 1 for i in range(60)})  # each search ~0.1-0.3 s, none over 0.5
    cfg = REWARD.parse_config({"schema": schema})
    items = [ScoreItem(response=doc), ScoreItem(response=doc.replace("b", "c"))]
    first, second = await REWARD.score(items, cfg, ScoreContext(deadline_s=5))
    assert (first.score, first.reason) == (None, Reason.TIMEOUT), first
    assert (second.score, second.reason) == (None, Reason.TIMEOUT), second  # the budget is the request's
    # a document whose searches are quick is unaffected
    quick = await score_text(REWARD, json.dumps({"aaaa": 1, "b": 2}), schema=schema)
    assert quick.score == 1.0


_UNEVALUATED = {"patternProperties": {"^\\p{L}+$": {"type": "string"}}, "unevaluatedProperties": False}
_UNEVALUATED_2019 = {"$schema": "https://json-schema.org/draft/2019-09/schema", **_UNEVALUATED}


@pytest.mark.parametrize("schema", [_UNEVALUATED, _UNEVALUATED_2019])
@pytest.mark.parametrize(("doc", "score"), [('{"Zoë": "x"}', 1.0), ('{"Zoë": 1}', 0.0), ('{"k1": "x"}', 0.0)])
async def test_unevaluated_properties_reads_patterns_with_the_guarded_engine(
    schema: dict[str, Any], doc: str, score: float
) -> None:
    """``unevaluatedProperties`` finds the keys a ``patternProperties`` pattern covers with jsonschema's
    own ``re.search``, not the guarded engine: an ECMA-262 pattern (``\\p{L}``) raised ``re.error`` out
    of the reward, failing the whole batch, and a hostile one was never timed. Found in review."""
    cfg = REWARD.parse_config({"schema": schema})
    items = [ScoreItem(response=doc), ScoreItem(response="[]")]
    out, other = await REWARD.score(items, cfg, ScoreContext(deadline_s=5))
    assert out.score == score, out
    assert other.score == 1.0  # the rest of the batch is scored


@pytest.mark.timeout(30)
async def test_pattern_under_unevaluated_properties_runs_in_the_guarded_engine() -> None:
    """The search for evaluated keys ran the pattern with Python's ``re``, untimed, after the guarded
    ``patternProperties`` check had passed: ``^(a+)+$``, which the ``regex`` engine answers at once,
    backtracks exponentially in ``re``, and a 31-character key held the event loop for over a minute
    (this one for good). Found in review. (The timeout is a hang guard: this takes milliseconds.)"""
    schema = {"patternProperties": {"^(a+)+$": {}}, "unevaluatedProperties": False}
    out = await score_text(REWARD, json.dumps({"a" * 5000 + "b": 1}), schema=schema)
    assert (out.score, out.reason) == (0.0, Reason.FORMAT), out
    assert out.details["errors"][0].startswith("$: Unevaluated properties are not allowed")


@pytest.mark.timeout(120)
async def test_unevaluated_properties_of_many_keys_is_linear() -> None:
    """jsonschema's ``unevaluatedProperties`` looked each key up in a list of the evaluated ones:
    quadratic, and 18,000 keys (a response under the inline limit) held the event loop for 2 s, 60,000
    (in a CPU worker) about 20 s. Found in review. (CPU time, bounded at 10 times what it takes here.)"""
    schema = {"additionalProperties": {"type": "integer"}, "unevaluatedProperties": False}
    config = REWARD.parse_config({"schema": schema})
    doc = json.dumps({f"k{i}": i for i in range(60_000)})
    t0 = time.process_time()
    out = validate_in_worker((ScoreItem(response=doc), config))
    spent = time.process_time() - t0
    assert out.score == 1.0, out
    assert spent < 5, spent
    # the keyword's own answers are kept: unevaluated keys listed, each once per error
    both = {"properties": {"a": {}}, "unevaluatedProperties": {"type": "string"}}
    bad = await score_text(REWARD, '{"a": 1, "b": 2, "c": "x", "d": 3}', schema=both)
    assert bad.details["errors"] == [
        "$: Unevaluated properties are not valid under the given schema ('b', 'd' were unevaluated and invalid)"
    ]
    shut = await score_text(
        REWARD, '{"z": 1, "a": 1, "y": 2}', schema={"properties": {"a": {}}, "unevaluatedProperties": False}
    )
    assert shut.details["errors"] == ["$: Unevaluated properties are not allowed ('y', 'z' were unexpected)"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("draft", [None, "https://json-schema.org/draft/2019-09/schema"])
async def test_unevaluated_items_of_a_long_array_is_linear(draft: str | None) -> None:
    """jsonschema's ``unevaluatedItems`` looked each index up in a list of the evaluated ones: quadratic,
    and an array of 60,000 zeros (180 kB, under the inline limit) held the event loop for about 13 s.
    Found in review. (CPU time, bounded at 10 times what it takes here.)"""
    schema: dict[str, Any] = {"items": {"type": "integer"}, "unevaluatedItems": False}
    if draft is not None:
        schema["$schema"] = draft
    doc = json.dumps([0] * 60_000)
    t0 = time.process_time()
    out = await score_text(REWARD, doc, schema=schema)
    spent = time.process_time() - t0
    assert out.score == 1.0, out
    assert spent < 5, spent
    # the keyword's own answer is kept
    tail = {"prefixItems": [{}], "unevaluatedItems": False}
    bad = await score_text(REWARD, "[1, 2, 3]", schema=tail)
    assert bad.details["errors"] == ["$: Unevaluated items are not allowed (2, 3 were unexpected)"]


@pytest.mark.timeout(60)
async def test_a_schema_whose_nesting_explodes_times_out_on_the_event_loop() -> None:
    """``unevaluatedProperties`` re-validates every ``allOf`` branch below it, so each level of nesting
    multiplied the work: 16 levels (a 1 kB schema) took 50 s on an 8-byte response, on the event loop,
    with nothing to stop it (only pattern searches were timed). Found in review. Validation on the loop
    now checks the request's clock at every keyword; past it the items left are ``timeout``. (The
    pytest timeout is a hang guard: the budget is 5 s.)"""
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(18):
        schema = {"allOf": [schema], "unevaluatedProperties": {"type": "integer"}}
    cfg = REWARD.parse_config({"schema": schema})
    items = [ScoreItem(response="{}"), ScoreItem(response='{"a": 1}')]
    first, second = await REWARD.score(items, cfg, ScoreContext(deadline_s=30))
    assert (first.score, first.reason) == (None, Reason.TIMEOUT), first
    assert (second.score, second.reason) == (None, Reason.TIMEOUT), second  # the budget is the request's
    # a few levels are quick, and a new request has its own clock
    shallow: dict[str, Any] = {"type": "object"}
    for _ in range(4):
        shallow = {"allOf": [shallow], "unevaluatedProperties": {"type": "integer"}}
    assert (await score_text(REWARD, '{"a": 1}', schema=shallow)).score == 1.0
    assert (await score_text(REWARD, '{"a": "x"}', schema=shallow)).score == 0.0


@pytest.mark.parametrize(
    "config",
    [
        {"schema": {"type": "person"}},  # fails the metaschema
        {"schema": {"type": "string", "pattern": "("}},  # a pattern that does not compile
        {"schema": [1]},  # not a schema
        {"schema": {"$schema": 5}},  # malformed $schema
        {"extract": "xml"},  # unknown extraction mode
        {"max_errors": 21},  # over the limit
        {"json_schema": {}},  # the field is spelled 'schema' on the wire
    ],
)
def test_bad_config_is_rejected(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        REWARD.parse_config(config)


@pytest.mark.parametrize(
    ("doc", "score"),
    [
        ("[1, 2, 3]", 1.0),
        ("[1, 2, 1]", 0.0),
        ("[1, 1.0]", 0.0),  # equal numbers
        ("[true, 1]", 1.0),  # a boolean is not a number
        ('[false, 0, null, ""]', 1.0),
        ('[{"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1.0}]', 0.0),  # key order does not matter
        ('[{"a": [1, 2]}, {"a": [2, 1]}]', 1.0),  # item order in an array does
        ('[[1, {"x": null}], [1, {"x": null}]]', 0.0),
    ],
)
async def test_unique_items_compares_as_json(doc: str, score: float) -> None:
    assert (await score_text(REWARD, doc, schema={"type": "array", "uniqueItems": True})).score == score
    assert (await score_text(REWARD, doc, schema={"type": "array", "uniqueItems": False})).score == 1.0


@pytest.mark.timeout(30)
async def test_unique_items_of_many_objects_is_linear() -> None:
    """jsonschema's uniqueItems compares every pair of items it cannot sort (objects, arrays), in Python
    on the event loop: 3,000 distinct objects (a 30 kB response) took 8 s, 15,000 about three minutes, the
    whole service stalled. Found in review. (The timeout is a hang guard: this takes milliseconds.)"""
    items = [{"i": i} for i in range(15_000)]  # under 200,000 characters: validated on the loop
    schema = {"type": "array", "uniqueItems": True}
    assert (await score_text(REWARD, json.dumps(items), schema=schema)).score == 1.0
    dup = await score_text(REWARD, json.dumps([*items, {"i": 10.0}]), schema=schema)
    assert dup.score == 0.0 and "items 10 and 15000 are equal" in dup.details["errors"][0]


async def test_big_documents_are_validated_in_the_cpu_workers(client: httpx.AsyncClient) -> None:
    """Validation is pure Python and ran on the event loop whatever the size: a 1 MB array of 250,000
    objects (the largest response a request may carry) took 1.4 s, a 64 MB request of them about a
    minute and a half, the whole service stalled and no deadline applied. Found in review. A big batch now runs in the CPU workers, each item under the
    request's deadline; a small one is still scored inline, with the same results."""
    schema = {"type": "array", "items": {"type": "object"}}
    small = [{"response": "[{}, {}]"}, {"response": "[{}, 1]"}, {"response": "nope"}]
    big = {"response": json.dumps([{} for _ in range(250_000)])}

    async def run(items: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
        body = {"reward": {"name": "json_schema", "config": {"schema": schema}}, "items": items}
        r = await client.post("/v1/score", json={**body, "options": {"use_cache": False, **options}})
        assert r.status_code == 200, r.text
        results: list[dict[str, Any]] = r.json()["results"]
        return results

    inline = await run(small)
    assert [(r["score"], r["reason"]) for r in inline] == [(1.0, None), (0.0, "format"), (0.0, "format")]
    padding = {"response": "[" + " " * 300_000 + "]"}  # makes the batch big: the same items in the workers
    in_workers = await run([*small, padding])
    assert [(r["score"], r["reason"], r["components"]) for r in in_workers[:3]] == [
        (r["score"], r["reason"], r["components"]) for r in inline
    ]
    assert in_workers[3]["score"] == 1.0
    late = await run([big, big], timeout_s=0.2)
    assert [(r["valid"], r["reason"]) for r in late] == [(False, "timeout")] * 2, late


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server that serves ``{"type": "integer"}`` at every path: (its URL, the paths asked)."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = json.dumps({"type": "integer"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_remote_references_are_never_fetched(
    client: httpx.AsyncClient, schema_server: tuple[str, list[str]]
) -> None:
    """jsonschema's default registry retrieves an unknown ``$ref`` with ``urllib`` (deprecated, with a
    warning): a caller's schema made the service GET any URL it could reach (cloud metadata, internal
    services), blocking the event loop for as long as the server took, with no timeout, and validated
    against what came back. Found in review: the test of it only passed because example.com was out of
    reach. Nothing is asked now, wherever the schema comes from and whatever keyword holds the URL: a
    reference's remote reference is ``parse_error`` (on the event loop or in the CPU workers), and a
    config's is refused as the request is read."""
    url, asked = schema_server
    padding = " " * 250_000  # over the inline limit: validated in the CPU workers

    async def run(items: list[dict[str, Any]], **config: Any) -> list[dict[str, Any]]:
        body = {"reward": {"name": "json_schema", "config": config}, "items": items}
        r = await client.post("/v1/score", json={**body, "options": {"use_cache": False}})
        assert r.status_code == 200, r.text
        results: list[dict[str, Any]] = r.json()["results"]
        return results

    body = {"reward": {"name": "json_schema", "config": {"schema": {"$ref": f"{url}/config.json"}}}}
    r = await client.post("/v1/score", json={**body, "items": [{"response": "5"}]})
    assert r.status_code == 422, r.text
    assert "remote references are never fetched" in r.json()["error"]["message"]
    results = [
        *await run(
            [
                {"response": "5", "reference": {"$ref": f"{url}/reference.json"}},
                {"response": "5", "reference": {"$id": f"{url}/root/", "$ref": "relative.json"}},
                {"response": "5", "reference": {"$dynamicRef": f"{url}/dynamic.json"}},
                {
                    "response": "5",
                    "reference": {"$schema": "http://json-schema.org/draft-04/schema#", "$ref": f"{url}/d4"},
                },
            ]
        ),
        *await run([{"response": "5" + padding, "reference": {"$ref": f"{url}/worker.json"}}]),
    ]
    assert asked == []
    assert [(r["score"], r["reason"]) for r in results] == [(None, "parse_error")] * 5, results
    assert all("Unresolvable" in r["details"]["message"] for r in results), results
    # the metaschemas jsonschema ships with still resolve, without the network
    [meta] = await run(
        [{"response": '{"type": "string"}'}], schema={"$ref": "http://json-schema.org/draft-07/schema#"}
    )
    assert (meta["score"], asked) == (1.0, [])


async def test_many_distinct_reference_schemas_are_checked_in_the_cpu_workers(
    client: httpx.AsyncClient,
) -> None:
    """Checking a schema against its metaschema costs about what validating a document of its size does
    (4.6 ms for a 3.4 kB one), but only the responses counted towards the inline limit: a batch of short
    responses, each with its own schema in the reference (per-item structured-output schemas), was
    checked on the event loop whatever the schemas' total, 4,096 such items holding the whole service for
    about 19 s, out of reach of the inline validation clock. Found in review. Each distinct schema now
    counts too, so such a batch runs in the CPU workers; one schema shared by the batch is counted once and
    stays inline."""
    pool = client.app.state.runtime.cpu_pool  # type: ignore[attr-defined]

    def done() -> int:  # items the CPU workers have scored (each slot keeps its own tally)
        return sum(slot.items_done for slot in pool._slots)

    def schema(i: int) -> dict[str, Any]:
        fields = {
            f"field_{j}_{i}": {"type": "integer", "description": "a field of the item " * 3}
            for j in range(25)
        }
        return {"type": "object", "properties": fields, "required": [f"field_0_{i}"]}

    distinct = [{"response": f'{{"field_0_{i}": {i}}}', "reference": schema(i)} for i in range(80)]
    shared = [{"response": f'{{"field_0_0": {i}}}', "reference": schema(0)} for i in range(80)]
    assert sum(len(json.dumps(item["reference"])) for item in distinct) > 200_000
    for items, in_workers in ((distinct, True), (shared, False)):
        before = done()
        body = {"reward": "json_schema", "items": [*items, {**items[0], "response": "[]"}]}
        r = await client.post("/v1/score", json={**body, "options": {"use_cache": False}})
        assert r.status_code == 200, r.text[:500]
        assert [res["score"] for res in r.json()["results"]] == [1.0] * len(items) + [0.0]
        assert done() - before == (len(items) + 1 if in_workers else 0)


async def test_a_config_schema_is_checked_once_not_on_every_request(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config's schema was checked against its metaschema as each request's config was read, and again
    when its validator was built: 52 ms of the event loop per request for a 25 kB schema (seconds for a
    large one), for a schema a training run sends unchanged with every batch, so the loop saturated near
    20 such requests a second. Found in review. The check is now the validator's own, built once per
    distinct schema and cached, and a request with the same schema checks nothing."""
    checked: list[Any] = []
    check_schema = Draft202012Validator.check_schema

    def counting(schema: Any, format_checker: Any = None) -> None:
        checked.append(schema)
        check_schema(schema, format_checker=format_checker)  # type: ignore[call-arg]

    monkeypatch.setattr(Draft202012Validator, "check_schema", counting)
    fields = {f"a_field_{i}": {"type": "integer", "description": "one field of it"} for i in range(300)}
    schema = {"type": "object", "properties": fields, "required": ["a_field_0"]}
    for i in range(3):
        body = {
            "reward": {"name": "json_schema", "config": {"schema": schema}},
            "items": [{"response": f'{{"a_field_0": {i}}}'}],
        }
        r = await client.post("/v1/score", json={**body, "options": {"use_cache": False}})
        assert r.status_code == 200, r.text[:500]
        assert r.json()["results"][0]["score"] == 1.0
    assert checked == [schema]
    # a bad one is still refused as the request is read
    bad = {
        "reward": {"name": "json_schema", "config": {"schema": {**schema, "required": 5}}},
        "items": [{"response": "{}"}],
    }
    r = await client.post("/v1/score", json=bad)
    assert r.status_code == 422 and "not a valid JSON Schema" in r.text, r.text[:500]


@pytest.mark.parametrize(
    ("schema", "refused"),
    [
        ({"$ref": "#/$defs/person"}, "'#/$defs/person' cannot be resolved"),
        ({"properties": {"a": {"items": {"$ref": "#/$defs/nope"}}}}, "'#/$defs/nope' cannot be resolved"),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "items": {"$ref": "#/definitions/x"}},
            "'#/definitions/x'",
        ),
        ({"$ref": "https://example.com/person.json"}, "remote references are never fetched"),
        ({"$dynamicRef": "urn:example:elsewhere"}, "$dynamicRef 'urn:example:elsewhere' cannot be resolved"),
        # references that resolve are fine: local pointers and anchors, an $id's relative one, a metaschema,
        # and '$ref' as a property name or inside a value
        ({"$defs": {"p": PERSON}, "$ref": "#/$defs/p"}, None),
        ({"$defs": {"p": {"$anchor": "person", **PERSON}}, "$ref": "#person"}, None),
        (
            {
                "$id": "https://example.com/root",
                "$defs": {"p": {"$id": "p.json", **PERSON}},
                "$ref": "p.json",
            },
            None,
        ),
        ({"$ref": "http://json-schema.org/draft-07/schema#"}, None),
        ({"properties": {"$ref": {"type": "string"}}, "const": {"$ref": "https://example.com"}}, None),
        ({"$dynamicAnchor": "node", "items": {"$dynamicRef": "#node"}}, None),
    ],
)
async def test_a_config_schema_reference_that_cannot_resolve_is_a_422(
    client: httpx.AsyncClient, schema: dict[str, Any], refused: str | None
) -> None:
    """Validation resolves a ``$ref`` only when it reaches it, so a config schema's reference to nothing (a
    typo in a pointer, a remote URL, which is never fetched) was accepted and every item came back
    ``parse_error``: a training run's whole batch masked, step after step, for a mistake in the config.
    Found in review. It is a 422 naming the reference now, as the config's other schema errors are."""
    body = {"reward": {"name": "json_schema", "config": {"schema": schema}}, "items": [{"response": GOOD}]}
    r = await client.post("/v1/score", json=body)
    if refused is None:
        assert r.status_code == 200, r.text
        assert r.json()["results"][0]["reason"] in (None, "format"), r.text
    else:
        assert r.status_code == 422, r.text
        assert refused in r.json()["error"]["message"], r.text


async def test_format_regex_of_a_response_is_checked_with_the_guarded_engine(
    client: httpx.AsyncClient,
) -> None:
    """With ``check_formats``, ``format: regex`` compiled the document's string with Python's ``re``: a
    response's ``"a{4294967295}"`` raised OverflowError out of the reward, every item of the request
    ``internal_error``, and 3,000 case-insensitive classes (18 kB) took ``re`` 11 s to compile on the
    event loop, the items after it ``timeout``. Found in review. The string is compiled by the ``regex``
    engine now (as the schema's own patterns are), uncached and bounded in size, without its full case
    folding (``(?f)``: neither ECMA-262's nor ``re``'s, and as slow); what does not compile is a format
    failure of that item alone."""
    classes = "(?i)" + "[\u0100-\uffff]" * 3000
    cases = [
        ("a{4294967295}", 0.0),  # too big a repeat: not a regex (re raised OverflowError)
        (classes, 1.0),  # a regex, compiled in milliseconds
        ("(?fi)[\u0100-\uffff]", 0.0),  # full case folding: not a regex of ECMA-262 or re
        ("(?i:(?-f:x))", 0.0),
        ("(?<name>a)\\p{L}+", 1.0),  # ECMA-262 syntax re rejects
        ("(x", 0.0),
        ("(?#f)x(?i:y)", 1.0),  # an 'f' in a comment is no flag
        ("^[a-z]+$", 1.0),
    ]
    body = {
        "reward": {"name": "json_schema", "config": {"schema": {"format": "regex"}, "check_formats": True}},
        "items": [{"response": json.dumps(text)} for text, _ in cases],
        "options": {"use_cache": False},
    }
    r = await client.post("/v1/score", json=body)
    assert r.status_code == 200, r.text[:500]
    results = r.json()["results"]
    assert [(res["score"], res["reason"]) for res in results] == [
        (score, None if score else "format") for _, score in cases
    ], results


@pytest.mark.parametrize(
    ("schema", "value", "score"),
    [
        ({"format": "date-time"}, "2024-02-29T23:59:59.5+05:30", 1.0),
        ({"format": "date-time"}, "2024-02-29t23:59:59z", 1.0),  # RFC 3339 letters in either case
        ({"format": "date-time"}, "2023-02-29T12:00:00Z", 0.0),  # no such day
        ({"format": "date-time"}, "2024-01-01T24:00:00Z", 0.0),
        ({"format": "date-time"}, "2024-01-01T12:00:00", 0.0),  # no offset
        ({"format": "date-time"}, "2024-01-01", 0.0),
        ({"format": "date-time"}, "yesterday at noon", 0.0),
        ({"format": "date-time"}, "2024-01-01T12:00:00Z\n", 0.0),
        ({"format": "date-time"}, 5, 1.0),  # a format asserts nothing of a non-string
        ({"format": "time"}, "08:30:00Z", 1.0),
        ({"format": "time"}, "08:30:00.25-02:00", 1.0),
        ({"format": "time"}, "8:30", 0.0),
        ({"format": "time"}, "25:00:00Z", 0.0),
        # draft 4 has no time format: not asserted
        ({"$schema": "http://json-schema.org/draft-04/schema#", "format": "time"}, "8:30", 1.0),
        ({"$schema": "http://json-schema.org/draft-04/schema#", "format": "date-time"}, "8:30", 0.0),
    ],
)
async def test_check_formats_asserts_date_time_and_time(
    schema: dict[str, Any], value: Any, score: float
) -> None:
    """``date-time`` and ``time`` are asserted by jsonschema only with its optional rfc3339-validator, which
    is not installed: with ``check_formats`` they passed anything ("yesterday at noon" was a date-time),
    though structured outputs carry timestamps more than any other format. Found in review. They are
    checked as RFC 3339 (the same rules as that package) when jsonschema has no checker of its own."""
    out = await score_text(REWARD, json.dumps(value), schema=schema, check_formats=True)
    assert (out.score, out.reason) == (score, None if score else Reason.FORMAT), out


@pytest.mark.parametrize(
    ("value", "score"),
    [
        ("2eb8aa08-aa98-11ea-b4aa-73b441d16380", 1.0),
        ("2EB8AA08-AA98-11EA-B4AA-73B441D16380", 1.0),
        # Python's UUID() reads any Unicode digit as a hex digit: full-width ones passed (1.0)
        ("２eb8aa08-aa98-11ea-b4aa-73b441d16380", 0.0),
        ("2eb8aa08-aa98-11ea-b4aa-73b441d1638٠", 0.0),
        # ... and drops every hyphen before the positions were checked: one too many passed
        ("2eb8aa08-aa98-11ea-b4aa-73b4-41d16380", 0.0),
        ("2eb8aa08aa9811eab4aa73b441d16380", 0.0),
        ("{2eb8aa08-aa98-11ea-b4aa-73b441d16380}", 0.0),
    ],
)
async def test_check_formats_reads_a_uuid_as_rfc_4122_writes_it(value: str, score: float) -> None:
    """``format: uuid`` was jsonschema's check, Python's ``UUID()`` and the hyphens' positions: ``UUID()``
    reads full-width and other Unicode digits as hex digits and drops every hyphen, so a uuid with a
    full-width digit or an extra hyphen passed, where RFC 4122's string form (and an ECMA validator) takes
    8-4-4-4-12 ASCII hex digits only. Found in review."""
    schema = {"type": "string", "format": "uuid"}
    out = await score_text(REWARD, json.dumps(value), schema=schema, check_formats=True)
    assert out.score == score, out


async def test_a_config_schema_over_the_limit_is_a_422_and_works_from_the_references(
    client: httpx.AsyncClient,
) -> None:
    """A config's schema is checked against its metaschema as the request is read, on the event loop, and
    its size was not bounded: a first-seen schema of a few MB held the service for seconds per MB. Over
    200,000 characters it is a 422 naming the way out, and the same schema in the items' references (whose
    checks go to the CPU workers with the batch) still scores."""
    fields = {f"field_{i:05d}": {"type": "integer", "description": "x" * 40} for i in range(3_000)}
    schema = {"type": "object", "properties": fields, "required": ["field_00000"]}
    assert len(json.dumps(schema)) > 200_000
    body = {"reward": {"name": "json_schema", "config": {"schema": schema}}, "items": [{"response": "{}"}]}
    r = await client.post("/v1/score", json=body)
    assert r.status_code == 422 and "in each item's reference" in r.text, r.text[:500]
    items = [{"response": '{"field_00000": 1}', "reference": {"schema": schema}}]
    r = await client.post("/v1/score", json={"reward": "json_schema", "items": items})
    assert r.status_code == 200, r.text[:500]
    assert r.json()["results"][0]["score"] == 1.0


@pytest.mark.parametrize("pattern", ["(?V1)[[a-z]--[aeiou]]+", "^(?V1)x$", "(?V0)(?V1)a"])
async def test_version1_schema_pattern_is_a_bad_pattern_like_any_other(pattern: str) -> None:
    """A schema ``pattern`` turning on the ``regex`` engine's version 1 (``(?V1)``, no ECMA-262 syntax) was
    refused with the engine's raw ``ValueError`` text ("not a valid JSON Schema: ValueError: VERSION0 and
    VERSION1 flags are mutually incompatible"), where a pattern that does not compile says it is not a
    regex. Found in review. Now both read the same: in the config (422) and in a reference (parse_error)."""
    schema = {"type": "string", "pattern": pattern}
    with pytest.raises(InvalidRequest) as bad:
        REWARD.parse_config({"schema": schema})
    message = str(bad.value)
    assert f"{pattern!r} is not a 'regex'" in message and "VERSION" not in message, message
    out = await score_text(REWARD, '"abc"', {"schema": schema})
    assert (out.score, out.reason) == (None, Reason.PARSE_ERROR), out
    assert out.details["message"] == f"not a valid JSON Schema: {pattern!r} is not a 'regex'", out
    # the same message as a pattern that does not compile
    broken = await score_text(REWARD, '"abc"', {"schema": {"type": "string", "pattern": "("}})
    assert broken.details["message"] == "not a valid JSON Schema: '(' is not a 'regex'", broken


@pytest.mark.parametrize(
    ("pattern", "doc", "score"),
    [
        # \d is [0-9] in ECMA-262: full-width and Arabic-Indic digits are no digits (both were 1.0)
        ("^\\d{5}$", '"12345"', 1.0),
        ("^\\d{5}$", '"１２３４５"', 0.0),
        ("^\\d{5}$", '"١٢٣٤٥"', 0.0),
        ("^\\D$", '"１"', 1.0),
        ("^[^\\d]+$", '"１２"', 1.0),
        # \w is [A-Za-z0-9_]: an identifier pattern does not take "café" or "東京"
        ("^\\w+$", '"abc_1"', 1.0),
        ("^\\w+$", '"café"', 0.0),
        ("^[\\w.-]+$", '"a.b-c"', 1.0),
        ("^[\\w.-]+$", '"東京"', 0.0),
        ("^\\W$", '"é"', 1.0),
        # \b is a boundary of those word characters: "é" is none, so "écat" has one before "cat"
        ("\\bcat\\b", '"écat"', 1.0),
        ("\\bcat\\b", '"scat"', 0.0),
        ("\\Bcat", '"écat"', 0.0),
        # Unicode properties stay Unicode, escapes and comments are read as written
        ("^\\p{L}+\\d$", '"Zoë1"', 1.0),
        ("^\\\\d$", '"\\\\d"', 1.0),
        ("^[\\\\d]+$", '"d\\\\"', 1.0),
        ("^(?#\\d)a$", '"a"', 1.0),
        # \s is ECMA-262's white space: the byte order mark is one, NEL (U+0085) none (both the other
        # way round in the engine's Unicode \s)
        ("^\\s$", '"\\ufeff"', 1.0),
        ("^\\s$", '"\\u0085"', 0.0),
        ("^[\\s]$", '"\\ufeff"', 1.0),
        ("^[a\\s]+$", '"a\\u0085"', 0.0),
        ("^\\S$", '"\\u0085"', 1.0),
        ("^\\S$", '"\\ufeff"', 0.0),
        ("^\\s+$", '" \\t\\u3000\\u00a0"', 1.0),
    ],
)
async def test_schema_pattern_classes_are_ecma_262s(pattern: str, doc: str, score: float) -> None:
    """JSON Schema patterns are ECMA-262 regular expressions, whose ``\\d``, ``\\w`` and ``\\b`` are ASCII
    (``\\d`` is ``[0-9]``, even with the ``u`` flag), as the JSON Schema test suite's ecmascript-regex cases
    check; the engine's are Unicode, so a five-digit pattern took full-width "１２３４５" and ``^\\w+$``
    took "café" (1.0, where an ECMA validator, the one a schema's consumer runs, rejects them). Found in
    review."""
    schema = {"type": "string", "pattern": pattern}
    assert (await score_text(REWARD, doc, schema=schema)).score == score
    key = {"type": "object", "patternProperties": {pattern: {"type": "integer"}}}
    keyed = await score_text(REWARD, f'{{{doc}: "x"}}', schema=key)  # a matched key's value must be 1
    assert keyed.score == 1.0 - score, keyed


async def test_a_schema_pattern_on_a_long_string_is_bounded_in_memory(client: httpx.AsyncClient) -> None:
    """A schema's pattern comes from the caller as the regex reward's does, and a repeated group keeps
    some 80 bytes a character for each group: ten nested groups on a 190 kB string grew the service by
    146 MB on the event loop, and (.)* on a 1 MB string grew a worker by 163 MB, uncapped. Such a match
    (characters x (groups + 1) over 262,144) runs in a CPU worker under the regex reward's 64 MB cap,
    resource_limit past it; a pattern that keeps little still validates there."""

    async def run(pattern: str, text: str) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
        body = {
            "reward": {"name": "json_schema", "config": {"schema": schema}},
            "items": [{"response": json.dumps({"s": text})}],
            "options": {"use_cache": False},
        }
        r = await client.post("/v1/score", json=body)
        assert r.status_code == 200, r.text
        result: dict[str, Any] = r.json()["results"][0]
        return result

    nested = "(" * 10 + "." + ")" * 10 + "*"
    for pattern, size in ((nested, 150_000), ("(.)*", 1_000_000)):
        r = await run(pattern, "a" * size)
        assert (r["valid"], r["reason"]) == (False, "resource_limit"), r
        assert "64 MB" in r["details"]["message"]
    r = await run("^(a)+$", "a" * 150_000)  # in a worker too, within the cap
    assert (r["score"], r["valid"]) == (1.0, True), r
    r = await run("^(a)+$", "a" * 150_000 + "b")
    assert (r["score"], r["reason"]) == (0.0, "format"), r
    r = await run(nested, "a" * 100)  # short: on the event loop, as before
    assert (r["score"], r["valid"]) == (1.0, True), r
