"""Keys and values of shared prompts kept across batches: a GRPO group's prompt prefilled once per model.

:func:`rewardhub.models.passes.run_shared` runs a prompt that several items of one batch start with once.
A group's rollouts do not all land in one batch, though: 64 one-item clients (slime and OpenRLHF's
remote reward models send one rollout per request), or a 16-rollout group cut by the 32-item batch limit,
spread a prompt over many batches, and each of them prefilled it again. On a CPU that prefill was a third
of a batch's work (BENCHMARKS.md §5: 3.2 ms per item with it, 2.1 without, on the 24-layer PRM). vLLM
keeps such prefixes in its automatic prefix cache; this is the same for the transformers backend.

A prefix's keys and values depend on its tokens and positions only (the model is causal, which
:func:`~rewardhub.models.passes.supported` checks at load, through this cache too), so an entry computed
in one batch is exact in any other. Entries are the group prefixes of earlier batches, keyed by their
token ids; a group whose prompt starts with a kept entry reuses it and runs the tokens after it in its
continuation pass. Least recently used entries go first once the kept tensors pass ``max_bytes``.

Only prefixes that two or more items of a batch shared are kept: a lone item's prefix runs into its own
response (up to its first step), which no other item repeats. A lone item, or a batch of prompts seen
once each, still reuses kept prefixes when every item starts with one
(:func:`~rewardhub.models.passes.plan_kept`): a quiet service's one-item batches then skip their prompts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Entry", "PrefixCache"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One kept prefix: the keys and values of every layer in one tensor, ``[layers, 2 (keys, values),
    kv heads, length, head size]``. One tensor, not one per layer and kind, so that putting an entry
    into a batch is one copy, not 2 x layers: on a GPU each copy is a kernel launch, and a 24-layer
    model's per-layer copies cost a batch more than its shared prompts saved (BENCHMARKS.md §5)."""

    length: int
    kv: Any
    nbytes: int


class PrefixCache:
    """Prefix keys and values of one model, least recently used dropped first (not thread-safe: a model
    process runs one batch at a time)."""

    def __init__(self, max_bytes: int):
        if max_bytes <= 0:
            raise ValueError("a prefix cache needs max_bytes > 0")
        self.max_bytes = max_bytes
        self.nbytes = 0
        self.hits = 0  # groups that reused a kept prefix (counted by the caller: passes.run_shared)
        self.misses = 0  # groups that prefilled theirs
        self._entries: OrderedDict[tuple[int, ...], Entry] = OrderedDict()
        self._lengths: dict[int, int] = {}  # length -> entries of it (the lengths a lookup tries)

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, tokens: Sequence[int]) -> Entry | None:
        """The longest kept entry that ``tokens`` start with (marked as used)."""
        whole = tuple(tokens)  # (once: each length tried is then a C-level slice of it)
        for length in sorted((k for k in self._lengths if k <= len(whole)), reverse=True):
            key = whole[:length]
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry
        return None

    def put(self, tokens: Sequence[int], kv: Any) -> None:
        """Keep ``kv`` (``[layers, 2, kv heads, len(tokens), head size]``: the keys and values of exactly
        ``tokens``, a tensor of its own, not a view of a batch's) for ``tokens``; one larger than the
        whole cache is not kept."""
        key = tuple(tokens)
        nbytes = int(kv.nbytes)
        if nbytes > self.max_bytes or key in self._entries:
            return
        self._entries[key] = Entry(len(key), kv, nbytes)
        self._lengths[len(key)] = self._lengths.get(len(key), 0) + 1
        self.nbytes += nbytes
        while self.nbytes > self.max_bytes:
            old_key, old = self._entries.popitem(last=False)
            self.nbytes -= old.nbytes
            left = self._lengths[len(old_key)] - 1
            if left:
                self._lengths[len(old_key)] = left
            else:
                del self._lengths[len(old_key)]
