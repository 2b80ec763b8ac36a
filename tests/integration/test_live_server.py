"""End to end: `rewardhub serve` in its own process, spoken to over real TCP."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from typing import Any

import httpx
import orjson
import pytest

pytestmark = pytest.mark.integration

MATH_ITEM = {
    "reward": "math",
    "items": [{"id": "q1", "response": "The answer is \\boxed{\\frac{2}{4}}", "reference": "0.5"}],
}


def test_serve_embedded_default_scores_and_caches(live_server_factory: Any) -> None:
    with live_server_factory() as server:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            first = c.post("/v1/score", json=MATH_ITEM).json()["results"][0]
            second = c.post("/v1/score", json=MATH_ITEM).json()["results"][0]
            assert (first["score"], first["cached"]) == (1.0, False)
            assert (second["score"], second["cached"]) == (1.0, True)
            assert c.get("/health").json()["cache"] == "memory"
            # HEAD over real HTTP (uvicorn): a probe's 200 with no body, as a load balancer sends it
            for path in ("/health", "/ready"):
                head = c.head(path)
                assert head.status_code == 200 and head.content == b"", path
    assert "service_ready" in server.log()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_readme_curl_example(live_server_factory: Any) -> None:
    with live_server_factory() as server:
        out = subprocess.run(
            [
                "curl",
                "-s",
                "-X",
                "POST",
                f"{server.url}/v1/score",
                "-H",
                "content-type: application/json",
                "-d",
                orjson.dumps(MATH_ITEM).decode(),
            ],
            capture_output=True,
            check=True,
            timeout=30,
        )
        assert orjson.loads(out.stdout)["results"][0]["score"] == 1.0


def test_cpu_workers_from_env_file_is_per_worker(live_server_factory: Any, tmp_path: Any) -> None:
    """REWARDHUB_CPU_WORKERS is per service process wherever it is set: `serve --workers 2` divided a
    value from .env by the worker count (it only looked for the variable in the environment)."""
    (tmp_path / ".env").write_text("REWARDHUB_CPU_WORKERS=3\n")
    with live_server_factory(env={"REWARDHUB_CPU_WORKERS": None}, workers=2, cwd=tmp_path) as server:
        for _ in range(100):  # both workers log once they are ready
            if server.log().count("service_ready") == 2:
                break
            time.sleep(0.1)
    ready = [line for line in server.log().splitlines() if "service_ready" in line]
    assert len(ready) == 2
    assert all("cpu_workers=3" in line for line in ready), ready


def test_two_workers_share_redis(live_server_factory: Any, redis_server: Any) -> None:
    env = {"REWARDHUB_REDIS_URL": redis_server.url, "REWARDHUB_CPU_WORKERS": "1"}
    with live_server_factory(env=env, workers=2) as server:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            items = {
                "reward": "math",
                "items": [{"response": f"\\boxed{{{i}}}", "reference": str(i)} for i in range(8)],
            }
            first = c.post("/v1/score", json=items).json()["results"]
            # whichever worker answers, the second request hits the shared cache
            for _ in range(3):
                again = c.post("/v1/score", json=items).json()["results"]
                assert all(r["cached"] for r in again)
            assert all(r["score"] == 1.0 for r in first)
            metrics = c.get("/metrics").text
            assert "rewardhub_requests_total" in metrics


def test_two_workers_leave_no_metrics_files_behind(live_server_factory: Any, tmp_path: Any) -> None:
    """`serve --workers N` made a directory for prometheus-client's multiprocess files (several per
    worker) and never removed it: every start left one more in /tmp, a container restarted in place or
    a test run accumulating them. It goes when the server stops."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with live_server_factory(env={"TMPDIR": str(tmp)}, workers=2) as server:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert c.post("/v1/score", json=MATH_ITEM).status_code == 200
            assert 'rewardhub_items_total{reward="math"} 1.0' in c.get("/metrics").text
        assert [d.name for d in tmp.glob("rewardhub-prom-*")]  # the workers' metrics, while they run
    assert server.proc.returncode is not None
    assert not list(tmp.glob("rewardhub-prom-*"))


def test_a_client_that_hangs_up_stops_its_request(live_server_factory: Any, judge_server: Any) -> None:
    """A trainer that times out leaves: its request's judge call (or its items in a model's batch queue)
    ran on to the item's deadline for nobody. The service now cancels it when the client disconnects
    (counted as 499), and serves the next request as usual."""
    from fake_openai import always

    judge_server.reply = always("Score: 4", delay_s=30)
    env = {"REWARDHUB_JUDGE_URL": judge_server.url, "REWARDHUB_JUDGE_MODEL": "m"}
    body = {
        "reward": {"name": "judge", "config": {"mode": "pointwise"}},
        "items": [{"prompt": "2 + 2?", "response": "The answer is 4."}],
    }
    with live_server_factory(env=env) as server:
        with httpx.Client(base_url=server.url, timeout=1.0) as c, pytest.raises(httpx.ReadTimeout):
            c.post("/v1/score", json=body)
        # the judge call is dropped within moments (15 s for a loaded host), not after its 30 s
        for _ in range(300):
            if judge_server.abandoned:
                break
            time.sleep(0.05)
        assert judge_server.abandoned == 1
        judge_server.reply = always("Score: 4", delay_s=0.3)  # slower than the watch starts: not cut
        with httpx.Client(base_url=server.url, timeout=30) as c:
            (res,) = c.post("/v1/score", json=body).json()["results"]
            assert res["score"] == 0.75
            metrics = c.get("/metrics").text
    assert 'rewardhub_requests_total{route="/v1/score",status="499"} 1.0' in metrics, metrics
    assert "client_gone" in server.log()


def test_a_hung_up_request_leaves_the_model_queue(live_server_factory: Any, qwen_prm_path: str) -> None:
    """Its items leave a local model's batch queue at once instead of waiting there (here for company,
    30 s) and then taking a forward pass."""
    env = {"REWARDHUB_PRM_MODEL": qwen_prm_path, "REWARDHUB_BATCH_MAX_WAIT_MS": "60000"}
    body = {
        "reward": "prm",
        "items": [{"prompt": "2 + 2?", "response": "2 + 2 = 4.\n\nSo 4."}],
        "options": {"timeout_s": 60},  # it waits 30 s for company (half its time), then runs: only the
        # hang-up takes it out without a forward pass
    }
    depth = 'rewardhub_queue_depth{pool="batcher:prm:steps"}'

    def metric_is(c: httpx.Client, value: str, what: str) -> None:
        for _ in range(1200):  # a bound only so that a broken build fails instead of hanging
            if f"{depth} {value}" in c.get("/metrics").text:
                return
            time.sleep(0.1)
        raise AssertionError(what)

    with live_server_factory(env=env) as server, httpx.Client(base_url=server.url, timeout=30) as c:
        # The client hangs up once its item is queued. (It used a 0.5 s read timeout: on a loaded host
        # the request could be gone before the item was queued, and the test passed with nothing to take
        # out.) A raw socket: closing it is the hang-up.
        url = httpx.URL(server.url)
        payload = orjson.dumps(body)
        with socket.create_connection((url.host, url.port or 80)) as sock:
            head = f"POST /v1/score HTTP/1.1\r\nHost: {url.host}\r\nContent-Type: application/json\r\n"
            sock.sendall(f"{head}Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
            metric_is(c, "1.0", "the item was never queued")
        # It leaves the queue either way: at once when the hang-up cancels it, or after its 30 s wait for
        # company when it is taken for a forward pass, which the count below shows. (It was a wall-clock
        # bound of 15 s, which a loaded host could exceed.)
        metric_is(c, "0.0", "the item stayed queued past its 30 s wait for company")
        batches = c.get("/ready").json()["checks"]["model:prm"]["batchers"]["steps"]
        assert batches["items"] == 0  # no forward pass for it: the hang-up took it out


def test_two_workers_run_the_periodic_canaries_once(live_server_factory: Any) -> None:
    """With `REWARDHUB_CANARY_REWARDS` set, every worker of `serve --workers 2` ran the canaries at start
    and every interval: N times the judge calls for one figure. The workers elect one runner."""
    env = {"REWARDHUB_CANARY_REWARDS": '["exact_match"]', "REWARDHUB_CANARY_INTERVAL_S": "3600"}
    with live_server_factory(env=env, workers=2) as server:
        for _ in range(200):  # both workers are up, and the elected one has logged that it leads
            log = server.log()
            if log.count("service_ready") == 2 and "canary_monitor_leads" in log:
                break
            time.sleep(0.1)
        with httpx.Client(base_url=server.url, timeout=30) as c:
            runs = ""
            for _ in range(100):
                runs = "\n".join(x for x in c.get("/metrics").text.splitlines() if "canary_runs_total{" in x)
                if runs:
                    break
                time.sleep(0.1)
            time.sleep(2.0)  # room for a second worker's run, which would show as 2.0
            runs = "\n".join(x for x in c.get("/metrics").text.splitlines() if "canary_runs_total{" in x)
    assert runs == 'rewardhub_canary_runs_total{outcome="ok",reward="exact_match"} 1.0', runs
    assert server.log().count("canary_monitor_leads") == 1
