"""The sandbox under the real server (uvicorn with uvloop, whose subprocess transports differ)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest


@pytest.mark.integration
def test_code_and_run_code_under_uvloop(live_server_factory: Callable[..., Any]) -> None:
    with live_server_factory() as server, httpx.Client(base_url=server.url, timeout=60) as c:
        assert c.get("/health").json()["sandbox"] == "bubblewrap"
        items = [
            {
                "response": "def f(x):\n    return 2 * x\n",
                "reference": {"tests": "assert f(2) == 4\nassert f(3) == 6"},
            },
            {"response": "print(input()[::-1])", "reference": {"cases": [{"stdin": "abc", "stdout": "cba"}]}},
            {
                "response": "import sys\nsys.stdout.write('x' * (8 << 20))",
                "reference": {"cases": [{"stdin": "", "stdout": "x"}]},
            },
        ]
        results = c.post("/v1/score", json={"reward": "code", "items": items}).json()["results"]
        assert [x["score"] for x in results] == [1.0, 1.0, 0.0]
        body = c.post("/run_code", json={"code": "print(6 * 7)", "language": "python"}).json()
        assert body["status"] == "Success" and body["run_result"]["stdout"] == "42\n"
