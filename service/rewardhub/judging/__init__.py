"""LLM-as-a-judge support independent of any backend: hardening gates (:mod:`~rewardhub.judging.hardening`),
prompt templates (:mod:`~rewardhub.judging.templates`) and reading a verdict from a judge's output, by
parsing or by logprob expectation (:mod:`~rewardhub.judging.decision`)."""

from __future__ import annotations

from rewardhub.judging.decision import Decision, DecisionError, read_decision
from rewardhub.judging.hardening import content_free, injection

__all__ = ["Decision", "DecisionError", "content_free", "injection", "read_decision"]
