"""JSON request bodies, read one way on every route of the API that takes one.

``POST /v1/score`` reads its raw body with pydantic-core's JSON parser (``model_validate_json``, see
routes/score.py), whatever the ``Content-Type``. A body FastAPI parses for a declared parameter is read
differently: without ``Content-Type: application/json`` (``curl -d`` sends
``application/x-www-form-urlencoded``, a hand-written client may send none) it is not parsed at all and
the route answered 422 "Input should be a valid dictionary"; with it the standard library's parser keeps
a lone surrogate (``"\\ud800"``) and nests as deep as the stack allows, which each route then had to
refuse again by hand. So ``POST /v1/rewards/check`` and ``POST /v1/jobs`` refused a body that
``/v1/score`` took, and answered a broken one with other errors. Every such route now reads its body
through :func:`parse_body`: any ``Content-Type`` is read as JSON, and a body that is not JSON, holds a
lone surrogate or nests deeper than 200 levels is the same 422 ``invalid_request`` everywhere (the size
limit is the app's, :class:`~rewardhub.middleware.BodyLimitMiddleware`).

FastAPI does not see such a body, so the route declares it for the OpenAPI document with
:func:`body_doc`, and :func:`document_bodies` adds the models' schemas to the document's components.

The drop-in routes (``/compat/...``, ``/verify``, ``/run_code``) keep FastAPI's bodies, parsed by the
standard library as their peers' servers parse them (a lone surrogate there is one item's fault, and an
integer past 64 bits stays exact), but their routers are built with :class:`AnyContentTypeJSONRoute`:
FastAPI reads a body as JSON only under a JSON ``Content-Type``, so ``curl -d`` (form type) or a client
sending ``text/plain`` or none was answered 422 "Input should be a valid dictionary" (or "Field
required"). A body that is not JSON is still the app's 422 "Invalid JSON ...".
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import FastAPI, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.models import Schema
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema

__all__ = ["AnyContentTypeJSONRoute", "body_doc", "document_bodies", "json_body", "parse_body"]

M = TypeVar("M", bound=BaseModel)

_REF = "#/components/schemas/{model}"
_DOCUMENTED: dict[str, type[BaseModel]] = {}


def parse_body(model: type[M], raw: bytes) -> M:
    """``raw`` as a ``model``, or the 422 FastAPI would give for a declared body (locations under
    ``body``; the app's handler words it, see :func:`rewardhub.errors.install_error_handlers`)."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def json_body(model: type[M]) -> Callable[[Request], Coroutine[Any, Any, M]]:
    """A dependency reading the request's body as a ``model`` (:func:`parse_body`).

    Declare it after the caller's (``CallerDep``): FastAPI solves a route's dependencies in order, and a
    request without a valid key is answered 401/403 before its body is looked at."""

    async def read(request: Request) -> M:
        return parse_body(model, await request.body())

    return read


class AnyContentTypeJSONRoute(APIRoute):
    """A route whose declared body is read as JSON whatever the request's ``Content-Type`` says (see the
    module's docstring). The request reaches FastAPI's handler as one sent with ``application/json``;
    the route, its dependencies and its document are FastAPI's own."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def as_json(request: Request) -> Response:
            return await handle(_as_json(request))

        return as_json


_JSON = b"application/json"


def _as_json(request: Request) -> Request:
    """``request`` with its ``Content-Type`` (if any) replaced by ``application/json``, unless it is JSON
    already (``application/json; charset=...``, ``application/*+json``: FastAPI reads those)."""
    headers = request.scope["headers"]
    sent = next((v for k, v in headers if k == b"content-type"), None)
    if sent is not None:
        kind = sent.split(b";", 1)[0].strip().lower()
        if kind == _JSON or (kind.startswith(b"application/") and kind.endswith(b"+json")):
            return request
    rest = [(k, v) for k, v in headers if k != b"content-type"]
    # (the body is unread: FastAPI's handler reads it from the same receive channel)
    return Request({**request.scope, "headers": [*rest, (b"content-type", _JSON)]}, request.receive)


def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """The route's ``openapi_extra``: ``model`` as its required JSON body."""
    _DOCUMENTED[model.__name__] = model
    ref = _REF.format(model=model.__name__)
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": ref}}}}}


def document_bodies(app: FastAPI) -> None:
    """Add the schemas of the models named by :func:`body_doc` (and the models they hold) to ``app``'s
    OpenAPI components, where FastAPI put those of the bodies it parses. A model FastAPI documents
    already (one also used elsewhere) keeps FastAPI's schema."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()  # (FastAPI keeps it as app.openapi_schema: completed here in place)
        if _DOCUMENTED:
            _, top = models_json_schema([(m, "validation") for m in _DOCUMENTED.values()], ref_template=_REF)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, definition in top.get("$defs", {}).items():
                # as FastAPI writes its own (through its Schema model, without nulls: `"default": null`
                # left out, `1` written `1.0`), so the document is the one a declared body gave
                written = jsonable_encoder(Schema(**definition), by_alias=True, exclude_none=True)
                components.setdefault(name, written)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
