"""A base model with a scalar value head: how a Skywork-o1-Open-PRM checkpoint is served.

Skywork's PRMs are a causal LM trained with a value head (TRL's ``AutoModelForCausalLMWithValueHead``
layout): one ``Linear(hidden, 1)`` over the last hidden state, saved beside the model's own weights as
``v_head.summary.weight`` and ``v_head.summary.bias``. No transformers class loads that head, and the
checkpoint's config names a plain ``...ForCausalLM``, so the backend loads the base model (``AutoModel``:
the LM head is never read) and adds the head from the safetensors files itself. A step's score is the
sigmoid of the value at the token after the step (algorithms.md §1.5).

Imported by :mod:`rewardhub.models.hf_compute` in the model process only: it imports torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rewardhub.models.errors import BackendUnavailable
from rewardhub.models.fingerprint import local_dir
from rewardhub.models.passes import cache_kwarg

__all__ = ["HEAD_KEYS", "ValueHeadModel", "ValueOutput", "value_head_weights"]

HEAD_KEYS = ("v_head.summary.weight", "v_head.summary.bias")


def _shards(root: Path) -> list[Path]:
    """The safetensors files holding ``HEAD_KEYS``: the index's, or every ``*.safetensors``."""
    index = root / "model.safetensors.index.json"
    if index.is_file():
        names = json.loads(index.read_text()).get("weight_map", {})
        return sorted({root / names[k] for k in HEAD_KEYS if k in names})
    return sorted(root.glob("*.safetensors"))


def value_head_weights(path: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weight [1, hidden], bias [1])`` of the checkpoint's value head, as float32.

    Refused when absent (a plain causal LM given as a Skywork PRM would otherwise need a random head:
    noise that looks like scores) or of another shape. ``path`` is read where ``from_pretrained`` read
    the base model: a hub id (``Skywork/Skywork-o1-Open-PRM-Qwen-2.5-1.5B``) is its cached snapshot,
    not a directory of that name under the working directory (where no head was ever found).
    """
    from safetensors import safe_open

    found: dict[str, torch.Tensor] = {}
    for shard in _shards(local_dir(path) or Path(path)):
        with safe_open(str(shard), framework="pt") as f:
            for key in HEAD_KEYS:
                if key in f.keys():  # safe_open has keys(), no __contains__
                    found[key] = f.get_tensor(key).float()
    missing = [k for k in HEAD_KEYS if k not in found]
    if missing:
        raise BackendUnavailable(
            f"{path}: no {' or '.join(missing)} in its safetensors files: not a value-head PRM "
            "(convention skywork reads Skywork-o1-Open-PRM's v_head)"
        )
    weight, bias = found[HEAD_KEYS[0]], found[HEAD_KEYS[1]]
    if weight.dim() != 2 or weight.shape[0] != 1 or bias.shape != (1,):
        raise BackendUnavailable(
            f"{path}: its value head is {tuple(weight.shape)} + {tuple(bias.shape)}, not one output"
        )
    return weight, bias


@dataclass
class ValueOutput:
    """What :class:`ValueHeadModel` returns: ``logits`` are the values, ``[batch, positions, 1]``, float32
    (the name lets the batch code read it as any head's output)."""

    logits: torch.Tensor


class ValueHeadModel(torch.nn.Module):
    """``base`` (a transformers base model) followed by a float32 ``Linear(hidden, 1)``.

    ``forward`` takes the keyword arguments the batch code passes (:mod:`rewardhub.models.passes`:
    padding mask, position ids, a key/value cache under either name) and hands them to the base model
    under the name it takes. ``base_model`` is what a shared prompt's prefill runs on.
    """

    def __init__(self, base: Any, head: tuple[torch.Tensor, torch.Tensor]):
        super().__init__()
        weight, bias = head
        hidden = int(getattr(base.config, "hidden_size", weight.shape[1]))
        if weight.shape[1] != hidden:
            raise BackendUnavailable(
                f"the value head reads {weight.shape[1]} features; the model has {hidden}"
            )
        self.base_model = base
        self.config = base.config
        self.summary = torch.nn.Linear(hidden, 1, dtype=torch.float32)
        with torch.no_grad():
            self.summary.weight.copy_(weight)
            self.summary.bias.copy_(bias)

    @property
    def dtype(self) -> torch.dtype:
        return self.base_model.dtype  # type: ignore[no-any-return]

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        use_cache: bool | None = None,
        cache: Any = None,
        past_key_values: Any = None,
    ) -> ValueOutput:
        kwargs: dict[str, Any] = {"attention_mask": attention_mask, "position_ids": position_ids}
        if use_cache is not None:
            kwargs["use_cache"] = use_cache
        given = cache if cache is not None else past_key_values
        if given is not None:
            kwargs[cache_kwarg(self.base_model)] = given
        hidden = self.base_model(input_ids=input_ids, **kwargs).last_hidden_state
        return ValueOutput(self.summary(hidden.float()))
