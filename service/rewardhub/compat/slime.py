"""slime remote reward model protocol (``--rm-type remote_rm --rm-url ... --reward-key reward``).

Request ``{"prompt": str | [messages], "response": str, "label": any}``, one sample per call (a
message list's last user message is the prompt, and a chat-templated string's last user turn). Answer
``{"reward": float, "valid": bool, "reason": str | null, "score": float | null, "components": {...}}``;
slime reads the number under ``--reward-key`` (use ``reward``). Failures answer 200 with
``valid: false`` and reward 0.0, because slime retries a non-200 ten times and then raises. A sample
that finds the service full waits for room within ``REWARDHUB_SLIME_DEADLINE_S`` (100 s, under slime's
120 s per call): answered ``overloaded`` at once, plain ``remote_rm`` trained on its 0.0. A remote RM
cannot mask a sample; the client's ``rewardhub_client.slime.reward_func`` (``--custom-rm-path``) sets
``Sample.remove_sample`` for such a sample instead.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rewardhub.compat.common import ScoreOutcome, parse_label, prompt_text, strip_eos
from rewardhub.errors import RewardHubError
from rewardhub.protocol import ScoreItem

__all__ = ["SlimeRequest", "SlimeResponse", "to_item", "to_response"]


class SlimeRequest(BaseModel):
    # slime's Sample.prompt is a string, or the chat messages when no chat template was applied
    prompt: str | list[Any] | None = None
    response: str
    label: Any = None


class SlimeResponse(BaseModel):
    reward: float
    valid: bool
    reason: str | None = None
    score: float | None = None
    components: dict[str, float | None] = {}
    cached: bool = False


def to_item(req: SlimeRequest, default_reward: str) -> ScoreItem | RewardHubError:
    try:
        spec, reference = parse_label(req.label, default_reward)
    except RewardHubError as exc:
        return exc
    return ScoreItem(
        prompt=prompt_text(req.prompt), response=strip_eos(req.response), reference=reference, reward=spec
    )


def to_response(outcome: ScoreOutcome) -> dict[str, Any]:
    r = outcome.results[0]
    return {
        "reward": float(r["score"]) if r["valid"] else 0.0,
        "valid": bool(r["valid"]),
        "reason": r.get("reason"),
        "score": r.get("score"),
        "components": r.get("components", {}),
        "cached": bool(r.get("cached", False)),
    }
