"""Which occurrences of a PRM's step tag are tags, one rule for both sides of the model input.

The convention removes step tags from user text (:mod:`~rewardhub.prm.conventions`) and a backend finds
the inserted ones to read the verdicts (:func:`rewardhub.models.hf_compute.step_probs`); with one rule
the input has exactly one tag per step. A module of its own, importing nothing of rewardhub: the model
code imports it while :mod:`rewardhub.prm` (which imports the model code) may still be loading.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["tag_pattern"]

_WORD = re.compile(r"\w")


@lru_cache(maxsize=8)
def tag_pattern(tag: str) -> re.Pattern[str]:
    """The occurrences of ``tag`` in a text that are step tags.

    A tag that begins or ends with a word character must not touch another one there: ``ки`` after a
    step is a tag, the end of the Russian "покупки" is not (removing it mangled ordinary Cyrillic text).
    A tag like ``<extra_0>`` is a special token wherever it appears, so every occurrence counts.
    """
    head = r"(?<!\w)" if _WORD.match(tag[:1]) else ""
    tail = r"(?!\w)" if _WORD.match(tag[-1:]) else ""
    return re.compile(head + re.escape(tag) + tail)
