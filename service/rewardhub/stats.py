"""Live statistics for the dashboard: a rolling window of one-second buckets.

Prometheus is the source of truth for monitoring; this is the small, process-local view behind
``/dashboard``: items per second, cache hit rate, per-reward latency percentiles and invalid reasons
over the last minute, without a Prometheus server. Recording is O(1) per request (a few dict updates),
so it stays on the hot path.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from rewardhub.shadow import tally

__all__ = ["LiveStats"]

WINDOW_S = 60
_MAX_LATENCIES = 2048  # per reward per bucket: enough for percentiles, bounded memory


@dataclass
class _Bucket:
    second: int
    requests: int = 0
    items: int = 0
    cached: int = 0
    invalid: Counter[str] = field(default_factory=Counter)
    per_reward_items: Counter[str] = field(default_factory=Counter)
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)
    # shadow verification: (reward, shadow reward, outcome) -> items
    shadow: Counter[tuple[str, str, str]] = field(default_factory=Counter)


def _percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


class LiveStats:
    def __init__(self) -> None:
        self._buckets: deque[_Bucket] = deque(maxlen=WINDOW_S)
        self.started = time.time()
        self.total_items = 0
        self.total_requests = 0

    def _bucket(self) -> _Bucket:
        now = int(time.time())
        if not self._buckets or self._buckets[-1].second != now:
            self._buckets.append(_Bucket(now))
        return self._buckets[-1]

    def record(self, rewards: list[str], results: list[dict[str, Any]]) -> None:
        """One request: the reward of each item and the final results.

        A reward's latency in a request is the slowest of its items there (the batch's wall time for
        computed items, the lookup for cached ones).
        """
        b = self._bucket()
        b.requests += 1
        b.items += len(results)
        self.total_items += len(results)
        self.total_requests += 1
        for name, r in zip(rewards, results, strict=True):
            b.per_reward_items[name] += 1
            if r["cached"]:
                b.cached += 1
            if not r["valid"]:
                b.invalid[r["reason"] or "unknown"] += 1
        slowest: dict[str, float] = {}
        for name, r in zip(rewards, results, strict=True):
            ms = float(r.get("latency_ms") or 0.0)
            if ms > slowest.get(name, -1.0):
                slowest[name] = ms
        for name, ms in slowest.items():
            lat = b.latencies_ms.setdefault(name, [])
            if len(lat) < _MAX_LATENCIES:
                lat.append(ms)

    def record_shadow(self, rewards: list[str], shadow: str, outcomes: list[str]) -> None:
        """A shadowed request: each item's reward and its outcome (:data:`rewardhub.shadow.OUTCOMES`)."""
        b = self._bucket()
        for name, outcome in zip(rewards, outcomes, strict=True):
            b.shadow[(name, shadow, outcome)] += 1

    def snapshot(self) -> dict[str, Any]:
        """The window as JSON for the dashboard."""
        now = int(time.time())
        series = []
        # The deque holds the last WINDOW_S *active* seconds, which on a quiet server reach back further
        # than the window: only the buckets inside it count.
        window = [b for b in self._buckets if b.second > now - WINDOW_S]
        buckets = {b.second: b for b in window}
        for s in range(now - WINDOW_S + 1, now + 1):
            b = buckets.get(s)
            series.append(
                {
                    "t": s,
                    "items": b.items if b else 0,
                    "requests": b.requests if b else 0,
                    "cached": b.cached if b else 0,
                }
            )
        items = sum(b.items for b in window)
        cached = sum(b.cached for b in window)
        invalid: Counter[str] = Counter()
        per_reward: Counter[str] = Counter()
        latencies: dict[str, list[float]] = {}
        shadowed: Counter[tuple[str, str, str]] = Counter()
        for b in window:
            invalid.update(b.invalid)
            shadowed.update(b.shadow)
            per_reward.update(b.per_reward_items)
            for name, values in b.latencies_ms.items():
                latencies.setdefault(name, []).extend(values)
        rewards = {}
        for name in sorted(set(per_reward) | set(latencies)):
            values = sorted(latencies.get(name, []))
            rewards[name] = {
                "items": per_reward.get(name, 0),
                "p50_ms": _percentile(values, 0.5),
                "p99_ms": _percentile(values, 0.99),
            }
        return {
            "window_s": WINDOW_S,
            "uptime_s": time.time() - self.started,
            "total_items": self.total_items,
            "total_requests": self.total_requests,
            "items_per_s": items / WINDOW_S,
            "cache_hit_rate": cached / items if items else None,
            "invalid": dict(invalid),
            "rewards": rewards,
            "shadow": _shadow_pairs(shadowed),
            "series": series,
        }


def _shadow_pairs(counts: Counter[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """Per (reward, shadow) pair: items, compared, agreement and the two directions of disagreement."""
    pairs: dict[tuple[str, str], Counter[str]] = {}
    for (reward, shadow, outcome), n in counts.items():
        pairs.setdefault((reward, shadow), Counter())[outcome] += n
    out = []
    for (reward, shadow), c in sorted(pairs.items()):
        t = tally(c)
        out.append(
            {
                "reward": reward,
                "shadow": shadow,
                **{k: t[k] for k in ("items", "compared", "agreement", "primary_only", "shadow_only")},
            }
        )
    return out
