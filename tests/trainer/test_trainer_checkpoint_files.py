"""What a resume reads back from the run directory: the checkpoint's files and metrics.jsonl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.serialization

from rewardhub_trainer.checkpoint import load_checkpoint, save_checkpoint


def _trained_linear(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    return model, opt


def test_a_checkpoint_written_on_a_gpu_resumes_where_that_device_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """optimizer.pt holds the AdamW moments on the device that trained (``cuda:1``, say), and torch.load
    restores a tensor onto its saved device unless told otherwise: a resume on a host without that device
    (another GPU count, ``model.device: cuda`` where the run had ``cuda:1``, a CPU-only host) stopped with
    "Attempting to deserialize object on a CUDA device". Found in review. The file is written here exactly
    as on a GPU (its storages tagged ``cuda:1``, what torch.save records for them) on a CPU-only host; the
    moments are now read onto the CPU and moved to the parameters' device by ``load_state_dict``."""
    model, opt = _trained_linear(0)
    save = torch.save

    def save_as_on_gpu(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        if Path(f).name != "optimizer.pt":  # the RNG states are CPU tensors on a GPU host too
            save(obj, f, *args, **kwargs)
            return
        with monkeypatch.context() as m:
            m.setattr(torch.serialization, "location_tag", lambda storage: "cuda:1")
            save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save_as_on_gpu)
    ckpt = save_checkpoint(tmp_path, 1, model, opt, {"data_position": 4})
    monkeypatch.setattr(torch, "save", save)
    fresh, fresh_opt = _trained_linear(1)
    state = load_checkpoint(ckpt, fresh, fresh_opt)
    assert state["step"] == 1 and state["data_position"] == 4
    saved, loaded = opt.state_dict()["state"], fresh_opt.state_dict()["state"]
    for k in saved:
        for name in ("exp_avg", "exp_avg_sq"):
            assert loaded[k][name].device == torch.device("cpu")
            assert torch.equal(loaded[k][name], saved[k][name])
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters(), strict=True))


def test_a_checkpoint_of_a_host_with_more_gpus_resumes_on_one_with_fewer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rng.pt holds one CUDA RNG state per GPU the run could see (``get_rng_state_all``), and resume set
    them all: on a host that sees fewer (another node, another CUDA_VISIBLE_DEVICES), setting a device it
    does not have raises IndexError (``torch.cuda.default_generators[i]``), so the run could not resume.
    Found in review. The CUDA calls are stood in for here (a CPU-only host), with torch's own indexing:
    the states of the devices the host has are restored, the others left out."""
    model, opt = _trained_linear(0)
    states = [torch.full((4,), k, dtype=torch.uint8) for k in range(4)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: states)
    ckpt = save_checkpoint(tmp_path, 1, model, opt, {"data_position": 4})
    generators: list[torch.Tensor | None] = [None, None]  # the resuming host sees two GPUs

    def set_rng_state(state: torch.Tensor, device: int) -> None:
        generators[device] = state  # IndexError past the host's devices, as torch's default_generators

    def set_rng_state_all(new_states: list[torch.Tensor]) -> None:  # torch's: one device after another
        for i, state in enumerate(new_states):
            set_rng_state(state, i)

    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(generators))
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", set_rng_state_all)
    load_checkpoint(ckpt, *_trained_linear(1))
    assert [g.tolist() for g in generators if g is not None] == [[0] * 4, [1] * 4]


@pytest.mark.parametrize(
    "torn",
    ['{"step": 4, "reward": 0.5, "los', "\x00" * 37],
    ids=["cut-row", "zero-filled"],
)
def test_a_row_the_stopped_run_left_half_written_does_not_keep_it_from_resuming(
    tmp_path: Path, torn: str
) -> None:
    """A run is resumed after it was stopped: killed, preempted, out of disk, any of which can leave the
    last line of metrics.jsonl or samples.jsonl half written (a cut row; after a host crash, a tail of
    zero bytes). Cutting the files back to the checkpoint's step parsed every line, and the torn one
    raised: the run could not resume until the file was edited by hand. Found in review. A line that is
    not a whole row is dropped with the rows past the checkpoint."""
    from rewardhub_trainer.metrics import MetricsWriter, read_metrics

    rows = "".join(f'{{"step": {k}, "reward": 0.{k}}}\n' for k in (1, 2, 3))
    for name in ("metrics.jsonl", "samples.jsonl"):
        (tmp_path / name).write_bytes((rows + torn).encode())
    writer = MetricsWriter(tmp_path, tensorboard=False, resume_step=2)
    writer.log(3, {"reward": 0.9})
    writer.close()
    assert read_metrics(tmp_path) == [
        {"step": 1, "reward": 0.1},
        {"step": 2, "reward": 0.2},
        {"step": 3, "reward": 0.9},
    ]
    assert (
        tmp_path / "samples.jsonl"
    ).read_text() == '{"step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.2}\n'


def test_vllm_sampling_seeds_continue_across_a_resume(tmp_path: Path) -> None:
    """vLLM's sampler keeps its own random state, which no checkpoint holds: a resumed vLLM run sampled
    other completions than the run it continues. Each prompt's seed (``SamplingParams(seed=...)``) is now
    drawn from torch's generator, which the checkpoint restores, so the resumed run asks for the seeds
    the uninterrupted one did; one per prompt, all different (a shared seed correlates prompts' draws).
    (The engine itself needs a GPU and the vllm extra; the seeds it is given are what is tested.)"""
    from rewardhub_trainer.generation import prompt_seeds

    model, opt = _trained_linear(0)
    torch.manual_seed(7)
    prompt_seeds(4)  # step 1's
    ckpt = save_checkpoint(tmp_path, 1, model, opt, {"data_position": 4})
    uninterrupted = prompt_seeds(4)  # step 2's, in the run that went on
    torch.manual_seed(12345)  # a new process: another state until the checkpoint is loaded
    fresh, fresh_opt = _trained_linear(1)
    load_checkpoint(ckpt, fresh, fresh_opt)
    assert prompt_seeds(4) == uninterrupted
    assert len(set(uninterrupted)) == 4
    assert all(0 <= s < 2**31 - 1 for s in uninterrupted)
