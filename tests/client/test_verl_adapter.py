"""The verl adapter with verl's call shapes, against a live service."""

from __future__ import annotations

import asyncio
import json
import math
import sys
import threading
import warnings
from typing import Any

import httpx
import pytest

from rewardhub_client import RewardClient, RewardSpec, RewardUnavailable, verl

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _invalid_score_warned(monkeypatch: Any) -> None:
    """As if this process had warned about the default invalid score, and a sample without its question,
    already: a test warns only where it is about that warning (it sets the flag to ``[]``)."""
    monkeypatch.setattr(verl, "_warned_invalid", [True])
    monkeypatch.setattr(verl, "_warned_question", [True])


def test_verl_compute_score_shapes(live_server_factory: Any) -> None:
    with live_server_factory() as server:
        verl.configure(
            server.url,
            routes={"openai/gsm8k": "math", "squad": {"name": "exact_match", "config": {}}},
            default_reward="math",
            components=["correct"],
        )
        # Per-sample (NaiveRewardManager / reward loop): compute_score(data_source, solution_str, ground_truth, extra_info)
        good = verl.compute_score(
            "openai/gsm8k", "... #### 72\nThe answer is \\boxed{72}", "72", {"index": 0}
        )
        assert good["score"] == 1.0 and good["valid"] == 1.0 and good["correct"] == 1.0
        assert verl.compute_score("openai/gsm8k", "\\boxed{71}", "72")["score"] == 0.0
        assert verl.compute_score("squad", "Paris", "paris")["score"] == 1.0
        # Unrouted sources fall back to the default reward; ground truth numbers are accepted.
        assert verl.compute_score("lighteval/MATH", "\\boxed{3}", 3)["score"] == 1.0
        # Async variant (verl's reward loop awaits an async compute_score).
        out = asyncio.run(verl.compute_score_async("openai/gsm8k", "\\boxed{5}", "5"))
        assert out["score"] == 1.0
        # Batch manager: compute_score(data_sources=..., solution_strs=..., ground_truths=..., extra_infos=...)
        batch = verl.compute_score_batch(
            data_sources=["openai/gsm8k", "squad", "openai/gsm8k"],
            solution_strs=["\\boxed{1}", "Rome", "no answer here"],
            ground_truths=["1", "Paris", "2"],
            extra_infos=[{}, {}, {}],
        )
        assert [b["score"] for b in batch] == [1.0, 0.0, 0.0]
        # An item the service cannot score reaches verl as the configured invalid score, flagged.
        verl.configure(server.url, default_reward="math", invalid_score=-1.0)
        missing = verl.compute_score("x", "\\boxed{1}", None)
        assert (missing["score"], missing["valid"]) == (-1.0, 0.0)


def test_numpy_ground_truths_from_a_parquet_dataset_are_scored(live_server_factory: Any) -> None:
    """verl reads its dataset through pandas, so a numeric or list-valued ``ground_truth`` column
    reaches compute_score as a numpy scalar or array; the adapter turned only Python int/float into
    strings and the request failed to build (a pydantic error for every sample). Found in review."""
    np = pytest.importorskip("numpy")
    with live_server_factory() as server:
        verl.configure(server.url, default_reward="math")
        assert verl.compute_score("x", "\\boxed{3}", np.int64(3))["score"] == 1.0
        assert verl.compute_score("x", "\\boxed{0.5}", np.float32(0.5))["score"] == 1.0
        assert verl.compute_score("x", "\\boxed{7}", np.array(["6", "7"]))["score"] == 1.0
        batch = verl.compute_score_batch(
            data_sources=["x", "x"],
            solution_strs=["\\boxed{4}", "\\boxed{5}"],
            ground_truths=np.array([4, 4]),
            extra_infos=[{}, {}],
        )
        assert [b["score"] for b in batch] == [1.0, 0.0]


def test_numpy_values_inside_a_structured_ground_truth_are_scored(live_server_factory: Any) -> None:
    """A ``ground_truth`` that is an object (a JSON schema, code tests) read through pandas holds its list
    fields as numpy arrays (and numbers as numpy scalars): only a top-level numpy value was converted, and
    building the request failed for every sample (pydantic cannot serialize a numpy array) before
    anything was sent. Found in review."""
    np = pytest.importorskip("numpy")
    schema = {
        "type": "object",
        "required": np.array(["a"]),
        "properties": {"a": {"type": "integer", "maximum": np.int64(5)}},
    }
    with live_server_factory() as server:
        verl.configure(server.url, default_reward="json_schema")
        assert verl.compute_score("x", '{"a": 1}', schema)["score"] == 1.0
        assert verl.compute_score("x", '{"a": 9}', schema)["score"] == 0.0
        batch = verl.compute_score_batch(
            data_sources=["x", "x"],
            solution_strs=['{"a": 2}', '{"b": 2}'],
            ground_truths=[schema, schema],
            extra_infos=[{}, {}],
        )
        assert [b["score"] for b in batch] == [1.0, 0.0]


def test_verl_extra_keys_are_the_same_for_every_item(live_server_factory: Any) -> None:
    # verl appends each returned key per sample and requires every list to be as long as the batch:
    # an invalid item (no components) or another reward (other components) must not change the keys.
    with live_server_factory() as server:
        verl.configure(server.url, routes={"squad": "exact_match"}, default_reward="math")
        calls = [
            ("openai/gsm8k", "\\boxed{1}", "1"),  # valid, components {"correct": 1.0}
            ("openai/gsm8k", "\\boxed{1}", None),  # missing_reference: no components
            ("squad", "Paris", "Paris"),  # another reward
        ]
        per_sample = [verl.compute_score(*c) for c in calls]
        batch = verl.compute_score_batch(*(list(x) for x in zip(*calls, strict=True)))
        for outs in (per_sample, batch):
            assert [set(o) for o in outs] == [{"score", "acc", "valid", "cached", "request_failed"}] * 3
            assert [o["valid"] for o in outs] == [1.0, 0.0, 1.0]
            # DAPO's dynamic sampling reads "acc" (filter_groups.metric's default): the score verl gets
            assert [o["acc"] for o in outs] == [o["score"] for o in outs] == [1.0, 0.0, 1.0]

        verl.configure(server.url, routes={"squad": "exact_match"}, components=["correct"])
        outs = [verl.compute_score(*c) for c in calls]
        assert [set(o) for o in outs] == [
            {"score", "acc", "valid", "cached", "request_failed", "correct"}
        ] * 3
        assert outs[0]["correct"] == 1.0
        assert math.isnan(outs[1]["correct"]) and math.isnan(outs[2]["correct"])


def test_verl_route_prefix_matching() -> None:
    verl.configure("http://unused", routes={"math": "math", "math/hard": "exact_match"}, default_reward="f1")
    assert verl.route("math/hard/v2") == "exact_match"
    assert verl.route("math/easy") == "math"
    assert verl.route("other") == "f1"


def test_first_use_from_many_threads(monkeypatch: Any) -> None:
    # verl's reward loop runs a sync compute_score on executor threads. The configuration was filled in
    # place on first use: a thread that came in meanwhile read a half-filled one (KeyError: 'routes').
    monkeypatch.setenv("REWARDHUB_VERL_ROUTES", json.dumps({"openai/gsm8k": "exact_match"}))
    seen: list[object] = []

    def first_use(barrier: threading.Barrier) -> None:
        barrier.wait()
        try:
            seen.append(verl.route("openai/gsm8k"))
        except Exception as exc:
            seen.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible, so that the window is hit
    try:
        for _ in range(200):
            monkeypatch.setattr(verl, "_state", {})  # a fresh process: not configured yet
            barrier = threading.Barrier(8)
            threads = [threading.Thread(target=first_use, args=(barrier,)) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    assert seen == ["exact_match"] * 1600


def test_a_route_the_service_cannot_run_stops_verl_at_its_first_sample(
    live_server_factory: Any, monkeypatch: Any
) -> None:
    # verl cannot mask: a route to a PRM the service was not given trained on the invalid score (0.0)
    # for every sample of that data source. Each spec is checked once per process, then only scored.
    asked: list[Any] = []
    real_check = RewardClient.check

    def counting(self: RewardClient, reward: Any, config: Any = None) -> Any:
        asked.append(reward)
        return real_check(self, reward, config)

    monkeypatch.setattr(RewardClient, "check", counting)
    nested = {"name": "composite", "config": {"components": [{"reward": "math"}, {"reward": "prm"}]}}
    with live_server_factory() as server:
        verl.configure(server.url, routes={"gsm8k": "math", "steps": nested})
        for _ in range(3):
            assert verl.compute_score("gsm8k", "\\boxed{1}", "1")["score"] == 1.0
        for _ in range(2):
            with pytest.raises(RewardUnavailable, match=r"'prm' \(reward.config.components.1.reward\)"):
                verl.compute_score("steps", "\\boxed{1}", "1")
        with pytest.raises(RewardUnavailable, match="REWARDHUB_PRM_MODEL"):
            verl.compute_score_batch(["gsm8k", "steps"], ["\\boxed{1}"] * 2, ["1"] * 2)
        with pytest.raises(RewardUnavailable):
            asyncio.run(verl.compute_score_async("steps", "\\boxed{1}", "1"))
        assert len(asked) == 2  # math once, the composite once: the answers are kept
        # a shadow the service cannot run is checked as a route's spec, and named as the shadow
        verl.configure(server.url, routes={"gsm8k": "math"}, shadow="prm")
        for _ in range(2):
            with pytest.raises(RewardUnavailable, match=r"'prm' \(shadow.reward\).*REWARDHUB_PRM_MODEL"):
                verl.compute_score("gsm8k", "\\boxed{1}", "1")
        assert asked[2:] == ["math", "prm"]
        # a shadow spec that is also a route's: the route's own check error is the route's, not the shadow's
        verl.configure(server.url, routes={"steps": "prm"}, shadow="prm")
        with pytest.raises(RewardUnavailable, match=r"cannot run reward 'prm': .*REWARDHUB_PRM_MODEL"):
            verl.compute_score("steps", "1. one\n\n2. two", "2")
        assert asked[4:] == ["prm"]  # asked once, for both
        # REWARDHUB_VERL_CHECK=0 (or configure(check=False)): the old behaviour, flagged invalid samples
        monkeypatch.setenv("REWARDHUB_VERL_CHECK", "0")
        verl.configure(server.url, routes={"steps": nested})
        out = verl.compute_score("steps", "\\boxed{1}", "1")
        assert (out["score"], out["valid"]) == (0.0, 0.0)
        assert len(asked) == 5


def test_a_dataset_uid_seen_again_next_epoch_is_a_new_group(live_server_factory: Any) -> None:
    """The group id sent was extra_info's ``uid`` as is: a dataset's per-row id, the same every epoch.
    The service remembers a group reward's member set per group id (cache TTL, 7 days), so the row's
    next batch of rollouts, under the same id with other responses, was refused (422 "scored with
    other members before") and the verl step failed. Found in review."""
    with live_server_factory() as server:
        verl.configure(server.url, default_reward="majority_vote")

        def epoch(answers: list[str]) -> list[float]:
            batch = verl.compute_score_batch(
                data_sources=["ttrl"] * 6,
                solution_strs=[f"\\boxed{{{a}}}" for a in answers],
                ground_truths=[None] * 6,
                extra_infos=[{"uid": "row-7"}] * 3 + [{"uid": "row-8"}] * 3,
            )
            return [b["score"] for b in batch]

        assert epoch(["1", "1", "2", "5", "5", "5"]) == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
        assert epoch(["3", "4", "4", "6", "5", "6"]) == [0.0, 1.0, 1.0, 1.0, 0.0, 1.0]
        # one sample per call is never a whole group: refused, not a vote of one (1.0)
        with pytest.raises(ValueError, match="compute_score_batch"):
            verl.compute_score("ttrl", "\\boxed{1}", None, {"uid": "row-7"})


def test_a_group_reward_without_groups_stops_verl_instead_of_training_on_the_invalid_score(
    live_server_factory: Any,
) -> None:
    """A group reward (majority_vote, group_length...) answers an item without a ``group`` unsupported,
    and verl cannot mask a sample: a per-sample compute_score (which holds one rollout) and a batch whose
    extra_info has no ``uid``/``group`` (verl keeps its own rollout uid outside extra_info) scored every
    sample invalid and trained the whole run on REWARDHUB_VERL_INVALID_SCORE, without a word. The start
    check says which specs are group rewards: such calls now raise, naming what to do. Found in review."""
    with live_server_factory() as server:
        verl.configure(server.url, routes={"ttrl": "majority_vote"})
        with pytest.raises(ValueError, match=r"'majority_vote'.*compute_score_batch"):
            verl.compute_score("ttrl", "\\boxed{1}", None, {"index": 0})
        with pytest.raises(ValueError, match="compute_score_batch"):
            asyncio.run(verl.compute_score_async("ttrl", "\\boxed{1}", None, {"index": 0}))
        with pytest.raises(ValueError, match=r"2 of 4 samples have no 'uid' or 'group'"):
            verl.compute_score_batch(
                data_sources=["ttrl", "ttrl", "ttrl", "gsm8k"],
                solution_strs=["\\boxed{1}"] * 4,
                ground_truths=[None, None, None, "1"],
                extra_infos=[{"uid": "a"}, {"index": 1}, {"index": 1}, {"index": 2}],
            )
        # grouped, a batch is voted on; another reward needs no group
        batch = verl.compute_score_batch(
            data_sources=["ttrl", "ttrl", "ttrl", "gsm8k"],
            solution_strs=["\\boxed{1}", "\\boxed{1}", "\\boxed{2}", "\\boxed{1}"],
            ground_truths=[None, None, None, "1"],
            extra_infos=[{"uid": "a"}, {"uid": "a"}, {"uid": "a"}, {"index": 2}],
        )
        assert [(b["score"], b["valid"]) for b in batch] == [(1.0, 1.0), (1.0, 1.0), (0.0, 1.0), (1.0, 1.0)]
        # without the start check nothing says it is a group reward: flagged invalid, as before
        verl.configure(server.url, routes={"ttrl": "majority_vote"}, check=False)
        single = verl.compute_score("ttrl", "\\boxed{1}", None, {"index": 0})
        assert (single["score"], single["valid"]) == (0.0, 0.0)


def test_a_uid_of_0_groups_its_rollouts(live_server_factory: Any) -> None:
    """``extra_info.get("uid") or ...`` read a uid 0 (the first row, where uids are row indices) as
    none: that row's rollouts went ungrouped and a group reward answered them unsupported (the
    invalid score) while every other row was voted on. Found in review."""
    with live_server_factory() as server:
        verl.configure(server.url, default_reward="majority_vote")
        batch = verl.compute_score_batch(
            data_sources=["ttrl"] * 6,
            solution_strs=[
                "\\boxed{1}",
                "\\boxed{1}",
                "\\boxed{2}",
                "\\boxed{5}",
                "\\boxed{5}",
                "\\boxed{4}",
            ],
            ground_truths=[None] * 6,
            extra_infos=[{"uid": 0}] * 3 + [{"uid": 1}] * 3,
        )
        assert [(b["score"], b["valid"]) for b in batch] == [(1.0, 1.0), (1.0, 1.0), (0.0, 1.0)] * 2


def test_a_new_api_key_is_used_after_configure(live_server_factory: Any) -> None:
    """The cached sync client was keyed by URL alone: configure() with a rotated key kept sending the
    old one (every sample refused once the old key was revoked)."""
    from rewardhub_client import Forbidden

    with live_server_factory({"REWARDHUB_API_KEYS": "new-key"}) as server:
        verl.configure(server.url, default_reward="exact_match", api_key="revoked-key", check=False)
        with pytest.raises(Forbidden):
            verl.compute_score("squad", "x", "x")
        verl.configure(server.url, default_reward="exact_match", api_key="new-key", check=False)
        assert verl.compute_score("squad", "x", "x")["score"] == 1.0


class _CountingRelay:
    """A plain TCP relay in front of the live server that counts the connections made through it."""

    def __init__(self, port: int) -> None:
        import socket

        self.port = port
        self.accepted = 0
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            upstream = socket.create_connection(("127.0.0.1", self.port))
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: Any, dst: Any) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(1)  # pass the end of the stream on
        except OSError:
            pass

    def close(self) -> None:
        self._listener.close()
        for s in self._sockets:
            s.close()


def test_compute_score_async_reuses_one_connection_pool(live_server_factory: Any) -> None:
    """compute_score_async built a new AsyncRewardClient for every sample: a new TCP connection per
    sample (verl's reward loop awaits one call per rollout, thousands a step) and a new TLS context
    each time, tens of milliseconds of CPU on the reward loop's event loop per sample. Found in review."""
    with live_server_factory() as server:
        relay = _CountingRelay(int(server.url.rsplit(":", 1)[1]))
        try:
            verl.configure(relay.url, default_reward="math")

            async def reward_loop() -> list[dict[str, Any]]:  # one long-lived loop, one call per rollout
                return [await verl.compute_score_async("gsm8k", f"\\boxed{{{i}}}", str(i)) for i in range(6)]

            outs = asyncio.run(reward_loop())
            assert [o["score"] for o in outs] == [1.0] * 6
            assert relay.accepted <= 2, relay.accepted  # the start check and the scoring, pooled
        finally:
            relay.close()


def _requests(server_url: str, route: str) -> float:
    """The service's count of answered requests to ``route`` (its /metrics)."""
    prefix = f'rewardhub_requests_total{{route="{route}",status="200"}} '
    text = httpx.get(f"{server_url}/metrics").text
    return sum(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


def test_a_step_of_concurrent_calls_asks_the_check_once(live_server_factory: Any) -> None:
    """verl's reward loop awaits one compute_score_async per rollout, a step's worth at once (and runs a
    sync compute_score on executor threads, many at once): every first call asked the service the same
    check before any knew the answer, one check request per rollout of the first step where the
    documentation says one per spec per process. Found in review."""
    with live_server_factory() as server:
        verl.configure(server.url, default_reward="math")

        async def step() -> list[dict[str, Any]]:
            return list(
                await asyncio.gather(
                    *(verl.compute_score_async("x", f"\\boxed{{{i}}}", "3") for i in range(24))
                )
            )

        assert [o["score"] for o in asyncio.run(step())] == [1.0 if i == 3 else 0.0 for i in range(24)]
        assert _requests(server.url, "/v1/rewards/check") == 1
        assert asyncio.run(step())[3]["score"] == 1.0  # a later step: scored only
        assert _requests(server.url, "/v1/rewards/check") == 1

        verl.configure(server.url, default_reward="exact_match")  # a new spec, from executor threads
        barrier = threading.Barrier(16)
        outs: list[Any] = []

        def executor_thread() -> None:
            barrier.wait()
            outs.append(verl.compute_score("x", "Paris", "paris")["score"])

        threads = [threading.Thread(target=executor_thread) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert outs == [1.0] * 16
        assert _requests(server.url, "/v1/rewards/check") == 2
        assert _requests(server.url, "/v1/score") == 24 * 2 + 16


def test_the_question_in_extra_info_reaches_a_reward_that_reads_the_prompt(
    live_server_factory: Any, judge_server: Any, monkeypatch: Any
) -> None:
    """The adapter never sent a prompt: a route to a judge (or a PRM, an ORM) scored every sample
    without its question. verl's preprocessing keeps the raw question in extra_info["question"]. A sample
    without one was scored without its question, validly, with nothing to say so: the first one in a
    process warns (found in review)."""
    from fake_openai import Reply, user_text

    monkeypatch.setattr(verl, "_warned_question", [])  # a fresh process: not warned yet
    judge_server.reply = lambda body: Reply("Score: 5" if "What is 2 + 2?" in user_text(body) else "Score: 1")
    env = {"REWARDHUB_JUDGE_URL": judge_server.url, "REWARDHUB_JUDGE_MODEL": "fake-judge"}
    with live_server_factory(env) as server:
        verl.configure(server.url, routes={"qa": {"name": "judge", "config": {"mode": "pointwise"}}})
        asked = verl.compute_score("qa", "It is 4.", None, {"question": "What is 2 + 2?", "index": 3})
        with pytest.warns(UserWarning, match=r"'judge' reads the question, and 1 of 2 samples have no"):
            batch = verl.compute_score_batch(
                data_sources=["qa", "qa"],
                solution_strs=["Four.", "Four."],
                ground_truths=[None, None],
                extra_infos=[{"prompt": "What is 2 + 2?"}, {"index": 4}],
            )
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per process
            assert verl.compute_score("qa", "Four.", None, {"index": 5})["score"] == 0.0
            # a reward that does not read the question: no warning
            verl.configure(server.url, default_reward="math")
            assert verl.compute_score("x", "\\boxed{4}", "4", {})["score"] == 1.0
    assert (asked["score"], asked["valid"]) == (1.0, 1.0)
    assert [b["score"] for b in batch] == [1.0, 0.0]  # the second sample has no question to show


class _ResponseDown(httpx.BaseTransport):
    """HTTP to the live server, except that a scoring request holding a sample whose response is one of
    ``down`` is answered 503, as a service that lost a replica answers it (retried, then given up)."""

    def __init__(self, down: set[str]) -> None:
        self.inner = httpx.HTTPTransport()
        self.down = down

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/score":
            items = json.loads(request.content)["items"]
            if any(it["response"] in self.down for it in items):
                error = {"message": "replica gone", "type": "unavailable", "param": None, "code": 503}
                return httpx.Response(503, json={"error": error})
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def test_a_failed_chunk_of_a_batch_gets_the_invalid_score_flagged_and_keeps_the_rest(
    live_server_factory: Any, monkeypatch: Any
) -> None:
    """One chunk of compute_score_batch's request failing after the client's retries raised for the
    whole batch: the answered chunks' scores were lost and the verl step with them. Found in review.
    The failed chunk's samples get the invalid score with ``request_failed: 1.0``, warned once; a batch
    of which nothing was answered still raises, and so does any partial failure with
    on_request_failure="raise"."""
    from rewardhub_client import RetryPolicy, ServiceUnavailable

    transport = _ResponseDown({"\\boxed{3}"})
    batch = {
        "data_sources": ["gsm8k"] * 4,
        "solution_strs": ["\\boxed{1}", "\\boxed{2}", "\\boxed{3}", "\\boxed{4}"],
        "ground_truths": ["1", "1", "3", "3"],
        "extra_infos": [{}] * 4,
    }
    monkeypatch.setattr(verl, "_warned", [], raising=False)  # a fresh process: not warned yet
    with live_server_factory() as server:
        verl.configure(server.url, default_reward="math", invalid_score=-1.0, components=["correct"])
        fast = RetryPolicy(max_retries=1, backoff_s=0.001, max_backoff_s=0.001)
        # the adapter's client, over a transport that fails one chunk (two samples a chunk)
        sync = RewardClient(server.url, transport=transport, retry=fast, chunk_size=2)
        monkeypatch.setitem(verl._sync, (server.url, None), sync)
        try:
            with pytest.warns(UserWarning, match=r"2 of 4 samples were not scored"):
                outs = verl.compute_score_batch(**batch)
            assert [(o["score"], o["valid"], o["request_failed"]) for o in outs] == [
                (1.0, 1.0, 0.0),
                (0.0, 1.0, 0.0),
                (-1.0, 0.0, 1.0),
                (-1.0, 0.0, 1.0),
            ]
            assert [o["acc"] for o in outs] == [o["score"] for o in outs]
            assert len({frozenset(o) for o in outs}) == 1  # the same keys for every sample
            assert outs[0]["correct"] == 1.0 and math.isnan(outs[2]["correct"])
            with warnings.catch_warnings():  # warned once per process
                warnings.simplefilter("error")
                assert [o["request_failed"] for o in verl.compute_score_batch(**batch)] == [0, 0, 1, 1]
            # nothing answered: raised, not a batch of invalid scores
            transport.down.add("\\boxed{1}")
            with pytest.raises(ServiceUnavailable):
                verl.compute_score_batch(**batch)
            transport.down.discard("\\boxed{1}")
            verl.configure(server.url, default_reward="math", on_request_failure="raise")
            with pytest.raises(ServiceUnavailable) as info:
                verl.compute_score_batch(**batch)
            assert info.value.failed_indices == [2, 3]
        finally:
            sync.close()
    with pytest.raises(ValueError, match="REWARDHUB_VERL_ON_REQUEST_FAILURE"):
        verl.configure("http://unused", on_request_failure="mask")


def test_configure_elsewhere_closes_the_clients_of_the_old_service(live_server_factory: Any) -> None:
    """configure() with another URL (or key) left the pooled sync and async clients of the old one in the
    module's pools, their kept-alive connections open for the life of the process. Found in review."""
    from waiting import until

    with live_server_factory() as server:
        verl.configure(server.url, default_reward="math", check=False)
        assert verl.compute_score_batch(["gsm8k"], ["\\boxed{1}"], ["1"])[0]["score"] == 1.0
        assert asyncio.run(verl.compute_score_async("gsm8k", "\\boxed{1}", "1"))["score"] == 1.0
        old_sync = verl._sync[(server.url, None)]
        old_pools = [pool for pool, _ in verl._async[(server.url, None)]._pools.values()]
        assert old_pools and not old_sync._http.is_closed
        elsewhere = server.url.replace("127.0.0.1", "localhost")  # the same service, another URL
        verl.configure(elsewhere, default_reward="math", check=False)
        assert old_sync._http.is_closed
        asyncio.run(until(lambda: all(p.is_closed for p in old_pools), "the old async pool stayed open"))
        assert (server.url, None) not in verl._sync and (server.url, None) not in verl._async
        assert verl.compute_score_batch(["gsm8k"], ["\\boxed{1}"], ["1"])[0]["score"] == 1.0
        assert asyncio.run(verl.compute_score_async("gsm8k", "\\boxed{1}", "1"))["score"] == 1.0


def test_a_route_counting_tokens_gets_them_from_extra_info_or_stops_verl(live_server_factory: Any) -> None:
    """verl passes a reward function the decoded text, never the response's token ids or count, and the
    adapter sent none: ``length`` (its unit is tokens by default: DAPO's overlong punishment) and
    ``repetition`` with ``unit: token_ids`` answered every sample ``missing_reference``, and verl, unable
    to mask, trained every one on the invalid score. The ids or count are taken from ``extra_info``
    (where verl's reward loop merges an agent loop's ``extra_fields``), under the spec's keys; a route
    that reads them from a sample without them raises, naming the text units. Found in review."""
    np = pytest.importorskip("numpy")
    overlong = {"name": "length", "config": {"mode": "dapo_overlong", "max_length": 10, "cache_length": 4}}
    repeats = {"name": "repetition", "config": {"unit": "token_ids", "ngram_size": 2}}
    chars = {"name": "length", "config": {**overlong["config"], "unit": "chars"}}
    own_key = {"name": "length", "config": {**overlong["config"], "token_count_key": "n_tokens"}}
    routes = {"dapo": overlong, "rep": repeats, "chars": chars, "own": own_key, "mv": "group_length"}
    with live_server_factory() as server:
        verl.configure(server.url, routes=routes, default_reward="math")
        with pytest.raises(ValueError, match=r"'length'.*completion_tokens.*\"unit\": \"chars\""):
            verl.compute_score("dapo", "r", None, {"index": 0})
        with pytest.raises(ValueError, match=r"'repetition'.*completion_ids"):
            asyncio.run(verl.compute_score_async("rep", "r", None, {}))
        with pytest.raises(ValueError, match=r"'group_length'.*completion_tokens"):
            verl.compute_score_batch(["mv"], ["r"], [None], [{"uid": 1}])
        with pytest.raises(ValueError, match=r"n_tokens"):
            verl.compute_score("own", "r", None, {"completion_tokens": 3})
        # the count itself, or the ids (a list, or the numpy array a parquet column becomes)
        assert verl.compute_score("dapo", "r", None, {"completion_tokens": 3})["score"] == 0.0
        assert verl.compute_score("dapo", "r", None, {"completion_tokens": np.int64(12)})["score"] == -1.0
        assert verl.compute_score("dapo", "r", None, {"completion_ids": list(range(8))})["score"] == -0.5
        assert verl.compute_score("own", "r", None, {"n_tokens": 9})["score"] == -0.75
        rep = verl.compute_score("rep", "r", None, {"completion_ids": np.array([5, 5, 5, 5, 5])})
        assert (rep["score"], rep["valid"]) == (-0.75, 1.0)
        batch = verl.compute_score_batch(
            ["dapo", "rep", "chars"],
            ["r", "a b", "r" * 12],
            [None, None, None],
            [{"completion_ids": [1, 2, 3]}, {"completion_ids": [1, 2, 1, 2]}, {}],
        )
        assert [b["score"] for b in batch] == pytest.approx([0.0, -1 / 3, -1.0])
        assert all(b["valid"] == 1.0 for b in batch)


def test_a_misconfiguration_fails_at_configure_naming_its_setting(monkeypatch: Any) -> None:
    """A URL without its scheme, a route that is no reward spec, routes that are not JSON or an invalid
    score that is not a number passed configure() and failed at every sample (a pydantic error naming no
    setting, or a bare JSONDecodeError at the first use); a NaN invalid score reached verl's rewards.
    configure() raises, naming the setting. Found in review."""
    with pytest.raises(ValueError, match=r"url.*'localhost:8000'.*http://HOST:PORT"):
        verl.configure("localhost:8000")
    monkeypatch.setenv("REWARDHUB_URL", "rewardhub:8000")
    with pytest.raises(ValueError, match="REWARDHUB_URL"):
        verl.configure()
    monkeypatch.delenv("REWARDHUB_URL")
    with pytest.raises(ValueError, match=r"routes\['gsm8k'\].*not a reward spec"):
        verl.configure("http://unused", routes={"gsm8k": {"reward": "math"}})
    with pytest.raises(ValueError, match=r"routes must map data_source"):
        verl.configure("http://unused", routes=["math"])  # type: ignore[arg-type]
    monkeypatch.setenv("REWARDHUB_VERL_ROUTES", "{'gsm8k': 'math'}")
    with pytest.raises(ValueError, match="REWARDHUB_VERL_ROUTES is not JSON"):
        verl.configure("http://unused")
    monkeypatch.setenv("REWARDHUB_VERL_ROUTES", '{"gsm8k": {"name": "math", "config": {}}}')
    monkeypatch.setenv("REWARDHUB_VERL_INVALID_SCORE", "zero")
    with pytest.raises(ValueError, match="REWARDHUB_VERL_INVALID_SCORE must be a number"):
        verl.configure("http://unused")
    with pytest.raises(ValueError, match="REWARDHUB_VERL_INVALID_SCORE must be a finite number"):
        verl.configure("http://unused", invalid_score=math.nan)
    monkeypatch.setenv("REWARDHUB_VERL_INVALID_SCORE", "-1")
    monkeypatch.setenv("REWARDHUB_VERL_DEFAULT_REWARD", '{"name": "exact_match"}')
    verl.configure("http://unused")
    assert verl.route("gsm8k") == RewardSpec(name="math") and verl._conf()["invalid"] == -1.0
    assert verl.route("other") == RewardSpec(name="exact_match")


def test_unscored_samples_on_the_default_invalid_score_warn_once(
    live_server_factory: Any, monkeypatch: Any
) -> None:
    """verl cannot mask a sample, and logs the ``valid`` key only in its validation metrics: in training a
    sample the service could not score became a 0.0 reward, told apart from a wrong answer by nothing the
    run showed. The first such sample in a process warns, naming the reason and the setting; a score the
    user chose (``REWARDHUB_VERL_INVALID_SCORE``, ``invalid_score=``) does not. Found in review."""
    monkeypatch.setattr(verl, "_warned_invalid", [])  # a fresh process: not warned yet
    monkeypatch.delenv("REWARDHUB_VERL_INVALID_SCORE", raising=False)
    with live_server_factory() as server:
        verl.configure(server.url, default_reward="math")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert verl.compute_score("x", "\\boxed{1}", "1")["score"] == 1.0  # scored: no warning
        with pytest.warns(
            UserWarning, match=r"1 of 2 samples could not be scored \(reason: missing_reference\)"
        ):
            out = verl.compute_score_batch(["x", "x"], ["\\boxed{1}", "\\boxed{1}"], ["1", None], [{}, {}])
        assert [(o["score"], o["valid"]) for o in out] == [(1.0, 1.0), (0.0, 0.0)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert verl.compute_score("x", "\\boxed{1}", None)["valid"] == 0.0  # once per process
            monkeypatch.setattr(verl, "_warned_invalid", [])
            verl.configure(server.url, default_reward="math", invalid_score=0.0)  # chosen: no warning
            assert verl.compute_score("x", "\\boxed{1}", None)["valid"] == 0.0
            monkeypatch.setenv("REWARDHUB_VERL_INVALID_SCORE", "-1")
            verl.configure(server.url, default_reward="math")
            assert verl.compute_score("x", "\\boxed{1}", None)["score"] == -1.0
        monkeypatch.delenv("REWARDHUB_VERL_INVALID_SCORE")
        verl.configure(server.url, default_reward="math")
        with pytest.warns(UserWarning, match="REWARDHUB_VERL_INVALID_SCORE"):
            assert asyncio.run(verl.compute_score_async("x", "\\boxed{1}", None))["valid"] == 0.0


def test_verl_shadow_passes_the_data_source_and_returns_each_samples_outcome(
    live_server_factory: Any, monkeypatch: Any
) -> None:
    """``shadow`` (``REWARDHUB_VERL_SHADOW``, ``configure(shadow=...)``): the service scores every sample
    with a second reward too, the sample's ``data_source`` goes as ``metadata.data_source`` (the
    service's per-source shadow counts), and each sample's extra info says how the two compared, in
    keys verl averages per data source. verl had no shadow option (TRL's adapter and the trainer do)."""
    answers: list[Any] = []
    real = RewardClient.score

    def recording(self: RewardClient, *args: Any, **kwargs: Any) -> Any:
        answers.append(real(self, *args, **kwargs))
        return answers[-1]

    monkeypatch.setattr(RewardClient, "score", recording)
    keys = {"score", "acc", "valid", "cached", "request_failed"}
    shadow_keys = {"shadow_compared", "shadow_agree", "shadow_only", "primary_only"}
    calls = [
        ("openai/gsm8k", "\\boxed{1}", "1"),  # math passes, exact_match does not: primary_only
        ("squad", "Paris", "Paris"),  # both pass
        ("openai/gsm8k", "1", "1"),  # both pass
        ("openai/gsm8k", "\\boxed{1}", None),  # missing_reference: not compared
    ]
    with live_server_factory() as server:
        monkeypatch.setenv("REWARDHUB_VERL_SHADOW", '{"reward": "exact_match", "threshold": 0.5}')
        verl.configure(server.url, routes={"squad": "exact_match"}, default_reward="math")
        batch = verl.compute_score_batch(*(list(x) for x in zip(*calls, strict=True)))
        per_sample = [verl.compute_score(*c) for c in calls]
        monkeypatch.delenv("REWARDHUB_VERL_SHADOW")
        verl.configure(server.url, routes={"squad": "exact_match"}, shadow="exact_match")
        from_arg = [asyncio.run(verl.compute_score_async(*c)) for c in calls]
        verl.configure(server.url, routes={"squad": "exact_match"})
        plain_run = verl.compute_score(*calls[0])
    for outs in (batch, per_sample, from_arg):
        assert [set(o) for o in outs] == [keys | shadow_keys] * 4, outs
        assert [o["score"] for o in outs] == [1.0, 1.0, 1.0, 0.0]  # the primary's scores
        assert [o["shadow_compared"] for o in outs] == [1.0, 1.0, 1.0, 0.0]
        assert [o["shadow_agree"] for o in outs] == [0.0, 1.0, 1.0, 0.0]
        assert [o["primary_only"] for o in outs] == [1.0, 0.0, 0.0, 0.0]
        assert [o["shadow_only"] for o in outs] == [0.0, 0.0, 0.0, 0.0]
    assert set(plain_run) == keys  # no shadow, no shadow keys
    # the service counted them per data source (the sync calls' answers: the batch, then each sample)
    by_source = answers[0].metrics["shadow"]["by_source"]
    assert {k: (v["compared"], v["agree"]) for k, v in by_source.items()} == {
        "openai/gsm8k": (2, 1),
        "squad": (1, 1),
    }, by_source
    assert [a.metrics["shadow"]["threshold"] for a in answers[:5]] == [0.5] * 5
    assert "shadow" not in answers[5].metrics


def test_verl_shadow_setting_is_checked_as_it_is_read(monkeypatch: Any) -> None:
    monkeypatch.setenv("REWARDHUB_VERL_SHADOW", "{not json")
    with pytest.raises(ValueError, match="REWARDHUB_VERL_SHADOW"):
        verl.configure("http://unused")
    monkeypatch.setenv("REWARDHUB_VERL_SHADOW", '{"config": {}}')
    with pytest.raises(ValueError, match="REWARDHUB_VERL_SHADOW"):
        verl.configure("http://unused")
    with pytest.raises(ValueError, match="shadow"):
        verl.configure("http://unused", shadow={"reward": "math", "threshold": "high"})
    monkeypatch.delenv("REWARDHUB_VERL_SHADOW")
    verl.configure("http://unused", shadow={"name": "exact_match", "config": {}})
    item = verl._item("\\boxed{1}", "1", "openai/gsm8k", {}, None)
    assert item.metadata == {"data_source": "openai/gsm8k"}
