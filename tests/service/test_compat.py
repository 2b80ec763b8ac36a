"""Drop-in protocols, each driven with the peer's exact payload shape."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import httpx
import pytest

from conftest import hold_the_service
from rewardhub.compat import nemo_gym, openrlhf
from rewardhub.compat.common import ScoreOutcome, _duplicates_together, parse_label
from rewardhub.config import ConfigError
from rewardhub.errors import RewardHubError
from rewardhub.protocol import RewardSpec, ScoreItem
from rewardhub.security import Caller

# What OpenRLHF's SingleTurnAgentExecutor sends: query = prompt + response decoded with special tokens.
PROMPT = "<|im_start|>user\nWhat is 6*7? Put the answer in \\boxed{}.<|im_end|>\n<|im_start|>assistant\n"


async def test_openrlhf_math(client: httpx.AsyncClient) -> None:
    payload = {
        "query": [
            PROMPT + "6*7 = 42, so \\boxed{42}<|im_end|>",
            PROMPT + "I think \\boxed{41}<|im_end|><|endoftext|>",
            "<s>" + PROMPT + "\\boxed{x}",  # a BOS before the prompt
        ],
        "prompts": [PROMPT, PROMPT, PROMPT],
        "labels": ["42", "42", '{"verifier": "exact_match", "answer": "\\\\boxed{x}"}'],
    }
    resp = await client.post("/compat/openrlhf/get_reward", json=payload)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"rewards", "scores", "extra_logs"}
    assert body["rewards"] == [1.0, 0.0, 1.0]
    assert body["scores"] == body["rewards"]
    assert body["extra_logs"]["rewardhub_valid"] == [1.0, 1.0, 1.0]
    assert len(body["extra_logs"]["rewardhub_cached"]) == 3


async def test_openrlhf_accepts_empty_lists(client: httpx.AsyncClient) -> None:
    resp = await client.post("/compat/openrlhf/get_reward", json={"query": [], "prompts": [], "labels": []})
    assert resp.status_code == 200
    assert resp.json() == {
        "rewards": [],
        "scores": [],
        "extra_logs": {"rewardhub_valid": [], "rewardhub_cached": [], "rewardhub_deadline_exceeded": []},
    }


async def test_openrlhf_answers_of_a_batch_split_across_urls_merge_key_by_key(
    client: httpx.AsyncClient,
) -> None:
    """OpenRLHF up to 0.9.0 (`--remote_rm_url a,b,c`) splits each batch by ceil(len/N) and merges the N
    answers with `torch.cat([logs[key] for logs in each answer's extra_logs])` for every key of the
    first answer's extra_logs. A short batch leaves the last URLs empty lists; their answer had
    `extra_logs: {}`, so the merge raised KeyError('rewardhub_valid') and stopped training."""
    query, prompts, labels = [PROMPT + "\\boxed{42}"] * 2, [PROMPT] * 2, ["42"] * 2
    urls = 3
    size = -(-len(query) // urls)  # ceil, as OpenRLHF's RemoteRewardModel.get_rewards
    answers = []
    for i in range(urls):
        part = {
            k: v[i * size : (i + 1) * size]
            for k, v in (("query", query), ("prompts", prompts), ("labels", labels))
        }
        resp = await client.post("/compat/openrlhf/get_reward", json=part)
        assert resp.status_code == 200, resp.text
        answers.append(resp.json())
    assert [len(a["rewards"]) for a in answers] == [1, 1, 0]
    merged = {
        key: [v for a in answers for v in a["extra_logs"][key]] for key in answers[0]["extra_logs"]
    }  # OpenRLHF 0.9.0's update_samples_with_rewards, without torch
    assert merged["rewardhub_valid"] == [1.0, 1.0]
    assert [r for a in answers for r in a["rewards"]] == [1.0, 1.0]


async def test_openrlhf_bad_label_flags_only_its_item(client: httpx.AsyncClient) -> None:
    payload = {
        "query": [PROMPT + "\\boxed{1}", PROMPT + "\\boxed{1}"],
        "prompts": [PROMPT, PROMPT],
        "labels": ["1", json.dumps({"verifier": "no_such_reward", "answer": "1"})],
    }
    body = (await client.post("/compat/openrlhf/get_reward", json=payload)).json()
    assert body["rewards"] == [1.0, 0.0]
    assert body["extra_logs"]["rewardhub_valid"] == [1.0, 0.0]


async def test_slime_math(client: httpx.AsyncClient) -> None:
    # slime's remote_rm sends {"prompt", "response", "label"} and reads `--reward-key reward`.
    ok = await client.post(
        "/compat/slime/reward",
        json={"prompt": "What is 1/2 + 1/4?", "response": "It is \\boxed{\\frac34}", "label": "0.75"},
    )
    assert ok.status_code == 200
    assert ok.json()["reward"] == 1.0 and ok.json()["valid"] is True
    wrong = (
        await client.post(
            "/compat/slime/reward", json={"prompt": "q", "response": "\\boxed{1}", "label": "2"}
        )
    ).json()
    assert (wrong["reward"], wrong["valid"]) == (0.0, True)
    no_label = (
        await client.post("/compat/slime/reward", json={"prompt": "q", "response": "\\boxed{1}"})
    ).json()
    assert (no_label["reward"], no_label["valid"], no_label["reason"]) == (0.0, False, "missing_reference")


async def test_a_lone_surrogate_from_a_peer_is_flagged_not_a_500(client: httpx.AsyncClient) -> None:
    """A peer's body is parsed by the standard library, which reads "\\ud800" as a lone surrogate: it
    reached the cache key, whose encoding failed the request with a 500 (/v1/score answers 422)."""
    body = b'{"prompt": "q", "response": "\\boxed{1} \\ud800", "label": "1"}'
    resp = await client.post(
        "/compat/slime/reward", content=body, headers={"content-type": "application/json"}
    )
    assert resp.status_code == 200, resp.text
    got = resp.json()
    assert (got["reward"], got["valid"], got["reason"]) == (0.0, False, "invalid_request"), got


async def test_slime_waits_for_room_within_its_deadline(make_app: Any) -> None:
    """slime's remote_rm trains on the reward it is answered: a sample that met a full service for a
    moment was answered "overloaded", reward 0.0, at once: a correct answer taught as wrong. It waits for
    room within REWARDHUB_SLIME_DEADLINE_S now (slime's client gives a call 120 s)."""
    async with make_app(max_inflight_items=2) as c:
        busy = await hold_the_service(c, 2)  # for its items' 1 s deadline
        resp = await c.post(
            "/compat/slime/reward", json={"prompt": "q", "response": "\\boxed{1}", "label": "1"}
        )
        await busy
    assert resp.status_code == 200 and resp.json()["reward"] == 1.0 and resp.json()["valid"], resp.json()
    async with make_app(max_inflight_items=2, slime_deadline_s=0.5) as c:
        busy = await hold_the_service(c, 2, hold_s=5.0)
        resp = await c.post(
            "/compat/slime/reward", json={"prompt": "q", "response": "\\boxed{1}", "label": "1"}
        )
        busy.cancel()
        await asyncio.gather(busy, return_exceptions=True)
    assert resp.status_code == 200 and resp.json()["valid"] is False, resp.json()
    assert resp.json()["reason"] == "deadline_exceeded"


async def test_slime_overload_is_200_invalid(make_app: Any) -> None:
    # without a deadline (REWARDHUB_SLIME_DEADLINE_S=0) a full service is answered at once, never with a
    # status slime would retry ten times
    async with make_app(max_inflight_items=2, slime_deadline_s=0) as c:
        busy = await hold_the_service(c, 2)
        resp = await c.post(
            "/compat/slime/reward", json={"prompt": "q", "response": "\\boxed{1}", "label": "1"}
        )
        assert resp.status_code == 200  # never a status slime would retry ten times
        assert resp.json()["valid"] is False and resp.json()["reason"] == "overloaded"
        await busy


async def test_overload_flags_the_sent_items_and_keeps_the_others_own_reasons(make_app: Any) -> None:
    """An item flagged before scoring (an unreadable label) keeps its reason when the rest of the batch
    meets a full service: "overloaded" would tell the peer that a retry can fix it."""
    from rewardhub.compat.common import score_or_flag
    from rewardhub.errors import InvalidRequest
    from rewardhub.protocol import ScoreItem
    from rewardhub.security import ANONYMOUS

    async with make_app(max_inflight_items=2) as c:
        state = c.app.state  # type: ignore[attr-defined]
        busy = await hold_the_service(c, 2)
        items = [
            InvalidRequest("the label is not JSON"),
            ScoreItem(response="\\boxed{1}", reference="1", reward="math"),
        ]
        outcome = await score_or_flag(state.scoring, state.admission, ANONYMOUS, items)
        assert [r["reason"] for r in outcome.results] == ["invalid_request", "overloaded"]
        assert outcome.results[0]["error"] == "the label is not JSON"
        await busy


async def test_each_items_limits_are_checked_once(client: httpx.AsyncClient, monkeypatch: Any) -> None:
    """score_or_flag checks every item's limits, and resolves each spec on the first item that names it:
    that resolution ran the whole of validate(), checking the first item's limits a second time. Still
    once per item (and the spec's error shared by its items, an item's own limit error its own)."""
    from rewardhub.compat.common import score_or_flag
    from rewardhub.security import ANONYMOUS

    state = client.app.state  # type: ignore[attr-defined]
    scoring = state.scoring
    checked: list[int] = []
    check_limits = scoring.check_limits

    def counted(req: Any, max_items: int | None = None) -> None:
        checked.append(len(req.items))
        check_limits(req, max_items)

    monkeypatch.setattr(scoring, "check_limits", counted)
    big = "x" * (scoring.settings.max_field_bytes + 1)
    bad = RewardSpec(name="math", config={"wrong_scor": 1})
    items: list[ScoreItem | RewardHubError] = [
        ScoreItem(response="\\boxed{1}", reference="1", reward="math"),
        ScoreItem(response=big, reference="1", reward="math"),
        ScoreItem(response="\\boxed{2}", reference="1", reward="math"),
        ScoreItem(response="\\boxed{1}", reference="1", reward=bad),
        ScoreItem(response="\\boxed{1}", reference="1", reward=bad),
    ]
    outcome = await score_or_flag(scoring, state.admission, ANONYMOUS, items)
    # (the scoring call itself checks its request's limits once more: the 2 items sent)
    assert checked == [1] * len(items) + [2], checked
    assert [r["valid"] for r in outcome.results] == [True, False, True, False, False]
    assert [r.get("score") for r in outcome.results[::2]] == [1.0, 0.0, None]
    assert [r["reason"] for r in outcome.results if not r["valid"]] == [
        "limit_exceeded",
        *["invalid_request"] * 2,
    ]


NEMO_VERIFY = {
    "responses_create_params": {"input": [{"role": "user", "content": "What is 2+2?"}]},
    "response": {
        "id": "resp_1",
        "object": "response",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "2+2 = ", "annotations": []},
                    {"type": "output_text", "text": "\\boxed{4}", "annotations": []},
                ],
            },
        ],
    },
    "expected_answer": "4",
    "_ng_task_index": 3,
    "_ng_rollout_index": 0,
}


async def test_nemo_gym_verify_echoes_and_adds_reward(client: httpx.AsyncClient) -> None:
    resp = await client.post("/compat/nemo-gym/verify", json=NEMO_VERIFY)
    assert resp.status_code == 200
    body = resp.json()
    for key, value in NEMO_VERIFY.items():
        assert body[key] == value  # the request is echoed
    assert body["reward"] == 1.0
    assert body["mask_sample"] is False and body["failure_kind"] is None
    assert body["extracted_answer"] == "4"
    wrong = (
        await client.post("/compat/nemo-gym/verify", json={**NEMO_VERIFY, "expected_answer": "5"})
    ).json()
    assert wrong["reward"] == 0.0 and wrong["mask_sample"] is False


async def test_nemo_gym_unscorable_sample_is_masked(client: httpx.AsyncClient) -> None:
    body = {k: v for k, v in NEMO_VERIFY.items() if k != "expected_answer"}
    out = (await client.post("/compat/nemo-gym/verify", json=body)).json()
    assert out["mask_sample"] is True and out["failure_kind"] == "rewardhub:missing_reference"


async def test_nemo_rl_masks_an_unscorable_sample_where_it_reads_the_flag(
    client: httpx.AsyncClient,
) -> None:
    """NeMo RL drops a sample from the loss when its verify result says so, and reads the flag at
    `instance_config.mask_sample` (nemo_rl/experience/rollouts.py, _extract_mask_sample_flags); it
    collects through NeMo Gym's run_examples, which keeps `_ng_failure_class` rows in the batch. The flag
    was only at the top level, so NeMo RL trained on every unscorable sample as a 0.0 reward. A task's
    own `instance_config` keeps its other keys; a reverified row loses a stale flag."""
    unscorable = {k: v for k, v in NEMO_VERIFY.items() if k != "expected_answer"}
    unscorable["instance_config"] = {"seed": 7}
    out = (await client.post("/verify", json=unscorable)).json()
    assert out["instance_config"] == {"seed": 7, "mask_sample": True}, out
    assert out["mask_sample"] is True  # (NeMo Gym's own agents and metrics read it here)
    stale = {**NEMO_VERIFY, "instance_config": {"mask_sample": True}}
    out = (await client.post("/verify", json=stale)).json()
    assert out["reward"] == 1.0 and out["instance_config"] == {"mask_sample": False}, out


async def test_nemo_rl_reward_components_sum_to_the_reward(client: httpx.AsyncClient) -> None:
    """NeMo RL takes `reward_components` as the objectives the scalar `reward` is the sum of (GDPO's
    per-component advantages) and raises ValueError, ending the run, for a verify result whose reward is
    not their sum (validate_reward_components_match_scalar). rewardhub's components are diagnostics
    (calibration's correct/confidence/brier, format's checks, a composite's parts), not addends: they
    were sent there, so the first calibration or format sample stopped a NeMo RL run. They are under
    `rewardhub.components` instead, and no result carries `reward_components` NeMo RL would reject."""
    text = "<think>six sevens</think><answer>\\boxed{42}</answer><confidence>0.7</confidence>"
    row = {
        "responses_create_params": {"input": "What is 6*7?"},
        "response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": text}]}]},
        "expected_answer": "42",
    }
    for reward in ("calibration", "format", "f1", "math"):
        out = (await client.post("/verify", json={**row, "reward": reward})).json()
        assert out["mask_sample"] is False, out
        components = out.get("reward_components") or {}
        if components:  # NeMo RL's own check
            assert math.isclose(out["reward"], sum(components.values()), rel_tol=1e-5, abs_tol=1e-6), out
        assert out["rewardhub"]["components"], out  # the diagnostics are still answered
    out = (await client.post("/verify", json={**row, "reward": "calibration"})).json()
    assert out["rewardhub"]["components"]["confidence"] == 0.7
    # a stored answer reverified: its stale components are not echoed as ours
    stale = {**row, "reward": 0.91, "reward_components": {"correct": 1.0, "brier": 0.09}}
    assert "reward_components" not in (await client.post("/verify", json=stale)).json()


async def test_nemo_gym_session_and_metrics_endpoints(client: httpx.AsyncClient) -> None:
    assert (await client.post("/compat/nemo-gym/seed_session", json={})).json() == {}
    seeded = await client.post(
        "/compat/nemo-gym/seed_session",
        json={"resources_session_id": "s1", "episode_id": "e", "task_id": "t", "task_data": {}},
    )
    assert seeded.json() == {"resources_session_id": "s1"}
    assert (
        await client.post("/compat/nemo-gym/close_session", json={"resources_session_id": "s1"})
    ).json() == {"resources_session_id": "s1"}
    assert (await client.get("/compat/nemo-gym/reverify_mode")).json() == "stateless"
    agg = (
        await client.post(
            "/compat/nemo-gym/aggregate_metrics",
            json={
                "verify_responses": [
                    {"_ng_task_index": 0, "reward": 1.0},
                    {"_ng_task_index": 0, "reward": 0.0},
                    {"_ng_task_index": 1, "reward": 0.0},
                    {"_ng_task_index": 1, "reward": 0.0, "mask_sample": True},
                ]
            },
        )
    ).json()
    tasks = {g["task_index"]: g for g in agg["group_level_metrics"]}
    assert tasks[0]["mean/reward"] == 0.5 and tasks[0]["num_rollouts"] == 2 and tasks[0]["pass@k"] == 1.0
    assert tasks[1]["num_rollouts"] == 1 and tasks[1]["pass@k"] == 0.0
    assert agg["agent_metrics"]["num_masked"] == 1
    assert agg["key_metrics"]["mean/reward"] == 1 / 3
    assert agg["key_metrics"]["pass@k"] == 0.5


async def test_malformed_task_spec_labels_are_flagged_not_500(client: httpx.AsyncClient) -> None:
    payload = {
        "query": ["\\boxed{1}"] * 4,
        "prompts": [""] * 4,
        "labels": [{"verifier": "math", "config": [1, 2]}, {"reward": {"nope": 1}}, False, 7],
    }
    resp = await client.post("/compat/openrlhf/get_reward", json=payload)
    assert resp.status_code == 200
    assert resp.json()["extra_logs"]["rewardhub_valid"] == [0.0, 0.0, 1.0, 1.0]
    slime = await client.post(
        "/compat/slime/reward", json={"response": "x", "label": {"reward": 5, "config": "bad"}}
    )
    assert slime.status_code == 200 and slime.json()["valid"] is False


async def test_nemo_gym_reverify_of_a_stored_verify_response(client: httpx.AsyncClient) -> None:
    """`gym eval reverify` posts stored /verify answers back to /verify: the old numeric `reward` (and
    our other result fields) are results to replace, not a task field naming the reward."""
    first = (await client.post("/compat/nemo-gym/verify", json=NEMO_VERIFY)).json()
    assert first["reward"] == 1.0
    again = (await client.post("/compat/nemo-gym/verify", json=first)).json()
    assert (again["reward"], again["mask_sample"], again["failure_kind"]) == (1.0, False, None)
    # the stored row's verdict is recomputed, not trusted: a changed reference turns it to 0
    changed = (await client.post("/compat/nemo-gym/verify", json={**first, "expected_answer": "5"})).json()
    assert (changed["reward"], changed["mask_sample"]) == (0.0, False)
    unscorable = {**first, "response": {"output": []}, "expected_answer": None}
    masked = (await client.post("/compat/nemo-gym/verify", json=unscorable)).json()
    assert masked["mask_sample"] is True and masked["reward"] == 0.0
    assert "extracted_answer" not in masked  # the stored answer's "4" is not this verdict's


async def test_slime_prompt_as_chat_messages(client: httpx.AsyncClient) -> None:
    """slime's Sample.prompt is `str | list[dict]`: without a chat template applied it posts the messages.
    A 422 there would be retried ten times and then crash the rollout."""
    messages = [
        {"role": "system", "content": "Put the answer in \\boxed{}."},
        {"role": "user", "content": "What is 1/2 + 1/4?"},
    ]
    resp = await client.post(
        "/compat/slime/reward",
        json={"prompt": messages, "response": "It is \\boxed{\\frac34}", "label": "0.75"},
    )
    assert resp.status_code == 200, resp.text
    assert (resp.json()["reward"], resp.json()["valid"]) == (1.0, True)


async def test_openrlhf_left_truncated_prompt_is_not_scored_as_the_response(
    client: httpx.AsyncClient,
) -> None:
    """OpenRLHF cuts an over-long prompt from the left (prompt_token_ids[-max_prompt_length:]) but posts
    the whole prompt string, so `query` holds only the prompt's tail. That tail, with its worked example's
    \\boxed{5}, is not part of the response."""
    prompt = (
        "<|im_start|>user\nExample: 2+3 = \\boxed{5}.\nNow: what is 10/2? Put the answer in \\boxed{}."
        "<|im_end|>\n<|im_start|>assistant\n"
    )
    truncated = prompt[len("<|im_start|>user\nExample: ") :]
    payload = {
        "query": [truncated + "I am not sure.<|im_end|>", truncated + "So \\boxed{5}<|im_end|>"],
        "prompts": [prompt, prompt],
        "labels": ["5", "5"],
    }
    body = (await client.post("/compat/openrlhf/get_reward", json=payload)).json()
    assert body["rewards"] == [0.0, 1.0]
    assert body["extra_logs"]["rewardhub_valid"] == [1.0, 1.0]


async def test_openrlhf_vlm_prompt_with_expanded_image_tokens_is_not_scored_as_the_response(
    client: httpx.AsyncClient,
) -> None:
    """For an image prompt OpenRLHF tokenizes with the VLM processor, which expands the template's one
    <|image_pad|> into one per image patch; `query` decodes those ids, so it never holds the prompt
    string. The whole query (system prompt, question with its worked example) was scored as the
    response: here the example's \\boxed{5} passed a response that gave no answer."""
    head = "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n<|vision_start|>"
    tail = (
        "<|vision_end|>Example: 2+3 = \\boxed{5}.\nHow many apples are in the picture? Put it in \\boxed{}."
        "<|im_end|>\n<|im_start|>assistant\n"
    )
    prompt = head + "<|image_pad|>" + tail
    decoded = head + "<|image_pad|>" * 64 + tail
    payload = {
        "query": [decoded + "I cannot tell.<|im_end|>", decoded + "I count \\boxed{5}.<|im_end|>"],
        "prompts": [prompt, prompt],
        "labels": ["5", json.dumps({"verifier": "exact_match", "answer": "I count \\boxed{5}."})],
    }
    body = (await client.post("/compat/openrlhf/get_reward", json=payload)).json()
    assert body["rewards"] == [0.0, 1.0]
    assert body["extra_logs"]["rewardhub_valid"] == [1.0, 1.0]


async def test_openrlhf_batch_larger_than_max_items_is_scored(make_app: Any) -> None:
    """OpenRLHF's list contract has no size limit (older releases post a whole rollout batch): a batch over
    REWARDHUB_MAX_ITEMS is scored in parts, not flagged invalid item by item as a 0.0 each."""
    payload = {
        "query": [PROMPT + f"\\boxed{{{n}}}" for n in (1, 2, 3, 4, 5)],
        "prompts": [PROMPT] * 5,
        "labels": ["1", "2", "3", "0", "5"],
    }
    async with make_app(max_items=2) as c:
        body = (await c.post("/compat/openrlhf/get_reward", json=payload)).json()
        assert body["rewards"] == [1.0, 1.0, 1.0, 0.0, 1.0]
        assert body["extra_logs"]["rewardhub_valid"] == [1.0] * 5
    # Over REWARDHUB_MAX_INFLIGHT_ITEMS too, with other work in flight: the parts are admitted one by
    # one. Admitted whole, the batch was 'overloaded' whenever anything else was being scored.
    async with make_app(max_items=2, max_inflight_items=4) as c:
        admission = c.app.state.admission  # type: ignore[attr-defined]
        async with admission.admit(Caller("someone-else"), 1):
            body = (await c.post("/compat/openrlhf/get_reward", json=payload)).json()
        assert body["rewards"] == [1.0, 1.0, 1.0, 0.0, 1.0], body
        assert body["extra_logs"]["rewardhub_valid"] == [1.0] * 5


async def test_openrlhf_waits_for_room_within_its_deadline_instead_of_answering_zeros(make_app: Any) -> None:
    """OpenRLHF cannot mask a sample: an item answered "overloaded" is a reward of 0.0 it trains on.
    A batch that met a full service for a moment (from 0.9.1 OpenRLHF posts every sample on its own, all
    at once) was answered so at once, every correct answer in it a 0.0, though the endpoint has its
    deadline (REWARDHUB_OPENRLHF_DEADLINE_S) to answer in. It now waits for room within that deadline;
    past it, the items still unscored are deadline_exceeded as before."""
    payload = {"query": [PROMPT + "\\boxed{1}"], "prompts": [PROMPT], "labels": ["1"]}
    async with make_app(max_inflight_items=2) as c:
        busy = await hold_the_service(c, 2)  # for its items' 1 s deadline
        body = (await c.post("/compat/openrlhf/get_reward", json=payload)).json()
        await busy
    assert body["rewards"] == [1.0], body
    assert body["extra_logs"]["rewardhub_valid"] == [1.0], body
    # no room before the deadline: deadline_exceeded, as for items still being scored then
    async with make_app(max_inflight_items=2, openrlhf_deadline_s=0.5) as c:
        busy = await hold_the_service(c, 2, hold_s=5.0)
        body = (await c.post("/compat/openrlhf/get_reward", json=payload)).json()
        busy.cancel()
        await asyncio.gather(busy, return_exceptions=True)
    assert body["rewards"] == [0.0], body
    assert body["extra_logs"]["rewardhub_deadline_exceeded"] == [1.0], body


SLOW = "SLOW"  # the judge holds its answer about a response holding this until the caller hangs up
SLOW_BATCH_PROGRESS = 4  # REWARDHUB_OPENRLHF_PROGRESS_ITEMS for _batch_with_one_held_item


def _batch_with_one_held_item(judge_server: Any) -> tuple[dict[str, Any], int]:
    """An OpenRLHF batch for the judge: one full scoring call (SLOW_BATCH_PROGRESS identical items the
    judge answers at once), then one item it holds (a call of its own), and the count answered at once.
    Sets the judge to answer so."""
    from fake_openai import Reply, user_text

    judge_server.reply = lambda body: Reply("Score: 5", delay_s=600 if SLOW in user_text(body) else 0)
    label = json.dumps({"verifier": "judge", "answer": "42"})
    responses = ["It is 42."] * SLOW_BATCH_PROGRESS + [f"It is 42 ({SLOW})."]
    payload = {
        "query": [PROMPT + r for r in responses],
        "prompts": [PROMPT] * len(responses),
        "labels": [label] * len(responses),
    }
    return payload, len(responses) - 1


async def test_openrlhf_batch_is_answered_by_its_deadline_and_its_scored_items_cached(
    make_app: Any, judge_server: Any
) -> None:
    """OpenRLHF's client waits 180 s for a batch (up to 0.9.0 the whole rollout batch in one request),
    then sends it again, five times, and raises. A batch the service scored for longer was answered to
    nobody: every try started over (one call for the whole part, cached only at its end) and the run
    ended. By REWARDHUB_OPENRLHF_DEADLINE_S it answers with what is scored, the rest invalid and marked,
    and the items scored before the cut come from the cache when the batch comes again."""
    from fake_openai import Reply, user_text

    payload, fast = _batch_with_one_held_item(judge_server)
    async with make_app(
        judge_url=judge_server.url,
        judge_model="fake-judge",
        backend_max_retries=0,
        openrlhf_deadline_s=10,
        openrlhf_progress_items=SLOW_BATCH_PROGRESS,
    ) as c:
        body = (await c.post("/compat/openrlhf/get_reward", json=payload)).json()
        logs = body["extra_logs"]
        assert logs["rewardhub_valid"] == [1.0] * fast + [0.0], body
        assert logs["rewardhub_deadline_exceeded"] == [0.0] * fast + [1.0]
        assert body["rewards"][-1] == 0.0 and body["rewards"][0] > 0.0
        asked = [user_text(r) for r in judge_server.requests]
        assert sum(SLOW not in q for q in asked) == 1  # (identical items are asked once)

        # OpenRLHF sends the batch again (a try that timed out on its side): the judge now answers all
        judge_server.reply = lambda body: Reply("Score: 5")
        again = (await c.post("/compat/openrlhf/get_reward", json=payload)).json()
        logs = again["extra_logs"]
        assert logs["rewardhub_valid"] == [1.0] * (fast + 1), again
        assert logs["rewardhub_deadline_exceeded"] == [0.0] * (fast + 1)
        assert logs["rewardhub_cached"] == [1.0] * fast + [0.0]
        assert again["rewards"][:fast] == body["rewards"][:fast]
        asked = [user_text(r) for r in judge_server.requests]
        assert sum(SLOW not in q for q in asked) == 1  # served from the cache, not asked again


async def test_openrlhf_batch_its_client_gave_up_on_keeps_the_scored_items_for_the_retry(
    make_app: Any, judge_server: Any
) -> None:
    """Without a deadline (REWARDHUB_OPENRLHF_DEADLINE_S=0), or with one past a client's own timeout,
    OpenRLHF hangs up and sends the batch again. The batch was one scoring call, cancelled with the
    request and cached only at its end: every try started over and scored the same items again."""
    from fake_openai import Reply, user_text

    payload, fast = _batch_with_one_held_item(judge_server)
    async with make_app(
        judge_url=judge_server.url,
        judge_model="fake-judge",
        backend_max_retries=0,
        openrlhf_deadline_s=0,
        openrlhf_progress_items=SLOW_BATCH_PROGRESS,
    ) as c:
        with pytest.raises(TimeoutError):  # the client gives up, as OpenRLHF's does after 180 s
            await asyncio.wait_for(c.post("/compat/openrlhf/get_reward", json=payload), 10)
        judge_server.reply = lambda body: Reply("Score: 5")
        again = (await c.post("/compat/openrlhf/get_reward", json=payload)).json()
        assert again["extra_logs"]["rewardhub_valid"] == [1.0] * (fast + 1), again
        assert again["extra_logs"]["rewardhub_cached"] == [1.0] * fast + [0.0]
        asked = [user_text(r) for r in judge_server.requests]
        assert sum(SLOW not in q for q in asked) == 1  # served from the cache, not asked again


async def test_openrlhf_identical_items_far_apart_in_a_batch_are_scored_once(
    make_app: Any, judge_server: Any
) -> None:
    """A batch is scored in calls of REWARDHUB_OPENRLHF_PROGRESS_ITEMS running together. The service
    computes identical items once within a call, but two identical items in two calls were both sent to
    the judge (neither call finds the other's result in the cache yet): a GRPO batch repeats responses
    across its groups. Identical items now share a call wherever the batch holds them, and each result
    still comes back at its own position."""
    from fake_openai import Reply, user_text

    scores = {"a": 1, "b": 2, "c": 3, "d": 4}  # the judge's score for each distinct response
    judge_server.reply = lambda body: Reply(
        f"Score: {next(v for k, v in scores.items() if f'({k})' in user_text(body))}"
    )
    label = json.dumps({"verifier": "judge", "answer": "42"})
    # calls of 2 in the batch's order: (a, b), (c, d), (a, b); a and b are each in two calls
    order = ["a", "b", "c", "d", "a", "b"]
    payload = {
        "query": [PROMPT + f"It is 42 ({k})." for k in order],
        "prompts": [PROMPT] * len(order),
        "labels": [label] * len(order),
    }
    async with make_app(
        judge_url=judge_server.url,
        judge_model="fake-judge",
        backend_max_retries=0,
        openrlhf_progress_items=2,
    ) as c:
        body = (await c.post("/compat/openrlhf/get_reward", json=payload)).json()
    assert body["extra_logs"]["rewardhub_valid"] == [1.0] * len(order), body
    asked = sorted(k for r in judge_server.requests for k in scores if f"({k})" in user_text(r))
    assert asked == ["a", "b", "c", "d"]  # each distinct response once (it was a, a, b, b, c, d)
    # each at its own position: the judge's scores rise from a to d
    rewards = body["rewards"]
    assert rewards[4] == rewards[0] and rewards[5] == rewards[1], rewards
    assert rewards[0] < rewards[1] < rewards[2] < rewards[3], rewards


async def test_identical_items_are_put_together_whatever_object_holds_their_spec(
    client: httpx.AsyncClient,
) -> None:
    """The order a batch is cut into calls by puts identical items together. A spec's key is computed
    once per spec (a name by its text, a RewardSpec by identity), yet two items are identical by the
    spec's content: a name and an equal RewardSpec, or two equal RewardSpec objects, are one spec."""
    scoring = client.app.state.scoring  # type: ignore[attr-defined]
    shared = RewardSpec(name="math")
    specs: list[str | RewardSpec] = [shared, "math", RewardSpec(name="math"), shared, "math"]
    answers = ["1", "2", "1", "2", "1"]
    items: list[ScoreItem | RewardHubError] = [
        ScoreItem(prompt=f"q{k}", response=f"\\boxed{{{a}}}", reference=a, reward=spec)
        for k, (spec, a) in enumerate(zip(specs, answers, strict=True))
    ]
    assert _duplicates_together(scoring, items, [0, 1, 2, 3, 4]) == [0, 2, 4, 1, 3]
    # a config makes another spec: its item is not put with the others
    items.append(
        ScoreItem(
            response="\\boxed{1}", reference="1", reward=RewardSpec(name="math", config={"wrong_score": -1.0})
        )
    )
    assert _duplicates_together(scoring, items, [5, 0, 1, 2]) == [5, 0, 2, 1]


async def test_openrlhf_labels_with_one_spec_share_it(client: httpx.AsyncClient) -> None:
    """OpenRLHF labels carrying a `config` each became a RewardSpec of their own, so a 4,096-item batch
    with one spec validated it 4,096 times, and the calls keyed each apart. Equal label specs (in any key
    order, beside any reference) are now one object; another config, or a bad one, is read on its own."""
    spec = {"verifier": "math", "config": {"wrong_score": -1.0, "correct_score": 2.0}}
    reordered = {"config": {"correct_score": 2.0, "wrong_score": -1.0}, "verifier": "math"}
    other = {"verifier": "math", "config": {"wrong_score": -0.5}}
    bad = {"verifier": {"name": ""}, "config": {"x": 1}}
    labels = [
        json.dumps({**spec, "answer": "1"}),
        json.dumps({**reordered, "answer": "2"}),
        {**spec, "answer": "1"},
        json.dumps({**other, "answer": "1"}),
        json.dumps({**bad, "answer": "1"}),
        json.dumps({**bad, "answer": "1"}),
        json.dumps({"verifier": "math", "answer": "1"}),
    ]
    req = openrlhf.OpenRLHFRequest(
        query=[PROMPT + f"\\boxed{{{k % 2 + 1}}}" for k in range(len(labels))],
        prompts=[PROMPT] * len(labels),
        labels=labels,
    )
    items = openrlhf.to_items(req, "math")
    good = [i for i in items if isinstance(i, ScoreItem)]
    assert [isinstance(i, RewardHubError) for i in items] == [False] * 4 + [True, True] + [False]
    a, b, c, d, plain = (i.reward for i in good)
    assert a is b is c and isinstance(a, RewardSpec) and a.config == spec["config"]
    assert isinstance(d, RewardSpec) and d is not a and d.config == other["config"]
    assert plain == "math"
    assert [i.reference for i in good] == ["1", "2", "1", "1", "1"]
    # the items of one spec with one response and one reference are put together
    scoring = client.app.state.scoring  # type: ignore[attr-defined]
    assert _duplicates_together(scoring, items, [0, 1, 2, 3, 6]) == [0, 2, 1, 3, 6]
    # scored as before: a spec is resolved once for its items, a config it refuses flags each of them
    wrong = json.dumps({"verifier": "math", "config": {"wrong_scor": 1}, "answer": "1"})
    payload = {
        "query": [*req.query, PROMPT + "\\boxed{1}", PROMPT + "\\boxed{1}"],
        "prompts": [PROMPT] * (len(labels) + 2),
        "labels": [*labels, wrong, wrong],
    }
    body = (await client.post("/compat/openrlhf/get_reward", json=payload)).json()
    assert body["rewards"] == [2.0, 2.0, 2.0, -0.5, 0.0, 0.0, 1.0, 0.0, 0.0], body
    assert body["extra_logs"]["rewardhub_valid"] == [1.0] * 4 + [0.0] * 2 + [1.0] + [0.0] * 2, body


async def test_nemo_gym_call_based_unit_tests_are_run_as_calls(client: httpx.AsyncClient) -> None:
    """LiveCodeBench-style unit tests with an `fn_name` call that method with the JSON arguments of each
    input's lines and compare the JSON output (NeMo Gym's code_gen grade_call_based). They were masked as
    "not supported" although the `code` reward runs call-based tests: every functional task gave no
    signal. Run as calls now (as stdin/stdout programs they would fail a correct solution)."""
    solution = "```python\nclass Solution:\n    def add(self, a, b):\n        return a + b\n```"
    body = {
        "responses_create_params": {"input": [{"role": "user", "content": "Add two numbers."}]},
        "response": {
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": solution}],
                }
            ]
        },
        "verifier_metadata": {
            "unit_tests": {"inputs": ["1\n2", "[5]\n[7]"], "outputs": ["3", "[5, 7]"], "fn_name": "add"}
        },
    }
    out = (await client.post("/compat/nemo-gym/verify", json=body)).json()
    assert (out["reward"], out["mask_sample"]) == (1.0, False), out
    wrong = {**body, "response": {"output_text": solution.replace("a + b", "a - b")}}
    out = (await client.post("/compat/nemo-gym/verify", json=wrong)).json()
    assert (out["reward"], out["mask_sample"]) == (0.0, False), out
    unreadable = {**body, "verifier_metadata": {"unit_tests": {**body["verifier_metadata"]["unit_tests"], "outputs": ["3", "[5,"]}}}  # fmt: skip
    out = (await client.post("/compat/nemo-gym/verify", json=unreadable)).json()
    assert out["mask_sample"] is True and "JSON" in out["failure_reason"], out
    # without fn_name the same shape is stdin/stdout and is run
    stdin_body = {
        **body,
        "response": {"output_text": "```python\nprint(sum(int(x) for x in open(0).read().split()))\n```"},
        "verifier_metadata": {
            "unit_tests": {"inputs": ["1\n2", "5\n7"], "outputs": ["3", "12"], "fn_name": None}
        },
    }
    ran = (await client.post("/compat/nemo-gym/verify", json=stdin_body)).json()
    assert (ran["reward"], ran["mask_sample"]) == (1.0, False)


async def test_nemo_gym_transient_failures_go_to_the_failures_sidecar(client: httpx.AsyncClient) -> None:
    """A failure of the moment (here a gold query past its time limit) was only masked; NeMo Gym's
    collector routes a row to its failures sidecar, to be retried on resume, by `_ng_failure_class`."""
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    row = {
        **NEMO_VERIFY,
        "verifier": {"name": "sql", "config": {"timeout_s": 0.3}},
        "expected_answer": {"query": endless, "schema": "CREATE TABLE t (a INTEGER);"},
    }
    out = (await client.post("/compat/nemo-gym/verify", json=row)).json()
    assert (out["mask_sample"], out["failure_kind"]) == (True, "rewardhub:timeout"), out
    assert out["_ng_failure_class"] == "transient"
    # a lasting failure (no reference) is masked but not retried; a reverified row loses the stale class
    body = {**out, "verifier": None, "expected_answer": None}
    masked = (await client.post("/compat/nemo-gym/verify", json=body)).json()
    assert masked["mask_sample"] is True and "_ng_failure_class" not in masked, masked


async def test_nemo_gym_contract_at_the_root_paths_its_server_client_calls(client: httpx.AsyncClient) -> None:
    """NeMo Gym addresses a resources server by host and port only: its ServerClient posts to
    f"http://{host}:{port}/verify" (and /seed_session, /aggregate_metrics, GET /reverify_mode), with no
    path prefix to configure. Under /compat/nemo-gym alone the endpoints answered those calls 404."""
    seeded = await client.post("/seed_session", json={**NEMO_VERIFY, "response": None})
    assert seeded.status_code == 200, seeded.text
    verified = await client.post("/verify", json=NEMO_VERIFY)
    assert verified.status_code == 200, verified.text
    body = verified.json()
    assert (body["reward"], body["mask_sample"], body["expected_answer"]) == (1.0, False, "4")
    agg = await client.post(
        "/aggregate_metrics", json={"verify_responses": [{"_ng_task_index": 3, "reward": 1.0}]}
    )
    assert agg.status_code == 200 and agg.json()["key_metrics"]["mean/reward"] == 1.0
    mode = await client.get("/reverify_mode")
    assert mode.status_code == 200 and mode.json() == "stateless"
    closed = await client.post("/close_session", json={"resources_session_id": "s1"})
    assert closed.json() == {"resources_session_id": "s1"}


async def test_nemo_gym_overloaded_verify_goes_to_the_failures_sidecar(make_app: Any) -> None:
    """A verify refused because the service is full is the plainest failure of the moment; it was masked
    with reward 0.0 but had no `_ng_failure_class`, so NeMo Gym's collector kept it as a finished rollout
    (in the metrics, never retried on resume)."""
    async with make_app(max_inflight_items=2) as c:
        busy = await hold_the_service(c, 2)
        out = (await c.post("/verify", json=NEMO_VERIFY)).json()
        assert (out["mask_sample"], out["failure_kind"]) == (True, "rewardhub:overloaded"), out
        assert out["_ng_failure_class"] == "transient"
        await busy


async def test_a_chat_templated_prompt_reaches_model_rewards_as_its_user_turn(
    make_app: Any, judge_server: Any
) -> None:
    """OpenRLHF posts the prompt as its dataset rendered it (the policy's chat template, control tokens
    and system turn included), slime too with --apply-chat-template. Model rewards put `prompt` into
    their own template: a judge was asked about "<|im_start|>system ... <|im_start|>assistant", and an
    RM scored a user turn holding the whole scrubbed conversation."""
    from fake_openai import always, user_text

    judge_server.reply = always("Score: 5")
    templated = {
        "chatml": "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 6*7?<|im_end|>\n"
        "<|im_start|>assistant\n",
        "llama3": "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nWhat is 6*7?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
    }
    label = json.dumps({"verifier": "judge", "answer": "42"})
    async with make_app(judge_url=judge_server.url, judge_model="fake-judge", backend_max_retries=0) as c:
        for name, prompt in templated.items():  # (a response of each's own: none is served from the cache)
            body = (
                await c.post(
                    "/compat/openrlhf/get_reward",
                    json={"query": [prompt + f"It is 42 ({name})."], "prompts": [prompt], "labels": [label]},
                )
            ).json()
            assert body["extra_logs"]["rewardhub_valid"] == [1.0], body
            slime = (
                await c.post(
                    "/compat/slime/reward",
                    json={"prompt": prompt, "response": f"So 42 ({name}).", "label": label},
                )
            ).json()
            assert slime["valid"] is True, slime
    questions = [user_text(r) for r in judge_server.requests]
    assert len(questions) == 4
    for q in questions:
        assert "What is 6*7?" in q and "Be brief" not in q and "<|" not in q, q


async def test_an_unknown_default_reward_stops_the_start(make_app: Any) -> None:
    """A typo in REWARDHUB_COMPAT_DEFAULT_REWARD ("math_verify") started a service whose compat endpoints
    answered every plain label reward 0.0 (unknown_reward): a run of zero rewards, not a failed start."""
    with pytest.raises(ConfigError, match=r"REWARDHUB_COMPAT_DEFAULT_REWARD='math_verify'.*no such reward"):
        async with make_app(compat_default_reward="math_verify"):
            pass
    async with make_app(compat_default_reward="exact_match") as c:  # any real reward will do
        resp = await c.post("/compat/slime/reward", json={"prompt": "1+1?", "response": "2", "label": "2"})
        assert resp.json()["reward"] == 1.0


async def test_openrlhf_query_without_prompts_is_scored_from_its_assistant_turn(make_app: Any) -> None:
    """OpenRLHF before 0.5.8 posts `{"query": [...]}` alone: each query the left-padded batch row decoded
    with special tokens (pad tokens, system and user turns, the response, its EOS and right padding).
    Without a prompt to strip, the whole row was scored as the response: a reference-free reward (the
    reward-model use those releases had) saw the chat template and the question, here failing every
    strict format check. The response is what follows the last user turn's assistant header."""
    pads = "<|endoftext|>" * 3
    system = "<|im_start|>system\nAnswer in <think></think><answer></answer>.<|im_end|>\n"
    good = "<think>6*7 is 42</think><answer>42</answer>"
    payload = {
        "query": [
            pads + system + PROMPT + good + "<|im_end|>" + pads,
            system + PROMPT + "42<|im_end|>",
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 6*7?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n" + good + "<|eot_id|>",
        ]
    }
    async with make_app(compat_default_reward="format") as c:
        body = (await c.post("/compat/openrlhf/get_reward", json=payload)).json()
    assert body["rewards"] == [1.0, 0.0, 1.0], body
    assert body["extra_logs"]["rewardhub_valid"] == [1.0, 1.0, 1.0]
    items = openrlhf.to_items(openrlhf.OpenRLHFRequest(query=payload["query"]), "format")
    assert [getattr(i, "prompt", None) for i in items] == [
        "What is 6*7? Put the answer in \\boxed{}.",
        "What is 6*7? Put the answer in \\boxed{}.",
        "What is 6*7?",
    ]


def test_nemo_gym_failed_model_call_is_a_judge_failure_it_can_recover() -> None:
    """NeMo Gym files a verifier's failed model call (transport, HTTP error) as `_ng_failure_class:
    "judge_failed"` (its judge_failsafe), the one class `gym eval reverify --judge-failed-only` re-verifies
    from the failures sidecar without re-running inference. A judge, PRM or ORM backend's failure here
    (reason backend_error) was filed "transient", so that recovery never picked it up."""
    failed = {
        "score": None,
        "valid": False,
        "reason": "backend_error",
        "error": None,
        "details": {"message": "judge-72b: HTTP 500"},
    }
    out = nemo_gym.to_response(NEMO_VERIFY, ScoreOutcome([failed]))
    assert (out["reward"], out["mask_sample"]) == (0.0, True)
    assert out["_ng_failure_class"] == "judge_failed"
    assert out["_ng_failure_judge_error"] == "judge-72b: HTTP 500"
    # other failures of the moment stay "transient"; a reverified row loses a stale judge error
    timed_out = {**failed, "reason": "timeout", "details": {}}
    stale = {**NEMO_VERIFY, "_ng_failure_class": "judge_failed", "_ng_failure_judge_error": "old"}
    out = nemo_gym.to_response(stale, ScoreOutcome([timed_out]))
    assert out["_ng_failure_class"] == "transient" and "_ng_failure_judge_error" not in out


async def test_nemo_gym_aggregate_metrics_keys_tasks_as_nemo_gym_does(client: httpx.AsyncClient) -> None:
    """NeMo Gym's /aggregate_metrics keeps each group's task index under its own key, `_ng_task_index`
    ("for downstream per-task joins"), and takes a row without one as task 0. Here the groups had it only
    as `task_index`, and a row without one made a task `null`."""
    rows = [{"_ng_task_index": 2, "reward": 1.0}, {"reward": 0.0}]
    agg = (await client.post("/aggregate_metrics", json={"verify_responses": rows})).json()
    tasks = {g["_ng_task_index"]: g for g in agg["group_level_metrics"]}
    assert sorted(tasks) == [0, 2], agg
    assert tasks[2]["mean/reward"] == 1.0 and tasks[0]["mean/reward"] == 0.0


async def test_openrlhf_response_ending_in_another_models_stop_token_is_stripped(make_app: Any) -> None:
    """OpenRLHF decodes the generated ids with special tokens kept, so a response ends in the token that
    stopped it. GLM-4 stops at <|user|> (or <|observation|>), gpt-oss at <|return|>, Llama 3.1's tool
    turn at <|eom_id|>: none was stripped, so a strict format check failed every such response."""
    glm = "[gMASK]<sop><|user|>\nWhat is 6*7?<|assistant|>"
    harmony = "<|start|>user<|message|>What is 6*7?<|end|><|start|>assistant<|channel|>final<|message|>"
    llama = "<|start_header_id|>user<|end_header_id|>\n\nWhat is 6*7?<|eot_id|>"
    llama += "<|start_header_id|>assistant<|end_header_id|>\n\n"
    good = "<think>6*7 is 42</think><answer>42</answer>"
    payload = {
        "query": [
            glm + "\n" + good + "<|user|>",
            glm + good + "<|observation|>",
            harmony + good + "<|return|>",
            llama + good + "<|eom_id|>",
        ],
        "prompts": [glm, glm, harmony, llama],
        "labels": [None] * 4,
    }
    async with make_app(compat_default_reward="format") as c:
        body = (await c.post("/compat/openrlhf/get_reward", json=payload)).json()
    assert body["rewards"] == [1.0] * 4, body


async def test_nemo_gym_malformed_rollout_fields_are_flagged_not_500(client: httpx.AsyncClient) -> None:
    """A verify body is the task row and the rollout as the agent built them; a message output whose
    `content` was not a list (a number, an object), unit tests whose `inputs`/`outputs` were not lists,
    and a task index that was a list each raised TypeError: a 500, which NeMo Gym's client retries and
    then fails the rollout. The text is read from what is readable, bad unit tests flag the sample
    (masked, invalid_request, naming the field), and metrics group by the index's JSON text."""
    odd_content = {
        "response": {
            "output": [
                {"type": "message", "content": 5},
                {"type": "message", "content": {"type": "output_text", "text": "x"}},
                {"type": "message", "content": [{"type": "output_text", "text": "so \\boxed{4}"}]},
            ]
        },
        "expected_answer": "4",
    }
    resp = await client.post("/verify", json=odd_content)
    assert resp.status_code == 200, resp.text
    assert resp.json()["reward"] == 1.0
    resp = await client.post("/verify", json={"response": {"output": 5}, "expected_answer": "4"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["rewardhub"]["reason"] == "no_answer"  # (no text: nothing answered)
    for tests in ({"inputs": "1\n", "outputs": "1\n"}, {"inputs": ["1"], "outputs": 3, "fn_name": "f"}):
        body = {"response": "print(input())", "verifier_metadata": {"unit_tests": tests}}
        resp = await client.post("/verify", json=body)
        assert resp.status_code == 200, resp.text
        out = resp.json()
        assert out["mask_sample"] is True and out["failure_kind"] == "rewardhub:invalid_request", out
        assert "verifier_metadata.unit_tests" in out["failure_reason"]
    rows = [{"reward": 1.0, "_ng_task_index": [0, 1]}, {"reward": 0.0, "_ng_task_index": [0, 1]}]
    resp = await client.post("/aggregate_metrics", json={"verify_responses": rows})
    assert resp.status_code == 200, resp.text
    (group,) = resp.json()["group_level_metrics"]
    assert group["num_rollouts"] == 2 and group["mean/reward"] == 0.5


@pytest.mark.parametrize("responses", [1, 1.5, True, "rows", {"reward": 1.0}])
async def test_nemo_gym_aggregate_metrics_of_no_list_is_a_422(
    client: httpx.AsyncClient, responses: Any
) -> None:
    """`verify_responses` that is not a list: a number raised TypeError (a 500), and a string or an
    object was iterated as characters or keys and answered as no rollouts at all. Now a 422 naming it."""
    resp = await client.post("/aggregate_metrics", json={"verify_responses": responses})
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["param"] == "verify_responses" and "a list" in error["message"], error


async def test_a_reference_object_without_a_spec_gives_its_reference_key(client: httpx.AsyncClient) -> None:
    """A dataset converted from verl keeps its `reward_model` column, {"ground_truth": ..., "style":
    "rule"}, and `--data.label_key reward_model` sends it as the label. Without a `verifier` key the
    whole object was the default reward's reference, which math reads only under `answer`: every item
    was parse_error (OpenRLHF: 0.0 for every sample). Its ground_truth (or reference / solution / label)
    is the reference now; an object with `answer` is still read by the reward itself."""
    verl_row = {"ground_truth": "42", "style": "rule"}
    labels: list[Any] = [verl_row, json.dumps(verl_row), {"solution": "42"}, {"answer": "42"}, verl_row]
    payload = {
        "query": [PROMPT + "\\boxed{42}<|im_end|>"] * 4 + [PROMPT + "\\boxed{41}<|im_end|>"],
        "prompts": [PROMPT] * 5,
        "labels": labels,
    }
    resp = await client.post("/compat/openrlhf/get_reward", json=payload)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["extra_logs"]["rewardhub_valid"] == [1.0] * 5, body
    assert body["rewards"] == [1.0, 1.0, 1.0, 1.0, 0.0]
    slime = await client.post(
        "/compat/slime/reward", json={"prompt": "q", "response": "\\boxed{42}", "label": verl_row}
    )
    assert slime.json()["valid"] is True and slime.json()["reward"] == 1.0, slime.text


@pytest.mark.parametrize(
    "label",
    [
        {"label": 3},  # ProcessBench's reference, which prm reads under "label"
        {"tests": "assert f() == 1", "solution": "def f(): return 1"},  # a code reference with a solution
        {"answers": {"text": ["Paris"]}, "ground_truth": "Paris"},  # a SQuAD row
    ],
)
def test_a_reference_object_with_keys_of_its_own_goes_to_the_reward_whole(label: dict[str, Any]) -> None:
    """Only an object made of wrapper keys alone (verl's {"ground_truth", "style"}) is unwrapped: a
    ProcessBench {"label": k} unwrapped to k lost the prm's first-error label, and a code reference that
    also carries a solution lost its tests."""
    assert parse_label(label, "prm") == ("prm", label)


@pytest.mark.parametrize("response", ["absent", None, 5, ["x"]])
async def test_nemo_gym_verify_without_a_response_is_a_422(client: httpx.AsyncClient, response: Any) -> None:
    """A /verify body without the rollout's `response` (absent, null, not a Responses object) was read as
    an empty answer: reward 0.0, valid and not masked, so an agent that lost the model's output trained
    on zeros and nothing said so. NeMo Gym's own verify request model requires `response`, and its
    resources servers answer such a body 422: so does this one, naming the field. Found in review."""
    body = {k: v for k, v in NEMO_VERIFY.items() if k != "response"}
    if response != "absent":
        body["response"] = response
    for path in ("/compat/nemo-gym/verify", "/verify"):
        resp = await client.post(path, json=body)
        assert resp.status_code == 422, resp.text
        error = resp.json()["error"]
        assert error["param"] == "response" and "response" in error["message"], error


async def test_nemo_gym_aggregate_metrics_leave_non_finite_rewards_out(client: httpx.AsyncClient) -> None:
    """A JSON body may carry NaN and Infinity (Python's json reads them), and a reward of NaN made the
    mean and std of its task and of the whole run NaN, answered as null: one bad row hid every metric.
    Such a reward is no measurement: it is left out, counted as num_non_finite_reward. Found in review."""
    rows = '[{"_ng_task_index": 0, "reward": 1.0}, {"_ng_task_index": 0, "reward": NaN},'
    rows += ' {"_ng_task_index": 1, "reward": 0.0}, {"_ng_task_index": 1, "reward": -Infinity}]'
    resp = await client.post(
        "/aggregate_metrics",
        content='{"verify_responses": ' + rows + "}",
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 200, resp.text
    agg = resp.json()
    tasks = {g["_ng_task_index"]: g for g in agg["group_level_metrics"]}
    assert tasks[0]["mean/reward"] == 1.0 and tasks[0]["num_rollouts"] == 1, agg
    assert tasks[1]["mean/reward"] == 0.0 and tasks[1]["std/reward"] == 0.0, agg
    assert agg["agent_metrics"]["mean/reward"] == 0.5 and agg["agent_metrics"]["num_rollouts"] == 2, agg
    assert agg["agent_metrics"]["num_non_finite_reward"] == 2 and agg["key_metrics"]["mean/reward"] == 0.5


async def test_the_drop_in_routes_document_the_error_body_they_answer(client: httpx.AsyncClient) -> None:
    """A drop-in route documented FastAPI's own 422 body (HTTPValidationError, a "detail" list), which the
    service never answers: its one handler answers a body that fails validation with the error envelope
    (as the 401/403 of a missing or refused key). Each route with a body or a caller now documents the
    envelope under those statuses; the peers' own answers (200s, SandboxFusion's 504) are unchanged. Found in
    review."""
    spec = (await client.get("/openapi.json")).json()
    envelope = {"$ref": "#/components/schemas/ErrorResponse"}
    checked = 0
    for path, methods in spec["paths"].items():
        drop_in = path.startswith("/compat/") or path in {
            "/run_code",
            "/verify",
            "/seed_session",
            "/close_session",
            "/aggregate_metrics",
        }
        for method, operation in methods.items():
            if not drop_in or method != "post":
                continue
            responses = operation["responses"]
            assert {"401", "403", "422"} <= set(responses), (method, path, sorted(responses))
            for status in ("401", "403", "422"):
                schema = responses[status]["content"]["application/json"]["schema"]
                assert schema == envelope, (path, status, schema)
            checked += 1
    assert checked >= 14, checked
    assert "HTTPValidationError" not in str(
        {p: m for p, m in spec["paths"].items() if p.startswith("/compat/") or p in {"/run_code", "/verify"}}
    )
    # and what a route answers is that envelope
    bad = await client.post("/compat/openrlhf/get_reward", json={"query": 3})
    assert bad.status_code == 422 and set(bad.json()) == {"error"}, bad.text
