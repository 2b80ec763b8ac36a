"""Loading the policy (optionally with LoRA adapters) and the frozen reference model.

The reference model exists only when the KL term is on (``kl_coef > 0``). With LoRA it is free: the
base weights *are* the reference, reached by running the same model with its adapters disabled. With a
full fine-tune it is a second, frozen copy loaded from ``model.path`` (so a resumed run gets the same
reference as the original one).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from rewardhub_trainer.config import ModelConfig

__all__ = ["load_policy", "reference_context", "resolve_device"]


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _load_lm(config: ModelConfig, device: torch.device) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    model: torch.nn.Module = AutoModelForCausalLM.from_pretrained(
        config.path, dtype=getattr(torch, config.dtype), local_files_only=True
    )
    _disable_dropout(model)
    return model.to(device)


def _disable_dropout(model: torch.nn.Module) -> None:
    """Turn off the checkpoint's own dropout (TRL's ``disable_dropout``, on by default in its GRPO).

    Sampling runs in eval mode and the loss passes in train mode: with dropout on there, the logprobs
    recorded while sampling are not those of the policy the loss sees (the PPO ratio is not 1 before the
    first update) and every gradient carries dropout noise. Llama/Qwen-style attention applies its
    ``attention_dropout`` float functionally when training, so that is zeroed as well as ``nn.Dropout``.
    Called before LoRA wraps the model: ``lora.dropout`` stays as configured.
    """
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if isinstance(getattr(module, "attention_dropout", None), float):
            module.attention_dropout = 0.0  # type: ignore[assignment]


def load_policy(
    config: ModelConfig, *, need_reference: bool
) -> tuple[torch.nn.Module, Any, torch.nn.Module | None]:
    """``(policy, tokenizer, reference)``; ``reference`` is None when not needed or when LoRA provides it.

    Raises:
        FileNotFoundError: ``model.path`` is not a directory. transformers would take the path for a hub
            id and fail with "Repo id must be in the form ..." deep in a traceback that names neither the
            field nor the fix (the README's examples need ``convert-smollm2`` run first).
    """
    from transformers import AutoTokenizer

    if not Path(config.path).is_dir():
        raise FileNotFoundError(
            f"model.path {config.path!r} is not a directory (relative paths are read from {Path.cwd()}): "
            "give a local transformers checkpoint (a hub id is never downloaded); for the examples' "
            f"SmolLM2, run `rewardhub-train convert-smollm2 {config.path}` first"
        )
    device = resolve_device(config.device)
    tokenizer = AutoTokenizer.from_pretrained(config.path, local_files_only=True)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = _load_lm(config, device)
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()  # type: ignore[operator]
        model.config.use_cache = False  # type: ignore[union-attr]
    if config.lora.enabled:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=config.lora.r,
            lora_alpha=config.lora.alpha,
            lora_dropout=config.lora.dropout,
            target_modules=list(config.lora.target_modules),
            task_type="CAUSAL_LM",
        )
        with warnings.catch_warnings():
            # peft reads transformers' deprecated `is_gradient_checkpointing` alias: its noise, not ours
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            model = get_peft_model(model, lora)
        if config.gradient_checkpointing:
            model.enable_input_require_grads()
        return model, tokenizer, None
    reference = None
    if need_reference:
        reference = _load_lm(config, device).eval()
        reference.requires_grad_(False)
    return model, tokenizer, reference


@contextlib.contextmanager
def reference_context(model: torch.nn.Module, reference: torch.nn.Module | None) -> Iterator[torch.nn.Module]:
    """The module that computes reference logprobs: the frozen copy, or the policy with adapters off."""
    if reference is not None:
        yield reference
        return
    disable = getattr(model, "disable_adapter", None)
    if disable is None:
        raise RuntimeError("kl_coef > 0 needs a reference model (full fine-tune) or LoRA adapters")
    with disable():
        yield model
