"""Checkpoints: everything needed for a resumed run to continue exactly as the original would have.

A checkpoint directory ``RUN_DIR/checkpoints/step_000012/`` holds:

* ``trainable.safetensors`` — the trainable parameters (all weights for a full fine-tune, the LoRA
  adapters otherwise; the frozen base is reloaded from ``model.path``);
* ``optimizer.pt`` — AdamW moments (the learning rate is a function of the updates, in ``state.json``);
* ``rng.pt`` — torch (CPU and CUDA) and Python RNG states, so sampling continues identically;
* ``state.json`` — the step, the updates made (steps that stepped the optimizer, ``num_epochs`` times
  each), the steps in a row in which every reward request failed (``reward.max_failed_steps``), every
  answered item was invalid (``reward.max_invalid_steps``) or every optimizer step was skipped
  (``training.max_skipped_steps``), the
  data position (the index of the next problem: data sources are indexed, see
  :mod:`rewardhub_trainer.data`), running totals (times, reward requests) and what identifies the run
  (model, data, reward: resume refuses a checkpoint of another run).

Why not ``save_pretrained`` here: one format for both cases, and no tokenizer/config copies per step. The
final model is written with ``save_pretrained`` (loadable by transformers/peft) by the trainer.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

__all__ = ["latest_checkpoint", "load_checkpoint", "save_checkpoint"]


def _trainable(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().contiguous().cpu() for n, p in model.named_parameters() if p.requires_grad}


def save_checkpoint(
    run_dir: Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Write ``RUN_DIR/checkpoints/step_N`` atomically (a temp dir renamed) and prune old ones."""
    root = run_dir / "checkpoints"
    final = root / f"step_{step:06d}"
    tmp = root / f".tmp_step_{step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(_trainable(model), str(tmp / "trainable.safetensors"))
    torch.save({"optimizer": optimizer.state_dict()}, tmp / "optimizer.pt")
    rng: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save(rng, tmp / "rng.pt")
    (tmp / "state.json").write_text(json.dumps({**state, "step": step}, indent=2) + "\n")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    # A checkpoint past this step belongs to an earlier run in the same directory (``resume: false``):
    # kept, it would sort last, get this run's own checkpoints pruned as "old", and be what resume loads.
    found = sorted(root.glob("step_*"))
    for old in [p for p in found if p.name > final.name] + [p for p in found if p.name <= final.name][:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = sorted((run_dir / "checkpoints").glob("step_*"))
    return found[-1] if found else None


def load_checkpoint(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
) -> dict[str, Any]:
    """Restore weights, optimizer and RNG states; returns ``state.json``."""
    weights = load_file(str(path / "trainable.safetensors"))
    expected = {n for n, p in model.named_parameters() if p.requires_grad}
    if set(weights) != expected:
        raise ValueError(
            f"{path}: checkpoint parameters do not match the model (is model.lora the same as in the run?); "
            f"missing {sorted(expected - set(weights))[:3]}, unexpected {sorted(set(weights) - expected)[:3]}"
        )
    device = next(model.parameters()).device
    model.load_state_dict({k: v.to(device) for k, v in weights.items()}, strict=False)
    # Read onto the CPU: the moments are saved on the device that trained (cuda:1, say), which the host
    # that resumes may not have (another GPU count, a CPU-only host); load_state_dict then moves each
    # moment to its parameter's device, wherever the model is now.
    opt = torch.load(path / "optimizer.pt", weights_only=True, map_location="cpu")
    optimizer.load_state_dict(opt["optimizer"])
    rng = torch.load(path / "rng.pt", weights_only=False)  # our own file: python's RNG state is a tuple
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["python"])
    if "cuda" in rng and torch.cuda.is_available():
        # one state per GPU the run could see; the host that resumes may see fewer (another node, another
        # CUDA_VISIBLE_DEVICES), and setting the state of a device it does not have raises IndexError
        torch.cuda.set_rng_state_all(rng["cuda"][: torch.cuda.device_count()])
    state: dict[str, Any] = json.loads((path / "state.json").read_text())
    return state
