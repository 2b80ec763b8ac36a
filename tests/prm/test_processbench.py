"""ProcessBench's metric (algorithms.md §1.9), computed by hand on small cases."""

from __future__ import annotations

import pytest

from rewardhub.prm.processbench import processbench_label, processbench_summary


def test_f1_is_the_harmonic_mean_of_the_two_accuracies() -> None:
    # erroneous: labels 2, 0, 3 -> predictions 2 (hit), 1 (late by one: a miss), -1 (missed): 1/3
    # correct: labels -1, -1 -> predictions -1 (hit), 4 (a false alarm): 1/2
    s = processbench_summary([2, 1, -1, -1, 4], [2, 0, 3, -1, -1])
    assert (s["count"], s["erroneous"], s["correct"]) == (5, 3, 2)
    assert s["acc_erroneous"] == pytest.approx(100 / 3)
    assert s["acc_correct"] == pytest.approx(50.0)
    assert s["f1"] == pytest.approx(2 * (100 / 3) * 50 / (100 / 3 + 50))  # 40.0
    assert s["f1"] == pytest.approx(40.0)


def test_a_prm_that_flags_everything_or_nothing_scores_zero() -> None:
    labels = [1, 2, -1, -1]
    never = processbench_summary([-1, -1, -1, -1], labels)
    assert (never["acc_erroneous"], never["acc_correct"], never["f1"]) == (0.0, 100.0, 0.0)
    always = processbench_summary([1, 2, 0, 0], labels)
    assert (always["acc_erroneous"], always["acc_correct"], always["f1"]) == (100.0, 0.0, 0.0)
    nothing_right = processbench_summary([0, 0, 0, 0], labels)
    assert nothing_right["f1"] == 0.0


def test_one_sided_sets_have_no_f1() -> None:
    only_errors = processbench_summary([1, 2], [1, 0])
    assert only_errors["acc_erroneous"] == 50.0 and only_errors["acc_correct"] is None
    assert only_errors["f1"] is None
    empty = processbench_summary([], [])
    assert empty == {
        "count": 0,
        "erroneous": 0,
        "correct": 0,
        "acc_erroneous": None,
        "acc_correct": None,
        "f1": None,
    }
    with pytest.raises(ValueError):
        processbench_summary([1], [1, 2])


@pytest.mark.parametrize(
    ("reference", "label"),
    [
        ({"label": 3}, 3),
        ({"label": 0}, 0),
        ({"label": -1}, -1),
        ({"label": -2}, None),
        ({"label": True}, None),  # a bool is no step index
        ({"label": "2"}, None),
        ({"label": 1.0}, None),
        ("2", None),
        (None, None),
        ([1], None),
    ],
)
def test_the_label_is_read_from_the_reference(reference: object, label: int | None) -> None:
    assert processbench_label(reference) == label
