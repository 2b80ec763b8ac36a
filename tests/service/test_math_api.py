"""The `math` reward through the real app: verdicts, invalid items, and the hard per-item deadline."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from rewardhub.runtime.process_pool import _HARD_GRACE_S as HARD_GRACE_S
from waiting import until

TOWER = "2^{2^{2^{2^{2^{2}}}}}"


async def score(c: httpx.AsyncClient, items: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    resp = await c.post("/v1/score", json={"reward": "math", "items": items, "options": options})
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


@pytest.mark.parametrize(
    "response, reference, expected, reason",
    [
        ("So the answer is $\\boxed{\\frac{1}{2}}$.", "0.5", 1.0, None),  # fraction vs decimal
        ("The answer is \\boxed{\\dfrac{\\sqrt{3}}{2}}", "$\\frac{\\sqrt 3}{2}$", 1.0, None),  # needs sympy
        ("The answer is 42.", "\\boxed{42}", 1.0, None),  # answer phrase, boxed gold
        ("\\boxed{x^2+2x+1}", "(x+1)^2", 1.0, None),  # symbolic equivalence
        ("\\boxed{7}", "8", 0.0, None),  # wrong
        ("I have no idea.", "8", 0.0, "no_answer"),  # the model's fault: a valid zero
        # a reasoning model: a box in its thinking is a draft, the answer after </think> counts
        ("<think>Is it \\boxed{7}? No.</think>\nThe answer is 8.", "8", 1.0, None),
        ("<think>\\boxed{8}?</think>\nThe answer is 7.", "8", 0.0, None),
        # cut off in its reasoning (a <think> that never closes): no answer, whatever the draft says
        ("<think>So far \\boxed{8}, but let me check", "8", 0.0, "no_answer"),
        ("<think>a</think>\\boxed{8}\n<think>or \\boxed{7}", "8", 1.0, None),
        # a unit stated on one side only is ignored, in the worker pool too; a constant value is no function
        ("The distance is \\boxed{1000 m}.", "1000", 1.0, None),
        ("\\boxed{1000}", "1000 m", 1.0, None),
        ("\\boxed{1 \\text{ km}}", "1000", 0.0, None),
        ("The answer is \\boxed{f(b) = 5}", "a = 5", 0.0, None),
        # a typeset symbol is a unit (normalisation drops it: the event loop's check read 1000 and 1000), a
        # rate converts, after a label too
        ("\\boxed{1000 \\text{ s}}", "1000 \\text{ m}", 0.0, None),
        ("\\boxed{1 \\text{ h}}", "3600 \\text{ s}", 1.0, None),
        ("The speed is \\boxed{18 km/h}.", "5 m/s", 1.0, None),
        ("\\boxed{t = 3 \\text{ minutes}}", "3 hours", 0.0, None),
        # ... in a list or a tuple too (normalisation dropped the typeset m before the split: 5, 5 hours)
        ("\\boxed{(5 hours, 2)}", "(5 \\text{ m}, 2)", 0.0, None),
        ("\\boxed{5 hours, 2}", "5 \\text{ m}, 2", 0.0, None),
        ("\\boxed{5 meters, 2}", "5 \\text{ m}, 2", 1.0, None),
        # ... and a typeset rate split in two groups is a rate
        ("The speed is \\boxed{18 km/h}.", "5 \\text{ m}/\\text{s}", 1.0, None),
        # a plain symbol's power against a unit's, a tuple's components, an upright x against a unit word
        ("The area is \\boxed{2000000 m^2}.", "2 km^2", 1.0, None),
        ("\\boxed{(60 minutes, 2)}", "(1 hour, 2)", 1.0, None),
        ("\\boxed{5 hours}", "5\\,\\text{x}", 0.0, None),
        # a whole number rounds a decimal gold (on the event loop), an identity on a domain (in a worker:
        # sample points), a typeset d is a day and wk a week
        ("The rate is \\boxed{118\\%}.", "117.95\\%", 1.0, None),
        ("\\boxed{300}", "299.94", 0.0, None),
        ("\\boxed{\\arccos(1 - 2a)}", "2 \\arcsin \\sqrt{a}", 1.0, None),
        ("\\boxed{2\\arctan x}", "\\arcsin\\frac{2x}{1+x^2}", 0.0, None),
        ("It takes \\boxed{5\\,\\text{d}}.", "5 days", 1.0, None),
        ("\\boxed{5 wk}", "5 hours", 0.0, None),
        # years are no days, a differential no unit word, a count noun no hours; months and years convert
        ("\\boxed{5 days}", "5 years", 0.0, None),
        ("\\boxed{1 year}", "12 months", 1.0, None),
        ("\\boxed{5\\,\\mathrm{d}x}", "5", 0.0, None),
        ("\\boxed{3 apples}", "3 hours", 0.0, None),
        ("\\boxed{12 apples}", "12", 1.0, None),
        # a plain l against litres, square and cubic units in words, cents against a dollar amount
        ("\\boxed{3 l}", "3 litres", 1.0, None),
        ("\\boxed{3 l}", "3 m", 0.0, None),
        ("\\boxed{25 m^2}", "25 square meters", 1.0, None),
        ("\\boxed{25 sq cm}", "25 cm^2", 1.0, None),
        ("\\boxed{25 m^3}", "25 cubic meters", 1.0, None),
        ("\\boxed{25 square meters}", "25 m", 0.0, None),
        ("The answer is \\boxed{50 cents}.", "\\$0.50", 1.0, None),
        ("\\boxed{50 cents}", "\\$50", 0.0, None),
        ("\\boxed{60 mph}", "96.56064 km/h", 1.0, None),
        # inches and unit powers in superscript digits, acres, the cent sign, a conversion at the answer's
        # own precision (math 1.1.16)
        ("The volume is \\boxed{8 \\text{ in}^3}.", "8 cubic inches", 1.0, None),
        ("\\boxed{8 cubic inches}", "8 in^3", 1.0, None),
        ("\\boxed{8 ft²}", "8 square feet", 1.0, None),
        ("\\boxed{8 \\text{ in}^2}", "8 cubic inches", 0.0, None),
        ("\\boxed{43560 ft^2}", "1 acre", 1.0, None),
        ("It costs \\boxed{50¢}.", "50 cents", 1.0, None),
        ("\\boxed{50¢}", "\\$0.50", 1.0, None),
        ("\\boxed{50¢}", "\\$50", 0.0, None),
        ("\\boxed{(\\$3, \\$5)}", "(3,5)", 1.0, None),
        ("\\boxed{\\$0.50, \\$0.20}", "50 cents, 20 cents", 1.0, None),
        ("\\boxed{\\$50, 2}", "50 cents, 2", 0.0, None),
        ("\\boxed{96.6 km/h}", "60 mph", 1.0, None),
        ("\\boxed{60 mph}", "96.56 km/h", 1.0, None),
        ("\\boxed{97 km/h}", "60 mph", 0.0, None),
        ("\\boxed{90 km/h}", "60 mph", 0.0, None),
        # a rate's units as a fraction, a dollar amount in thousands groups in a list (math 1.1.17: both 0)
        ("\\boxed{96.56 \\frac{\\text{km}}{\\text{h}}}", "60 mph", 1.0, None),
        ("\\boxed{96.56 \\frac{\\text{km}}{\\text{s}}}", "96.56 km/h", 0.0, None),
        ("\\boxed{\\frac{96}{2}}", "48", 1.0, None),
        ("\\boxed{\\$1,200, \\$5}", "1200, 5", 1.0, None),
        ("\\boxed{1,200, 5}", "1200, 5", 0.0, None),
        # a converted quantity compares as a plain number, a plain "in" is an inch against a length, a dollar
        # amount in thousands groups keeps its sign against cents in a list (math 1.1.18: "143 weeks" against
        # "1000 days", "8 in" against "8 cm" (either way), "\\$1,200, 5" against "1200 cents, 5" scored 1;
        # "20.32 cm" against "8 in", "120000 cents, 30000 cents" against "\\$1,200, \\$300" 0)
        ("\\boxed{143 weeks}", "1000 days", 0.0, None),
        ("\\boxed{1000 days}", "143 weeks", 0.0, None),
        ("\\boxed{1.5 hours}", "90 minutes", 1.0, None),
        ("\\boxed{1001 m}", "1 km", 0.0, None),
        ("\\boxed{8 in}", "8 cm", 0.0, None),
        ("\\boxed{8 cm}", "8 in", 0.0, None),
        ("\\boxed{20.32 cm}", "8 in", 1.0, None),
        ("\\boxed{8 in}", "8 inches", 1.0, None),
        ("\\boxed{8 in}", "8", 1.0, None),
        ("The answer is 8 in total.", "8 cm", 1.0, None),
        ("\\boxed{\\$1,200, 5}", "1200 cents, 5", 0.0, None),
        ("\\boxed{120000 cents, 30000 cents}", "\\$1,200, \\$300", 1.0, None),
        ("\\boxed{\\$1,200, \\$300}", "\\$1,200, \\$301", 0.0, None),
        ("\\boxed{\\$1200.5}", "\\$1,200.50", 1.0, None),
        # a plain "in" is an inch against a unit of any dimension (math 1.1.19: "8 in" against "8 hours" scored 1)
        ("\\boxed{8 in}", "8 hours", 0.0, None),
        ("\\boxed{8 hours}", "8 in", 0.0, None),
        ("The answer is 8 in total.", "8 hours", 1.0, None),
        # degrees against a unit of another kind, two temperature scales and a percentage against a unit differ,
        # and a preposition before a restated quantity is no inch (math 1.1.19: the three 0.0 rows scored 1, the
        # last 0; against a bare 8 a degree stays 1)
        ("\\boxed{8^\\circ}", "8 cm", 0.0, None),
        ("\\boxed{8^\\circ}", "8", 1.0, None),
        ("\\boxed{8 °F}", "8 °C", 0.0, None),
        ("\\boxed{8\\%}", "8 in", 0.0, None),
        ("\\boxed{\\text{in } 8 \\text{ hours}}", "8 hours", 1.0, None),
        # radians are an angle's unit, kelvin in words a temperature, a tuple's components drop their unit
        # words, and a preposition before an upright symbol is dropped (math 1.1.19 as first extended: the
        # first and fourth rows scored 1, the second and the last two 0; against a bare 8 radians stay 1)
        ("\\boxed{8 rad}", "8^\\circ", 0.0, None),
        ("\\boxed{\\pi \\text{ rad}}", "180^\\circ", 1.0, None),
        ("\\boxed{8 rad}", "8", 1.0, None),
        ("\\boxed{8 kelvin}", "8 °C", 0.0, None),
        ("\\boxed{(30 degrees, 2)}", "(30^\\circ, 2)", 1.0, None),
        ("\\boxed{in 8\\,\\text{h}}", "8 hours", 1.0, None),
    ],
)
async def test_math_verdicts(
    client: httpx.AsyncClient, response: str, reference: str, expected: float, reason: str | None
) -> None:
    body = await score(client, [{"response": response, "reference": reference}], use_cache=False)
    r = body["results"][0]
    assert (r["score"], r["valid"], r["reason"]) == (expected, True, reason), r


async def test_math_details_explain_the_verdict(client: httpx.AsyncClient) -> None:
    r = (await score(client, [{"response": "Thus \\boxed{0.25}", "reference": "\\frac14"}]))["results"][0]
    assert r["details"]["extracted"] == "0.25"
    assert r["details"]["extraction"] == "boxed"
    assert r["details"]["match"]
    assert r["components"] == {"correct": 1.0}


async def test_missing_reference_is_invalid(client: httpx.AsyncClient) -> None:
    r = (await score(client, [{"response": "\\boxed{1}"}]))["results"][0]
    assert (r["score"], r["valid"], r["reason"]) == (None, False, "missing_reference")


async def test_any_of_several_golds(client: httpx.AsyncClient) -> None:
    r = (await score(client, [{"response": "\\boxed{3}", "reference": {"answers": ["-3", "3"]}}]))["results"][
        0
    ]
    assert r["score"] == 1.0


async def test_power_tower_times_out_and_service_keeps_answering(client: httpx.AsyncClient) -> None:
    tower = asyncio.create_task(
        score(
            client,
            [{"id": "tower", "response": f"\\boxed{{{TOWER}}}", "reference": "4"}],
            timeout_s=4.0,  # (with 2 s and the bound below 1.5 s, a loaded CI machine had little room)
            use_cache=False,
        )
    )
    pool = client.app.state.runtime.cpu_pool  # type: ignore[attr-defined]
    await until(lambda: pool.stats().busy >= 1)  # the tower holds a worker
    # Meanwhile other requests are answered (the other worker, the event loop is free): before the tower's
    # 4 s deadline, not after it; no wall-clock bound of our own (3 s was a chance failure under load).
    others = await score(
        client, [{"response": f"\\boxed{{{i}}}", "reference": str(i)} for i in range(20)], use_cache=False
    )
    assert not tower.done()
    assert all(r["score"] == 1.0 for r in others["results"])
    health = await client.get("/health")
    assert health.status_code == 200

    r = (await tower)["results"][0]
    assert (r["score"], r["valid"], r["reason"]) == (None, False, "timeout"), r
    # The item was stopped at its 4 s deadline, as the pool timed it: the worker's soft alarm (its own
    # time on the item, 4 s at least) or the parent's hard kill at deadline + grace (reported as exactly
    # 4.5 s); no later, whatever the load (a wall-clock bound on the request with a loaded host's
    # slack, 14.5 s, let a deadline of 10 s or more pass).
    assert 4000 <= r["latency_ms"] <= (4.0 + HARD_GRACE_S) * 1000, r
    # The killed worker was replaced: the pool is whole again.
    ready = (await client.get("/ready")).json()
    assert ready["checks"]["cpu_pool"]["alive"] == 2
    # A timeout is never cached: the same request is computed again.
    again = await score(
        client, [{"id": "tower", "response": f"\\boxed{{{TOWER}}}", "reference": "4"}], timeout_s=0.5
    )
    assert again["results"][0]["cached"] is False and again["results"][0]["reason"] == "timeout"


async def test_a_gold_that_times_out_makes_the_item_a_timeout_not_a_zero(client: httpx.AsyncClient) -> None:
    # The answer is wrong against "5", and could not be checked against the other accepted answer
    # before the deadline: it might equal it, so the item was not scored (0.0 means "scored and wrong").
    items = [{"response": "\\boxed{4}", "reference": {"answers": ["5", TOWER]}}]
    r = (await score(client, items, timeout_s=0.5, use_cache=False))["results"][0]
    assert (r["score"], r["valid"], r["reason"]) == (None, False, "timeout"), r
    # A match with another gold still wins over the timeout (a wider deadline: the match must be found
    # within it, by a worker the pool may still be replacing, on a loaded CI machine).
    items = [{"response": "\\boxed{5}", "reference": {"answers": [TOWER, "5"]}}]
    r = (await score(client, items, timeout_s=3.0, use_cache=False))["results"][0]
    assert (r["score"], r["valid"]) == (1.0, True), r


async def test_non_finite_scores_in_the_math_config_are_refused(client: httpx.AsyncClient) -> None:
    """correct_score / wrong_score took NaN and Infinity (the JSON parser reads them), and then every item
    came back invalid (internal_error, "the reward produced a non-finite score"); they are a 422 naming
    the field, as the other rewards' float settings are. Found in review."""
    for field in ("correct_score", "wrong_score"):
        body = b'{"reward": {"name": "math", "config": {"%s": NaN}}, "items": [{"response": "1", "reference": "1"}]}'
        resp = await client.post(
            "/v1/score", content=body % field.encode(), headers={"content-type": "application/json"}
        )
        assert resp.status_code == 422 and field in resp.json()["error"]["message"], resp.text


async def test_a_request_gone_mid_item_frees_its_worker(make_app: Any) -> None:
    """A request cancelled (its client hung up: in process, the disconnect cancels the request's task)
    while its item was running in a worker left the worker on it until the item's deadline (60 s here),
    and with one worker every later math request waited behind it. The worker is now replaced (after
    a 0.1 s grace; restart cause ``cancelled``) and the next request is scored in the new one."""
    async with make_app(cpu_workers=1) as c:
        pool = c.app.state.runtime.cpu_pool  # type: ignore[attr-defined]
        tower = asyncio.create_task(
            score(c, [{"response": f"\\boxed{{{TOWER}}}", "reference": "4"}], timeout_s=60, use_cache=False)
        )
        await until(lambda: pool.stats().busy == 1)
        tower.cancel()
        with pytest.raises(asyncio.CancelledError):
            await tower
        await until(lambda: pool.stats().restarts.get("cancelled", 0) == 1 and pool.stats().busy == 0)
        items = [
            {"response": "The answer is \\boxed{\\dfrac{\\sqrt{3}}{2}}", "reference": "$\\frac{\\sqrt 3}{2}$"}
        ]
        r = (await score(c, items, use_cache=False))["results"][0]
        assert (r["score"], r["valid"]) == (1.0, True), r
        metrics = (await c.get("/metrics")).text
    assert 'rewardhub_worker_restarts_total{cause="cancelled",pool="cpu"} 1.0' in metrics
