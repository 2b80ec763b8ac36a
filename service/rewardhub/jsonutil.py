"""JSON encoding for values that come from callers.

orjson is fast and used everywhere on the hot path, but it refuses integers outside the signed/unsigned
64-bit range, which JSON itself allows (a reference may hold ``-9223372036854775809``). Every place that
encodes caller-supplied data goes through :func:`dumps`, which falls back to the standard library for
such values instead of failing the request. A given value always takes the same path, so hashes of it
(cache keys, group fingerprints) stay stable.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["dumps"]


def dumps(value: Any, *, sort_keys: bool = False) -> bytes:
    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        return json.dumps(
            value,
            sort_keys=sort_keys,
            separators=(",", ":"),
            ensure_ascii=False,
            default=str,
            allow_nan=False,
        ).encode()
