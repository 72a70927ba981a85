"""The HTTP contract beyond what each route declares: every status the service may answer
is in the OpenAPI document (schemathesis found undocumented 400s, and 408, 413 and 503
come from middleware no route knows of), and a 405 names in `Allow` every method the
path has (Starlette named only the first route's: `OPTIONS /v1/jobs/{id}` said GET, the
document GET and DELETE)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from ppsched.api.service.bounded import BODY_MODELS
from ppsched.api.service.config import Settings
from ppsched.api.service.errors import error_body
from ppsched.api.service.pooled_paths import POOLED_POSTS
from ppsched.solver.advisor import STRATEGIES

_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
# Answered to any request with a body, by the framework or the middleware.
_BODY_STATUSES = {
    "400": "A body the framework cannot read (not UTF-8, a broken encoding).",
    "408": "The body did not arrive within PPSCHED_BODY_TIMEOUT_S of the headers; the "
           "connection is closed.",
    "413": "The body is over PPSCHED_MAX_BODY_BYTES.",
    "422": "Invalid input or over a limit (the field, the value and what is accepted are "
           "named).",
}
# Routes that take a worker of the pool (or a job slot) and their refusals.
_POOLED = {
    *(("post", path) for path in POOLED_POSTS),
    ("get", "/v1/schedules/{schedule_id}.svg"), ("get", "/v1/schedules/{schedule_id}.csv"),
    ("get", "/v1/schedules/{schedule_id}/trace"),
}
_FULL = "Every worker busy and the queue full (or its worker died); retry after the " \
        "Retry-After header's seconds."
_JOB_QUEUE = ("post", "/v1/schedules")  # over the synchronous budget: a job, or a 429
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.",
                                "schema": {"type": "integer"}}}


def declare_statuses(schema: dict[str, Any], settings: Settings) -> None:
    """Add to each operation of the OpenAPI `schema` the statuses it may answer and does
    not declare itself, the schemas of the bodies routes read by hand, and this
    service's limits as the schemas' maxima (a request the schema allows is not refused
    for a limit it did not state)."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for model in BODY_MODELS:
        model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(model_schema.pop("$defs", {}))
        components[model.__name__] = model_schema
    _state_limits(components, settings)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            statuses: dict[str, str] = {}
            if "requestBody" in operation:
                statuses.update(_BODY_STATUSES)
            if operation.get("parameters"):
                statuses["422"] = _BODY_STATUSES["422"]
            if (method, path) in _POOLED:
                statuses["503"] = _FULL
            if (method, path) == _JOB_QUEUE:
                statuses["429"] = "The job queue is full (a request over the synchronous " \
                                  "budget becomes a job); retry after Retry-After's seconds."
            for status, description in statuses.items():
                if status not in responses:
                    responses[status] = {"description": description, "content": _ERROR}
                if status in ("429", "503"):
                    responses[status].setdefault("headers", _RETRY_AFTER)


def install_allow(app: FastAPI) -> None:
    """A 405 whose `Allow` lists the methods the OpenAPI document gives the path (every
    route of it, not only the first one the router tried)."""

    @app.exception_handler(405)
    async def _not_allowed(request: Request, exc: Exception) -> JSONResponse:
        # A path no template matches whole (/static/{path} holds slashes): the router's.
        allowed = ", ".join(documented_methods(app.openapi(), request.url.path)) or \
            str((getattr(exc, "headers", None) or {}).get("Allow", ""))
        message = f"Method Not Allowed: {request.method} {request.url.path}"
        return JSONResponse(error_body(message, "method", request.method,
                                       f"a method listed at /docs for this path: {allowed}"),
                            status_code=405, headers={"Allow": allowed})


def documented_methods(schema: dict[str, Any], path: str) -> list[str]:
    """The methods of every documented path template that `path` matches, sorted."""
    methods: set[str] = set()
    for template, operations in schema["paths"].items():
        pattern = re.sub(r"\\\{[^}]*:path\\\}", ".*", re.escape(template))
        pattern = re.sub(r"\\\{[^}]*\\\}", "[^/]+", pattern)
        if re.fullmatch(pattern, path):
            methods |= {m.upper() for m in operations}
    return sorted(methods)


# (component, property, keyword, setting): the limits a schema can state. Only on
# request-only components: Profile is in answers too (/v1/examples holds p=16 profiles
# a service limited to p=8 still lists).
_LIMITS = (
    ("ScheduleRequest", "time_limit_s", "maximum", "max_time_limit_s"),
    ("PackRequest", "lengths", "maxItems", "max_pack_samples"),
    ("PackRequest", "replicas", "maximum", "max_pack_replicas"),
    ("ModelDims", "layers", "maximum", "max_advise_layers"),
    ("Cluster", "num_gpus", "maximum", "max_advise_gpus"),
    ("AdvisorConfig", "num_microbatches", "maximum", "max_advise_microbatches"),
)


def _state_limits(components: dict[str, Any], settings: Settings) -> None:
    for component, prop, keyword, setting in _LIMITS:
        target = components.get(component, {}).get("properties", {}).get(prop)
        if target is not None:
            target[keyword] = getattr(settings, setting)
            if keyword == "maximum" and target.get("default", 0) > target[keyword]:
                target["default"] = target[keyword]  # as the service applies it
    pack = components.get("PackRequest", {}).get("properties", {})
    if "profile" in pack:  # read as a dict, parsed as a Profile
        pack["profile"] = {"$ref": "#/components/schemas/Profile",
                           "description": pack["profile"].get("description", "")}
    advisor = components.get("AdvisorConfig", {}).get("properties", {})
    for name in ("strategies", "recompute"):  # names checked by hand: listed here
        for option in advisor.get(name, {}).get("anyOf", []):
            if option.get("type") == "array":
                option["items"] = {"type": "string", "enum": list(STRATEGIES)}
