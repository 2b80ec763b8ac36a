"""``POST /compat/sandboxfusion/run_code`` (and ``/run_code``): SandboxFusion's code-execution API.

Same request and response schema as ByteDance SandboxFusion's ``/run_code``, so verl's built-in
``sandbox_fusion`` scorer (``reward_model.sandbox_fusion.url=http://HOST:PORT/compat/sandboxfusion/run_code``)
and ROLL's code sandbox worker use this service unchanged. One program per call, like the original:
compile (C, C++) under ``compile_timeout``, run once with ``stdin`` under ``run_timeout``; both are
wall-clock limits, as in SandboxFusion (the ``code`` reward's are CPU time).

``status``: ``Success`` (ran and exited 0), ``Failed`` (compile error, non-zero exit, time limit),
``SandboxError`` (the sandbox, not the program, failed — or the language is not offered here). Extra
fields a strict client ignores: ``run_result.memory_limit_exceeded`` (SandboxFusion issue #43: it only
reports time limits), ``cpu_time``, ``max_rss_kb``, ``output_truncated``; top-level ``isolation``.

A full service (REWARDHUB_MAX_INFLIGHT_ITEMS, REWARDHUB_SANDBOX_QUEUE_MAX_ITEMS) is a moment's lack of room,
not a verdict on the program: the call waits up to REWARDHUB_SANDBOXFUSION_ROOM_WAIT_S (5 s) for a slot,
then answers **504** with ``Retry-After`` (body: ``SandboxError`` with the limit in ``message``). verl's
client retries only a 504 (3 tries, 1 s then 2 s apart) and takes a 200 ``SandboxError`` as final: the
test case fails and a correct program scored 0. The SandboxFusion SDK and ROLL retry a non-200 as well.
The default wait stays well inside the 10 s verl adds to ``compile_timeout + run_timeout`` for its
request timeout (a client timeout is not retried).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import socket
import time
from collections.abc import Callable
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from rewardhub.admission import Admission
from rewardhub.config import Settings
from rewardhub.deps import AdmissionDep, SettingsDep
from rewardhub.errors import Overloaded
from rewardhub.responses import JSONBytesResponse
from rewardhub.routes.body import AnyContentTypeJSONRoute
from rewardhub.routes.compat import ERRORS
from rewardhub.sandbox import RunReport, SandboxPool, SandboxUnavailable, resolve_language
from rewardhub.security import Caller, CallerDep

__all__ = ["RunCodeRequest", "RunCodeResponse", "alias_router", "router"]

router = APIRouter(prefix="/compat/sandboxfusion", tags=["compat"], route_class=AnyContentTypeJSONRoute)
alias_router = APIRouter(tags=["compat"], route_class=AnyContentTypeJSONRoute)
_HOST = socket.gethostname()


class RunCodeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    code: str
    language: str = "python"
    compile_timeout: float = Field(10.0, gt=0)
    run_timeout: float = Field(10.0, gt=0)
    memory_limit_MB: int = Field(-1, description="-1: the server's default (REWARDHUB_SANDBOX_MEMORY_MB).")
    stdin: str | None = None
    files: dict[str, str | None] = Field(
        default_factory=dict, description="Path -> base64 content (null: no file, as in SandboxFusion)."
    )
    fetch_files: list[str] = Field(default_factory=list)


class CommandRunResult(BaseModel):
    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    # Extras (not in SandboxFusion; its clients ignore unknown fields).
    memory_limit_exceeded: bool = False
    cpu_time: float | None = None
    max_rss_kb: int | None = None
    output_truncated: bool = False


class RunCodeResponse(BaseModel):
    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    isolation: str | None = None


_OOM_MARKERS = (
    b"MemoryError",
    b"bad_alloc",
    b"out of memory",
    b"Cannot allocate memory",
    b"heap out of memory",
)


def _command_result(run: RunReport, memory_mb: int) -> CommandRunResult:
    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    if run.status == "timeout":
        status = "TimeLimitExceeded"
    elif run.status in ("exited", "signaled"):
        status = "Finished"
    else:
        status = "Error"
    failed = not run.ok
    oom = failed and (
        any(m in run.stderr for m in _OOM_MARKERS) or run.max_rss_kb * 1024 >= 0.9 * (memory_mb << 20)
    )
    return CommandRunResult(
        status=status,
        execution_time=run.wall_s,
        return_code=-run.signal if run.signal else run.return_code,
        stdout=run.stdout.decode("utf-8", "replace"),
        stderr=run.stderr.decode("utf-8", "replace"),
        memory_limit_exceeded=oom,
        cpu_time=run.cpu_s,
        max_rss_kb=run.max_rss_kb,
        output_truncated=run.truncated,
    )


def _error(
    message: str,
    isolation: str | None = None,
    *,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> JSONBytesResponse:
    body = RunCodeResponse(
        status="SandboxError", message=message, executor_pod_name=_HOST, isolation=isolation
    )
    return JSONBytesResponse(body.model_dump(), status_code=status_code, headers=headers)


async def _enter_when_room(
    stack: contextlib.AsyncExitStack,
    enter: Callable[
        [], contextlib.AbstractContextManager[None] | contextlib.AbstractAsyncContextManager[None]
    ],
    deadline: float,
) -> None:
    """Enter ``enter()`` into ``stack``, retrying while it raises :class:`Overloaded` until ``deadline``
    (monotonic); past it the last Overloaded propagates."""
    while True:
        try:
            cm = enter()
            if isinstance(cm, contextlib.AbstractAsyncContextManager):
                await stack.enter_async_context(cm)
            else:
                stack.enter_context(cm)
            return
        except Overloaded:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            await asyncio.sleep(min(0.1, left))


async def run_code(body: RunCodeRequest, request: Request, deadline: float) -> JSONBytesResponse:
    """Run one program; raises :class:`Overloaded` if no sandbox slot frees before ``deadline``."""
    runtime = getattr(request.app.state, "runtime", None)
    pool: SandboxPool | None = getattr(runtime, "sandbox", None)
    if pool is None or pool.level == "none":
        return _error(pool.message if pool is not None else "the sandbox is not running")
    lang = resolve_language(body.language)
    if lang is None or lang.name not in pool.languages:
        return _error(
            f"unsupported language {body.language!r}; offered: {sorted(pool.languages)}", pool.level
        )
    try:
        # a null content is no file, as in SandboxFusion's restore_files (it wrote an empty file here)
        files = {
            name: base64.b64decode(data, validate=True)
            for name, data in body.files.items()
            if data is not None
        }
    except (binascii.Error, ValueError):
        return _error("files: every value must be base64", pool.level)
    memory_mb = body.memory_limit_MB if body.memory_limit_MB > 0 else pool.limits.memory_mb
    memory_mb = max(64, min(memory_mb, 65536))
    try:
        async with contextlib.AsyncExitStack() as slot:
            await _enter_when_room(slot, lambda: pool.admit(1), deadline)
            report, raw = await pool.run_program(
                language=lang,
                code=body.code,
                stdins=[(body.stdin or "").encode("utf-8", "surrogatepass")],
                compile_timeout_s=body.compile_timeout,
                run_timeout_s=body.run_timeout,
                total_timeout_s=body.run_timeout,
                memory_mb=memory_mb,
                files=files,
                fetch=body.fetch_files,
                wall_clock=True,  # SandboxFusion's timeouts are wall-clock (its clients' budgets are)
            )
    except SandboxUnavailable as exc:
        return _error(str(exc), pool.level)
    if raw.spawn_error is not None or report.error is not None or not report.ready:
        tail = raw.stderr.decode("utf-8", "replace")[-500:]
        return _error(raw.spawn_error or report.error or f"the sandbox failed: {tail}", pool.level)
    out = RunCodeResponse(status="Failed", executor_pod_name=_HOST, isolation=pool.level)
    if report.compile is not None:
        out.compile_result = _command_result(report.compile, memory_mb)
        if not report.compile.ok:
            out.message = "compile error" if report.compile.status != "timeout" else "compile time limit"
            return JSONBytesResponse(out.model_dump())
    run = report.runs.get(0)
    if run is None:
        return _error("the program was not run (total time limit)", pool.level)
    out.run_result = _command_result(run, memory_mb)
    out.status = "Success" if run.ok else "Failed"
    out.files = {
        name: base64.b64encode(data).decode("ascii")
        for name, data in report.files.items()
        if data is not None
    }
    return JSONBytesResponse(out.model_dump())


_DOC: dict[str, Any] = {
    "response_model": RunCodeResponse,
    "responses": ERRORS,
    "summary": "SandboxFusion /run_code (one program, compile + run)",
    "description": __doc__ or "",
}


async def admitted_run_code(
    body: RunCodeRequest,
    request: Request,
    admission: Admission,
    caller: Caller,
    settings: Settings,
) -> JSONBytesResponse:
    """Wait up to ``settings.sandboxfusion_room_wait_s`` for room (admission, then a sandbox slot), then
    504 + ``Retry-After``: the one status verl's client retries (a 429 it takes as a failed call at once,
    a 200 ``SandboxError`` as a failed test case)."""
    deadline = time.monotonic() + settings.sandboxfusion_room_wait_s
    try:
        async with contextlib.AsyncExitStack() as held:
            await _enter_when_room(held, lambda: admission.admit(caller, 1), deadline)
            return await run_code(body, request, deadline)
    except Overloaded as exc:
        return _error(f"overloaded: {exc.message}", status_code=504, headers=exc.headers)


@router.post("/run_code", **_DOC)
async def sandboxfusion_run_code(
    body: RunCodeRequest,
    request: Request,
    admission: AdmissionDep,
    caller: CallerDep,
    settings: SettingsDep,
) -> JSONBytesResponse:
    return await admitted_run_code(body, request, admission, caller, settings)


@alias_router.post("/run_code", **_DOC)
async def run_code_alias(
    body: RunCodeRequest,
    request: Request,
    admission: AdmissionDep,
    caller: CallerDep,
    settings: SettingsDep,
) -> JSONBytesResponse:
    """The same endpoint at SandboxFusion's own path, for clients that append ``/run_code`` to a base URL."""
    return await admitted_run_code(body, request, admission, caller, settings)
