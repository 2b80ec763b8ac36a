"""Shared-prefix forward passes: a prompt that several items of a batch start with is run once.

Why: RL batches come in groups. GRPO samples 8-64 rollouts per prompt, and a PRM or ORM input is the
(templated) prompt followed by one response, so a large share of a batch's tokens is the same prompt,
repeated. In a causal (decoder-only) model the hidden states, keys and values of a prefix do not depend
on what follows it, so the prefix can be computed once per group and its key/value cache reused for
every member's continuation. The result is the unsplit forward pass's, up to float rounding (the tests
compare both), with fewer tokens through every linear layer. vLLM gets the same effect from its
automatic prefix cache; the transformers backend needs it done by hand.

How:

1. :func:`plan` sorts the token sequences (neighbours in sorted order share the longest prefixes) and
   cuts them greedily into groups, adding an item to the current group while the tokens saved grow.
   A group's prefix stops before the first position whose output is read (a PRM's first step tag, a
   sequence classifier's last token) and at least one token short of each member, so every output comes
   from the second pass. It returns ``None`` when sharing would not save at least ``min_gain`` of the
   padded tokens (distinct prompts, one item): then the caller runs the plain padded pass.
2. :func:`forward` runs the group prefixes as one padded batch into a ``DynamicCache``, gathers the
   cache rows per member, and runs the suffixes with the 2-D mask ``[prefix mask | suffix mask]`` and
   explicit position ids (prefix length + i), so the padding between a short prefix and its suffix is
   masked and rotary positions are those of the unsplit sequence.
3. :func:`supported` runs a probe both ways when the model loads; a model for which the two differ
   (bidirectional encoders, sliding-window attention, remote code that ignores ``past_key_values``) or
   that raises never takes this path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Group", "Plan", "forward", "logits_of", "plan", "supported"]

MIN_PREFIX = 16  # tokens: a shorter common prefix does not pay for the second forward pass
MIN_GAIN = 0.2  # share only when it saves at least this fraction of the plain pass's padded tokens


@dataclass(frozen=True, slots=True)
class Group:
    prefix: int  # tokens every member starts with, run once
    members: tuple[int, ...]  # indices into the batch


@dataclass(frozen=True, slots=True)
class Plan:
    groups: tuple[Group, ...]
    starts: tuple[int, ...]  # per item: its prefix length (where its rows of the output begin)
    group_of: tuple[int, ...]  # per item: the index of its group

    def padded_tokens(self, lengths: Sequence[int]) -> int:
        """Tokens of the two passes, padding included (what the forward passes cost)."""
        widest_prefix = max(g.prefix for g in self.groups)
        widest_suffix = max(n - s for n, s in zip(lengths, self.starts, strict=True))
        return len(self.groups) * widest_prefix + len(lengths) * widest_suffix


def _common(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = 0
    while n < limit and a[n] == b[n]:
        n += 1
    return n


def plan(
    seqs: Sequence[Sequence[int]],
    read_from: Sequence[int],
    *,
    min_prefix: int = MIN_PREFIX,
    min_gain: float = MIN_GAIN,
) -> Plan | None:
    """Group ``seqs`` by shared prefix; ``read_from[i]`` is the first position of item i whose output
    is needed. ``None`` when sharing would not pay (see the module docstring)."""
    if len(seqs) < 2:
        return None
    caps = [min(f, len(s) - 1) for s, f in zip(seqs, read_from, strict=True)]
    if min(caps) < 1:
        return None  # an item needs its first token's output: nothing of it can be shared
    built: list[tuple[int, list[int]]] = []
    for i in sorted(range(len(seqs)), key=lambda k: list(seqs[k])):
        if built:
            prefix, members = built[-1]
            # In sorted order a run's common prefix is the smallest common prefix of neighbours.
            shared = _common(seqs[members[-1]], seqs[i], min(prefix, caps[i]))
            if shared >= min_prefix and len(members) * shared > (len(members) - 1) * prefix:
                built[-1] = (shared, [*members, i])
                continue
        built.append((caps[i], [i]))
    if all(len(members) == 1 for _, members in built):
        return None
    starts = [0] * len(seqs)
    group_of = [0] * len(seqs)
    for g, (prefix, members) in enumerate(built):
        for i in members:
            starts[i], group_of[i] = prefix, g
    p = Plan(tuple(Group(pre, tuple(mem)) for pre, mem in built), tuple(starts), tuple(group_of))
    lengths = [len(s) for s in seqs]
    if p.padded_tokens(lengths) > (1.0 - min_gain) * len(seqs) * max(lengths):
        return None
    return p


def forward(model: Any, p: Plan, seqs: Sequence[Sequence[int]], pad_id: int, device: str) -> Any:
    """The model's output for every item's suffix: rows in item order, row i's position j is position
    ``p.starts[i] + j`` of item i (a sequence classifier's output is per item, as in a plain pass)."""
    import torch
    from transformers import DynamicCache

    widest_prefix = max(g.prefix for g in p.groups)
    prefix_ids = torch.full((len(p.groups), widest_prefix), pad_id, dtype=torch.long)
    prefix_mask = torch.zeros((len(p.groups), widest_prefix), dtype=torch.long)
    for g, group in enumerate(p.groups):
        prefix_ids[g, : group.prefix] = torch.tensor(seqs[group.members[0]][: group.prefix])
        prefix_mask[g, : group.prefix] = 1
    widest_suffix = max(len(s) - start for s, start in zip(seqs, p.starts, strict=True))
    ids = torch.full((len(seqs), widest_suffix), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), widest_suffix), dtype=torch.long)
    for i, (s, start) in enumerate(zip(seqs, p.starts, strict=True)):
        ids[i, : len(s) - start] = torch.tensor(s[start:])
        mask[i, : len(s) - start] = 1
    positions = torch.tensor(p.starts).unsqueeze(1) + torch.arange(widest_suffix).unsqueeze(0)
    rows = torch.tensor(p.group_of)

    cache = DynamicCache()
    base = getattr(model, "base_model", model)
    base(
        input_ids=prefix_ids.to(device),
        attention_mask=prefix_mask.to(device),
        past_key_values=cache,
        use_cache=True,
    )
    cache.batch_select_indices(rows.to(device))
    return model(
        input_ids=ids.to(device),
        attention_mask=torch.cat([prefix_mask[rows], mask], dim=1).to(device),
        position_ids=positions.to(device),
        past_key_values=cache,
        use_cache=True,
    )


def logits_of(out: Any) -> Any:
    """A forward pass's logits as float32, whatever the head returned (an output object or a tuple)."""
    return (out.logits if hasattr(out, "logits") else out[0]).float()


def supported(model: Any, pad_id: int, device: str, *, per_token: bool) -> bool:
    """Whether split and unsplit forward passes agree on a probe (run once, at load).

    The probe has two groups with prefixes of different lengths, so the padding between a short prefix
    and its suffix is exercised too. ``per_token``: the output has a row per position (token or LM head)
    rather than one per sequence.
    """
    import torch

    cfg = getattr(model, "config", None)
    if getattr(cfg, "is_encoder_decoder", False) or getattr(cfg, "use_sliding_window", False):
        return False
    if any(t != "full_attention" for t in getattr(cfg, "layer_types", None) or ()):
        return False
    vocab = int(getattr(cfg, "vocab_size", 0) or 0)
    if vocab < 8:
        return False
    ids = [(7 * k + 3) % vocab for k in range(40)]
    seqs = [ids[:24] + ids[30:36], ids[:24] + ids[32:40], ids[10:22] + ids[:5]]
    p = Plan((Group(24, (0, 1)), Group(12, (2,))), (24, 24, 12), (0, 0, 1))
    try:
        width = max(len(s) for s in seqs)
        plain_ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
        plain_mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            plain_ids[i, : len(s)] = torch.tensor(s)
            plain_mask[i, : len(s)] = 1
        with torch.inference_mode():
            plain = logits_of(model(input_ids=plain_ids.to(device), attention_mask=plain_mask.to(device)))
            split = logits_of(forward(model, p, seqs, pad_id, device))
    except Exception:  # any failure means "not for this model"; the plain pass serves it
        return False
    if per_token:
        pairs = [
            (plain[i, start : len(s)], split[i, : len(s) - start])
            for i, (s, start) in enumerate(zip(seqs, p.starts, strict=True))
        ]
    else:
        pairs = [(plain, split)]
    tol = 5e-2 if getattr(model, "dtype", None) in (torch.float16, torch.bfloat16) else 1e-3
    return all(
        a.shape == b.shape and bool(torch.allclose(a, b, rtol=tol, atol=tol * (1.0 + float(a.abs().max()))))
        for a, b in pairs
    )
