"""OpenRLHF remote reward model protocol (``--reward.remote_url``, formerly ``--remote_rm_url``).

Request ``{"query": [str], "prompts": [str], "labels": [any]}``; ``query`` is prompt + response decoded
with special tokens kept (before 0.5.8 OpenRLHF sends ``query`` alone: the response is then what follows
the template's assistant header, and before 0.6.0 it sends no ``labels``). Answer ``{"rewards": [float], "scores": [float], "extra_logs": {name: [float]}}``
with lists as long as ``query`` (empty lists are valid: OpenRLHF sends them to the second and later URLs;
``extra_logs`` has its keys then too, with empty lists).

``scores`` are the rewards: OpenRLHF logs them and, with ``--dynamic_filtering``, keeps a prompt's group
only if its mean score is strictly inside ``--dynamic_filtering_reward_range``, which the user sets on the
reward's own scale (the README says so; a reward's range is not known here to map it to [0, 1]).

OpenRLHF cannot mask a sample, so an item that could not be scored gets reward 0.0 and
``extra_logs.rewardhub_valid`` 0.0 (logged to wandb by OpenRLHF), instead of an HTTP error that its
client would retry five times and then drop.

OpenRLHF's client waits 180 s for an answer (``requests``' read timeout up to 0.9.0, which posts a
whole rollout batch at once; aiohttp's total timeout from 0.9.1, one sample per request), tries five
times a second apart, then raises: up to 0.9.0 the exception ends the run, from 0.9.1 the sample is
left without a reward, which its experience maker cannot batch. So the endpoint answers by
``REWARDHUB_OPENRLHF_DEADLINE_S`` (150 s): the items not scored by then are invalid as above, marked
``extra_logs.rewardhub_deadline_exceeded`` 1.0. A service too full to take the batch (429) is waited
for within that deadline, not answered with a 0.0 for every item. A batch is scored in calls of
``REWARDHUB_OPENRLHF_PROGRESS_ITEMS`` (256) items, each cached as it ends, so a batch sent again (the
client gave up first) is served from the cache for what was scored.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from rewardhub.compat.common import (
    DEADLINE_EXCEEDED,
    ScoreOutcome,
    parse_label,
    prompt_text,
    reply_start,
    strip_eos,
    user_turn,
)
from rewardhub.errors import RewardHubError
from rewardhub.protocol import RewardSpec, ScoreItem

__all__ = ["OpenRLHFRequest", "OpenRLHFResponse", "to_items", "to_response"]


class OpenRLHFRequest(BaseModel):
    query: list[str] = Field(default_factory=list, description="Prompt + response, special tokens included.")
    prompts: list[str] = Field(default_factory=list, description="The prompts (stripped from `query`).")
    labels: list[Any] = Field(
        default_factory=list,
        description='Per item: the reference, or a JSON task spec such as {"verifier": "math", "answer": "32"}.',
    )


class OpenRLHFResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]


# The shortest prompt tail trusted to mark where the prompt ends in ``query``.
_MIN_TAIL_CHARS = 16


def split_response(query: str, prompt: str | None) -> str:
    """The response part of ``query``: what follows the prompt (wherever a BOS or template put it).

    ``query`` is decoded from the token ids OpenRLHF generated from, which need not spell the prompt
    string it posts: an over-long prompt is cut from the left (``prompt_token_ids[-max_prompt_length:]``),
    and a VLM processor expands an image placeholder (``<|image_pad|>``) into one token per patch. The
    response then follows the longest tail of the prompt that ``query`` holds. Without a prompt to find
    (OpenRLHF before 0.5.8 sends none), it follows the chat template's assistant header after the last
    user turn (:func:`~rewardhub.compat.common.reply_start`)."""
    if prompt:
        at = query.find(prompt)
        if at >= 0:
            return strip_eos(query[at + len(prompt) :])
        end = _prompt_tail_end(query, prompt)
        if end is not None:
            return strip_eos(query[end:])
    # No prompt (OpenRLHF before 0.5.8 posts `query` alone) or none found: the template's reply boundary
    start = reply_start(query)
    return strip_eos(query[start:] if start is not None else query)


def _prompt_tail_end(query: str, prompt: str) -> int | None:
    """Where the first occurrence of the longest tail of ``prompt`` found in ``query`` ends, if that
    tail is long enough to trust. A tail found means every shorter one is found too, so the longest is
    a binary search. (Its place is not required to be the start of ``query``: after an expanded image
    placeholder the tail starts past the expansion.)"""
    lo, hi = 0, min(len(prompt), len(query))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if prompt[-mid:] in query:
            lo = mid
        else:
            hi = mid - 1
    if lo < min(_MIN_TAIL_CHARS, len(prompt)):
        return None
    return query.find(prompt[-lo:]) + lo


def to_items(req: OpenRLHFRequest, default_reward: str) -> list[ScoreItem | RewardHubError]:
    items: list[ScoreItem | RewardHubError] = []
    specs: dict[bytes, str | RewardSpec] = {}  # (equal label specs: one object, validated once)
    for i, query in enumerate(req.query):
        prompt = req.prompts[i] if i < len(req.prompts) else None
        label = req.labels[i] if i < len(req.labels) else None
        try:
            spec, reference = parse_label(label, default_reward, specs)
        except RewardHubError as exc:  # an unreadable label flags its item only
            items.append(exc)
            continue
        if prompt is None:  # the prompt is the query's part before the reply, where the template shows it
            start = reply_start(query)
            asked = user_turn(query[:start]) if start is not None else None
        else:
            asked = prompt_text(prompt)
        items.append(
            ScoreItem(
                id=str(i),
                prompt=asked,
                response=split_response(query, prompt),
                reference=reference,
                reward=spec,
            )
        )
    return items


def to_response(outcome: ScoreOutcome) -> dict[str, Any]:
    rewards = [float(r["score"]) if r["valid"] else 0.0 for r in outcome.results]
    logs: dict[str, list[float]] = {
        "rewardhub_valid": [1.0 if r["valid"] else 0.0 for r in outcome.results],
        "rewardhub_cached": [1.0 if r.get("cached") else 0.0 for r in outcome.results],
        "rewardhub_deadline_exceeded": [
            1.0 if r.get("reason") == DEADLINE_EXCEEDED else 0.0 for r in outcome.results
        ],
    }
    # the keys even for empty lists: OpenRLHF up to 0.9.0 merges the answers of its URLs key by key
    # (the first answer's keys looked up in every other one), and a short batch leaves the last URLs empty
    return {"rewards": rewards, "scores": list(rewards), "extra_logs": logs}
