"""ProcessBench's metric for a PRM's first-error predictions (algorithms.md §1.9; arXiv 2412.06559).

Each labelled solution has ``label``: the 0-based index of its earliest wrong step, or ``-1`` when every
step is right. A PRM predicts the first step scored below the threshold τ, or ``-1`` (the ``prm``
reward's ``details.first_error``). A prediction matches when it equals the label exactly, so flagging
an error one step late is as wrong as missing it. Over the labelled items:

* ``acc_erroneous`` ``= 100 · mean(match | label ≠ −1)`` (did it find the right first error),
* ``acc_correct`` ``= 100 · mean(match | label = −1)`` (did it leave a correct solution alone),
* ``f1`` ``= 2 · acc_erroneous · acc_correct / (acc_erroneous + acc_correct)``, the harmonic mean that
  ProcessBench ranks models by: a PRM that flags everything, or nothing, scores 0.

Percentages, as ProcessBench's tables print them. An accuracy whose subset is empty is ``None``, and so
is ``f1`` then (one side alone says nothing about the trade-off); ``f1`` is 0 when both are 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["processbench_label", "processbench_summary"]


def processbench_label(reference: Any) -> int | None:
    """The label a ``prm`` item carries in ``reference`` as ``{"label": k}`` (k ≥ -1), else None."""
    if not isinstance(reference, Mapping):
        return None
    label = reference.get("label")
    if isinstance(label, bool) or not isinstance(label, int) or label < -1:
        return None
    return label


def processbench_summary(predictions: Sequence[int], labels: Sequence[int]) -> dict[str, Any]:
    """``{count, erroneous, correct, acc_erroneous, acc_correct, f1}`` (module docstring)."""
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predictions for {len(labels)} labels")
    err = [p == y for p, y in zip(predictions, labels, strict=True) if y != -1]
    ok = [p == y for p, y in zip(predictions, labels, strict=True) if y == -1]
    acc_err = 100.0 * sum(err) / len(err) if err else None
    acc_ok = 100.0 * sum(ok) / len(ok) if ok else None
    f1: float | None = None
    if acc_err is not None and acc_ok is not None:
        f1 = 2 * acc_err * acc_ok / (acc_err + acc_ok) if acc_err + acc_ok > 0 else 0.0
    return {
        "count": len(labels),
        "erroneous": len(err),
        "correct": len(ok),
        "acc_erroneous": acc_err,
        "acc_correct": acc_ok,
        "f1": f1,
    }
