"""From step scores ``s_1..s_K`` in [0, 1] to one reward (see docs/algorithms.md §1.8).

* ``min`` — the weakest step (the default: PURE's finding is that min-form credit resists the reward
  hacking that sum/mean forms invite);
* ``prod`` — joint correctness under independence (penalises long solutions);
* ``last`` — the final step's score (ORM-like);
* ``mean`` — dilutes one bad step; easiest to game by padding with trivially true steps;
* ``first_error`` with threshold τ — ProcessBench's protocol finds the first step with ``s_k < τ``.
  As a *reward* it is the fraction of steps before the first error: ``(k-1)/K`` when step ``k`` (1-based)
  is the first below τ, and ``1.0`` when none is. The 0-based index of that step (ProcessBench's
  prediction, ``-1`` when none) is reported in ``details.first_error``;
* ``soft_min`` with temperature T — PURE's min-form credit ("Stop Summation", arXiv 2504.15275): each
  step's reward ``r_k = 2 s_k - 1`` (``p(+) - p(-)`` of a two-class PRM, in [-1, 1]) is weighted by
  ``w_k = softmax_k(-r_k / T)``, and the reward is ``sum_k w_k r_k``, a smooth ``min_k r_k``. It lies in
  [-1, 1], not [0, 1]: PURE trains on it as is (with T = 0.1), and ``w_k r_k`` are its per-step dense
  rewards (:func:`soft_min_rewards`), whose sum is the reward. Sum-form credit over raw step scores, the
  alternative, is what PURE found reward-hacked from the start of training; this is the min form made
  differentiable in the weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, get_args

__all__ = [
    "AGGREGATIONS",
    "FLOORS",
    "Aggregation",
    "aggregate",
    "first_error_index",
    "soft_min_rewards",
    "summarize",
]

Aggregation = Literal["min", "prod", "last", "mean", "first_error", "soft_min"]
AGGREGATIONS: tuple[Aggregation, ...] = get_args(Aggregation)
# Every aggregate's lowest value, what a response with no step (or one stopped before scoring) gets:
# 0, and -1 for soft_min, whose 0 is a middling step
FLOORS: dict[str, float] = {a: (-1.0 if a == "soft_min" else 0.0) for a in AGGREGATIONS}


def first_error_index(scores: Sequence[float], threshold: float) -> int:
    """0-based index of the first step scoring below ``threshold``; -1 when every step passes."""
    for k, s in enumerate(scores):
        if s < threshold:
            return k
    return -1


def soft_min_rewards(scores: Sequence[float], temperature: float) -> list[float]:
    """PURE's per-step rewards ``w_k r_k`` (see the module docstring); their sum is ``soft_min``.

    The softmax is taken with the largest exponent subtracted, so a low temperature cannot overflow.
    """
    if temperature <= 0.0:
        raise ValueError("the soft_min temperature must be positive")
    r = [2.0 * s - 1.0 for s in scores]
    top = max(-x / temperature for x in r)
    e = [math.exp(-x / temperature - top) for x in r]
    total = sum(e)
    return [x * ek / total for x, ek in zip(r, e, strict=True)]


def aggregate(
    scores: Sequence[float], how: Aggregation, threshold: float = 0.5, temperature: float = 0.1
) -> float:
    if not scores:
        raise ValueError("no step scores to aggregate")
    if how == "min":
        return min(scores)
    if how == "prod":
        return math.prod(scores)
    if how == "last":
        return scores[-1]
    if how == "mean":
        return sum(scores) / len(scores)
    if how == "soft_min":
        return math.fsum(soft_min_rewards(scores, temperature))
    k = first_error_index(scores, threshold)
    return 1.0 if k < 0 else k / len(scores)


def summarize(
    rows: list[dict[str, Any]],
    scores: Sequence[float],
    how: Aggregation,
    threshold: float,
    temperature: float,
) -> tuple[dict[str, float | None], dict[str, Any]]:
    """A scored response's ``(components, details)``: every aggregate of its step ``scores``, and the
    details ``{aggregation, steps, first_error}`` with ``rows`` (one per step) as the steps. With
    ``soft_min`` each row gets its ``reward``, PURE's dense per-step share of the score.

    One place for what every step-scoring reward (``prm``, the judge's ``steps`` mode) reports, so the
    two read the same."""
    if how == "soft_min":
        for row, r in zip(rows, soft_min_rewards(scores, temperature), strict=True):
            row["reward"] = round(r, 6)
    components: dict[str, float | None] = {
        a: aggregate(scores, a, threshold, temperature) for a in AGGREGATIONS
    }
    details = {"aggregation": how, "steps": rows, "first_error": first_error_index(scores, threshold)}
    return components, details
