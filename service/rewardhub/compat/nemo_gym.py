"""NeMo Gym resources-server contract: ``/verify``, ``/seed_session``, ``/close_session``,
``/aggregate_metrics``, ``/reverify_mode``, under ``/compat/nemo-gym`` and at the root (NeMo Gym posts to
its resources server's host and port plus these paths).

``/verify`` gets the task row plus the rollout: ``responses_create_params`` (the OpenAI Responses
request, whose ``input`` holds the prompt), ``response`` (an OpenAI Responses object: the text is the
``output_text`` parts of its ``message`` outputs; required, as NeMo Gym's own request model requires
it: a body without one is a 422 naming it) and the task's own fields. The reference is
``expected_answer`` (or ``answer``/``ground_truth``); a task field ``reward``/``verifier`` (a name or
spec; a number under ``reward`` is a stored answer's result, as ``gym eval reverify`` sends) picks the
reward (default: the service's compat default, ``math``); ``verifier_metadata.unit_tests``
(``{"inputs": [...], "outputs": [...]}``) selects the ``code`` reward with stdin/stdout cases, or, with
an ``fn_name``, LiveCodeBench's call-based tests (each input's lines the JSON arguments of a call to that
function or ``Solution`` method, each output its JSON result). The
answer echoes the request and adds ``reward``, and NeMo Gym's ``mask_sample`` / ``failure_kind`` /
``failure_reason`` for items that could not be scored (masked, never a silent 0; the flag is also at
``instance_config.mask_sample``, where NeMo RL reads it). The reward's components are diagnostics, not
addends of ``reward``, so they are under ``rewardhub.components``, not NeMo Gym's ``reward_components``
(NeMo RL stops a run whose ``reward`` is not the sum of those).
An item that failed *for the moment* (a timeout, a judge backend down, the sandbox failing: the
transient reasons; or a service too full to take it, ``overloaded``) also carries
``_ng_failure_class: "transient"``: NeMo Gym's collector then writes the row to its failures sidecar,
keeps it out of the metrics, and a resumed run retries it. A failed model call (a judge, PRM or ORM
backend's error, reason ``backend_error``) is NeMo Gym's own ``"judge_failed"`` instead, with
``_ng_failure_judge_error``: ``gym eval reverify --judge-failed-only`` re-verifies those rows.
rewardhub rewards are pure functions of the request, so ``/reverify_mode`` is ``stateless``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from rewardhub.compat.common import ScoreOutcome, as_reference, parse_label, prompt_text
from rewardhub.errors import InvalidRequest, Overloaded, RewardHubError, ServiceUnavailable
from rewardhub.protocol import TRANSIENT_REASONS, Reason, RewardSpec, ScoreItem

__all__ = ["aggregate_metrics", "prompt_of", "require_response", "response_text", "to_item", "to_response"]

TASK_INDEX_KEYS = ("_ng_task_index", "_task_index")
FAILURE_CLASS_KEY = "_ng_failure_class"
JUDGE_ERROR_KEY = "_ng_failure_judge_error"
# the item reasons of the moment, and the request-level ones score_or_flag gives every item of a call the
# service could not take (full, or a worker pool not running)
_TRANSIENT = frozenset(r.value for r in TRANSIENT_REASONS) | {
    Overloaded.error_type,
    ServiceUnavailable.error_type,
}


def response_text(response: Any) -> str:
    """Concatenate the ``output_text`` parts of the ``message`` items of a Responses object."""
    if isinstance(response, str):
        return response
    if not isinstance(response, dict):
        return ""
    if isinstance(response.get("output_text"), str) and not response.get("output"):
        return str(response["output_text"])
    parts: list[str] = []
    outputs = response.get("output")
    for out in outputs if isinstance(outputs, list) else []:
        if not isinstance(out, dict) or out.get("type", "message") != "message":
            continue
        content = out.get("content")
        if isinstance(content, str):
            parts.append(content)
            continue
        if not isinstance(content, list):  # (no text parts: nothing, as for a refusal's)
            continue
        for c in content:
            if (
                isinstance(c, dict)
                and c.get("type") in ("output_text", "text")
                and isinstance(c.get("text"), str)
            ):
                parts.append(c["text"])
    return "".join(parts)


def require_response(body: dict[str, Any]) -> None:
    """A ``/verify`` body without its rollout's ``response`` (absent, null, or not a Responses object
    or text) is a request error, a 422 naming the field: NeMo Gym's own ``BaseVerifyRequest`` requires
    ``response: NeMoGymResponse``, so its resources servers answer such a body with FastAPI's 422. It
    was read as an empty answer, scored and wrong (reward 0, not masked): an agent that lost the
    model's output trained on zeros and nothing said so."""
    response = body.get("response")
    if not isinstance(response, dict | str):
        given = "none" if response is None else f"a {type(response).__name__}"
        raise InvalidRequest(
            f"response: the rollout's OpenAI Responses object is required (as NeMo Gym's verify request "
            f"requires it), got {given}",
            param="response",
        )


def prompt_of(params: Any) -> str | None:
    """The last user message of ``responses_create_params.input`` (a string or a list of messages)."""
    if not isinstance(params, dict):
        return None
    return prompt_text(params.get("input"))


def to_item(body: dict[str, Any], default_reward: str, code_available: bool) -> ScoreItem | RewardHubError:
    try:
        return _to_item(body, default_reward, code_available)
    except RewardHubError as exc:
        return exc


def _spec_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The task fields that pick the reward. A number under ``reward`` is a previous verify answer's
    result (``gym eval reverify`` posts stored answers back), not a reward name."""
    fields: dict[str, Any] = {k: body[k] for k in ("verifier", "config") if k in body}
    if isinstance(body.get("reward"), str | dict):
        fields["reward"] = body["reward"]
    return fields if "reward" in fields or "verifier" in fields else {}


def _to_item(body: dict[str, Any], default_reward: str, code_available: bool) -> ScoreItem:
    text = response_text(body.get("response"))
    prompt = prompt_of(body.get("responses_create_params"))
    tests = (
        (body.get("verifier_metadata") or {}).get("unit_tests")
        if isinstance(body.get("verifier_metadata"), dict)
        else None
    )
    spec: str | RewardSpec
    label: dict[str, Any] = _spec_fields(body)
    if isinstance(tests, dict) and code_available and not label:
        for key in ("inputs", "outputs"):
            if not isinstance(tests.get(key) or [], list):
                raise InvalidRequest(
                    f"verifier_metadata.unit_tests.{key}: a list is required, not "
                    f"{type(tests[key]).__name__}",
                    param="verifier_metadata",
                )
        if tests.get("fn_name"):
            # call-based (LeetCode-style) tests: run as stdin/stdout they would fail a correct solution
            return ScoreItem(prompt=prompt, response=text, reward="code", reference=_call_based(tests))
        cases = [
            {"stdin": str(i), "stdout": str(o)}
            for i, o in zip(tests.get("inputs") or [], tests.get("outputs") or [], strict=False)
        ]
        return ScoreItem(
            prompt=prompt, response=text, reward="code", reference={"language": "python", "cases": cases}
        )
    reference = as_reference(
        next((body[k] for k in ("expected_answer", "answer", "ground_truth") if k in body), None)
    )
    if label:
        label["reference"] = reference
        spec, reference = parse_label(label, default_reward)
    else:
        spec, reference = parse_label(reference, default_reward)
    return ScoreItem(prompt=prompt, response=text, reference=reference, reward=spec)


def _call_based(tests: dict[str, Any]) -> dict[str, Any]:
    """LiveCodeBench's call-based tests as the ``code`` reward's: each input's lines are the JSON
    arguments, each output the JSON result (NeMo Gym's code_gen ``grade_call_based``)."""
    try:
        inputs = [
            i if isinstance(i, list) else [json.loads(line) for line in str(i).split("\n")]
            for i in tests.get("inputs") or []
        ]
        outputs = [json.loads(o) if isinstance(o, str) else o for o in tests.get("outputs") or []]
    except ValueError as exc:
        raise InvalidRequest(
            f"verifier_metadata.unit_tests: a call-based test is not JSON (one argument a line): {exc}",
            param="verifier_metadata",
        ) from None
    return {"language": "python", "fn_name": tests["fn_name"], "inputs": inputs, "outputs": outputs}


def to_response(body: dict[str, Any], outcome: ScoreOutcome) -> dict[str, Any]:
    r = outcome.results[0]
    out = dict(body)
    out["reward"] = float(r["score"]) if r["valid"] else 0.0
    # NeMo RL takes `reward_components` as the addends of `reward` (GDPO's objectives) and stops the run
    # when they do not sum to it; rewardhub's components are diagnostics, so they go under `rewardhub`
    out.pop("reward_components", None)  # (a stale one from a stored answer being reverified)
    out["mask_sample"] = not r["valid"]
    # NeMo RL reads the mask flag under `instance_config` (NeMo Gym's agents and metrics at the top)
    own = body.get("instance_config")
    out["instance_config"] = {**(own if isinstance(own, dict) else {}), "mask_sample": not r["valid"]}
    out["failure_kind"] = None if r["valid"] else f"rewardhub:{r.get('reason')}"
    out["failure_reason"] = (
        None if r["valid"] else (r.get("error") or (r.get("details") or {}).get("message") or r.get("reason"))
    )
    out.pop(FAILURE_CLASS_KEY, None)  # stale ones from the stored answer being reverified
    out.pop(JUDGE_ERROR_KEY, None)
    if not r["valid"] and r.get("reason") == Reason.BACKEND_ERROR:
        # NeMo Gym's own class for a verifier's failed model call (its judge_failsafe): the one that
        # `gym eval reverify --judge-failed-only` re-verifies from the sidecar without new rollouts
        out[FAILURE_CLASS_KEY] = "judge_failed"
        out[JUDGE_ERROR_KEY] = out["failure_reason"]
    elif not r["valid"] and r.get("reason") in _TRANSIENT:
        out[FAILURE_CLASS_KEY] = "transient"
    details = r.get("details") or {}
    out.pop("extracted_answer", None)  # a stale one from the stored answer being reverified
    if "extracted" in details:
        out["extracted_answer"] = details["extracted"]
    out["rewardhub"] = {
        k: r.get(k) for k in ("reward", "score", "valid", "reason", "cached", "reward_version")
    }
    out["rewardhub"]["components"] = r.get("components") or {}
    return out


def _stats(values: Sequence[float]) -> dict[str, float]:
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return {"mean": mean, "std": math.sqrt(var), "min": min(values), "max": max(values), "n": float(n)}


def aggregate_metrics(verify_responses: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-task and overall reward statistics, skipping masked samples and non-finite rewards (NaN,
    infinities: counted as ``num_non_finite_reward``) (NeMo Gym's AggregateMetrics shape:
    each group keyed by ``_ng_task_index``, a row without one task 0, as NeMo Gym's own aggregation)."""
    by_task: dict[Any, list[float]] = defaultdict(list)
    masked = non_finite = 0
    for resp in verify_responses:
        if resp.get("mask_sample"):
            masked += 1
            continue
        reward = resp.get("reward")
        if not isinstance(reward, int | float):
            continue
        if not math.isfinite(reward):
            # NaN (or an infinity: JSON bodies may carry both) is no measurement; kept, it made every
            # mean and std of its task and of the run NaN, answered as null
            non_finite += 1
            continue
        task = next((resp[k] for k in TASK_INDEX_KEYS if k in resp), 0)  # NeMo Gym's default
        if not isinstance(task, int | float | str | bool) and task is not None:
            task = json.dumps(task, sort_keys=True, default=str)  # (a list or object: its JSON text)
        by_task[task].append(float(reward))
    group_level = []
    for task, rewards in by_task.items():
        s = _stats(rewards)
        group_level.append(
            {
                TASK_INDEX_KEYS[0]: task,  # NeMo Gym's key for per-task joins
                "task_index": task,
                "mean/reward": s["mean"],
                "std/reward": s["std"],
                "max/reward": s["max"],
                "min/reward": s["min"],
                "num_rollouts": int(s["n"]),
                "pass@k": 1.0 if s["max"] >= 1.0 else 0.0,
            }
        )
    all_rewards = [r for rewards in by_task.values() for r in rewards]
    agent: dict[str, Any] = {
        "num_rollouts": len(all_rewards),
        "num_masked": masked,
        "num_non_finite_reward": non_finite,
        "num_tasks": len(by_task),
    }
    if all_rewards:
        s = _stats(all_rewards)
        agent.update(
            {
                "mean/reward": s["mean"],
                "std/reward": s["std"],
                "min/reward": s["min"],
                "max/reward": s["max"],
                "pass@k": sum(g["pass@k"] for g in group_level) / len(group_level),
            }
        )
    key = {k: agent[k] for k in ("mean/reward", "pass@k") if k in agent}
    return {"group_level_metrics": group_level, "agent_metrics": agent, "key_metrics": key}
