"""Batch calibration metrics (Brier, ECE, AUROC) against independent computations, and in responses."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import httpx
import pytest

from rewardhub.calibration_metrics import auroc, brier, calibration_summary, ece, ece_bin

Q = [0.05, 0.3, 0.35, 0.7, 0.95, 1.0, 0.0, 0.6, 0.6, 0.42, 0.1, 0.99]
C = [0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0]


def brute_auroc(q: list[float], c: list[float]) -> float:
    """Every (correct, wrong) pair: 1 if the correct one is more confident, ½ on a tie."""
    pos = [qi for qi, ci in zip(q, c, strict=True) if ci == 1.0]
    neg = [qi for qi, ci in zip(q, c, strict=True) if ci == 0.0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def decimal_ece(q: list[float], c: list[float]) -> float:
    """ECE with bins taken from the exact decimal value of each confidence (Fractions, no floats)."""
    bins: dict[int, list[tuple[float, float]]] = {}
    for qi, ci in zip(q, c, strict=True):
        b = min(9, math.floor(Fraction(repr(qi)) * 10))
        bins.setdefault(b, []).append((qi, ci))
    n = len(q)
    total = 0.0
    for members in bins.values():
        conf = sum(m[0] for m in members) / len(members)
        acc = sum(m[1] for m in members) / len(members)
        total += len(members) / n * abs(conf - acc)
    return total


def test_ece_hand_computed() -> None:
    # bins: 0.05 -> 0 (conf .05, acc 0); 0.3, 0.35 -> 3 (conf .325, acc .5); 0.7 -> 7 (conf .7, acc 1);
    # 0.95, 1.0 -> 9 (conf .975, acc 1):  (1·.05 + 2·.175 + 1·.3 + 2·.025) / 6 = 0.75 / 6
    q = [0.05, 0.3, 0.35, 0.7, 0.95, 1.0]
    c = [0.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert ece(q, c) == pytest.approx(0.125, abs=1e-15)


def test_ece_matches_independent_computation() -> None:
    assert ece(Q, C) == pytest.approx(decimal_ece(Q, C), abs=1e-15)


@pytest.mark.parametrize(
    ("q", "b"),
    [(0.0, 0), (0.0999, 0), (0.1, 1), (0.3, 3), (0.6, 6), (0.7, 7), (0.9, 9), (0.95, 9), (1.0, 9)],
)
def test_bin_edges_are_the_decimals(q: float, b: int) -> None:
    # Left-closed bins on the decimal edges; 1.0 goes to the last bin (open to +inf).
    assert ece_bin(q) == b


def test_brier() -> None:
    expected = sum((qi - ci) ** 2 for qi, ci in zip(Q, C, strict=True)) / len(Q)
    assert brier(Q, C) == pytest.approx(expected, abs=1e-15)
    assert brier([1.0, 0.0], [1.0, 0.0]) == 0.0
    assert brier([1.0], [0.0]) == 1.0


def test_auroc_matches_brute_force_with_ties() -> None:
    assert auroc(Q, C) == pytest.approx(brute_auroc(Q, C), abs=1e-15)
    # pos {0.8, 0.6}, neg {0.8, 0.6, 0.2}: (0.5 + 1 + 1) + (0 + 0.5 + 1) = 4 of 6 pairs
    assert auroc([0.8, 0.8, 0.6, 0.6, 0.2], [1, 0, 1, 0, 0]) == pytest.approx(4 / 6)
    assert auroc([0.9, 0.1], [1, 0]) == 1.0
    assert auroc([0.1, 0.9], [1, 0]) == 0.0
    assert auroc([0.5, 0.5, 0.5], [1, 0, 1]) == 0.5  # all tied


def test_auroc_undefined_with_one_class() -> None:
    assert auroc([0.2, 0.9], [1, 1]) is None
    assert auroc([0.2, 0.9], [0, 0]) is None


def test_summary() -> None:
    s = calibration_summary(Q, C)
    assert s["count"] == len(Q)
    assert s["mean_confidence"] == pytest.approx(sum(Q) / len(Q))
    assert s["accuracy"] == pytest.approx(sum(C) / len(C))
    empty = calibration_summary([], [])
    assert empty == {
        "count": 0,
        "brier": None,
        "ece": None,
        "auroc": None,
        "mean_confidence": None,
        "accuracy": None,
    }


CAL = {"name": "calibration", "config": {"verifier": "exact_match"}}


def cal_item(answer: str, conf: str, ref: str = "Paris") -> dict[str, Any]:
    return {"response": f"<answer>{answer}</answer><confidence>{conf}</confidence>", "reference": ref}


async def test_metrics_in_the_response(client: httpx.AsyncClient) -> None:
    items = [
        cal_item("Paris", "0.9"),  # correct, 0.9
        cal_item("Paris", "60%"),  # correct, 0.6
        cal_item("Lyon", "0.6"),  # wrong, 0.6 (tie with a correct one)
        cal_item("Lyon", "0.2"),  # wrong, 0.2
        cal_item("Paris", "high"),  # format failure: excluded
        {"response": "<answer>x</answer><confidence>0.5</confidence>"},  # invalid (no reference): excluded
    ]
    resp = await client.post("/v1/score", json={"reward": CAL, "items": items})
    assert resp.status_code == 200, resp.text
    m = resp.json()["metrics"]["calibration"]
    q, c = [0.9, 0.6, 0.6, 0.2], [1.0, 1.0, 0.0, 0.0]
    assert m["count"] == 4
    assert m["brier"] == pytest.approx((0.01 + 0.16 + 0.36 + 0.04) / 4)
    assert m["auroc"] == pytest.approx(brute_auroc(q, c))  # (1 + 1) + (0.5 + 1) = 3.5 of 4
    assert m["auroc"] == pytest.approx(0.875)
    # bins: 0.9 -> 9 (|.9 - 1|), 0.6, 0.6 -> 6 (|.6 - .5|), 0.2 -> 2 (|.2 - 0|)
    assert m["ece"] == pytest.approx((0.1 + 2 * 0.1 + 0.2) / 4)
    assert m["mean_confidence"] == pytest.approx(0.575)
    assert m["accuracy"] == 0.5


async def test_no_calibration_metrics_for_other_rewards(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/score", json={"reward": "exact_match", "items": [{"response": "a", "reference": "a"}]}
    )
    assert "calibration" not in resp.json()["metrics"]


async def test_one_class_gives_null_auroc(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/score", json={"reward": CAL, "items": [cal_item("Paris", "0.7")] * 2})
    m = resp.json()["metrics"]["calibration"]
    assert m["count"] == 2 and m["auroc"] is None and m["accuracy"] == 1.0


async def test_metrics_use_the_pair_the_reward_scored(client: httpx.AsyncClient) -> None:
    """A response with several answer/confidence pairs is scored on its last (the final word); the
    metrics are computed from the result's components, so they use that pair too, inside a composite as
    well (reported as taking the first pair; it did not: this pins it)."""
    revised = "<answer>Lyon</answer><confidence>0.9</confidence> no: <answer>Paris</answer><confidence>0.3</confidence>"
    items = [{"response": revised, "reference": "Paris"}, cal_item("Lyon", "0.6")]
    composite = {"name": "composite", "config": {"components": [{"reward": CAL}]}}
    for reward in (CAL, composite):
        resp = await client.post("/v1/score", json={"reward": reward, "items": items})
        assert resp.status_code == 200, resp.text
        m = resp.json()["metrics"]["calibration"]
        assert (m["count"], m["mean_confidence"], m["accuracy"]) == (2, pytest.approx(0.45), 0.5), reward
        assert m["brier"] == pytest.approx((0.7**2 + 0.6**2) / 2)
        assert m["auroc"] == 0.0  # the correct answer is the less confident one


async def test_every_calibration_component_is_counted(client: httpx.AsyncClient) -> None:
    """A composite with two calibration components (two verifiers of one answer, or two confidence
    formats) counted only the first in sorted order: the second's pairs were dropped from the metrics.
    Each source has its own summary in ``calibration_sources``; ``calibration`` pools every pair."""
    strict = {"name": "calibration", "config": {"verifier": "exact_match"}}
    loose = {"name": "calibration", "config": {"verifier": "f1"}}
    composite = {
        "name": "composite",
        "config": {"components": [{"reward": strict, "name": "b_strict"}, {"reward": loose, "name": "a_f1"}]},
    }
    items = [cal_item("Paris", "0.8"), cal_item("Lyon", "0.4")]
    resp = await client.post("/v1/score", json={"reward": composite, "items": items})
    assert resp.status_code == 200, resp.text
    comps = [r["components"] for r in resp.json()["results"]]
    metrics = resp.json()["metrics"]
    sources = metrics["calibration_sources"]
    assert set(sources) == {"a_f1", "b_strict"}
    assert sources["b_strict"]["count"] == 2
    assert sources["b_strict"]["brier"] == pytest.approx((0.2**2 + 0.4**2) / 2)
    f1 = [c["a_f1.correct"] for c in comps]
    assert sources["a_f1"]["accuracy"] == pytest.approx(sum(f1) / 2)
    pooled = metrics["calibration"]
    assert pooled["count"] == 4
    q = [0.8, 0.4, 0.8, 0.4]
    c = [1.0, 0.0, *f1]
    assert pooled["brier"] == pytest.approx(sum((qi - ci) ** 2 for qi, ci in zip(q, c, strict=True)) / 4)


async def test_a_single_reward_is_its_own_source(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/score", json={"reward": CAL, "items": [cal_item("Paris", "0.7")]})
    metrics = resp.json()["metrics"]
    assert metrics["calibration_sources"] == {"calibration": metrics["calibration"]}


async def test_a_pair_beside_another_components_failure_is_counted(client: httpx.AsyncClient) -> None:
    """A composite made invalid by another component (here a length term whose correctness flag the item
    lacks) still holds a calibration pair its calibration component read and scored: it was dropped from
    the metrics with the item, so the batch's calibration figures depended on an unrelated part."""
    length = {"name": "length", "config": {"mode": "dapo_overlong", "max_length": 100, "cache_length": 10}}
    composite = {"name": "composite", "config": {"components": [{"reward": CAL}, {"reward": length}]}}
    items = [cal_item("Paris", "0.8"), cal_item("Lyon", "0.4")]
    resp = await client.post("/v1/score", json={"reward": composite, "items": items})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [r["valid"] for r in body["results"]] == [False, False], body["results"]
    m = body["metrics"]["calibration"]
    assert m["count"] == 2
    assert m["brier"] == pytest.approx((0.2**2 + 0.4**2) / 2)
