"""Step scores for process credit: read from a result's ``details``, placed on completion tokens.

The service reports each step of a PRM (or of ``judge`` in ``steps`` mode) as ``{index, start, end,
score}`` in ``details.steps``, ``[start, end)`` character offsets (Python ``str`` indices) into the
``response`` it was sent. The trainer sends ``data.response_prefix`` + the completion's text, and that
text is ``tokenizer.decode(completion_ids, skip_special_tokens=True)`` (generation.py), so an offset
``e`` of the response is offset ``e − len(prefix)`` of the decoded completion.

Which token ends a step: the first token whose decoded prefix covers the step's last character, i.e.
the smallest ``n`` with ``covered(n) ≥ end`` (the step's token is ``n − 1``), where ``covered(n)`` is
how much of the completion's text ``decode(ids[:n])`` already writes (its common prefix with the text).
Decoding prefixes rather than single tokens is what keeps this right where one character spans tokens
(byte-level BPE writes '€' in three tokens, the first two decoding to '�') and where a tokenizer's
decode depends on the neighbours (SentencePiece's leading space); special tokens write nothing, so an
EOS never ends a step. ``covered`` grows with ``n``, so each step takes a binary search, ``O(log |y|)``
decodes. A step that ends inside the prefix (the prompt wrote it, not the policy) is no credit of the
completion and is dropped; one that ends past the text ends on the last token.

What of a step is read (``algorithm.process_step_value``): a two-class PRM's ``score`` is ``p(+)`` of
that step, and a step reward is made of it (PURE's ``2s − 1``); an implicit PRM's (prm's ``implicit``
convention, PRIME) ``score`` is ``σ(q_k)`` of the running sum ``q_k`` of the rewards so far, a value
rather than the step's own reward, which is its ``process_reward`` (``β Σ log π_φ/π_ref`` over the
step's tokens). Reading the score there would credit a bad step after good ones as good (``σ(q_k) >
0.5`` while its reward is negative), so ``auto`` reads ``process_reward`` where every step carries one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from rewardhub_client import ItemResult

__all__ = ["read_steps", "step_end_tokens", "step_key", "step_scores"]


def read_steps(result: ItemResult, where: str | None) -> list[Mapping[str, Any]] | None:
    """``details.steps`` of the result, or of the composite part ``where`` (``a.b``: part ``b`` of part
    ``a``, as composite components nest: ``details.parts.a.details.parts.b.details.steps``); None where
    there are none to read."""
    details: Any = result.details
    for key in where.split(".") if where else ():
        parts = details.get("parts") if isinstance(details, Mapping) else None
        part = parts.get(key) if isinstance(parts, Mapping) else None
        details = part.get("details") if isinstance(part, Mapping) else None
    steps = details.get("steps") if isinstance(details, Mapping) else None
    if not isinstance(steps, list) or not all(_is_step(s) for s in steps):
        return None
    return steps


def _is_step(step: Any) -> bool:
    return isinstance(step, Mapping) and isinstance(step.get("end"), int) and _is_number(step.get("score"))


def step_key(steps: Sequence[Mapping[str, Any]], value: str) -> str | None:
    """The key of each step's value to read for ``process_step_value`` ``value`` (``score``,
    ``process_reward`` or ``auto``): ``auto`` is ``process_reward`` where every step carries a number
    there (an implicit PRM's), else ``score``; None where ``process_reward`` is asked for and a step has
    none (nothing to read: masked)."""
    dense = all(_is_number(s.get("process_reward")) for s in steps)
    if value == "auto":
        return "process_reward" if steps and dense else "score"
    if value == "process_reward" and not dense:
        return None
    return value


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def step_end_tokens(tokenizer: Any, ids: Sequence[int], text: str, ends: Sequence[int]) -> list[int]:
    """For each ``end`` (exclusive character offset into ``text``, the decoded ``ids``), the index of the
    token that writes character ``end − 1``; −1 for ``end ≤ 0`` (nothing of the completion), the last
    token for an end past what the tokens write."""
    covered: dict[int, int] = {0: 0}

    def cover(n: int) -> int:
        if n not in covered:
            written = tokenizer.decode(list(ids[:n]), skip_special_tokens=True)
            covered[n] = len(os.path.commonprefix([written, text]))
        return covered[n]

    out = []
    for end in ends:
        if end <= 0 or not ids:
            out.append(-1)
            continue
        lo, hi = 1, len(ids)
        if cover(hi) < end:
            out.append(len(ids) - 1)
            continue
        while lo < hi:
            mid = (lo + hi) // 2
            if cover(mid) >= end:
                hi = mid
            else:
                lo = mid + 1
        out.append(lo - 1)
    return out


def step_scores(
    tokenizer: Any,
    steps: Sequence[Mapping[str, Any]],
    ids: Sequence[int],
    text: str,
    prefix: str,
    key: str = "score",
) -> list[tuple[int, float]]:
    """``(token on which the step ends, its value under key)`` of each step that ends in the completion, in
    order."""
    ends = [int(s["end"]) - len(prefix) for s in steps]
    tokens = step_end_tokens(tokenizer, ids, text, ends)
    return [(t, float(s[key])) for s, t in zip(steps, tokens, strict=True) if t >= 0]
