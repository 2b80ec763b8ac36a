"""rewardhub_client: typed HTTP client for a rewardhub service (depends only on httpx and pydantic)."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
