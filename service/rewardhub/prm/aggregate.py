"""From step scores ``s_1..s_K`` in [0, 1] to one reward (see docs/algorithms.md §1.8).

* ``min`` — the weakest step (the default: PURE's finding is that min-form credit resists the reward
  hacking that sum/mean forms invite);
* ``prod`` — joint correctness under independence (penalises long solutions);
* ``last`` — the final step's score (ORM-like);
* ``mean`` — dilutes one bad step; easiest to game by padding with trivially true steps;
* ``first_error`` with threshold τ — ProcessBench's protocol finds the first step with ``s_k < τ``.
  As a *reward* it is the fraction of steps before the first error: ``(k-1)/K`` when step ``k`` (1-based)
  is the first below τ, and ``1.0`` when none is. The 0-based index of that step (ProcessBench's
  prediction, ``-1`` when none) is reported in ``details.first_error``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

__all__ = ["Aggregation", "aggregate", "first_error_index"]

Aggregation = Literal["min", "prod", "last", "mean", "first_error"]


def first_error_index(scores: Sequence[float], threshold: float) -> int:
    """0-based index of the first step scoring below ``threshold``; -1 when every step passes."""
    for k, s in enumerate(scores):
        if s < threshold:
            return k
    return -1


def aggregate(scores: Sequence[float], how: Aggregation, threshold: float = 0.5) -> float:
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
    k = first_error_index(scores, threshold)
    return 1.0 if k < 0 else k / len(scores)
