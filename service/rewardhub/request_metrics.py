"""Per-request metrics returned in ``ScoreResponse.metrics``.

Computed from the final result dicts (fresh and cached alike), so a cached batch reports the same
figures as a fresh one.

``calibration`` (when results carry confidence): Brier, ECE, AUROC, mean confidence, accuracy and count
(:mod:`rewardhub.calibration_metrics`) over the valid results whose components hold a non-null
``confidence`` and ``correct`` with the same prefix (``calibration.confidence`` and
``calibration.correct`` inside a composite), the prefix's ``format_ok`` not 0. An item counts once: its
unprefixed pair if it has one, else the first prefix in sorted order.

``groups`` (when items carry ``group``): per-group score statistics of any reward (:mod:`rewardhub.groups`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rewardhub.calibration_metrics import calibration_summary
from rewardhub.groups import group_stats
from rewardhub.prm.processbench import processbench_label, processbench_summary
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
    out: dict[str, Any] = {
        "items": len(results),
        "cached": cached,
        "invalid": sum(reasons.values()),
        "invalid_reasons": dict(reasons),
        "rewards": per_reward,
    }
    calibration = _calibration(results)
    if calibration is not None:
        out["calibration"] = calibration
    groups = group_stats(items, results)
    if groups is not None:
        out["groups"] = groups
    processbench = _processbench(items, results, per_item_reward)
    if processbench is not None:
        out["processbench"] = processbench
    return out


def _processbench(
    items: Sequence[ScoreItem], results: Sequence[dict[str, Any]], per_item_reward: Sequence[str]
) -> dict[str, Any] | None:
    """ProcessBench's F1 over the ``prm`` items labelled ``reference: {"label": k}``; None if none is.
    An item the PRM could not score has no prediction: it is counted in ``unscored``, not as a miss;
    so is one whose steps were merged to ``max_steps`` (its ``first_error`` indexes groups of steps)."""
    preds: list[int] = []
    labels: list[int] = []
    unscored = 0
    for item, d, name in zip(items, results, per_item_reward, strict=True):
        label = processbench_label(item.reference) if name == "prm" else None
        if label is None:
            continue
        details = d.get("details") or {}
        pred = details.get("first_error")
        # steps merged to max_steps: first_error counts groups, the label the solution's own steps
        if not d["valid"] or not isinstance(pred, int) or "steps_before_merge" in details:
            unscored += 1
            continue
        preds.append(pred)
        labels.append(label)
    if not labels and not unscored:
        return None
    return {**processbench_summary(preds, labels), "unscored": unscored}


def _confidence_pair(components: dict[str, Any]) -> tuple[float, float] | None:
    """(confidence, correct) of one result's components (module docstring), or None."""
    prefixes = sorted(
        p
        for p in (k[: -len("confidence")] for k in components if k.endswith("confidence"))
        if (not p or p.endswith(".")) and p + "correct" in components
    )
    if not prefixes:
        return None
    prefix = prefixes[0]
    q, c = components[prefix + "confidence"], components[prefix + "correct"]
    if q is None or c is None or components.get(prefix + "format_ok", 1.0) == 0.0:
        return None
    return float(q), float(c)


def _calibration(results: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    seen = False
    q: list[float] = []
    c: list[float] = []
    for d in results:
        comps = d.get("components") or {}
        if not any(k.endswith("confidence") for k in comps):
            continue
        seen = True
        pair = _confidence_pair(comps) if d["valid"] else None
        if pair is not None:
            q.append(pair[0])
            c.append(pair[1])
    return calibration_summary(q, c) if seen else None
