"""A JSON response rendered by orjson.

FastAPI deprecated its own ``ORJSONResponse`` in favour of serialising through a response model, but the
scoring hot path assembles plain dicts (many straight out of the cache) and validating them again
through pydantic would cost more than the scoring of a cache hit. Routes that return this class still
declare ``response_model`` so the OpenAPI document stays exact.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from rewardhub import jsonutil

__all__ = ["JSONBytesResponse"]


class JSONBytesResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return jsonutil.dumps(content)
