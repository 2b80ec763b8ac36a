"""Text normalisation shared by the string-matching rewards (exact_match, f1, multiple_choice).

``squad_normalize`` is the normalisation of the SQuAD v1.1 evaluation script (lower case, drop
punctuation and the articles a/an/the, collapse whitespace), so scores are comparable with published
EM/F1 numbers.
"""

from __future__ import annotations

import re
import string
import unicodedata

__all__ = ["squad_normalize", "squad_tokens"]

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = frozenset(string.punctuation)


def squad_normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_tokens(text: str) -> list[str]:
    return squad_normalize(text).split()
