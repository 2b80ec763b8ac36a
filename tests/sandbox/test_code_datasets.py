"""The `code` reward on real datasets, through the real service and the real bubblewrap sandbox.

HumanEval: every canonical solution passes and every mutated one fails. MBPP: a fixed sample of the
canonical solutions with their `test_list` and `test_setup_code` passes.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import pytest

from conftest import SHARED_BENCHMARKS

HUMANEVAL = SHARED_BENCHMARKS / "HumanEval.jsonl.gz"
MBPP = SHARED_BENCHMARKS / "mbpp.jsonl"


def _humaneval() -> list[dict[str, Any]]:
    if not HUMANEVAL.exists():
        pytest.skip(f"HumanEval is not available at {HUMANEVAL}")
    with gzip.open(HUMANEVAL, "rt") as f:
        return [json.loads(line) for line in f]


async def _score(
    client: httpx.AsyncClient, items: list[dict[str, Any]], **config: Any
) -> list[dict[str, Any]]:
    r = await client.post(
        "/v1/score",
        json={"reward": {"name": "code", "config": config}, "items": items, "options": {"use_cache": False}},
    )
    assert r.status_code == 200, r.text
    results: list[dict[str, Any]] = r.json()["results"]
    return results


async def test_humaneval_canonical_solutions_all_pass(client: httpx.AsyncClient) -> None:
    rows = _humaneval()
    items = [
        {
            "id": r["task_id"],
            "response": f"Here is my solution:\n```python\n{r['prompt']}{r['canonical_solution']}\n```\n",
            "reference": {"tests": r["test"], "entry_point": r["entry_point"]},
        }
        for r in rows
    ]
    results = await _score(client, items)
    failed = [(x["id"], x["details"]) for x in results if x["score"] != 1.0]
    assert len(results) == 164
    assert not failed, failed[:3]
    assert all(x["valid"] and x["components"]["passed_all"] == 1.0 for x in results)
    # per-test details: HumanEval/0 has seven asserts
    assert results[0]["details"]["total"] == 7 and results[0]["details"]["passed"] == 7


async def test_humaneval_mutated_solutions_all_fail(client: httpx.AsyncClient) -> None:
    rows = _humaneval()
    # The mutation: the canonical body replaced by `return None`.
    items = [
        {
            "response": f"{r['prompt']}    return None\n",
            "reference": {"tests": r["test"], "entry_point": r["entry_point"]},
        }
        for r in rows
    ]
    results = await _score(client, items)
    assert all(x["valid"] for x in results)
    passed = [rows[i]["task_id"] for i, x in enumerate(results) if x["components"]["passed_all"] == 1.0]
    assert not passed, passed
    # Partial credit exists: some stubs pass some asserts (e.g. the ones expecting a falsy value)...
    assert any(0 < x["score"] < 1 for x in results)
    # ...but the all-or-nothing mode (pass@1-style) gives none.
    strict = await _score(client, items[:40], all_or_nothing=True)
    assert all(x["score"] == 0.0 for x in strict)


async def test_mbpp_sample_passes(client: httpx.AsyncClient) -> None:
    if not MBPP.exists():
        pytest.skip(f"MBPP is not available at {MBPP}")
    with open(MBPP) as f:
        rows = [json.loads(line) for line in f]
    # Every 8th task, plus the ones whose tests need the solution's own classes (Node fixtures in
    # test_setup_code, Pair objects) or pass builtin types as arguments.
    wanted = {342, 367, 533, 601, 927}
    sample = [r for k, r in enumerate(rows) if k % 8 == 0 or r["task_id"] in wanted]
    items = [
        {
            "id": str(r["task_id"]),
            "response": r["code"],
            "reference": {"tests": r["test_list"], "setup": r["test_setup_code"] or None},
        }
        for r in sample
    ]
    results = await _score(client, items)
    failed = [(x["id"], x["details"]) for x in results if x["score"] != 1.0]
    assert not failed, failed[:3]
    assert len(results) >= 120
    # a wrong solution fails exactly the tests it gets wrong (one test per test_list entry)
    wrong = await _score(
        client,
        [
            {
                "response": "def min_cost(cost, m, n):\n    return 8\n",
                "reference": {"tests": rows[0]["test_list"]},
            }
        ],
    )
    assert wrong[0]["score"] == pytest.approx(1 / 3)
    assert [t["passed"] for t in wrong[0]["details"]["tests"]] == [True, False, False]
