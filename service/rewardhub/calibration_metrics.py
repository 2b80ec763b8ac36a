"""Batch calibration metrics of verbalized confidence (algorithms.md §3.4; RLCR ``eval/eval_utils.py``).

For N items with confidence ``q_i ∈ [0, 1]`` and correctness ``c_i ∈ {0, 1}``:

* **Brier** ``= (1/N) Σ (q_i − c_i)²`` (0 is perfect, 1 is confidently wrong everywhere);
* **ECE** ``= Σ_b (n_b / N) · |mean(q in b) − mean(c in b)|`` over 10 equal-width bins. Bin ``b`` holds
  ``b/10 ≤ q < (b+1)/10``: bins are closed on the left and open on the right, except that the first
  is open to −∞ and the last to +∞, so ``q = 0`` is in bin 0 and ``q = 1`` in bin 9 (its own decimal
  edges included: a confidence written ``0.3`` is in ``[0.3, 0.4)``). RLCR's ``get_ece`` means the
  same bins but builds the edges with ``np.linspace(0, 1, 11)``, whose 0.3, 0.6 and 0.7 are one ulp above
  the decimals, so it puts a confidence of exactly 0.3, 0.6 or 0.7 one bin lower; we compare against
  the decimal edges, the evident intent, since verbalized confidences sit on them all the time;
* **AUROC** of confidence as a score for correctness, the Mann–Whitney statistic
  ``P(q_correct > q_wrong) + ½ P(q_correct = q_wrong)`` over all (correct, wrong) pairs, which equals
  ``sklearn.metrics.roc_curve`` + ``auc`` (ties get half credit). Computed in O(N log N) from
  mid-ranks. ``None`` when every item is correct, or every item is wrong (the ROC is undefined);
* ``mean_confidence``, ``accuracy`` and ``count``.

An empty input gives ``count: 0`` and ``None`` everywhere else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["N_BINS", "auroc", "brier", "calibration_summary", "ece", "ece_bin"]

N_BINS = 10
# Decimal edges 0.1 … 0.9 as the nearest doubles (k / 10 is correctly rounded; k * 0.1 is not).
_EDGES = tuple(k / N_BINS for k in range(N_BINS + 1))


def ece_bin(q: float) -> int:
    """The ECE bin of a confidence (module docstring): ``b`` with ``b/10 ≤ q < (b+1)/10``, clamped."""
    b = min(N_BINS - 1, max(0, math.floor(q * N_BINS)))
    # q * 10 can round across an integer; settle the edge against the decimal edge itself.
    if b > 0 and q < _EDGES[b]:
        b -= 1
    elif b < N_BINS - 1 and q >= _EDGES[b + 1]:
        b += 1
    return b


def brier(q: Sequence[float], c: Sequence[float]) -> float | None:
    if not q:
        return None
    return math.fsum((qi - ci) ** 2 for qi, ci in zip(q, c, strict=True)) / len(q)


def ece(q: Sequence[float], c: Sequence[float]) -> float | None:
    n = len(q)
    if n == 0:
        return None
    count = [0] * N_BINS
    sum_q = [0.0] * N_BINS
    sum_c = [0.0] * N_BINS
    for qi, ci in zip(q, c, strict=True):
        b = ece_bin(qi)
        count[b] += 1
        sum_q[b] += qi
        sum_c[b] += ci
    return math.fsum(
        (count[b] / n) * abs(sum_q[b] / count[b] - sum_c[b] / count[b]) for b in range(N_BINS) if count[b]
    )


def auroc(q: Sequence[float], c: Sequence[float]) -> float | None:
    """Mann–Whitney AUROC with mid-ranks for ties; None when one class is empty."""
    n_pos = sum(1 for ci in c if ci >= 0.5)
    n_neg = len(c) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    order = sorted(range(len(q)), key=lambda i: q[i])
    rank_sum_pos = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and q[order[j + 1]] == q[order[i]]:
            j += 1
        mid_rank = (i + j) / 2 + 1  # ranks are 1-based; tied values share the average rank
        rank_sum_pos += mid_rank * sum(1 for k in range(i, j + 1) if c[order[k]] >= 0.5)
        i = j + 1
    return (rank_sum_pos - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def calibration_summary(q: Sequence[float], c: Sequence[float]) -> dict[str, Any]:
    """All the metrics of the module docstring for one set of (confidence, correctness) pairs."""
    n = len(q)
    return {
        "count": n,
        "brier": brier(q, c),
        "ece": ece(q, c),
        "auroc": auroc(q, c),
        "mean_confidence": math.fsum(q) / n if n else None,
        "accuracy": math.fsum(c) / n if n else None,
    }
