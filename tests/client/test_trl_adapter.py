"""The TRL reward function called with TRL's arguments, against the real service in process."""

from __future__ import annotations

import json
import warnings
from typing import Any

import httpx
import pytest

from rewardhub_client import AsyncRewardClient, RetryPolicy, RewardUnavailable, ServiceUnavailable
from rewardhub_client.trl import completion_text, make_reward_func, prompt_text


async def test_numeric_reference_column_is_scored(client: httpx.AsyncClient) -> None:
    # Datasets often hold numeric answers; the batch must be scored, not fail validation.
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        reward = make_reward_func(service, "math", reference_column="solution")
        scores = await reward(
            prompts=["What is 6*7?", "What is 6*7?", "Half of 1?"],
            completions=["\\boxed{42}", "\\boxed{41}", "\\boxed{0.5}"],
            solution=[42, 42, 0.5],
        )
    assert scores == [1.0, 0.0, 1.0]


class _Counting(httpx.AsyncBaseTransport):
    """The app's ASGI transport, counting requests by path."""

    def __init__(self, app: object) -> None:
        self.inner = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return await self.inner.handle_async_request(request)


async def test_a_spec_the_service_cannot_run_fails_the_first_call(client: httpx.AsyncClient) -> None:
    # A PRM the service was not given answered every item None: TRL trained on no signal, silently.
    transport = _Counting(client.app)  # type: ignore[attr-defined]
    call = {
        "prompts": ["What is 1+1?"] * 2,
        "completions": ["\\boxed{2}", "\\boxed{3}"],
        "solution": ["2"] * 2,
    }
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        spec = {"name": "composite", "config": {"components": [{"reward": "math"}, {"reward": "prm"}]}}
        reward = make_reward_func(service, spec)
        for _ in range(2):  # the answer is kept: asked once, raised on every call
            with pytest.raises(
                RewardUnavailable, match=r"'prm' \(reward.config.components.1.reward\).*REWARDHUB_PRM_MODEL"
            ):
                await reward(**call)
        assert transport.paths == ["/v1/rewards/check"]
        # a runnable spec: one check for the function's life, then only scoring
        transport.paths.clear()
        reward = make_reward_func(service, "math")
        assert await reward(**call) == [1.0, 0.0]
        assert await reward(**call) == [1.0, 0.0]
        assert transport.paths == ["/v1/rewards/check", "/v1/score", "/v1/score"]
        # check=False: no check, and the items come back masked as before
        transport.paths.clear()
        reward = make_reward_func(service, "prm", check=False)
        assert await reward(**call) == [None, None]
        assert transport.paths == ["/v1/score"]
        # a shadow the service cannot run: every item came back shadow_invalid and no agreement was ever
        # logged, with nothing said; it fails the first call, named as the shadow
        transport.paths.clear()
        reward = make_reward_func(service, "math", shadow="prm")
        for _ in range(2):
            with pytest.raises(RewardUnavailable, match=r"'prm' \(shadow.reward\).*REWARDHUB_PRM_MODEL"):
                await reward(**call)
        assert transport.paths == ["/v1/rewards/check", "/v1/rewards/check"]  # the reward's, the shadow's


async def test_a_service_without_the_check_route_is_scored_unchecked() -> None:
    paths: list[str] = []

    def older_service(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        if request.url.path == "/v1/rewards/check":
            return httpx.Response(404, json={"detail": "Not Found"})
        result = {"id": "0", "reward": "math", "score": 1.0, "valid": True}
        return httpx.Response(200, json={"request_id": "r", "results": [result]})

    async with AsyncRewardClient("http://old.test", transport=httpx.MockTransport(older_service)) as service:
        reward = make_reward_func(service, "math")
        assert await reward(prompts=["q"], completions=["\\boxed{1}"], solution=["1"]) == [1.0]
        assert await reward(prompts=["q"], completions=["\\boxed{1}"], solution=["1"]) == [1.0]
    assert paths == ["/v1/rewards/check", "/v1/score", "/v1/score"]


async def test_a_reference_column_the_dataset_does_not_have_is_an_error(client: httpx.AsyncClient) -> None:
    # make_reward_func's default reference_column="solution" on a dataset that calls it "answer": every
    # item came back None (missing_reference), every step, and TRL trained on no signal without a word.
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    call = {
        "prompts": ["What is 6*7?"] * 2,
        "completions": ["\\boxed{42}", "\\boxed{41}"],
        "answer": ["42"] * 2,
    }
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        with pytest.raises(ValueError, match=r"no column 'solution' \(its columns: answer\)"):
            await make_reward_func(service, "math")(**call, log_metric=lambda name, value: None)
        assert await make_reward_func(service, "math", reference_column="answer")(**call) == [1.0, 0.0]
        # a reward that needs no reference is scored as before, the column or not
        thinking = ["<think>6*7</think><answer>42</answer>", "42"]
        fmt = make_reward_func(service, {"name": "format", "config": {"preset": "think_answer"}})
        assert await fmt(prompts=call["prompts"], completions=thinking) == [1.0, 0.0]


async def test_conversational_message_content_is_read_as_text(client: httpx.AsyncClient) -> None:
    # TRL's multimodal format gives a message's content as a list of parts, and a tool-calling assistant
    # turn has no content: both were sent as Python reprs ("[{'type': 'text', ...}]", "None").
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    vlm_prompt = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Capital of France?"}]}
    ]
    completions = [
        [{"role": "assistant", "content": [{"type": "text", "text": "Paris"}]}],
        [
            {"role": "assistant", "content": None, "tool_calls": [{"type": "function"}]},
            {"role": "tool", "name": "search", "content": "Paris is the capital"},
            {"role": "assistant", "content": "Paris"},
        ],
        [{"role": "assistant", "content": "Rome"}],
    ]
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        reward = make_reward_func(service, "exact_match", reference_column="answer")
        scores = await reward(prompts=[vlm_prompt] * 3, completions=completions, answer=["Paris"] * 3)
    assert scores == [1.0, 1.0, 0.0]
    assert prompt_text(vlm_prompt) == "Capital of France?"


async def test_a_group_split_across_processes_raises_with_num_generations(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRL gives each process a slice of the batch, so a prompt's completions can be split; a group
    reward then voted among half a group, silently. Found in review."""
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    whole = {"prompts": ["p1"] * 3 + ["p2"] * 3, "completions": ["\\boxed{1}"] * 2 + ["\\boxed{2}"] * 4}
    half = {"prompts": ["p1"] * 3 + ["p2"] * 2, "completions": ["\\boxed{1}"] * 5}
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        vote = make_reward_func(service, "majority_vote", reference_column=None, num_generations=3)
        assert await vote(**whole) == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
        with pytest.raises(ValueError, match="got 2 of one prompt: TRL split the group across processes"):
            await vote(**half)
        # a pointwise reward does not care how groups are split
        math = make_reward_func(service, "math", reference_column=None, num_generations=3)
        assert await math(**half, solution=None) == [None] * 5
        # without num_generations, a group reward in a multi-process run warns once
        monkeypatch.setenv("WORLD_SIZE", "2")
        unguarded = make_reward_func(service, "majority_vote", reference_column=None)
        with pytest.warns(UserWarning, match="num_generations"):
            await unguarded(**whole)


async def test_an_evaluation_batch_with_its_own_group_size_is_not_a_split(client: httpx.AsyncClient) -> None:
    """TRL evaluates with num_generations_eval completions per prompt and does not tell the reward
    function it is evaluating: with num_generations=3, an eval batch of 2 per prompt raised "TRL split
    the group". Told num_generations_eval=2, whole groups of 2 are scored; a real split still raises."""
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    evaluation = {"prompts": ["p1"] * 2 + ["p2"] * 2, "completions": ["\\boxed{1}"] * 3 + ["\\boxed{2}"]}
    split = {"prompts": ["p1"] * 3 + ["p2"], "completions": ["\\boxed{1}"] * 4}
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        vote = make_reward_func(
            service, "majority_vote", reference_column=None, num_generations=3, num_generations_eval=2
        )
        # p2's 1 and 2 have a vote each: no pseudo-label (majority_vote's min_votes), so None
        assert await vote(**evaluation) == [1.0, 1.0, None, None]
        with pytest.raises(ValueError, match="TRL split the group"):
            await vote(**split)
        with pytest.raises(ValueError, match="num_generations_eval must be at least 1"):
            make_reward_func(service, "majority_vote", num_generations=3, num_generations_eval=0)


async def test_two_rows_with_the_same_prompt_text_are_two_groups(client: httpx.AsyncClient) -> None:
    """Groups were keyed by the prompt alone, so two dataset rows with the same prompt text (a VLM set:
    "What number is in the image?" over different images; a dataset with a duplicate question) became
    one group of 2G: a group reward voted across both problems, and with num_generations the call
    raised "TRL split the group" though nothing was split. TRL lays out each prompt's num_generations
    completions consecutively, so a group is a run of them. Found in review."""
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    call = {
        "prompts": ["What number is in the image?"] * 6,
        # row A's group votes 1, 1, 2 (majority 1); row B's votes 2, 2, 3 (majority 2)
        "completions": ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}", "\\boxed{2}", "\\boxed{2}", "\\boxed{3}"],
    }
    expected = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        vote = make_reward_func(service, "majority_vote", reference_column=None, num_generations=3)
        assert await vote(**call) == expected
        # without num_generations the rows are told apart by their references
        unguarded = make_reward_func(service, "majority_vote", reference_column="image_id")
        assert await unguarded(**call, image_id=["a"] * 3 + ["b"] * 3) == expected


class _DecodedImage:
    """Stands for the PIL image TRL puts into a VLM prompt: every completion's prompt holds its own
    decoded copy (the dataloader decodes the row once per generation), and its repr carries the
    object's address."""


async def test_vlm_prompts_with_image_objects_are_grouped_by_their_text(client: httpx.AsyncClient) -> None:
    """TRL (>= 1.x) hands reward functions VLM prompts as ``[{"type": "image", "image": <PIL image>},
    {"type": "text", ...}]``, one decoded image object per completion. Groups were keyed by
    ``repr(prompt)``, which differs per object ("<... at 0x7f...>"): every completion was a group of
    one, majority_vote scored each a vote of one (1.0 for all), and with num_generations the call
    raised "got 1 of one prompt". Found in review."""
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]

    def vlm_prompt() -> list[dict[str, Any]]:
        parts = [
            {"type": "image", "image": _DecodedImage()},
            {"type": "text", "text": "What number is shown?"},
        ]
        return [{"role": "user", "content": parts}]

    call = {
        "prompts": [vlm_prompt() for _ in range(6)],
        "completions": ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}", "\\boxed{2}", "\\boxed{2}", "\\boxed{3}"],
        "image_id": ["a"] * 3 + ["b"] * 3,
    }
    expected = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        vote = make_reward_func(service, "majority_vote", reference_column=None, num_generations=3)
        assert await vote(**call) == expected
        unguarded = make_reward_func(service, "majority_vote", reference_column="image_id")
        assert await unguarded(**call) == expected


def test_a_call_in_its_own_event_loop_leaves_no_connection_open(live_server_factory: Any) -> None:
    # Outside TRL (an evaluation script: asyncio.run per batch) each call ran in a new loop, and the
    # function kept a client per loop that nobody closed: a socket (and a client, and its loop) leaked per
    # call. A loop's client is now closed as the loop ends (asyncio.run cancels its tasks).
    import asyncio
    import os

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    call = {"prompts": ["p", "p"], "completions": ["a", "b"], "answer": ["a", "a"]}
    with live_server_factory() as server:
        reward = make_reward_func(server.url, "exact_match", reference_column="answer")
        assert asyncio.run(reward(**call)) == [1.0, 0.0]
        before = open_fds()
        for _ in range(20):
            assert asyncio.run(reward(**call)) == [1.0, 0.0]
        assert open_fds() <= before


async def test_tool_calls_trl_parsed_out_of_the_text_reach_the_tool_call_reward(
    client: httpx.AsyncClient,
) -> None:
    """With tools (transformers 5's response parsing), TRL hands a tool-calling turn over as
    ``{"content": "", "tool_calls": [{"type": "function", "function": {"name", "arguments"}}]}``: the
    calls were dropped from the text, so tool_call scored every call 0 (no_answer). For tool_call (alone
    or in a composite) they are sent as ``<tool_call>`` blocks; other rewards still read the content."""
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    wrong = {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}
    completions = [
        [{"role": "assistant", "content": "", "tool_calls": [call]}],
        [
            {"role": "assistant", "content": "Let me check.", "tool_calls": [call]},
            {"role": "tool", "name": "get_weather", "content": "sunny"},
            {"role": "assistant", "content": "It is sunny."},
        ],
        [{"role": "assistant", "content": "", "tool_calls": [wrong]}],
    ]
    reference = [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    composite = {"name": "composite", "config": {"components": [{"reward": "tool_call"}]}}
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        for spec in ("tool_call", composite):
            reward = make_reward_func(service, spec, reference_column="calls")
            scores = await reward(
                prompts=["Weather in Paris?"] * 3, completions=completions, calls=[reference] * 3
            )
            assert scores == [1.0, 1.0, 0.0], spec
    # other rewards read what they read before: the turns' content
    assert completion_text(completions[1]) == "Let me check.\nIt is sunny."


def test_a_service_that_is_no_url_or_async_client_is_refused_at_once() -> None:
    """A sync RewardClient passed as the service failed at TRL's first batch with "AttributeError:
    rstrip", far from the call that caused it, and an api_key beside a client object was dropped."""
    from rewardhub_client import AsyncRewardClient, RewardClient

    sync = RewardClient("http://127.0.0.1:9")
    try:
        with pytest.raises(TypeError, match="AsyncRewardClient"):
            make_reward_func(sync)  # type: ignore[arg-type]
    finally:
        sync.close()
    with pytest.raises(ValueError, match="api_key goes to the AsyncRewardClient"):
        make_reward_func(AsyncRewardClient("http://127.0.0.1:9"), api_key="k")


class _PromptDown(httpx.AsyncBaseTransport):
    """The app's ASGI transport, except that a scoring request holding an item of one of the ``down``
    prompts is answered 503, as a service that lost a replica answers it (retried, then given up)."""

    def __init__(self, app: object, down: set[str]) -> None:
        self.inner = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        self.down = down

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/score":
            items = json.loads(request.content)["items"]
            if any(it.get("prompt") in self.down for it in items):
                error = {"message": "replica gone", "type": "unavailable", "param": None, "code": 503}
                return httpx.Response(503, json={"error": error})
        return await self.inner.handle_async_request(request)


_FAST = RetryPolicy(max_retries=1, backoff_s=0.001, max_backoff_s=0.001)
# two prompts of two completions each; with chunk_size=2 each prompt's group is a chunk of its own
_TWO_GROUPS = {
    "prompts": ["p1", "p1", "p2", "p2"],
    "completions": ["\\boxed{1}", "\\boxed{2}", "\\boxed{1}", "\\boxed{2}"],
    "solution": ["1"] * 4,
}


async def test_a_failed_chunk_masks_its_items_and_keeps_the_answered_ones(client: httpx.AsyncClient) -> None:
    """One chunk of the request failing after the client's retries made the whole TRL call raise: the
    answered chunks' rewards were lost and the step with them. Found in review. The failed chunk's
    items get invalid_value (masked), counted in rewardhub/request_failed_fraction, warned once."""
    transport = _PromptDown(client.app, {"p2"})  # type: ignore[attr-defined]
    metrics: dict[str, float] = {}
    extra: dict[str, list[str]] = {}

    def log_metric(name: str, value: float) -> None:
        metrics[name] = value

    def log_extra(name: str, values: list[str]) -> None:
        extra[name] = values

    async with AsyncRewardClient(
        "http://rewardhub.test", transport=transport, retry=_FAST, chunk_size=2
    ) as service:
        reward = make_reward_func(service, "math", name="acc")
        with pytest.warns(UserWarning, match=r"2 of 4 items were not scored.*request_failed_fraction"):
            scores = await reward(**_TWO_GROUPS, log_metric=log_metric, log_extra=log_extra)
        assert scores == [1.0, 0.0, None, None]
        assert metrics["rewardhub/request_failed_fraction"] == 0.5
        assert metrics["rewardhub/invalid_fraction"] == 0.0  # over the answered items
        assert extra["acc_reason"] == ["", "", "request_failed", "request_failed"]
        # warned once: the next partly failed call only counts
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert await reward(**_TWO_GROUPS, log_metric=log_metric) == [1.0, 0.0, None, None]
            # a number for what the service could not score is the failed items' number too
            scored = make_reward_func(service, "math", invalid_value=-1.0)
            with pytest.warns(UserWarning):
                assert await scored(**_TWO_GROUPS) == [1.0, 0.0, -1.0, -1.0]
        # and a call answered whole says so
        transport.down.clear()
        assert await reward(**_TWO_GROUPS, log_metric=log_metric) == [1.0, 0.0, 1.0, 0.0]
        assert metrics["rewardhub/request_failed_fraction"] == 0.0


async def test_a_call_with_nothing_answered_still_raises(client: httpx.AsyncClient) -> None:
    """Every chunk failed (or one request, not chunked): no reward at all, and a step trained on none
    must not pass silently; on_request_failure="raise" raises for a partial failure too, its error
    carrying the answered results."""
    transport = _PromptDown(client.app, {"p1", "p2"})  # type: ignore[attr-defined]
    async with AsyncRewardClient(
        "http://rewardhub.test", transport=transport, retry=_FAST, chunk_size=2
    ) as service:
        reward = make_reward_func(service, "math")
        with pytest.raises(ServiceUnavailable) as info:
            await reward(**_TWO_GROUPS)
        assert info.value.partial_results is None
        transport.down.discard("p1")
        strict = make_reward_func(service, "math", on_request_failure="raise")
        with pytest.raises(ServiceUnavailable) as info:
            await strict(**_TWO_GROUPS)
        assert info.value.failed_indices == [2, 3]
    with pytest.raises(ValueError, match="on_request_failure must be 'invalid' or 'raise'"):
        make_reward_func(service, "math", on_request_failure="mask")  # type: ignore[arg-type]


async def test_token_counting_rewards_get_the_completions_token_counts(client: httpx.AsyncClient) -> None:
    """TRL passes each completion's token ids (``completion_ids``) and the function dropped them: the
    service has no tokenizer, so ``length`` (DAPO's overlong punishment, the cosine length reward) and
    ``group_length`` answered every item ``missing_reference`` (None, masked: a run on no signal). They
    go as ``metadata["completion_tokens"]``, as the project's own trainer sends them. Found in review."""
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        overlong = {
            "name": "length",
            "config": {"mode": "dapo_overlong", "max_length": 10, "cache_length": 4},
        }
        reward = make_reward_func(service, overlong, reference_column=None)
        scores = await reward(
            prompts=["Count."] * 3,
            completions=["one two three", "a longer one", "the longest one of all"],
            completion_ids=[[1, 2, 3], [4] * 8, [5] * 12],
        )
        assert scores == [0.0, -0.5, -1.0]
        # a caller that passes no token ids (not TRL): nothing to send, the items say what is missing
        assert await reward(prompts=["Count."], completions=["one"]) == [None]
        # a spec that names its own token_count_key gets the count there too (it was sent under
        # completion_tokens only: every item missing_reference)
        own_key = {"name": "length", "config": {**overlong["config"], "token_count_key": "n_tokens"}}
        reward = make_reward_func(service, own_key, reference_column=None)
        scores = await reward(
            prompts=["Count."] * 2, completions=["a", "b"], completion_ids=[[1, 2, 3], [4] * 12]
        )
        assert scores == [0.0, -1.0]


class _Recording(httpx.AsyncBaseTransport):
    """The app's ASGI transport, keeping the items of each scoring request."""

    def __init__(self, app: object) -> None:
        self.inner = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        self.items: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/score":
            self.items += json.loads(request.content)["items"]
        return await self.inner.handle_async_request(request)


async def test_a_reward_counting_token_ids_gets_trls_completion_ids(client: httpx.AsyncClient) -> None:
    """``repetition`` with ``unit: token_ids`` reads the completion's ids from ``metadata["completion_ids"]``
    (its ``token_ids_key``) and the function sent only their count: every item was ``missing_reference``
    (None, masked: a run on no signal). The ids go when the spec (or a part of it) reads them, and only
    then: as JSON they are about one and a half times the text. Found in review."""
    transport = _Recording(client.app)  # type: ignore[attr-defined]
    call = {
        "prompts": ["Go."] * 2,
        "completions": ["no repeats here", "none here either"],
        "completion_ids": [[5, 5, 5, 5, 5], [1, 2, 3, 4, 5]],
    }
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        by_ids = {"name": "repetition", "config": {"unit": "token_ids", "ngram_size": 2}}
        reward = make_reward_func(service, by_ids, reference_column=None)
        assert await reward(**call) == [-0.75, 0.0]  # 4 bigrams of [5 x 5], 1 unique: (1 - 1/4) * -1
        assert [it["metadata"]["completion_ids"] for it in transport.items] == call["completion_ids"]
        # the unit given in make_reward_func's config, a part of a composite, its own key
        nested = {"unit": "token_ids", "ngram_size": 2, "token_ids_key": "ids"}
        part = {
            "name": "composite",
            "config": {"components": [{"reward": {"name": "repetition", "config": nested}}]},
        }
        reward = make_reward_func(service, part, reference_column=None)
        assert await reward(**call) == [-0.75, 0.0]
        reward = make_reward_func(service, "repetition", config=nested, reference_column=None)
        assert await reward(**call) == [-0.75, 0.0]
        # words (the default) read the text: the ids are not sent, their count is
        transport.items.clear()
        reward = make_reward_func(service, "repetition", config={"ngram_size": 2}, reference_column=None)
        assert await reward(**call) == [0.0, 0.0]
        assert [it["metadata"] for it in transport.items] == [{"completion_tokens": 5}] * 2


def test_a_misconfiguration_fails_when_the_function_is_made() -> None:
    """A URL without its scheme failed only at TRL's first batch (the client is made then), and a reward
    mapping without a name was a bare KeyError 'name'. Both raise when the function is made, naming
    the argument. Found in review."""
    with pytest.raises(ValueError, match=r"service.*'localhost:8000'.*http://HOST:PORT"):
        make_reward_func("localhost:8000", "math")
    with pytest.raises(ValueError, match=r"reward.*not a reward spec"):
        make_reward_func("http://unused", {"reward": "math"})
    assert make_reward_func("http://unused", {"name": "math"}).__name__ == "rewardhub_math"


async def test_a_shadow_reward_is_logged_beside_the_rewards(client: httpx.AsyncClient) -> None:
    """make_reward_func(..., shadow=...): the rewards are the reward's own; each call logs how often the
    shadow agrees and which way they part."""
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    metrics: dict[str, float] = {}
    batch = {
        "prompts": ["p1", "p1", "p2", "p2"],
        # math reads \frac{2}{2} as 1; exact_match (whole response) sees LaTeX: only the reward passes it
        "completions": ["1", "\\boxed{\\frac{2}{2}}", "2", "1"],
        "solution": ["1"] * 4,
    }
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as service:
        reward = make_reward_func(service, "math", shadow="exact_match")
        scores = await reward(**batch, log_metric=lambda name, value: metrics.__setitem__(name, value))
    assert scores == [1.0, 1.0, 0.0, 1.0]
    assert metrics["rewardhub/shadow_agreement"] == 0.75
    assert metrics["rewardhub/primary_only_fraction"] == 0.25
    assert metrics["rewardhub/shadow_only_fraction"] == 0.0


class _ShadowCheckDown(httpx.AsyncBaseTransport):
    """The app's ASGI transport, except that the first ``fail`` checks of ``prm`` are answered 503."""

    def __init__(self, app: object, fail: int) -> None:
        self.inner = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        self.fail = fail
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        if request.url.path == "/v1/rewards/check" and b"prm" in request.content and self.fail > 0:
            self.fail -= 1
            error = {"message": "replica gone", "type": "unavailable", "param": None, "code": 503}
            return httpx.Response(503, json={"error": error})
        return await self.inner.handle_async_request(request)


async def test_a_shadow_check_that_failed_is_asked_again(client: httpx.AsyncClient) -> None:
    """The reward's check was recorded before the shadow's was asked: a shadow check that failed (the
    service briefly unavailable) left the function marked checked, and every later call scored with a
    shadow the service cannot run (each item shadow_invalid, no agreement logged, nothing said). Found in
    review. The next call asks again and raises RewardUnavailable naming the shadow."""
    call = {"prompts": ["What is 1+1?"], "completions": ["\\boxed{2}"], "solution": ["2"]}
    transport = _ShadowCheckDown(client.app, fail=2)  # type: ignore[attr-defined]
    async with AsyncRewardClient("http://rewardhub.test", transport=transport, retry=_FAST) as service:
        reward = make_reward_func(service, "math", shadow="prm")
        with pytest.raises(ServiceUnavailable):
            await reward(**call)
        assert "/v1/score" not in transport.paths
        with pytest.raises(RewardUnavailable, match=r"'prm' \(shadow.reward\).*REWARDHUB_PRM_MODEL"):
            await reward(**call)
        assert "/v1/score" not in transport.paths
