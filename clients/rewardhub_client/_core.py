"""What the sync and async clients share: request building, group-preserving chunking, merging, retries.

Chunking keeps every GRPO group whole: items that share a ``group`` id always travel in the same
request, because group rewards (majority vote, group-relative length) need the whole group and the
service rejects a group split across requests.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from rewardhub_client.errors import APIError, ProtocolError, RewardHubClientError, TransportError
from rewardhub_client.types import (
    ItemResult,
    RewardCheck,
    RewardSpec,
    ScoreItem,
    ScoreOptions,
    ScoreRequest,
    ScoreResponse,
    ShadowSpec,
)

__all__ = [
    "RetryPolicy",
    "as_items",
    "as_shadow",
    "as_shadow_check",
    "as_spec",
    "chunk_indices",
    "chunk_items",
    "in_batch",
    "job_path",
    "item_ids",
    "merge_responses",
    "shadow_rates",
    "split_chunk",
    "transient",
    "with_partial",
]

ItemLike = ScoreItem | Mapping[str, Any]
RewardLike = str | RewardSpec | Mapping[str, Any] | None
# A shadow reward: its name, its spec, or a ShadowSpec / {"reward": ..., "threshold": ...}.
ShadowLike = str | RewardSpec | ShadowSpec | Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with jitter, never shorter than a ``Retry-After`` from the service.

    Retried: transport failures (connect, timeout, broken connection) and 429/502/503/504. Never a
    4xx other than 429 — those will fail the same way again — and never a scoring request that timed out
    waiting for its answer: a copy asks for the same work under the same timeout, and where the service
    goes on scoring the first it only queues more work (a score call's read timeout already outlasts the
    deadline it asks for). Scoring is a pure function of the request and job submission carries an
    Idempotency-Key, so a retry can never double-count.

    A ``Retry-After`` past ``max_retry_after_s`` (a gateway's hourly quota, an HTTP-date far off) is not
    slept through: the error is raised at once, its ``retry_after_s`` saying when, instead of a training
    step blocking for that long (and up to ``max_retries`` times over) without a word.
    """

    max_retries: int = 5
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 120.0
    retry_statuses: frozenset[int] = frozenset({429, 502, 503, 504})

    def delay(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds before retry ``attempt`` (0-based): the jittered backoff, after ``Retry-After`` if any.

        ``Retry-After`` says when the service may have room again, not a moment for everyone to come
        back at: the service gives every request it refuses the same value, so clients (and the chunks
        of one batch) that waited exactly that long came back together, were refused together again,
        and had ``max_retries`` x ``Retry-After`` of patience in all. The backoff on top of it grows
        and spreads them out.
        """
        base = min(self.max_backoff_s, self.backoff_s * (2**attempt))
        backoff = base * (0.5 + random.random() / 2)
        return float(max(0.0, retry_after_s or 0.0) + backoff)


def job_path(job_id: str) -> str:
    """The URL path of one job. The id is quoted as a single path segment: written as is, an id holding
    ``/``, ``?`` or ``#`` (one the caller got from elsewhere than the service) asked for another job or
    reached another route."""
    return f"/v1/jobs/{quote(job_id, safe='')}"


def as_spec(reward: RewardLike, config: Mapping[str, Any] | None = None) -> str | RewardSpec | None:
    if reward is None:
        if config:
            raise ValueError("a config needs a reward name")
        return None
    if isinstance(reward, str):
        return RewardSpec(name=reward, config=dict(config)) if config else reward
    spec = reward if isinstance(reward, RewardSpec) else RewardSpec.model_validate(reward)
    # model_copy keeps the spec's other keys (the service judges them)
    return spec if not config else spec.model_copy(update={"config": {**spec.config, **config}})


def as_shadow(shadow: ShadowLike) -> ShadowSpec | None:
    """``shadow`` as the request's ``shadow``: a reward name or spec is one with the default threshold."""
    if shadow is None or isinstance(shadow, ShadowSpec):
        return shadow
    if isinstance(shadow, str | RewardSpec):
        return ShadowSpec(reward=shadow)
    if "reward" in shadow:
        return ShadowSpec.model_validate(shadow)
    return ShadowSpec(reward=RewardSpec.model_validate(shadow))  # {"name": ..., "config": ...}


def as_shadow_check(check: RewardCheck) -> RewardCheck:
    """A shadow spec's ``/v1/rewards/check`` answer with each part that cannot run placed under ``shadow.``
    (``cannot run reward 'judge' (shadow.reward): ...``), so the error says which of the two it is."""
    parts = [p.model_copy(update={"where": f"shadow.{p.where}"}) for p in check.unavailable]
    return check.model_copy(update={"unavailable": parts})


def as_items(items: Iterable[ItemLike]) -> list[ScoreItem]:
    return [it if isinstance(it, ScoreItem) else ScoreItem.model_validate(it) for it in items]


def chunk_indices(items: Sequence[ScoreItem], chunk_size: int) -> list[list[int]]:
    """Split item indices into chunks of at most ``chunk_size`` items, never splitting a group.

    A group larger than ``chunk_size`` travels alone in one chunk.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    units: list[list[int]] = []
    by_group: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        if item.group is None:
            units.append([i])
        elif item.group in by_group:
            by_group[item.group].append(i)
        else:
            unit = [i]
            by_group[item.group] = unit
            units.append(unit)
    chunks: list[list[int]] = []
    current: list[int] = []
    for unit in units:
        if current and len(current) + len(unit) > chunk_size:
            chunks.append(current)
            current = []
        current.extend(unit)
    if current:
        chunks.append(current)
    return chunks


def split_chunk(items: Sequence[ScoreItem], indices: Sequence[int]) -> list[list[int]] | None:
    """A chunk the service refused as too large (413, or over its item limit), as smaller chunks of about
    half its items each, groups still whole; None when it cannot be split (one item, or one group)."""
    sub = [items[i] for i in indices]
    parts = chunk_indices(sub, max(1, (len(sub) + 1) // 2))
    if len(parts) < 2:
        return None
    return [[indices[j] for j in part] for part in parts]


def chunk_items(items: Sequence[ScoreItem], indices: Sequence[int]) -> list[ScoreItem]:
    """The items of one chunk, each without an ``id`` given its index in the whole batch as its id.

    The service's default id is the item's index in *its request*: in a chunked batch the fifth item
    came back as ``"1"``, and two items of one answer had the same id.
    """
    return [
        items[i] if items[i].id is not None else items[i].model_copy(update={"id": str(i)}) for i in indices
    ]


_ITEM_PARAM = re.compile(r"items\.(\d+)(?![\d])")


def in_batch(exc: APIError, indices: Sequence[int]) -> APIError:
    """An error about an item of one chunk (``param`` ``items.2.response``), naming the item by its place
    in the caller's batch: the service numbers the items of its request, and in a chunked batch its
    ``items.2`` is the batch's item ``indices[2]``. The exception is changed in place and returned."""
    match = _ITEM_PARAM.match(exc.param or "")
    if (
        match is None
        or not int(match.group(1)) < len(indices)
        or indices[int(match.group(1))] == int(match.group(1))
    ):
        return exc
    j = int(match.group(1))
    place = re.compile(rf"(?<![\w.])items\.{j}(?![\d])")
    exc.param = place.sub(f"items.{indices[j]}", exc.param or "", count=1)
    exc.message = place.sub(f"items.{indices[j]}", exc.message)
    exc.args = (f"{exc.status_code} {exc.error_type or 'error'}: {exc.message}",)
    return exc


def transient(exc: BaseException) -> bool:
    """Whether a chunk's failure (after its retries) is the service's state, not the request's: no
    answer (unreachable, a timeout), a 5xx, 408 or 429. The other chunks of the batch go on after such a
    failure (their answers travel on the error raised); after any other, which every chunk would meet
    alike, they stop."""
    if isinstance(exc, TransportError):
        return True
    return isinstance(exc, APIError) and (exc.status_code >= 500 or exc.status_code in (408, 429))


def item_ids(items: Sequence[ScoreItem]) -> list[str]:
    """The id each item's result must carry: its own, else its index in the batch (what
    :func:`chunk_items` sends for it)."""
    return [it.id if it.id is not None else str(i) for i, it in enumerate(items)]


def _misfit(ids: Sequence[str], parts: Sequence[tuple[list[int], ScoreResponse]]) -> str | None:
    """Why the chunks' answers do not fit their items (None when they do): a count other than one result
    per item, else a result whose id is not its item's, the first one in batch order. The trainer and
    the adapters pair results with items by position, so a reordered or misnumbered answer would give
    each reward to another completion."""
    for indices, resp in parts:
        if len(resp.results) != len(indices):
            return (
                f"the service answered {len(resp.results)} results for {len(indices)} items "
                f"(request {resp.request_id})"
            )
    placed = sorted(
        (
            (i, r.id, resp.request_id)
            for indices, resp in parts
            for i, r in zip(indices, resp.results, strict=True)
        ),
        key=lambda p: p[0],
    )
    for i, got, request_id in placed:
        if got != ids[i]:
            return (
                f"the service's result {i} has id {got!r}, but item {i} is {ids[i]!r} (request "
                f"{request_id}): results out of order, or numbered as another request's"
            )
    return None


def with_partial(
    exc: BaseException, ids: Sequence[str], parts: Sequence[tuple[list[int], ScoreResponse]]
) -> BaseException:
    """The error of a chunk that failed, carrying what the other chunks of the batch answered
    (``partial_results``, ``None`` at the failed chunks' items, listed in ``failed_indices``): a caller
    keeps the rewards already computed instead of losing the whole batch to one chunk's failure. An
    error that is not the client's, or a batch nothing of which was answered, is returned unchanged."""
    if not parts or not isinstance(exc, RewardHubClientError):
        return exc
    results: list[ItemResult | None] = [None] * len(ids)
    for indices, resp in parts:
        if _misfit(ids, [(indices, resp)]) is not None:
            return exc  # a malformed answer: keep nothing of it
        for i, r in zip(indices, resp.results, strict=True):
            results[i] = r
    exc.partial_results = results
    exc.failed_indices = [i for i, r in enumerate(results) if r is None]
    return exc


def build_request(
    items: Sequence[ScoreItem],
    spec: str | RewardSpec | None,
    options: ScoreOptions,
    shadow: ShadowSpec | None = None,
) -> bytes:
    return (
        ScoreRequest(reward=spec, items=list(items), options=options, shadow=shadow)
        .model_dump_json(exclude_none=True)
        .encode()
    )


def merge_responses(
    ids: Sequence[str], parts: Sequence[tuple[list[int], ScoreResponse]], wall_ms: float | None = None
) -> ScoreResponse:
    """Put chunked answers back in request order; sum the count metrics, keep each chunk's metrics.

    ``latency_ms`` of a merged answer is ``wall_ms``, the time the whole call took as the caller saw it
    (chunks may overlap, so neither the sum nor the longest of theirs is the batch's latency); without
    it, the longest chunk's. ``ids`` are the batch's :func:`item_ids`. An answer with more or fewer
    results than its chunk's items, or with a result whose id is not its item's, is a
    :class:`ProtocolError`, for one chunk as for many."""
    n = len(ids)
    why = _misfit(ids, parts)
    if why is not None:
        raise ProtocolError(why)
    if len(parts) == 1 and parts[0][0] == list(range(n)):
        return parts[0][1]
    results: list[ItemResult | None] = [None] * n
    for indices, resp in parts:
        for i, r in zip(indices, resp.results, strict=True):
            results[i] = r
    metrics: dict[str, Any] = {"chunks": [p.metrics for _, p in parts]}
    for key in ("items", "cached", "invalid", "deduplicated"):
        metrics[key] = sum(int(p.metrics.get(key, 0) or 0) for _, p in parts)
    reasons: dict[str, int] = {}
    for _, p in parts:
        for reason, count in (p.metrics.get("invalid_reasons") or {}).items():
            reasons[reason] = reasons.get(reason, 0) + int(count)
    metrics["invalid_reasons"] = reasons
    shadow = merge_shadow_metrics([p.metrics for _, p in parts])
    if shadow is not None:
        metrics["shadow"] = shadow
    if wall_ms is None:
        wall_ms = max((float(p.metrics.get("latency_ms", 0.0) or 0.0) for _, p in parts), default=0.0)
    metrics["latency_ms"] = wall_ms
    return ScoreResponse(
        request_id=",".join(p.request_id for _, p in parts),
        results=[r for r in results if r is not None],
        metrics=metrics,
    )


# ``metrics["shadow"]``'s counts (the service's rewardhub.shadow): sums over a request sent in chunks.
_SHADOW_COUNTS = (
    "items",
    "compared",
    "agree",
    "agree_pass",
    "agree_fail",
    "primary_only",
    "shadow_only",
    "primary_invalid",
    "shadow_invalid",
)


def merge_shadow_metrics(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """One ``metrics["shadow"]`` for chunks' answers: counts added (overall and per source), the agreement
    rate recomputed from them; None when no chunk has one."""
    summaries = [m["shadow"] for m in chunks if isinstance(m.get("shadow"), Mapping)]
    if not summaries:
        return None
    versions = {s.get("reward_version") for s in summaries}
    merged: dict[str, Any] = {
        "reward": summaries[0].get("reward"),
        "reward_version": versions.pop() if len(versions) == 1 else None,
        "threshold": summaries[0].get("threshold"),
        **_add_counts(summaries),
    }
    sources: dict[str, list[Mapping[str, Any]]] = {}
    for s in summaries:
        for source, counts in (s.get("by_source") or {}).items():
            sources.setdefault(source, []).append(counts)
    merged["by_source"] = {k: _add_counts(v) for k, v in sorted(sources.items())}
    return merged


def _add_counts(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: sum(int(p.get(k, 0) or 0) for p in parts) for k in _SHADOW_COUNTS}
    out["agreement"] = out["agree"] / out["compared"] if out["compared"] else None
    return out


def shadow_rates(results: Iterable[ItemResult]) -> dict[str, float] | None:
    """Shadow verification's rates over the results both rewards scored: ``agreement``, ``shadow_only``
    (the shadow passed, the reward did not: possible false negatives) and ``primary_only``; None when no
    result was compared. For the adapters and the trainer, which log them per call or step."""
    outcomes = [r.shadow.outcome for r in results if r.shadow is not None and r.shadow.agree is not None]
    if not outcomes:
        return None
    n = len(outcomes)
    return {
        "agreement": sum(o in ("agree_pass", "agree_fail") for o in outcomes) / n,
        "shadow_only": outcomes.count("shadow_only") / n,
        "primary_only": outcomes.count("primary_only") / n,
    }
