"""FastAPI dependencies: typed handles on what the lifespan put on ``app.state``.

They are ``async def`` although they never await: FastAPI runs a plain ``def`` dependency in its thread
pool, a thread hand-off per dependency per request (a tenth of the event loop's time under 64 clients).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from rewardhub.admission import Admission
from rewardhub.config import Settings
from rewardhub.errors import ServiceUnavailable
from rewardhub.serving import ScoringService

__all__ = ["AdmissionDep", "ScoringDep", "SettingsDep"]


async def get_scoring(request: Request) -> ScoringService:
    scoring: ScoringService | None = getattr(request.app.state, "scoring", None)
    if scoring is None:
        raise ServiceUnavailable("the service is starting up or shutting down")
    return scoring


async def get_app_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_admission(request: Request) -> Admission:
    admission: Admission = request.app.state.admission
    return admission


ScoringDep = Annotated[ScoringService, Depends(get_scoring)]
AdmissionDep = Annotated[Admission, Depends(get_admission)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
