"""The client against a live service whose rewards are slow models (a scripted judge server)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from rewardhub_client import RetryPolicy, RewardClient

pytestmark = pytest.mark.integration

JUDGE = {"name": "judge", "config": {"mode": "pointwise"}}


def test_slow_judge_within_its_deadline_is_answered_once(live_server_factory: Any, judge_server: Any) -> None:
    # The client's timeout (1 s) is shorter than the deadline the request asks for (10 s) and than the
    # judge (2 s): the client must wait for the answer, not abandon it and send the work again.
    from fake_openai import always

    judge_server.reply = always("Score: 5", delay_s=2.0)
    env = {"REWARDHUB_JUDGE_URL": judge_server.url, "REWARDHUB_JUDGE_MODEL": "m"}
    # (It slept 0.5 s after the answer for a second judge call to show up: one sent again by the client
    # reaches the judge only if the service got that far before the first hang-up cancelled it, which a
    # loaded host decides. The client's own requests are counted now: it sent one.)
    sent: list[str] = []

    class Counting(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            sent.append(request.url.path)
            return super().handle_request(request)

    with live_server_factory(env) as server:
        retry = RetryPolicy(max_retries=3, backoff_s=0.05)
        with RewardClient(server.url, timeout=1.0, retry=retry, transport=Counting) as client:
            resp = client.score(
                [{"prompt": "Capital of France?", "response": "Paris is the capital."}], JUDGE, timeout_s=10
            )
        assert resp.scores == [1.0]
        assert sent == ["/v1/score"]
        assert judge_server.calls == 1
