"""Built-in reward kinds, one module each; importing a module registers its reward."""

from __future__ import annotations

import importlib

from rewardhub.rewards.base import Outcome, Reward, RewardConfig, RewardRegistry, ScoreContext, register

__all__ = [
    "BUILTIN_MODULES",
    "Outcome",
    "Reward",
    "RewardConfig",
    "RewardRegistry",
    "ScoreContext",
    "load_builtin_rewards",
    "register",
]

BUILTIN_MODULES: tuple[str, ...] = (
    "rewardhub.rewards.math_answer",
    "rewardhub.rewards.exact_match",
    "rewardhub.rewards.string_check",
    "rewardhub.rewards.text_similarity",
    "rewardhub.rewards.python_grader",
    "rewardhub.rewards.score_model",
    "rewardhub.rewards.f1",
    "rewardhub.rewards.multiple_choice",
    "rewardhub.rewards.regex_match",
    "rewardhub.rewards.format",
    "rewardhub.rewards.json_schema",
    "rewardhub.rewards.tool_call",
    "rewardhub.rewards.length",
    "rewardhub.rewards.repetition",
    "rewardhub.rewards.calibration",
    "rewardhub.rewards.majority_vote",
    "rewardhub.rewards.group_length",
    "rewardhub.rewards.noisy",
    "rewardhub.rewards.composite",
    "rewardhub.rewards.judge",
    "rewardhub.rewards.prm",
    "rewardhub.rewards.orm",
    "rewardhub.rewards.similarity",
    "rewardhub.rewards.code",
    "rewardhub.rewards.verpo",
    "rewardhub.rewards.sql",
)


def load_builtin_rewards() -> None:
    """Import every built-in reward module (idempotent)."""
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
