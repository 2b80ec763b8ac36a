"""The `verpo` group reward (algorithms.md §5.1) through the real app and a real sandbox, and the
`code` reward's `details.pass_mask` it reads."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from rewardhub.rewards.verpo import verpo_rewards

TESTS = ["assert sq(1) == 1", "assert sq(2) == 4", "assert sq(3) == 9", "assert sq(4) == 16"]
SOLUTIONS = {
    "all": "def sq(x):\n    return x * x\n",
    "easy": "def sq(x):\n    return x * x if x < 3 else 0\n",  # the two easy tests only
    "three": "def sq(x):\n    return x * x if x < 4 else 0\n",
    "broken": "def sq(x) return x\n",  # a SyntaxError: passes nothing (reason format)
}


async def _score(client: httpx.AsyncClient, reward: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = await client.post(
        "/v1/score", json={"reward": reward, "items": items, "options": {"use_cache": False}}
    )
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()["results"]
    return out


def _expected(masks: list[list[bool]], alpha: float = 0.5, delta: float = 1e-3) -> list[float]:
    """The formula written out once more, independently of the service's code."""
    n, tests = len(masks), len(masks[0])
    rho = [sum(m[j] for m in masks) / n for j in range(tests)]
    w = [1 - r + delta for r in rho]
    return [
        float(all(m)) + alpha * sum(wj for wj, ok in zip(w, m, strict=True) if ok) / sum(w) for m in masks
    ]


async def test_tests_weigh_by_how_hard_the_group_found_them(client: httpx.AsyncClient) -> None:
    g = f"g-{uuid.uuid4().hex}"
    names = ["all", "easy", "three", "broken"]
    items = [{"response": SOLUTIONS[k], "reference": {"tests": TESTS}, "group": g} for k in names]
    out = await _score(client, "verpo", items)
    masks = [[True] * 4, [True, True, False, False], [True, True, True, False], [False] * 4]
    assert [r["score"] for r in out] == pytest.approx(_expected(masks), abs=1e-9)
    assert all(r["valid"] for r in out), out
    assert out[3]["reason"] == "format" and out[3]["score"] == 0.0  # a broken program passed nothing
    assert out[0]["components"]["passed_all"] == 1.0 and out[0]["score"] > 1.0
    # the cardinality bias VeRPO removes: the two easy tests are half the tests, but less than half the
    # weight (three of four members passed them)
    easy = out[1]["components"]
    assert easy["pass_rate"] == 0.5 and easy["dense"] < 0.3
    assert out[1]["details"]["pool_size"] == 4 and out[1]["details"]["tests"] == 4
    assert out[1]["details"]["weights"] == pytest.approx([0.251, 0.251, 0.501, 0.751])
    # alpha and delta are settings
    scaled = await _score(client, {"name": "verpo", "config": {"alpha": 1.0, "delta": 0.1}}, items)
    assert [r["score"] for r in scaled] == pytest.approx(_expected(masks, 1.0, 0.1), abs=1e-9)


async def test_members_that_cannot_be_scored_stay_out_of_the_difficulty(client: httpx.AsyncClient) -> None:
    g = f"g-{uuid.uuid4().hex}"
    items = [
        {"response": SOLUTIONS["all"], "reference": {"tests": TESTS}, "group": g},
        {"response": SOLUTIONS["easy"], "reference": {"tests": TESTS}, "group": g},
        {"response": SOLUTIONS["easy"], "group": g},  # no tests: missing_reference, not a member of ρ
    ]
    out = await _score(client, "verpo", items)
    assert (out[2]["valid"], out[2]["reason"]) == (False, "missing_reference"), out[2]
    masks = [[True] * 4, [True, True, False, False]]
    assert [r["score"] for r in out[:2]] == pytest.approx(_expected(masks), abs=1e-9)
    assert out[0]["details"]["pool_size"] == 2
    # no group: no difficulty to estimate
    (alone,) = await _score(client, "verpo", [{"response": SOLUTIONS["all"], "reference": {"tests": TESTS}}])
    assert (alone["valid"], alone["reason"]) == (False, "unsupported")
    # a part that reports no per-test results is refused per item, clearly
    (other,) = await _score(
        client,
        {"name": "verpo", "config": {"code": "exact_match"}},
        [{"response": "x", "reference": "x", "group": f"g-{uuid.uuid4().hex}"}],
    )
    assert (other["valid"], other["reason"]) == (False, "unsupported") and "pass_mask" in other["details"][
        "message"
    ]


async def test_code_reports_every_test_in_pass_mask(client: httpx.AsyncClient) -> None:
    """details.tests stops at 100 tests; a group reward needs every verdict: pass_mask has them all."""
    tests = [f"assert sq({k}) == {k * k}" for k in range(1, 121)]
    (r,) = await _score(
        client,
        "code",
        [{"response": "def sq(x):\n    return x * x if x != 110 else 0\n", "reference": {"tests": tests}}],
    )
    assert len(r["details"]["tests"]) == 100
    mask = r["details"]["pass_mask"]
    assert len(mask) == 120 and mask.count("0") == 1 and mask[109] == "0"


def test_formula_edges() -> None:
    # every member passed every test: each test weighs delta, dense is 1
    assert verpo_rewards([[True, True], [True, True]], 0.5, 1e-3) == ([1.5, 1.5], [1.0, 1.0], [1e-3, 1e-3])
    # nobody passed anything: 0, not a division by zero
    rewards, dense, _ = verpo_rewards([[False, False], [False, False]], 0.5, 1e-3)
    assert rewards == [0.0, 0.0] and dense == [0.0, 0.0]
    assert verpo_rewards([[]], 0.5, 1e-3) == ([0.0], [0.0], [])


async def test_a_part_other_than_code_is_unsupported_on_every_item(client: httpx.AsyncClient) -> None:
    """Only the code reward's format / no_answer 0s mean "no program ran, no test passed". Another part's
    (math finding no answer; a composite whose format gate failed) must not become a valid 0 beside the
    unsupported items of the same batch: a trainer would learn from zeros nobody scored."""
    gated_code = {
        "name": "composite",
        "config": {
            "components": [
                {"reward": {"name": "format", "config": {"preset": "answer"}}, "gate": True},
                {"reward": "code"},
            ]
        },
    }
    cases: list[tuple[Any, list[tuple[str, Any]]]] = [
        ("math", [("", "2"), ("\\boxed{2}", "2")]),  # no_answer, then a valid 1 without a pass_mask
        (gated_code, [("", {"tests": TESTS}), (SOLUTIONS["all"], {"tests": TESTS})]),  # no <answer>: format
    ]
    for part, rows in cases:
        g = f"g-{uuid.uuid4().hex}"
        items = [{"response": r, "reference": ref, "group": g} for r, ref in rows]
        out = await _score(client, {"name": "verpo", "config": {"code": part}}, items)
        assert [(r["valid"], r["reason"]) for r in out] == [(False, "unsupported")] * 2, out


async def test_members_are_pooled_by_their_tests(client: httpx.AsyncClient) -> None:
    """ρ is taken over the members that carry the same tests. A member with other tests in the group
    (here a second task of four tests, and one of two) is its own pool; it neither mixes its tests into
    the first task's pass rates nor drops the first task's program-less member out of them."""
    g = f"g-{uuid.uuid4().hex}"
    names = ["all", "easy", "three", "broken"]
    items = [{"response": SOLUTIONS[k], "reference": {"tests": TESTS}, "group": g} for k in names]
    cube = ["assert cu(1) == 1", "assert cu(2) == 8", "assert cu(3) == 27", "assert cu(4) == 64"]
    items += [
        {"response": "def cu(x):\n    return x ** 3\n", "reference": {"tests": cube}, "group": g},
        {"response": SOLUTIONS["all"], "reference": {"tests": TESTS[:2]}, "group": g},
    ]
    out = await _score(client, "verpo", items)
    masks = [[True] * 4, [True, True, False, False], [True, True, True, False], [False] * 4]
    assert [r["score"] for r in out[:4]] == pytest.approx(_expected(masks), abs=1e-9), out
    assert [r["details"]["pool_size"] for r in out] == [4, 4, 4, 4, 1, 1]
    assert (out[3]["reason"], out[3]["details"]["tests"]) == ("format", 4)
    # a pool of one has no difficulty estimate (test_a_pool_of_one_is_unsupported)
    assert [(r["score"], r["reason"]) for r in out[4:]] == [(None, "unsupported")] * 2


async def test_a_pool_of_one_is_unsupported(client: httpx.AsyncClient) -> None:
    """A member alone with its tests (a group of one, or the only member carrying those tests) had its
    tests weighed by its own passes: every test it passed weighed δ, every one it failed 1 + δ, so two of
    four tests passed scored 0.0005 and four of four 1.5, whatever the tests. An item without a group is
    refused for exactly that (a group of one has no difficulty estimate); such a member is now too, not
    scored. Found in review."""
    for solution in ("easy", "all"):
        g = f"g-{uuid.uuid4().hex}"
        (alone,) = await _score(
            client, "verpo", [{"response": SOLUTIONS[solution], "reference": {"tests": TESTS}, "group": g}]
        )
        assert (alone["score"], alone["valid"], alone["reason"]) == (None, False, "unsupported"), alone
        assert "difficulty" in alone["details"]["message"]
        assert (alone["details"]["pool_size"], alone["details"]["tests"]) == (1, 4)
    # a program-less member with its tests makes the pool two: ρ from both
    g = f"g-{uuid.uuid4().hex}"
    items = [
        {"response": SOLUTIONS[k], "reference": {"tests": TESTS}, "group": g} for k in ("easy", "broken")
    ]
    out = await _score(client, "verpo", items)
    masks = [[True, True, False, False], [False] * 4]
    assert [r["score"] for r in out] == pytest.approx(_expected(masks), abs=1e-9), out
