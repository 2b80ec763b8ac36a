"""TRL's own GRPOTrainer, for a couple of steps on a tiny model, with rewards from a live rewardhub."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

# TRL and transformers warn about their own deprecations; that is their noise, not ours.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"),
]

trl = pytest.importorskip("trl", reason="TRL is part of the dev extra (scripts/test installs it)")


def items_scored(server_url: str) -> float:
    text = httpx.get(f"{server_url}/metrics").text
    prefix = 'rewardhub_items_total{reward="regex"} '
    return sum(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


def test_grpo_trainer_uses_rewardhub(live_server_factory: Any, tmp_path: Path) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from rewardhub_client.trl import make_reward_func
    from tiny_models import build_tiny_causal_lm

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model_dir = build_tiny_causal_lm(tmp_path / "tiny")
    tok = AutoTokenizer.from_pretrained(model_dir)
    data = Dataset.from_list(
        [{"prompt": f"Say a number between {i} and {i + 5}:", "target": "[0-9]"} for i in range(8)]
    )

    with live_server_factory() as server:
        reward = make_reward_func(
            server.url,
            {"name": "regex", "config": {"pattern": "[0-9]"}},
            reference_column=None,
            name="rewardhub_digit",
        )
        args = GRPOConfig(
            output_dir=str(tmp_path / "out"),
            use_cpu=True,
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=8,
            max_steps=2,
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            seed=0,
        )
        trainer = GRPOTrainer(
            model=str(model_dir), reward_funcs=[reward], args=args, train_dataset=data, processing_class=tok
        )
        before = items_scored(server.url)
        try:
            trainer.train()
        finally:
            # Close our connections on TRL's loop, then stop that loop (TRL otherwise leaves it to atexit).
            import asyncio

            from trl.trainer.utils import shutdown_event_loop_in_daemon

            asyncio.run_coroutine_threadsafe(reward.aclose(), trainer.async_loop).result(timeout=10)  # type: ignore[attr-defined]
            shutdown_event_loop_in_daemon(trainer.async_loop_thread, trainer.async_loop)
        after = items_scored(server.url)

    assert after - before >= 8  # two steps x (1 prompt x 4 generations) went through the service
    logged = [h for h in trainer.state.log_history if "rewards/rewardhub_digit/mean" in h]
    assert len(logged) == 2
    for h in logged:
        assert 0.0 <= h["rewards/rewardhub_digit/mean"] <= 1.0
    assert any("rewardhub/invalid_fraction" in h for h in trainer.state.log_history)
