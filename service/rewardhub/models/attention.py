"""Attention for grouped-query models with a mask, on a CPU: the kernel's own GQA, no copied heads.

Qwen2-style models keep fewer key/value heads than query heads (Qwen2.5-Math-PRM-7B: 4 for 28). Given
an attention mask, transformers' SDPA path copies every key/value head once per query head it serves
(``repeat_kv``: on CUDA the fused kernels refuse a mask with GQA) before calling the kernel. torch's CPU
attention takes the grouped heads as they are (``enable_gqa``), so on a CPU the copies, two per layer, are
pure loss: ~10% of a continuation pass of the PRM benchmark's batch (BENCHMARKS.md §5). The masked passes
are the continuation passes of shared prompts (:mod:`rewardhub.models.passes`) and the plain masked pass
of bidirectional models; an unmasked causal pass already gets ``enable_gqa`` from transformers.

:func:`install` registers the function under transformers' own ``sdpa`` name (its
``AttentionInterface``), so that the masks transformers builds for ``sdpa`` stay as they are; every other
call (a GPU, no mask, no grouping, dropout, a position bias) goes to transformers' function unchanged.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["install"]


@functools.cache
def install() -> None:
    """Register the grouped-head attention as this process's ``sdpa`` attention (once); it serves the
    calls :func:`_grouped_on_cpu` accepts and passes every other to transformers' own function."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def forward(
        module: Any,
        query: Any,
        key: Any,
        value: Any,
        attention_mask: Any,
        dropout: float = 0.0,
        scaling: float | None = None,
        is_causal: bool | None = None,
        **kwargs: Any,
    ) -> tuple[Any, None]:
        if _grouped_on_cpu(module, query, attention_mask, dropout, kwargs):
            import torch

            out = torch.nn.functional.scaled_dot_product_attention(
                query, key, value, attn_mask=attention_mask, scale=scaling, enable_gqa=True
            )
            return out.transpose(1, 2).contiguous(), None
        return sdpa_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            is_causal=is_causal,
            **kwargs,
        )

    AttentionInterface.register("sdpa", forward)


def _grouped_on_cpu(
    module: Any, query: Any, attention_mask: Any, dropout: float, kwargs: dict[str, Any]
) -> bool:
    """Whether a call is the one this module serves: grouped heads, a mask, a CPU, nothing else special."""
    return (
        getattr(module, "num_key_value_groups", 1) > 1
        and attention_mask is not None
        and query.device.type == "cpu"
        and dropout == 0.0
        and kwargs.get("position_bias") is None
        and kwargs.get("softcap") is None
        and not kwargs.get("output_attentions", False)
    )
