"""The client package needs only httpx and pydantic: it must import with the service unavailable."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
for blocked in ("rewardhub", "fastapi", "starlette", "redis", "sympy", "math_verify", "orjson", "uvicorn"):
    sys.modules[blocked] = None  # any import of these now raises ImportError
import rewardhub_client
import rewardhub_client.trl
import rewardhub_client.verl
import rewardhub_client.slime
from rewardhub_client import RewardClient, AsyncRewardClient
c = RewardClient("http://127.0.0.1:9")
c.close()
print("ok")
"""


def test_client_imports_without_the_service() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
