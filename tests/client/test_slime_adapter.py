"""The slime adapter (``--custom-rm-path rewardhub_client.slime.reward_func``) with slime's call shapes,
against a live service."""

from __future__ import annotations

import asyncio
import json
import warnings
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from rewardhub_client import AsyncRewardClient, RetryPolicy, RewardUnavailable, ServiceUnavailable, slime

pytestmark = pytest.mark.integration


@dataclass
class Sample:
    """A stand-in for slime's ``slime.utils.types.Sample`` (THUDM/slime, checked at 624b824a), the fields
    the adapter reads or writes, under slime's names and defaults: ``group_index`` (the prompt's group),
    ``prompt`` (the chat-templated string, or the messages), ``tokens`` (the prompt's and the response's
    token ids), ``response``, ``response_length`` (its token count), ``label`` (the dataset's
    label column), ``reward``, ``remove_sample`` (slime zeroes the loss mask of a sample that has it, in
    ``RolloutManager._convert_samples_to_train_data``) and ``metadata``."""

    group_index: int | None = None
    index: int | None = None
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    remove_sample: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


class _Counting(httpx.AsyncBaseTransport):
    """HTTP to the live server, counting the scoring requests; a scoring request holding a sample whose
    response is in ``down`` is answered 503, as a service that lost a replica answers it."""

    def __init__(self, seen: list[list[str]], down: set[str], paths: list[str]) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.seen = seen
        self.down = down
        self.paths = paths

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        if request.url.path == "/v1/score":
            responses = [it["response"] for it in json.loads(request.content)["items"]]
            self.seen.append(responses)
            if any(r in self.down for r in responses):
                error = {"message": "replica gone", "type": "unavailable", "param": None, "code": 503}
                return httpx.Response(503, json={"error": error})
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _client(
    url: str,
    seen: list[list[str]],
    down: set[str] | None = None,
    paths: list[str] | None = None,
    **kw: Any,
) -> AsyncRewardClient:
    gone = down if down is not None else set()
    asked = paths if paths is not None else []
    fast = RetryPolicy(max_retries=1, backoff_s=0.001, max_backoff_s=0.001)
    return AsyncRewardClient(url, transport=lambda: _Counting(seen, gone, asked), retry=fast, **kw)


CHATML = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n"


def test_a_sample_the_service_cannot_score_is_removed_and_a_scored_one_is_not(
    live_server_factory: Any,
) -> None:
    """slime's remote_rm can only return a number, so an unscorable sample trained as 0.0; through the
    custom reward function it gets ``remove_sample`` (slime masks its loss) and its reason in metadata."""
    with live_server_factory() as server:
        slime.configure(server.url)
        good = Sample(prompt=CHATML, response="The answer is \\boxed{4}", label="4")
        wrong = Sample(prompt=CHATML, response="\\boxed{5}", label="4")
        missing = Sample(prompt=CHATML, response="\\boxed{4}", label=None)
        assert asyncio.run(slime.reward_func(None, good)) == 1.0
        assert asyncio.run(slime.reward_func(None, wrong)) == 0.0
        assert asyncio.run(slime.reward_func(None, missing)) == 0.0
    assert (good.remove_sample, wrong.remove_sample, missing.remove_sample) == (False, False, True)
    assert good.metadata["rewardhub"]["valid"] is True and good.metadata["rewardhub"]["reason"] is None
    assert wrong.metadata["rewardhub"]["valid"] is True  # scored and wrong: trained on, as 0.0
    assert missing.metadata["rewardhub"] == {
        "valid": False,
        "reason": "missing_reference",
        "cached": False,
        "components": {},
    }


def test_a_group_is_one_request_and_its_invalid_sample_does_not_move_the_others(
    live_server_factory: Any,
) -> None:
    """With ``--group-rm`` slime passes the group's list: one request, one reward per sample. slime still
    puts a removed sample's reward into the group's mean and std, so it gets the mean of the group's
    valid rewards: [1, 1, 1, invalid] is no signal, where 0.0 would give the valid ones an advantage."""
    seen: list[list[str]] = []
    with live_server_factory() as server:
        slime.configure(client=_client(server.url, seen))
        group = [
            Sample(group_index=7, prompt=CHATML, response=f"\\boxed{{{a}}}", label=label)
            for a, label in (("4", "4"), ("4", "4"), ("4", "4"), ("4", None))
        ]
        assert asyncio.run(slime.reward_func(None, group)) == [1.0, 1.0, 1.0, 1.0]
        assert len(seen) == 1 and len(seen[0]) == 4
        assert [s.remove_sample for s in group] == [False, False, False, True]
        assert group[3].metadata["rewardhub"]["reason"] == "missing_reference"
        mixed = [
            Sample(group_index=8, response=f"\\boxed{{{a}}}", label=label)
            for a, label in (("4", "4"), ("5", "4"), ("4", None))
        ]
        assert asyncio.run(slime.reward_func(None, mixed)) == [1.0, 0.0, 0.5]
        # a number instead: returned for the removed sample as is
        slime.configure(client=_client(server.url, seen), invalid_reward=-1.0)
        again = [Sample(group_index=9, response="\\boxed{4}", label=label) for label in ("4", None)]
        assert asyncio.run(slime.reward_func(None, again)) == [1.0, -1.0]
        assert [s.remove_sample for s in again] == [False, True]
        assert asyncio.run(slime.reward_func(None, [])) == []
    assert len(seen) == 3


@dataclass
class Args:
    """The one field of slime's ``args`` the adapter reads: ``group_rm`` (``--group-rm``)."""

    group_rm: bool = False


def test_a_group_reward_needs_the_group(live_server_factory: Any) -> None:
    """A group reward votes among the list's samples of one ``group_index``; the same group index at
    the next epoch (other responses) is a new group."""
    with live_server_factory() as server:
        slime.configure(server.url, default_reward="majority_vote")

        def vote(answers: list[str], args: Any = None) -> list[float]:
            group = [Sample(group_index=3, response=f"\\boxed{{{a}}}") for a in answers]
            return asyncio.run(slime.reward_func(args, group))  # type: ignore[return-value]

        assert vote(["1", "1", "2"]) == [1.0, 1.0, 0.0]
        assert vote(["3", "2", "2"], Args(group_rm=True)) == [0.0, 1.0, 1.0]


def test_a_group_reward_scored_without_its_group_raises(live_server_factory: Any) -> None:
    """Without ``--group-rm`` slime calls the reward function per sample, and a single sample claims no
    group: a group reward answered every one ``unsupported`` and the adapter removed every sample from the
    loss, silently (a run on no signal). It raises, naming ``--group-rm`` (and, for slime's evaluation,
    which refuses ``--group-rm``, a reward that needs no group); a per-sample call under ``--group-rm`` (a
    custom rollout function) and a list without it (one rollout's samples from a custom generate
    function, not the prompt's group) raise too. Found in review."""
    with live_server_factory() as server:
        slime.configure(server.url, default_reward="majority_vote")
        single = Sample(group_index=3, response="\\boxed{1}")
        with pytest.raises(ValueError, match=r"majority_vote.*--group-rm"):
            asyncio.run(slime.reward_func(Args(), single))
        with pytest.raises(ValueError, match=r"majority_vote.*--group-rm"):
            asyncio.run(slime.reward_func(None, single))  # (no args: per sample all the same)
        assert not single.remove_sample and "rewardhub" not in single.metadata
        with pytest.raises(ValueError, match=r"evaluation refuses --group-rm.*\{\"verifier\""):
            asyncio.run(slime.reward_func(Args(), single))
        with pytest.raises(ValueError, match=r"although --group-rm is set"):
            asyncio.run(slime.reward_func(Args(group_rm=True), single))
        rollout = [Sample(group_index=3, response=f"\\boxed{{{a}}}") for a in ("1", "1")]
        with pytest.raises(ValueError, match=r"custom generate function.*--group-rm"):
            asyncio.run(slime.reward_func(Args(group_rm=False), rollout))
        # a label picking a group reward, the default another: the same
        label = json.dumps({"reward": {"name": "group_length", "config": {"unit": "chars"}}})
        slime.configure(server.url)
        with pytest.raises(ValueError, match=r"group_length.*--group-rm"):
            asyncio.run(slime.reward_func(Args(), Sample(response="r", label=label)))
        # a reward that is not a group reward still scores per sample
        assert asyncio.run(slime.reward_func(Args(), Sample(response="\\boxed{4}", label="4"))) == 1.0


def test_a_label_that_is_a_task_spec_picks_the_reward_and_the_prompt_is_the_user_turn(
    live_server_factory: Any, judge_server: Any
) -> None:
    """A JSON label picks the reward as /compat/slime/reward reads it; the question sent is the
    templated prompt's last user turn (or the last user message), not the policy's whole template."""
    from fake_openai import Reply, user_text

    judge_server.reply = lambda body: Reply(
        "Score: 5"
        if "What is 2 + 2?" in user_text(body) and "Be brief" not in user_text(body)
        else "Score: 1"
    )
    env = {"REWARDHUB_JUDGE_URL": judge_server.url, "REWARDHUB_JUDGE_MODEL": "fake-judge"}
    judge = json.dumps({"reward": {"name": "judge", "config": {"mode": "pointwise"}}})
    with live_server_factory(env) as server:
        slime.configure(server.url)
        exact = Sample(response="Paris", label=json.dumps({"verifier": "exact_match", "answer": "paris"}))
        templated = Sample(prompt=CHATML, response="It is 4.", label=judge)
        messages = Sample(
            prompt=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is 2 + 2?"},
            ],
            response="Four.",
            label=judge,
        )
        assert asyncio.run(slime.reward_func(None, exact)) == 1.0
        assert asyncio.run(slime.reward_func(None, [templated, messages])) == [1.0, 1.0]


def test_a_reward_the_service_cannot_run_stops_slime_at_its_first_sample(live_server_factory: Any) -> None:
    with live_server_factory() as server:
        slime.configure(server.url, default_reward="prm")
        with pytest.raises(RewardUnavailable, match="REWARDHUB_PRM_MODEL"):
            asyncio.run(slime.reward_func(None, Sample(response="\\boxed{1}", label="1")))
        with pytest.raises(RewardUnavailable):
            asyncio.run(slime.reward_func(None, [Sample(response="\\boxed{1}", label="1")]))
        slime.configure(server.url, default_reward="prm", check=False)
        unchecked = Sample(response="\\boxed{1}", label="1")
        assert asyncio.run(slime.reward_func(None, unchecked)) == 0.0
        assert unchecked.remove_sample


def test_a_rollout_batch_of_per_sample_calls_asks_the_check_once(live_server_factory: Any) -> None:
    """slime awaits every sample's reward call of a rollout batch at once: each first call asked the
    service the same check question, one request per sample, before any knew the answer."""
    seen: list[list[str]] = []
    paths: list[str] = []
    with live_server_factory() as server:
        slime.configure(client=_client(server.url, seen, paths=paths))

        async def batch() -> list[float | list[float]]:
            samples = [Sample(response=f"\\boxed{{{i}}}", label="3") for i in range(12)]
            return list(await asyncio.gather(*(slime.reward_func(None, s) for s in samples)))

        assert asyncio.run(batch()) == [1.0 if i == 3 else 0.0 for i in range(12)]
        assert asyncio.run(batch())[3] == 1.0
    assert paths.count("/v1/rewards/check") == 1 and paths.count("/v1/score") == 24


def test_a_failed_chunk_removes_its_samples_and_keeps_the_rest(
    live_server_factory: Any, monkeypatch: Any
) -> None:
    """A list whose request partly failed after the client's retries keeps the answered rewards and
    removes the failed chunk's samples (reason ``request_failed``), warned once; nothing answered, or
    ``on_request_failure="raise"``, raises."""
    monkeypatch.setattr(slime, "_warned", [])  # a fresh process: not warned yet
    seen: list[list[str]] = []
    down = {"\\boxed{3}"}
    with live_server_factory() as server:
        slime.configure(client=_client(server.url, seen, down, chunk_size=2))

        def batch() -> list[Sample]:
            return [
                Sample(group_index=g, response=f"\\boxed{{{a}}}", label=label)
                for g, a, label in ((0, "1", "1"), (0, "2", "1"), (1, "3", "3"), (1, "4", "3"))
            ]

        samples = batch()
        with pytest.warns(UserWarning, match=r"2 of 4 samples were not scored"):
            assert asyncio.run(slime.reward_func(None, samples)) == [1.0, 0.0, 0.0, 0.0]
        assert [s.remove_sample for s in samples] == [False, False, True, True]
        assert samples[2].metadata["rewardhub"]["reason"] == "request_failed"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            asyncio.run(slime.reward_func(None, batch()))
        down.add("\\boxed{1}")
        with pytest.raises(ServiceUnavailable):
            asyncio.run(slime.reward_func(None, batch()))
        down.discard("\\boxed{1}")
        slime.configure(client=_client(server.url, seen, down, chunk_size=2), on_request_failure="raise")
        with pytest.raises(ServiceUnavailable) as info:
            asyncio.run(slime.reward_func(None, batch()))
        assert info.value.failed_indices == [2, 3]
    with pytest.raises(ValueError, match="REWARDHUB_SLIME_ON_REQUEST_FAILURE"):
        slime.configure("http://unused", on_request_failure="mask")
    with pytest.raises(ValueError, match="REWARDHUB_SLIME_INVALID_REWARD"):
        slime.configure("http://unused", invalid_reward="zero")


def test_configuration_comes_from_the_environment(monkeypatch: Any) -> None:
    monkeypatch.setenv("REWARDHUB_URL", "http://rh.test:9000")
    monkeypatch.setenv("REWARDHUB_SLIME_DEFAULT_REWARD", '{"name": "exact_match", "config": {}}')
    monkeypatch.setenv("REWARDHUB_SLIME_INVALID_REWARD", "-0.5")
    monkeypatch.setenv("REWARDHUB_SLIME_CHECK", "0")
    monkeypatch.setattr(slime, "_state", {})
    conf = slime._conf()
    assert conf["url"] == "http://rh.test:9000" and conf["invalid"] == -0.5 and not conf["check"]
    assert conf["default"].name == "exact_match"
    assert slime._client().base_url == "http://rh.test:9000"


def test_token_counting_rewards_get_the_responses_token_counts(live_server_factory: Any) -> None:
    """slime's Sample carries its response's token count (``response_length``) and the adapter sent none:
    the service has no tokenizer, so ``length`` (DAPO's overlong punishment) and ``group_length``
    answered every sample ``missing_reference`` and every one was removed from the loss (a run on no
    signal). It goes as ``metadata["completion_tokens"]``. Found in review."""
    overlong = {"name": "length", "config": {"mode": "dapo_overlong", "max_length": 10, "cache_length": 4}}
    with live_server_factory() as server:
        slime.configure(server.url, default_reward=overlong)
        samples = [Sample(group_index=0, response="r", response_length=n) for n in (3, 8, 12)]
        assert asyncio.run(slime.reward_func(None, samples)) == [0.0, -0.5, -1.0]
        assert [s.remove_sample for s in samples] == [False, False, False]
        one = Sample(response="r", response_length=9)
        assert asyncio.run(slime.reward_func(None, one)) == -0.75 and not one.remove_sample
        # a spec naming its own token_count_key gets the count there too (was completion_tokens only)
        config = {**overlong["config"], "token_count_key": "n_tokens"}
        slime.configure(server.url, default_reward={"name": "length", "config": config})
        samples = [Sample(group_index=0, response="r", response_length=n) for n in (3, 12)]
        assert asyncio.run(slime.reward_func(None, samples)) == [0.0, -1.0]


def test_a_reference_column_without_a_spec_gives_its_reference(live_server_factory: Any) -> None:
    """A dataset converted from verl carries its reward_model column, {"ground_truth": ..., "style":
    "rule"}, as the sample's label; it was the math reward's reference whole, which math reads only
    under `answer`, so every sample was parse_error and removed. Its ground_truth is the reference, as
    /compat/slime/reward reads it."""
    row = {"ground_truth": "4", "style": "rule"}
    with live_server_factory() as server:
        slime.configure(server.url)
        as_object = Sample(prompt=CHATML, response="\\boxed{4}", label=row)
        as_json = Sample(prompt=CHATML, response="\\boxed{4}", label=json.dumps(row))
        assert asyncio.run(slime.reward_func(None, as_object)) == 1.0
        assert asyncio.run(slime.reward_func(None, as_json)) == 1.0
    assert (as_object.remove_sample, as_json.remove_sample) == (False, False)


def test_configure_elsewhere_closes_the_client_of_the_old_service(live_server_factory: Any) -> None:
    """configure() with another URL (or key) left the pooled client of the old one open: its pool on
    slime's long-lived event loop kept its connections for the life of the process. Found in review."""
    import threading

    from waiting import until

    loop = asyncio.new_event_loop()  # slime's rollout loop: one, in a thread of its own, for the run
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with live_server_factory() as server:
            slime.configure(server.url)

            def score() -> float | list[float]:
                sample = Sample(response="\\boxed{4}", label="4")
                return asyncio.run_coroutine_threadsafe(slime.reward_func(None, sample), loop).result(60)

            assert score() == 1.0
            old_pools = [pool for pool, _ in slime._clients[(server.url, None)]._pools.values()]
            assert old_pools and not any(p.is_closed for p in old_pools)
            slime.configure(server.url.replace("127.0.0.1", "localhost"))  # the same service, another URL
            asyncio.run(until(lambda: all(p.is_closed for p in old_pools), "the old pool stayed open"))
            assert (server.url, None) not in slime._clients
            assert score() == 1.0
    finally:
        # as slime's loop ends: the pool of the client now in use closes with it
        asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_a_reward_counting_token_ids_gets_the_responses_ids(live_server_factory: Any) -> None:
    """slime's Sample holds the prompt's and the response's token ids (``tokens``, the response its last
    ``response_length``) and the adapter sent only the count: ``repetition`` with ``unit: token_ids``
    answered every sample ``missing_reference`` and each was removed from the loss (a run on no signal).
    The response's ids go under the spec's ``token_ids_key``. Found in review."""
    repeats = {"name": "repetition", "config": {"unit": "token_ids", "ngram_size": 2}}
    with live_server_factory() as server:
        slime.configure(server.url, default_reward=repeats)
        looped = Sample(tokens=[101, 102, 5, 5, 5, 5, 5], response="r", response_length=5)
        assert asyncio.run(slime.reward_func(None, looped)) == -0.75 and not looped.remove_sample
        group = [
            Sample(group_index=0, tokens=[9, 1, 2, 3], response="r", response_length=3),
            Sample(group_index=0, tokens=[9, 9, 1, 2, 1, 2], response="r", response_length=4),
        ]
        assert asyncio.run(slime.reward_func(None, group)) == pytest.approx([0.0, -1 / 3])
        own_key = {"name": "repetition", "config": {**repeats["config"], "token_ids_key": "ids"}}
        slime.configure(server.url, default_reward=own_key)
        assert asyncio.run(slime.reward_func(None, Sample(tokens=[7, 7, 7], response_length=3))) == -0.5
        # a sample without its ids (none generated, or fewer than its response) is not scored: removed
        empty = Sample(tokens=[1], response="r", response_length=3)
        assert asyncio.run(slime.reward_func(None, empty)) == 0.0 and empty.remove_sample
        assert empty.metadata["rewardhub"]["reason"] == "missing_reference"


def test_a_misconfiguration_fails_at_configure_naming_its_setting(monkeypatch: Any) -> None:
    """A URL without its scheme, or a default reward that is no spec, passed configure() and failed at
    every sample (or at the first, as a bare JSONDecodeError); a NaN invalid reward reached slime's
    advantages. configure() raises, naming the setting. Found in review."""
    import math

    with pytest.raises(ValueError, match=r"url.*'localhost:8000'.*http://HOST:PORT"):
        slime.configure("localhost:8000")
    monkeypatch.setenv("REWARDHUB_URL", "rewardhub:8000")
    with pytest.raises(ValueError, match="REWARDHUB_URL"):
        slime.configure()
    monkeypatch.delenv("REWARDHUB_URL")
    monkeypatch.setenv("REWARDHUB_SLIME_DEFAULT_REWARD", '{"name": "math", ')
    with pytest.raises(ValueError, match="REWARDHUB_SLIME_DEFAULT_REWARD.*is not JSON"):
        slime.configure("http://unused")
    with pytest.raises(ValueError, match=r"default_reward.*not a reward spec"):
        slime.configure("http://unused", default_reward={"reward": "math"})
    monkeypatch.delenv("REWARDHUB_SLIME_DEFAULT_REWARD")
    with pytest.raises(ValueError, match="REWARDHUB_SLIME_INVALID_REWARD.*finite number"):
        slime.configure("http://unused", invalid_reward=math.nan)
    monkeypatch.setenv("REWARDHUB_SLIME_INVALID_REWARD", "inf")
    with pytest.raises(ValueError, match="REWARDHUB_SLIME_INVALID_REWARD"):
        slime.configure("http://unused")


def test_a_label_read_through_pandas_with_numpy_values_is_scored(live_server_factory: Any) -> None:
    """A label read from a parquet file through pandas holds its list fields as numpy arrays: one at the
    top was sent as its str() ("['6' '7']", no answer the reward could read), and one inside a task spec
    or a reference object failed to build the request (pydantic cannot serialize it). Found in review."""
    np = pytest.importorskip("numpy")
    schema = {"type": "object", "required": np.array(["a"])}
    with live_server_factory() as server:
        slime.configure(server.url)
        listed = Sample(prompt=CHATML, response="\\boxed{7}", label=np.array(["6", "7"]))  # type: ignore[arg-type]
        spec = Sample(
            prompt=CHATML,
            response='{"a": 1}',
            label={"verifier": "json_schema", "reference": schema},  # type: ignore[arg-type]
        )
        assert asyncio.run(slime.reward_func(None, listed)) == 1.0
        assert asyncio.run(slime.reward_func(None, spec)) == 1.0
    assert (listed.remove_sample, spec.remove_sample) == (False, False)


@pytest.mark.parametrize(
    "prompt",
    [
        # slime with multimodal_keys and no chat template: the prompt is one message's content parts, with
        # no role; it gave no question, so a judge or a prompt-reading reward scored without it
        [{"type": "text", "text": "What is in the picture?"}, {"type": "image", "path": "x.png"}],
        [{"type": "image", "path": "x.png"}, {"type": "text", "text": "What is in the picture?"}],
    ],
)
def test_a_prompt_of_content_parts_without_roles_is_its_text(prompt: list[dict[str, str]]) -> None:
    from rewardhub_client import prompts

    assert slime._prompt(prompt) == "What is in the picture?"
    assert prompts.prompt_text(prompt, json_types=True) == "What is in the picture?"
    # chat messages still give their last user turn, not their parts
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}]
    assert prompts.prompt_text(chat) == "What is in the picture?"
    assert prompts.prompt_text([{"type": "image", "path": "x.png"}]) is None
