"""Bounded calls: a CPU-heavy route (pack, advise, simulate, validate) hands its request's
bytes to the worker pool, where they are parsed, checked against the size limits and
worked on; the event loop only moves bytes. The call runs within the time budget
(PPSCHED_CALL_TIME_BUDGET_S: past it the worker is killed and replaced) and is cancelled
when its client disconnects (the pool replaces the worker of a cancelled call). Admission
(admission.py) refuses these routes with a 503 before their body is read when the pool
is full.

Measured before (issue 29): a 0.29 MB /v1/pack ran 11 minutes in the main process after
its client left, /healthz taking up to 7.1 s; a 1.86 MB schedule took 5.5 s of
/v1/simulate parsing on the event loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Request, Response
from ppsched.api.service.config import Settings
from ppsched.api.service.deps import ServiceState
from ppsched.api.service.errors import error_body, invalid_schedule_body
from ppsched.api.service.flight import unless_disconnected
from ppsched.api.service.schemas import ErrorBody
from ppsched.solver.model import ProfileError, ScheduleInvalid, did_you_mean
from pydantic import BaseModel, ValidationError

# The work a route hands to a worker: the parsed body and the limits in, the response's
# JSON out (with the id to store it under, for a simulated schedule).
Work = Callable[[Any, Settings], str | tuple[str, str]]
Body = TypeVar("Body", bound=BaseModel)
# The tags pydantic puts in an error's location for the member of a union it tried.
_UNION_TAGS = frozenset({"int", "float", "str", "list[int]", "none"})
# What comes back from the worker: (status, JSON body, id to store the body under).
Answer = tuple[int, str, str | None]

POOLED_ERRORS: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": "Invalid input, over a size limit (the field, "
          "the value and the PPSCHED_ setting are named) or past the time budget "
          "(PPSCHED_CALL_TIME_BUDGET_S)."},
    503: {"model": ErrorBody, "description": "Every worker busy and the queue full (or "
          "the worker died); retry after the Retry-After header's seconds."},
}

# Request-body models the routes read by hand (their schemas join the OpenAPI
# components: contract.py).
BODY_MODELS: list[type[BaseModel]] = []


def request_body(model: type[BaseModel] | None, description: str,
                 examples: dict[str, Any]) -> dict[str, Any]:
    """`openapi_extra` documenting a body the route reads as bytes: `model`'s schema (any
    JSON object when None), its description and examples."""
    schema: dict[str, Any] = {"type": "object"}
    if model is not None:
        BODY_MODELS.append(model)
        schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "description": description, "content": {
        "application/json": {"schema": schema, "examples": examples}}}}


async def run_bounded(http: Request, state: ServiceState, work: Work) -> Response:
    """Read the body, run `work` on it in the pool (budgeted, cancelled on disconnect),
    store what it asks to store, and answer its JSON."""
    body = await http.body()
    settings = state.settings
    status, text, key = await unless_disconnected(http, state.pool.run(
        answer, work, body, settings, timeout_s=settings.call_time_budget_s))
    if key is not None:
        await asyncio.to_thread(state.store.put_schedule, key, text)
    return Response(text, status_code=status, media_type="application/json")


def answer(work: Work, body: bytes, settings: Settings) -> Answer:
    """In a worker process: the body parsed and `work` done, as (status, JSON, key); a
    refused request is its 422 error body (exceptions with their own arguments do not
    cross processes whole)."""
    try:
        data = parse_json(body)
        done = work(data, settings)
    except ProfileError as exc:
        return 422, json.dumps(error_body(str(exc), exc.field, exc.value, exc.accepted)), None
    except ScheduleInvalid as exc:
        return 422, json.dumps(invalid_schedule_body(exc, settings.max_violations)), None
    except ValidationError as exc:
        # A model built from values the work derived (the advisor's profiles of a cluster
        # whose links are 5e-324 Gb/s: infinite times): the request's values are the
        # cause. Was a 500 (schemathesis).
        return 422, json.dumps(_derived_error(exc)), None
    except ArithmeticError as exc:
        # Extreme values the schema allows (act_bytes_per_token_hidden = 5e-324 divides
        # by zero in the advisor's sensitivity probe; schemathesis found it): the
        # request's values are the cause, so a 422, not a 500. The exact field is the
        # solver's to name (a fix there is better; this is the net).
        return 422, json.dumps(error_body(
            f"the request's values make the computation fail ({type(exc).__name__}: "
            f"{exc})", "body", None, "values within the ranges a real cluster and model "
            "have (no denormal or overflowing numbers)")), None
    except MemoryError:
        # Values that ask a worker for more memory than it has (schemathesis: a 500).
        return 422, json.dumps(error_body(
            "the request needs more memory than a worker has", "body", None,
            "smaller values (sizes, counts)")), None
    if isinstance(done, tuple):
        return 200, done[0], done[1]
    return 200, done, None


def _derived_error(exc: ValidationError) -> dict[str, Any]:
    error = exc.errors()[0]
    inner = (error.get("ctx") or {}).get("error")
    if isinstance(inner, ProfileError):
        message = f"the request's values make an invalid {exc.title}: {inner}"
        return error_body(message, inner.field, inner.value, inner.accepted)
    return error_body(f"the request's values make an invalid {exc.title}: {error['msg']}",
                      "body", None, "values within the ranges a real cluster has")


def parse_json(body: bytes) -> Any:
    """The body as JSON, or a ProfileError naming it as FastAPI's own 422 does."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProfileError("body", "text that is not JSON", f"a JSON object ({exc})") from None


def parse_request(model: type[Body], data: Any, shape: str) -> Body:
    """In a worker process: the decoded body validated as `model`, or a ProfileError for
    its first error, naming the field (``lengths[4]``, ``cost.a``) as the service's
    422s do. An unknown field leads, with a "did you mean" over the model's fields (a
    misspelt field is also a missing one). `shape` says what a body is, for a body that
    is not an object."""
    if not isinstance(data, dict):
        raise ProfileError("body", data, f"a JSON object with {shape}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = sorted(exc.errors(), key=lambda e: e.get("type") != "extra_forbidden")[0]
        named = (error.get("ctx") or {}).get("error")
        if isinstance(named, ProfileError):  # a validator's own error, its field named
            raise named from None
        loc = [x for x in error["loc"] if x not in _UNION_TAGS]
        field = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in loc)[1:]
        accepted = str(error["msg"])
        if error["type"] == "missing":
            accepted = "a value (required)"
        elif error["type"] == "extra_forbidden" and len(loc) == 1:
            accepted = (did_you_mean(str(loc[0]), model.model_fields)
                        + "no such field: the fields are " + ", ".join(model.model_fields))
        raise ProfileError(field or "body", error.get("input"), accepted) from None
