"""Process-reward-model support independent of any backend: step splitting with character spans
(:mod:`~rewardhub.prm.steps`), the input conventions of known PRMs (:mod:`~rewardhub.prm.conventions`)
and step-score aggregation (:mod:`~rewardhub.prm.aggregate`)."""

from __future__ import annotations

from rewardhub.prm.aggregate import Aggregation, aggregate
from rewardhub.prm.conventions import CONVENTIONS, PRMConvention
from rewardhub.prm.steps import Step, split_steps

__all__ = ["CONVENTIONS", "Aggregation", "PRMConvention", "Step", "aggregate", "split_steps"]
