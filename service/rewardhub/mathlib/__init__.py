"""Math answer extraction and equivalence for the ``math`` reward.

``extract_answer`` / ``read_gold`` pull answers out of responses and references;
``quick_check`` is the cheap, certain event-loop path; ``check`` is the full (possibly slow)
judgement meant to run in a killable worker process.
"""

from __future__ import annotations

from rewardhub.mathlib.equivalence import Check, check, quick_check
from rewardhub.mathlib.extract import DEFAULT_METHODS, Extracted, extract_answer, read_gold

__all__ = ["DEFAULT_METHODS", "Check", "Extracted", "check", "extract_answer", "quick_check", "read_gold"]
