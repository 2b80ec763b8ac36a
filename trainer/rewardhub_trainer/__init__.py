"""rewardhub_trainer: a thin GRPO-family trainer that gets its rewards from a rewardhub service over HTTP."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
