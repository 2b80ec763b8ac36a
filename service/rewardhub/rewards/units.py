"""Length and token units shared by the ``length`` and ``repetition`` rewards.

The service has no tokenizer for the policy model, and guessing one would make token counts silently
wrong. So "tokens" are never computed here: the trainer, which knows them, sends them in the item's
``metadata`` (a count, or the completion's token ids). Characters and words are computed from the
response: words are whitespace-separated, and each CJK ideograph or kana is a word of its own, as is
each letter of Thai, Lao, Khmer or Myanmar (:func:`.text.length_words`), since these scripts are written
without spaces between words (a 3,000-character Chinese or Thai answer was a handful of words, never past
a ``max_length`` in words). A missing token field is not the model's fault, so it makes the item invalid
(``missing_reference``) with a message naming the key, rather than a score of a guessed length.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome
from rewardhub.rewards.text import length_words

__all__ = ["LengthUnit", "UnitError", "completion_length", "metadata_int_list", "metadata_value"]

LengthUnit = Literal["chars", "words", "tokens"]

# The largest count a float holds: JSON integers are unbounded, and float(10**400) raises
_MAX_COUNT = int(sys.float_info.max)


class UnitError(Exception):
    """An item lacks (or has an unreadable) field a unit needs; :meth:`outcome` is its invalid result."""

    def __init__(self, reason: Reason, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message

    def outcome(self) -> Outcome:
        return Outcome.invalid(self.reason, self.message)


def metadata_value(item: ScoreItem, key: str, what: str) -> Any:
    """``item.metadata[key]``; raises :class:`UnitError` (missing_reference) naming ``what`` when absent."""
    meta = item.metadata or {}
    if key not in meta:
        raise UnitError(
            Reason.MISSING_REFERENCE,
            f"metadata[{key!r}] is missing: it must hold {what} (the service has no tokenizer), "
            "or choose a text unit (chars, words)",
        )
    return meta[key]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def metadata_int_list(item: ScoreItem, key: str) -> list[int]:
    """``item.metadata[key]`` as a list of ints (token ids); raises :class:`UnitError` otherwise."""
    value = metadata_value(item, key, "the completion's token ids")
    # the types as a set, not a Python check per id: 30M ids held the event loop 2.6 s that way, 0.7 s so
    # (type() is exact: a bool, an int subclass, is no token id)
    if not isinstance(value, list) or not set(map(type, value)) <= {int}:
        raise UnitError(Reason.PARSE_ERROR, f"metadata[{key!r}] must be a list of integer token ids")
    return value


def completion_length(item: ScoreItem, unit: LengthUnit, token_count_key: str) -> int:
    """The response's length: code points, words (whitespace-separated, a CJK ideograph or kana one word,
    a Thai, Lao, Khmer or Myanmar letter one word), or ``metadata[token_count_key]``."""
    if unit == "chars":
        return len(item.response)
    if unit == "words":
        return length_words(item.response)
    value = metadata_value(item, token_count_key, "the completion's token count")
    # past the floats a count cannot be scored (the OverflowError took the whole batch with it)
    if not _is_int(value) or not 0 <= value <= _MAX_COUNT:
        raise UnitError(
            Reason.PARSE_ERROR,
            f"metadata[{token_count_key!r}] must be a non-negative integer token count (at most 1.8e308)",
        )
    n: int = value
    return n
