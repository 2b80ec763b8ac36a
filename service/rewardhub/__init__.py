"""rewardhub: reward-as-a-service for RL post-training of language models."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
