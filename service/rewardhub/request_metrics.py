"""Per-request metrics returned in ``ScoreResponse.metrics``.

Computed from the final result dicts (fresh and cached alike), so a cached batch reports the same
figures as a fresh one.

``calibration`` (when results carry confidence): Brier, ECE, AUROC, mean confidence, accuracy and count
(:mod:`rewardhub.calibration_metrics`) over the results whose components hold a non-null
``confidence`` and ``correct`` with the same prefix (``calibration.confidence`` and
``calibration.correct`` inside a composite), the prefix's ``format_ok`` not 0. Every pair counts: a
composite with two calibration components (two verifiers, two confidence formats) gives two pairs per
item, pooled in ``calibration`` (its count is pairs) and summarised per source in
``calibration_sources`` (the component's name; an unprefixed pair under its reward's name), so a
request mixing them can still be read apart.

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
    calibration = _calibration(results, per_item_reward)
    if calibration is not None:
        out["calibration"], out["calibration_sources"] = calibration
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


def _confidence_pairs(components: dict[str, Any], reward: str) -> list[tuple[str, float, float]]:
    """(source, confidence, correct) of each calibration component of one result (module docstring)."""
    pairs: list[tuple[str, float, float]] = []
    for key in sorted(components):
        if not key.endswith("confidence"):
            continue
        prefix = key[: -len("confidence")]
        if (prefix and not prefix.endswith(".")) or prefix + "correct" not in components:
            continue
        q, c = components[key], components[prefix + "correct"]
        if q is None or c is None or components.get(prefix + "format_ok", 1.0) == 0.0:
            continue
        pairs.append((prefix[:-1] if prefix else reward, float(q), float(c)))
    return pairs


def _calibration(
    results: Sequence[dict[str, Any]], per_item_reward: Sequence[str]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]] | None:
    """(pooled summary, summary per source), or None when no result carries a confidence."""
    seen = False
    q: list[float] = []
    c: list[float] = []
    by_source: dict[str, tuple[list[float], list[float]]] = {}
    for d, reward in zip(results, per_item_reward, strict=True):
        comps = d.get("components") or {}
        if not any(k.endswith("confidence") for k in comps):
            continue
        seen = True
        # an item invalid through another component still holds the pair its calibration scored (a
        # pair whose verifier failed has no ``correct`` and is skipped): counted, so that the figures do
        # not hang on an unrelated part of a composite
        for source, qi, ci in _confidence_pairs(comps, reward):
            q.append(qi)
            c.append(ci)
            sq, sc = by_source.setdefault(source, ([], []))
            sq.append(qi)
            sc.append(ci)
    if not seen:
        return None
    return calibration_summary(q, c), {k: calibration_summary(*v) for k, v in sorted(by_source.items())}
