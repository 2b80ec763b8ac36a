"""Property-based fuzzing of every endpoint from the OpenAPI schema (schemathesis), against a live server.

Invariants: no 5xx, ever; every 4xx carries the error envelope with a message that names the problem.
Both valid (positive) and schema-violating (negative) inputs are generated for every operation.

(Schemathesis' own pytest plugin does not run under pytest 9, so its core API drives Hypothesis here.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from conftest import LiveServer, serve

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLES_PER_MODE = 20


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # A short per-item deadline so random math answers cannot hold the run; jobs stay small.
    env = {
        "REWARDHUB_ITEM_TIMEOUT_S": "1",
        "REWARDHUB_MAX_ITEM_TIMEOUT_S": "2",
        "REWARDHUB_JOB_MAX_ITEMS": "64",
    }
    with serve(env, tmp=tmp_path_factory.mktemp("fuzz")) as server:
        yield server


def check(case: Any, base_url: str) -> None:
    response = case.call(base_url=base_url, timeout=60)
    where = f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}"
    assert response.status_code < 500, where
    if 400 <= response.status_code < 500:
        body = response.json()
        error = body.get("error") if isinstance(body, dict) else None
        assert isinstance(error, dict), where
        assert isinstance(error.get("message"), str) and error["message"].strip(), where
        assert error.get("type") and error.get("code") == response.status_code, where


def test_every_operation(fuzz_server: LiveServer) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzz_server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15  # all endpoints, including compat, jobs and the dashboard
    seen = []
    for op in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=op.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES_PER_MODE,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                database=None,
            )
            def run(case: Any) -> None:
                check(case, fuzz_server.url)

            try:
                run()
            except Unsatisfiable:
                # An operation without parameters or body (GET /health) has no input to make invalid.
                assert mode is GenerationMode.NEGATIVE, (
                    f"{op.method} {op.path}: no valid input could be generated"
                )
        seen.append(f"{op.method.upper()} {op.path}")
    # The service is still healthy after the barrage.
    import httpx

    assert httpx.get(f"{fuzz_server.url}/ready", timeout=10).status_code == 200
    print(f"fuzzed {len(seen)} operations: {', '.join(seen)}")
