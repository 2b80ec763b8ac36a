"""Drop-in endpoints for other trainers: OpenRLHF, slime, NeMo Gym (translation only, see rewardhub.compat)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body

from rewardhub.compat import nemo_gym, openrlhf, slime
from rewardhub.compat.common import score_or_flag
from rewardhub.deps import AdmissionDep, ScoringDep, SettingsDep
from rewardhub.responses import JSONBytesResponse
from rewardhub.security import CallerDep

router = APIRouter(prefix="/compat", tags=["compat"])


@router.post(
    "/openrlhf/get_reward",
    response_model=openrlhf.OpenRLHFResponse,
    summary="OpenRLHF remote reward model",
    description="Point `--reward.remote_url` (or `--remote_rm_url`) at this URL. " + (openrlhf.__doc__ or ""),
)
async def openrlhf_get_reward(
    body: openrlhf.OpenRLHFRequest,
    scoring: ScoringDep,
    admission: AdmissionDep,
    caller: CallerDep,
    settings: SettingsDep,
) -> JSONBytesResponse:
    items = openrlhf.to_items(body, settings.compat_default_reward)
    outcome = await score_or_flag(scoring, admission, caller, items)
    return JSONBytesResponse(openrlhf.to_response(outcome))


@router.post(
    "/slime/reward",
    response_model=slime.SlimeResponse,
    summary="slime remote reward model",
    description="`--rm-type remote_rm --rm-url <this URL> --reward-key reward`. " + (slime.__doc__ or ""),
)
async def slime_reward(
    body: slime.SlimeRequest,
    scoring: ScoringDep,
    admission: AdmissionDep,
    caller: CallerDep,
    settings: SettingsDep,
) -> JSONBytesResponse:
    outcome = await score_or_flag(
        scoring, admission, caller, [slime.to_item(body, settings.compat_default_reward)]
    )
    return JSONBytesResponse(slime.to_response(outcome))


@router.post(
    "/nemo-gym/verify",
    summary="NeMo Gym resources server: verify one rollout",
    description=nemo_gym.__doc__ or "",
)
async def nemo_gym_verify(
    scoring: ScoringDep,
    admission: AdmissionDep,
    caller: CallerDep,
    settings: SettingsDep,
    body: dict[str, Any] = Body(...),
) -> JSONBytesResponse:
    item = nemo_gym.to_item(body, settings.compat_default_reward, "code" in scoring.registry.names())
    outcome = await score_or_flag(scoring, admission, caller, [item])
    return JSONBytesResponse(nemo_gym.to_response(body, outcome))


@router.post("/nemo-gym/seed_session", summary="NeMo Gym: seed a session (stateless: nothing to keep)")
async def nemo_gym_seed_session(
    caller: CallerDep, body: dict[str, Any] | None = Body(None)
) -> dict[str, Any]:
    if body and "resources_session_id" in body:
        return {"resources_session_id": body["resources_session_id"]}
    return {}


@router.post("/nemo-gym/close_session", summary="NeMo Gym: close a session (stateless)")
async def nemo_gym_close_session(
    caller: CallerDep, body: dict[str, Any] | None = Body(None)
) -> dict[str, Any]:
    return {"resources_session_id": (body or {}).get("resources_session_id", "")}


@router.post("/nemo-gym/aggregate_metrics", summary="NeMo Gym: aggregate verify responses")
async def nemo_gym_aggregate_metrics(caller: CallerDep, body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    responses = body.get("verify_responses") or []
    return nemo_gym.aggregate_metrics([r for r in responses if isinstance(r, dict)])


@router.get("/nemo-gym/reverify_mode", summary="NeMo Gym: rewards are pure functions of the request")
async def nemo_gym_reverify_mode() -> str:
    return "stateless"
