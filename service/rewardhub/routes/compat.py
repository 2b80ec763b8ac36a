"""Drop-in endpoints for other trainers and graders: OpenRLHF, slime, NeMo Gym, OpenAI graders (translation
only, see rewardhub.compat)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Body

from rewardhub.compat import nemo_gym, openai_graders, openrlhf, slime
from rewardhub.compat.common import score_or_flag
from rewardhub.deps import AdmissionDep, ScoringDep, SettingsDep
from rewardhub.errors import Forbidden, InvalidRequest, RewardHubError, Unauthorized, error_responses
from rewardhub.protocol import ScoreItem, ScoreRequest
from rewardhub.responses import JSONBytesResponse
from rewardhub.routes.body import AnyContentTypeJSONRoute
from rewardhub.security import CallerDep
from rewardhub.serving import ScoringService

# (a JSON body whatever its Content-Type, as the API's own routes read theirs: see routes/body.py)
router = APIRouter(prefix="/compat", tags=["compat"], route_class=AnyContentTypeJSONRoute)

# What a route with a body or a caller answers besides its own shape: the service's error envelope (the app's
# one handler answers a body that fails validation so; FastAPI would document its own HTTPValidationError).
ERRORS = error_responses(
    (Unauthorized, "An API key is required."),
    (Forbidden, "The API key is not accepted."),
    (InvalidRequest, "The body is not the peer's request shape (the message names the field)."),
)


@router.post(
    "/openrlhf/get_reward",
    responses=ERRORS,
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
    outcome = await score_or_flag(
        scoring,
        admission,
        caller,
        items,
        deadline_s=settings.openrlhf_deadline_s or None,  # (0: none)
        # OpenRLHF resends a batch it gave up on (0: one call per part)
        progress_items=settings.openrlhf_progress_items or None,
    )
    return JSONBytesResponse(openrlhf.to_response(outcome))


@router.post(
    "/slime/reward",
    responses=ERRORS,
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
        scoring,
        admission,
        caller,
        [slime.to_item(body, settings.compat_default_reward)],
        deadline_s=settings.slime_deadline_s or None,  # (0: none)
    )
    return JSONBytesResponse(slime.to_response(outcome))


@router.post(
    "/nemo-gym/verify",
    responses=ERRORS,
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
    nemo_gym.require_response(body)  # (a 422, as NeMo Gym's own request model answers it)
    item = nemo_gym.to_item(body, settings.compat_default_reward, "code" in scoring.registry.names())
    outcome = await score_or_flag(scoring, admission, caller, [item])
    return JSONBytesResponse(nemo_gym.to_response(body, outcome))


@router.post(
    "/nemo-gym/seed_session",
    responses=ERRORS,
    summary="NeMo Gym: seed a session (stateless: nothing to keep)",
)
async def nemo_gym_seed_session(
    caller: CallerDep, body: dict[str, Any] | None = Body(None)
) -> dict[str, Any]:
    if body and "resources_session_id" in body:
        return {"resources_session_id": body["resources_session_id"]}
    return {}


@router.post("/nemo-gym/close_session", responses=ERRORS, summary="NeMo Gym: close a session (stateless)")
async def nemo_gym_close_session(
    caller: CallerDep, body: dict[str, Any] | None = Body(None)
) -> dict[str, Any]:
    return {"resources_session_id": (body or {}).get("resources_session_id", "")}


@router.post("/nemo-gym/aggregate_metrics", responses=ERRORS, summary="NeMo Gym: aggregate verify responses")
async def nemo_gym_aggregate_metrics(caller: CallerDep, body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    responses = body.get("verify_responses") or []
    if not isinstance(responses, list):
        raise InvalidRequest(
            f"verify_responses: a list of verify responses is required, not {type(responses).__name__}",
            param="verify_responses",
        )
    return nemo_gym.aggregate_metrics([r for r in responses if isinstance(r, dict)])


@router.get("/nemo-gym/reverify_mode", summary="NeMo Gym: rewards are pure functions of the request")
async def nemo_gym_reverify_mode() -> str:
    return "stateless"


# NeMo Gym addresses a resources server by host and port alone (its ServerClient posts to
# f"http://{host}:{port}/verify"; there is no path prefix to configure), so the contract is also served
# at the root paths, as SandboxFusion's /run_code is.
nemo_gym_alias_router = APIRouter(tags=["compat"], route_class=AnyContentTypeJSONRoute)
for _path, _endpoint, _method in (
    ("/verify", nemo_gym_verify, "POST"),
    ("/seed_session", nemo_gym_seed_session, "POST"),
    ("/close_session", nemo_gym_close_session, "POST"),
    ("/aggregate_metrics", nemo_gym_aggregate_metrics, "POST"),
    ("/reverify_mode", nemo_gym_reverify_mode, "GET"),
):
    nemo_gym_alias_router.add_api_route(
        _path,
        _endpoint,
        methods=[_method],
        responses=ERRORS if _method == "POST" else None,
        summary=f"NeMo Gym {_path} at the root path (as /compat/nemo-gym{_path})",
        description=(nemo_gym.__doc__ or "") if _path == "/verify" else "",
    )


@router.post(
    "/openai/graders/run",
    responses=ERRORS,
    summary="OpenAI grader JSON: run a grader on one sample",
    description=openai_graders.__doc__ or "",
)
@router.post(
    "/openai/fine_tuning/alpha/graders/run",
    responses=ERRORS,
    summary="OpenAI grader JSON: run a grader (the hosted API's path, as the OpenAI SDK posts it)",
    description="`OpenAI(base_url='http://HOST:PORT/compat/openai').fine_tuning.alpha.graders.run(...)`; "
    "the same as /compat/openai/graders/run.",
)
async def openai_graders_run(
    body: openai_graders.GraderRunRequest, scoring: ScoringDep, admission: AdmissionDep, caller: CallerDep
) -> JSONBytesResponse:
    t0 = time.perf_counter()
    grader = body.grader
    meta: dict[str, Any] = {
        "name": grader.get("name", grader.get("type")),
        "type": grader.get("type"),
        "errors": openai_graders.error_flags(),
        "execution_time": 0.0,
        "scores": {},
        "token_usage": None,
        "sampled_model_name": None,
    }
    reward, sub_rewards = 0.0, {}
    try:
        ns = openai_graders.namespace(body.model_sample, body.item)
        names, items = openai_graders.plan_items(grader, ns, set(scoring.registry.names()))
        check_configs(scoring, names, items)
        outcome = await score_or_flag(scoring, admission, caller, items)
        scores: dict[str, float] = {}
        for name, r in zip(names, outcome.results, strict=True):
            if not r["valid"]:
                flag = grader_error_flag(grader_type_of(grader, name), r.get("reason"))
                details = r.get("details") or {}
                message = str(r.get("error") or details.get("message") or r.get("reason"))
                if isinstance(details.get("stderr"), str) and details["stderr"].strip():
                    message += f"\n{details['stderr'].strip()[-1000:]}"  # grade()'s traceback
                raise openai_graders.GraderError(message, flag, str(r.get("reason")))
            scores[name] = float(r["score"])
        reward = openai_graders.combine(grader, names, scores)
        meta["scores"] = scores
        if grader.get("type") == "multi":
            sub_rewards = scores
    except openai_graders.TemplateError as exc:
        meta["errors"] = openai_graders.flag_error("invalid_variable_error", str(exc))
    except openai_graders.GraderError as exc:
        meta["errors"] = openai_graders.flag_error(exc.flag, str(exc), exc.kind)
    meta["execution_time"] = time.perf_counter() - t0
    return JSONBytesResponse(
        {
            "reward": reward,
            "metadata": meta,
            "sub_rewards": sub_rewards,
            "model_grader_token_usage_per_model": {},
        }
    )


def check_configs(scoring: ScoringService, names: list[str], items: list[ScoreItem]) -> None:
    """A grader whose translation is a reward config that reward refuses (a score_model ``range`` of
    [1, 0], a temperature of 5) is a malformed grader: ``other_error`` from /run and a 422 from
    /validate, as for the grader's other faults. Left to scoring, each run failed as the item's
    ``invalid_request``, reported as ``model_grader_server_error``, and /validate accepted it."""
    for name, item in zip(names, items, strict=True):
        try:
            scoring.validate(ScoreRequest(items=[item]))
        except RewardHubError as exc:
            raise openai_graders.GraderError(f"{name}: {exc.message}") from None


def grader_error_flag(grader_type: Any, reason: Any) -> str:
    """OpenAI's error flag for a sub-grader whose item could not be scored."""
    if grader_type == "score_model":
        return "model_grader_parse_error" if reason == "parse_error" else "model_grader_server_error"
    if grader_type == "python":
        # the service's faults (a failed sandbox, a full service, a bug), not the grade() code's
        server = reason in ("sandbox_error", "overloaded", "internal_error")
        return "python_grader_server_error" if server else "python_grader_runtime_error"
    return "other_error"


def grader_type_of(grader: dict[str, Any], name: str) -> Any:
    if grader.get("type") == "multi":
        sub = (grader.get("graders") or {}).get(name)
        return sub.get("type") if isinstance(sub, dict) else None
    return grader.get("type")


@router.post(
    "/openai/graders/validate",
    responses=ERRORS,
    summary="OpenAI grader JSON: check a grader without running it",
)
@router.post(
    "/openai/fine_tuning/alpha/graders/validate",
    responses=ERRORS,
    summary="OpenAI grader JSON: check a grader (the hosted API's path, as the OpenAI SDK posts it)",
)
async def openai_graders_validate(
    caller: CallerDep, scoring: ScoringDep, body: dict[str, Any] = Body(...)
) -> dict[str, Any]:
    grader = body.get("grader")
    if not isinstance(grader, dict):
        raise InvalidRequest("grader: an object is required", param="grader")
    # the sample's JSON, like the item, has every field: a template may read either without data
    ns = {"sample": {"output_text": "", "output_json": _Anything()}, "item": _Anything()}
    try:
        names, items = openai_graders.plan_items(grader, ns, set(scoring.registry.names()))
        check_configs(scoring, names, items)
        if grader.get("type") == "multi":
            # parsed, not evaluated: a valid formula may fail on made-up scores ("1 / (a - b)" at 0.5)
            openai_graders.output_formula(grader, names)
    except (openai_graders.GraderError, openai_graders.TemplateError) as exc:
        raise InvalidRequest(f"grader: {exc}", param="grader") from None
    return {"grader": grader}


class _Anything(dict[str, Any]):
    """An item that has every field, for validating templates without data."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> Any:
        return _Anything()
