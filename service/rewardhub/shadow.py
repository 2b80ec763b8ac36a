"""Shadow verification: a second reward scores the same items, and where it disagrees is reported.

A rule verifier's false negatives are silent: a correct answer it cannot parse scores 0 and the policy
is pushed away from it (Math-Verify's issues #14 and #69 list both kinds of error). Running a second
verifier beside it, an LLM judge in ``reference`` mode or another rule, and counting where the two part
ways is how such errors are found on live traffic without changing what the trainer gets: the scores
stay the primary reward's. Each result carries the shadow's own result and whether the two agree;
``metrics.shadow`` counts the agreements and the two directions of disagreement, per data source
(``metadata.data_source``, else the item's primary reward), and ``rewardhub_shadow_items_total`` counts
them across requests for alerting.

Agreement is decided on pass / fail, not on equal scores, since the two rewards need not share a scale
(a judge's 0.8 and math's 1.0 both pass): a result passes when its ``correct`` component is 1 (``math``,
``calibration``, a composite component named ``correct``), else when its score is at least the request's
``shadow.threshold``. An item either reward could not score is counted as such, never as agreement.

The counts are sums, so the client adds those of a request sent in chunks: every field of
:func:`attach`'s summary but ``reward``, ``reward_version``, ``threshold`` and the ``agreement`` rate
(recomputed from the sums) is a count, overall and per source.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rewardhub.protocol import ScoreItem, ShadowSpec

__all__ = ["OUTCOMES", "attach", "outcome", "passes", "tally"]

# What one item's two results say, as ``rewardhub_shadow_items_total`` labels it.
OUTCOMES = ("agree_pass", "agree_fail", "primary_only", "shadow_only", "primary_invalid", "shadow_invalid")


def passes(result: dict[str, Any], threshold: float) -> bool:
    """A valid result's verdict: its ``correct`` component when it has one, else its score ≥ threshold."""
    correct = (result.get("components") or {}).get("correct")
    if correct is not None:
        return bool(correct >= 0.5)
    return bool(result["score"] >= threshold)


def outcome(primary: dict[str, Any], shadow: dict[str, Any], threshold: float) -> str:
    """One of :data:`OUTCOMES`; the primary's failure to score counts first."""
    if not primary["valid"]:
        return "primary_invalid"
    if not shadow["valid"]:
        return "shadow_invalid"
    p, s = passes(primary, threshold), passes(shadow, threshold)
    if p == s:
        return "agree_pass" if p else "agree_fail"
    return "primary_only" if p else "shadow_only"


def attach(
    items: Sequence[ScoreItem],
    primary: Sequence[dict[str, Any]],
    shadow: Sequence[dict[str, Any]],
    spec: ShadowSpec,
    per_item_reward: Sequence[str],
    *,
    include_details: bool,
) -> tuple[dict[str, Any], list[str]]:
    """Put each shadow result on its primary result (``result["shadow"]``); return ``metrics.shadow``
    and each item's outcome (for the Prometheus counter)."""
    total: Counter[str] = Counter()
    by_source: dict[str, Counter[str]] = {}
    outcomes: list[str] = []
    versions: set[str] = set()
    for item, p, s, reward in zip(items, primary, shadow, per_item_reward, strict=True):
        kind = outcome(p, s, spec.threshold)
        outcomes.append(kind)
        versions.add(s["reward_version"])
        p["shadow"] = {
            "reward": s["reward"],
            "score": s["score"],
            "valid": s["valid"],
            "reason": s["reason"],
            "components": s.get("components") or {},
            "details": (s.get("details") or {}) if include_details else {},
            "cached": s["cached"],
            "reward_version": s["reward_version"],
            "agree": None if kind.endswith("invalid") else kind.startswith("agree"),
            "outcome": kind,
        }
        total[kind] += 1
        by_source.setdefault(_source(item, reward), Counter())[kind] += 1
    summary: dict[str, Any] = {
        "reward": shadow[0]["reward"] if shadow else _name(spec),
        "reward_version": versions.pop() if len(versions) == 1 else None,
        "threshold": spec.threshold,
        **tally(total),
        "by_source": {k: tally(v) for k, v in sorted(by_source.items())},
    }
    return summary, outcomes


def tally(kinds: Counter[str]) -> dict[str, Any]:
    """Outcome counts as ``metrics.shadow`` gives them: ``items``, ``compared`` (both scored), ``agree``, each
    outcome's count and the ``agreement`` rate (None when nothing was compared). The dashboard's window
    (:mod:`rewardhub.stats`) reads the same figures."""
    compared = sum(kinds[k] for k in OUTCOMES if not k.endswith("invalid"))
    agree = kinds["agree_pass"] + kinds["agree_fail"]
    return {
        "items": sum(kinds.values()),
        "compared": compared,
        "agree": agree,
        **{k: kinds[k] for k in OUTCOMES},
        "agreement": agree / compared if compared else None,
    }


def _source(item: ScoreItem, reward: str) -> str:
    source = (item.metadata or {}).get("data_source")
    return source if isinstance(source, str) and source else reward


def _name(spec: ShadowSpec) -> str:
    return spec.reward if isinstance(spec.reward, str) else spec.reward.name
