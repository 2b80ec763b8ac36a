"""Per-request metrics returned in ``ScoreResponse.metrics``.

Computed from the final result dicts (fresh and cached alike), so a cached batch reports the same
figures as a fresh one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rewardhub.protocol import ScoreItem

__all__ = ["request_metrics"]


def request_metrics(
    items: Sequence[ScoreItem], results: Sequence[dict[str, Any]], *, per_item_reward: Sequence[str]
) -> dict[str, Any]:
    reasons: Counter[str] = Counter()
    per_reward: dict[str, dict[str, Any]] = {}
    cached = 0
    for name, d in zip(per_item_reward, results, strict=True):
        agg = per_reward.get(name)
        if agg is None:
            agg = per_reward[name] = {"items": 0, "valid": 0, "cached": 0, "score_sum": 0.0}
        agg["items"] += 1
        if d["cached"]:
            cached += 1
            agg["cached"] += 1
        if d["valid"]:
            agg["valid"] += 1
            agg["score_sum"] += d["score"]
        else:
            reasons[d["reason"]] += 1
    for agg in per_reward.values():
        total = agg.pop("score_sum")
        agg["mean_score"] = total / agg["valid"] if agg["valid"] else None
    return {
        "items": len(results),
        "cached": cached,
        "invalid": sum(reasons.values()),
        "invalid_reasons": dict(reasons),
        "rewards": per_reward,
    }
