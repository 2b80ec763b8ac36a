"""`rewardhub serve` configured by environment variables only: a PRM loaded at start, the judge on a
scripted OpenAI-compatible server, both answering over real HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from fake_openai import FakeJudge, always

pytestmark = pytest.mark.integration


def test_served_prm_and_judge_from_env(
    live_server_factory: Callable[..., Any], qwen_prm_path: str, judge_server: FakeJudge
) -> None:
    judge_server.reply = always("Final Decision: Yes")
    env = {
        "REWARDHUB_PRM_MODEL": qwen_prm_path,
        "REWARDHUB_PRM_CONVENTION": "qwen",
        "REWARDHUB_JUDGE_URL": judge_server.url,
        "REWARDHUB_JUDGE_MODEL": "fake",
        "REWARDHUB_JUDGE_API_KEY": "sk-live-secret",
        "REWARDHUB_EMBEDDING_MODEL": "off",
    }
    with live_server_factory(env) as server:
        ready = httpx.get(f"{server.url}/ready").json()
        assert ready["checks"]["model:prm"]["loaded"] and ready["checks"]["model:judge"]["kind"] == "openai"
        items = [
            {"reward": "prm", "prompt": "q", "response": "a\n\nb"},
            {
                "reward": {"name": "judge", "config": {"mode": "reference", "rule": None}},
                "prompt": "2+2?",
                "response": "\\boxed{4}",
                "reference": "4",
            },
            {
                "reward": {"name": "judge", "config": {"mode": "reference"}},
                "prompt": "2+2?",
                "response": "Thought process:",
                "reference": "4",
            },
        ]
        res = httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=60).json()["results"]
        assert len(res[0]["details"]["steps"]) == 2
        assert res[1]["score"] == 1.0 and res[2]["score"] == 0.0
        assert judge_server.calls == 1
        assert "sk-live-secret" not in server.log()
