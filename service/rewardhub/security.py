"""API keys: who is calling.

Keys come from ``REWARDHUB_API_KEYS`` (comma-separated) and are accepted as ``Authorization: Bearer
<key>`` or ``X-API-Key: <key>``. With no keys configured the API is open (the lifespan logs a warning).
Without a key: 401; with a key that is not accepted: 403. Probes (``/health``, ``/ready``,
``/metrics``) are always open.

Keys are held only as SHA-256 digests and compared in constant time; a caller is identified in logs,
metrics and quotas by ``key:<first 12 hex digits of the digest>``, never by the key itself.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from rewardhub.errors import Forbidden, Unauthorized

__all__ = ["ANONYMOUS", "ANONYMOUS_KEY_ID", "Authenticator", "Caller", "CallerDep", "get_caller"]


#: The tenant of every request when no API keys are configured: quotas, group ids and jobs are scoped
#: by key id, and an open service is one tenant.
ANONYMOUS_KEY_ID = "anonymous"


@dataclass(frozen=True, slots=True)
class Caller:
    key_id: str

    @property
    def anonymous(self) -> bool:
        return self.key_id == ANONYMOUS_KEY_ID


ANONYMOUS = Caller(ANONYMOUS_KEY_ID)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class Authenticator:
    def __init__(self, keys: tuple[str, ...]):
        self._digests = [_digest(k) for k in keys]

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def authenticate(self, authorization: str | None, x_api_key: str | None) -> Caller:
        if not self._digests:
            return ANONYMOUS
        token = None
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() == "bearer" and value.strip():
                token = value.strip()
        if token is None and x_api_key:
            token = x_api_key.strip()
        if not token:
            raise Unauthorized(
                "an API key is required: send `Authorization: Bearer <key>` or `X-API-Key: <key>`"
            )
        d = _digest(token)
        # Compare against every key (no early exit) so timing says nothing about which key is close.
        match = False
        for known in self._digests:
            match |= hmac.compare_digest(d, known)
        if not match:
            raise Forbidden("the API key is not accepted")
        return Caller(f"key:{d.hex()[:12]}")


async def get_caller(request: Request) -> Caller:
    auth: Authenticator = request.app.state.authenticator
    caller = auth.authenticate(request.headers.get("authorization"), request.headers.get("x-api-key"))
    request.state.caller = caller
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]
