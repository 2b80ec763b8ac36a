"""The dashboard's live statistics (rewardhub.stats.LiveStats)."""

from __future__ import annotations

from rewardhub.stats import WINDOW_S, LiveStats


def test_snapshot_leaves_out_requests_older_than_the_window() -> None:
    stats = LiveStats()
    stats.record(["math"], [{"cached": True, "valid": False, "reason": "timeout", "latency_ms": 5000.0}])
    # That request's bucket, as it stands an hour later on a server that has been idle since.
    stats._buckets[-1].second -= 3600
    stats.record(["exact_match"], [{"cached": False, "valid": True, "reason": None, "latency_ms": 1.0}])
    snap = stats.snapshot()
    assert snap["items_per_s"] == 1 / WINDOW_S
    assert snap["cache_hit_rate"] == 0.0
    assert snap["invalid"] == {}
    assert set(snap["rewards"]) == {"exact_match"}
    assert snap["total_items"] == 2  # the totals are since start, not per window


def test_shadow_pairs_are_counted_over_the_window() -> None:
    stats = LiveStats()
    stats.record_shadow(["math", "math", "math"], "judge", ["agree_pass", "shadow_only", "primary_invalid"])
    stats.record_shadow(["math"], "judge", ["primary_only"])
    assert stats.snapshot()["shadow"] == [
        {
            "reward": "math",
            "shadow": "judge",
            "items": 4,
            "compared": 3,
            "agreement": 1 / 3,
            "primary_only": 1,
            "shadow_only": 1,
        }
    ]
    stats._buckets[-1].second -= 3600  # an hour ago
    assert stats.snapshot()["shadow"] == []
