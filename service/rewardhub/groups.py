"""Groups (the G completions of one prompt): whole-group checks for group rewards, and group statistics.

**Whole groups.** A group reward (``majority_vote``, ``group_length``, a composite containing one) scores
each item against the other members of its group, so it needs the whole group in one request. Two checks
enforce that, both in the serving layer before anything is scored:

* ``options.group_size``: every group in the request must have exactly that many items (422 naming the
  first group that does not);
* across requests: for each (group reward, group id) the service remembers a fingerprint of the member
  set (a multiset hash of each member's reward-relevant fields) in its cache, under
  ``rh:v1:group:{tenant}:{reward}:{fields}:{group}`` with the cache TTL (``tenant``: the caller's API key
  id, so two keys' group "0" are two groups; ``fields``: the fields hashed, such as
  ``prompt+response+reference``). A later request that brings the same group id to the same reward with
  a *different* member set was given part of a group, or reuses a group id: 422. Resending the
  identical group (a retry) matches the fingerprint and is fine, and so does scoring it with another
  config that reads other fields (a composite with a judge reads the prompt, one without does not):
  fingerprints of different fields are never compared. The check costs one
  ``get_many`` (and one ``set_many`` for new groups) per request that uses a group reward, none otherwise.
  It is best-effort: it needs the cache (off when caching is disabled), two concurrent requests can race,
  and it forgets a group after the TTL.

Within one request, a group id must also go to one config of a given group reward: half a group under
one config and half under another would give each config a partial group (422 naming the config fields
that differ). A config is its validated value: ``{}`` and the defaults spelled out are one config.

**Statistics** (any reward): per group id the item count ``n``, the count of ``valid`` scores and their
``mean``, sample ``std`` (Bessel, as TRL's ``nanstd`` and ``torch.std``; ``None`` below 2 scores),
``min``, ``max``, and ``zero_variance`` (every valid score equal: the groups DAPO's dynamic sampling
drops, since their advantages are all 0). Over the request: the number of groups, how many have zero
variance, and that fraction among groups with at least one valid score.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from rewardhub import jsonutil
from rewardhub.cache import KEY_PREFIX, Cache
from rewardhub.errors import InvalidRequest
from rewardhub.protocol import ScoreItem
from rewardhub.security import ANONYMOUS_KEY_ID

__all__ = [
    "GroupClaim",
    "check_group_size",
    "claim_groups",
    "enforce_whole_groups",
    "group_indices",
    "group_key",
    "group_stats",
]


def group_indices(items: Sequence[ScoreItem], indices: Sequence[int] | None = None) -> dict[str, list[int]]:
    """Item indices by group id, in order of first appearance (items without a group are left out)."""
    out: dict[str, list[int]] = {}
    for i in range(len(items)) if indices is None else indices:
        g = items[i].group
        if g is not None:
            out.setdefault(g, []).append(i)
    return out


def check_group_size(items: Sequence[ScoreItem], size: int) -> None:
    """Raise a 422 naming the first group whose item count is not ``size``."""
    for gid, idx in group_indices(items).items():
        if len(idx) != size:
            raise InvalidRequest(
                f"group {gid!r} has {len(idx)} item{'s' if len(idx) != 1 else ''} in this request, "
                f"options.group_size is {size}; send each group whole in one request",
                param=f"items.{idx[0]}.group",
            )


def group_key(reward: str, group: str, fields: Sequence[str], tenant: str = ANONYMOUS_KEY_ID) -> str:
    return f"{KEY_PREFIX}:group:{tenant}:{reward}:{'+'.join(fields)}:{group}"


@dataclass(frozen=True, slots=True)
class GroupClaim:
    """One group as a group reward sees it in this request."""

    key: str
    reward: str
    group: str
    fingerprint: str
    size: int
    first_index: int
    plan: int  # which plan (reward + config) of the request it belongs to
    config: Mapping[str, Any] = field(default_factory=dict, compare=False)  # the plan's validated config


def _fingerprint(items: Sequence[ScoreItem], idx: Sequence[int], fields: Sequence[str]) -> str:
    """Multiset hash of the members' fields: order-independent, duplicates counted."""
    digests = sorted(
        hashlib.sha256(jsonutil.canonical([getattr(items[i], f) for f in fields])).digest() for i in idx
    )
    return hashlib.sha256(b"".join(digests)).hexdigest()


def claim_groups(
    reward: str,
    items: Sequence[ScoreItem],
    indices: Sequence[int],
    reads: Sequence[str],
    plan: int,
    tenant: str = ANONYMOUS_KEY_ID,
    config: Mapping[str, Any] | None = None,
) -> list[GroupClaim]:
    fields = [f for f in reads if f != "group"]
    return [
        GroupClaim(
            group_key(reward, gid, fields, tenant),
            reward,
            gid,
            _fingerprint(items, idx, fields),
            len(idx),
            idx[0],
            plan,
            config or {},
        )
        for gid, idx in group_indices(items, indices).items()
    ]


async def enforce_whole_groups(cache: Cache, claims: Sequence[GroupClaim]) -> None:
    """Check the claims against each other and the remembered fingerprints, then remember new ones.

    Raises:
        InvalidRequest: a group is split between two configs here, or was scored with other members before.
    """
    seen: dict[tuple[str, str], GroupClaim] = {}
    for c in claims:
        other = seen.setdefault((c.reward, c.group), c)
        if other.plan != c.plan:
            raise InvalidRequest(
                f"group {c.group!r} is split between two configs of reward {c.reward!r} in this request "
                f"(items {other.first_index} and {c.first_index} differ in {_differences(other.config, c.config)}); "
                "a group reward needs the whole group under one config",
                param=f"items.{c.first_index}.group",
            )
    unique = list(seen.values())
    stored = await cache.get_many([c.key for c in unique])
    new: list[tuple[str, bytes]] = []
    for c, raw in zip(unique, stored, strict=True):
        prev = _load(raw)
        if prev is None:
            new.append((c.key, orjson.dumps({"fp": c.fingerprint, "n": c.size})))
        elif prev[0] != c.fingerprint:
            n_prev = prev[1]
            raise InvalidRequest(
                f"group {c.group!r} was already scored with {n_prev} different item"
                f"{'s' if n_prev != 1 else ''} in an earlier request (this request sends {c.size}); "
                "send each group whole in one request (or use a new group id)",
                param=f"items.{c.first_index}.group",
            )
    if new:
        await cache.set_many(new)


def _differences(a: Mapping[str, Any], b: Mapping[str, Any], shown: int = 3) -> str:
    """Where two validated configs differ, for a message: ``config.tie_break: "first" vs "none"``, the
    first ``shown`` such fields (dotted paths) and how many more."""
    found: list[str] = []
    stack: list[tuple[str, Any, Any]] = [("config", a, b)]
    while stack:
        path, x, y = stack.pop()
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            stack.extend(
                (f"{path}.{k}", x.get(k), y.get(k)) for k in sorted(x.keys() | y.keys(), reverse=True)
            )
        elif isinstance(x, list | tuple) and isinstance(y, list | tuple) and len(x) == len(y):
            stack.extend((f"{path}.{n}", x[n], y[n]) for n in reversed(range(len(x))))
        elif jsonutil.canonical(x) != jsonutil.canonical(y):
            found.append(f"{path}: {_brief(x)} vs {_brief(y)}")
    more = (
        f" and {len(found) - shown} more field{'s' if len(found) - shown > 1 else ''}"
        if len(found) > shown
        else ""
    )
    return ", ".join(found[:shown]) + more if found else "config"


def _brief(value: Any, limit: int = 40) -> str:
    text = jsonutil.dumps(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _load(raw: bytes | None) -> tuple[str, int] | None:
    if raw is None:
        return None
    try:
        d = orjson.loads(raw)
        return str(d["fp"]), int(d["n"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None  # an unreadable entry is treated as absent and overwritten


def group_stats(items: Sequence[ScoreItem], results: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Per-group score statistics (module docstring); None when no item has a group."""
    by_group = group_indices(items)
    if not by_group:
        return None
    groups: dict[str, dict[str, Any]] = {}
    zero = scored = 0
    for gid, idx in by_group.items():
        scores = [float(results[i]["score"]) for i in idx if results[i]["valid"]]
        entry: dict[str, Any] = {"n": len(idx), "valid": len(scores)}
        if scores:
            scored += 1
            flat = min(scores) == max(scores)
            zero += flat
            # a flat group is reported exactly: sum-then-divide makes three 0.1s a mean of
            # 0.10000000000000002 and a std of 1.7e-17, which reads as "not zero variance"
            mean = scores[0] if flat else math.fsum(scores) / len(scores)
            std = (
                (0.0 if flat else math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / (len(scores) - 1)))
                if len(scores) > 1
                else None
            )
            entry.update(mean=mean, std=std, min=min(scores), max=max(scores), zero_variance=flat)
        else:
            entry.update(mean=None, std=None, min=None, max=None, zero_variance=None)
        groups[gid] = entry
    return {
        "count": len(by_group),
        "zero_variance": zero,
        "zero_variance_fraction": zero / scored if scored else None,
        "groups": groups,
    }
