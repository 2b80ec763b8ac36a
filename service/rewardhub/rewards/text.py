"""Text helpers shared by rewards: SQuAD normalisation and the part of a response after its reasoning.

``squad_normalize`` is the normalisation of the SQuAD v1.1 evaluation script (lower case, drop
punctuation and the articles a/an/the, collapse whitespace), so scores are comparable with published
EM/F1 numbers. :func:`after_think` is what follows a reasoning model's last ``</think>`` (the judge's
hardening reads it); :func:`answer_span` also stops at a ``<think>`` that never closes, and is the answer
the PRM, calibration, score_model, math, code, sql and json_schema rewards read instead of the reasoning.
Tags match exactly (``<think>``, ``</think>``: the tokens reasoning models emit), in every reward.
"""

from __future__ import annotations

import re
import string
import unicodedata

__all__ = ["THINK_CLOSE", "after_think", "after_think_at", "answer_span", "squad_normalize", "squad_tokens"]

THINK_CLOSE = "</think>"

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = frozenset(string.punctuation)


def squad_normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_tokens(text: str) -> list[str]:
    return squad_normalize(text).split()


def after_think_at(text: str) -> int:
    """Where the text after the last ``</think>`` starts (0 when there is none)."""
    cut = text.rfind(THINK_CLOSE)
    return cut + len(THINK_CLOSE) if cut >= 0 else 0


def after_think(text: str) -> str:
    """``text`` after its last ``</think>`` (all of it when there is none)."""
    return text[after_think_at(text) :]


def answer_span(text: str) -> tuple[int, int]:
    """Where a grading model's answer lies in its output: after the last ``</think>``, up to an unclosed
    ``<think>`` (a reasoning block the output ended in). A number or verdict in the reasoning is a draft,
    not the answer."""
    start = after_think_at(text)
    opened = text.find("<think>", start)
    return start, (opened if opened >= 0 else len(text))
