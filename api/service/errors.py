"""Service errors and their one mapping to HTTP: every error body is
``{"message", "field", "value", "accepted"}`` (plus ``errors`` or ``violations``).

Routes raise domain errors (`ProfileError`, `ScheduleInvalid`, `LimitExceeded`,
`QueueFull`, `NotFound`) and hold no try/except; `install_error_handlers` turns them
into responses here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from ppsched.api.service.body_fields import body_fields
from ppsched.api.service.store.base import StoreUnavailable
from ppsched.solver.model import ProfileError, ScheduleInvalid, did_you_mean
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)


class LimitExceeded(ProfileError):
    """A request over one of the service's limits (a setting): 422 naming the limit."""

    def __init__(self, field: str, value: Any, limit: float, setting: str) -> None:
        text = str(limit) if isinstance(limit, int) else f"{limit:g}"
        super().__init__(field, value, f"<= {text} (this service's limit, "
                         f"PPSCHED_{setting.upper()})")
        self.setting = setting


class QueueFull(Exception):
    """No worker or queue slot is free: 503 (synchronous solves) or 429 (jobs)."""

    def __init__(self, what: str, capacity: int, status_code: int, retry_after_s: int) -> None:
        self.what, self.capacity = what, capacity
        self.status_code, self.retry_after_s = status_code, retry_after_s
        super().__init__(f"{what} is full ({capacity} in progress or waiting); retry in "
                         f"{retry_after_s} s")


class WorkerLost(RuntimeError):
    """A worker process died while solving (killed, out of memory): 503, retry."""


class ClientGone(Exception):
    """The client closed its connection before the answer was ready (its work is
    cancelled); answered 499 for the logs, which nobody reads."""


class NotFound(Exception):
    """An id that names no stored schedule or job: 404."""

    def __init__(self, field: str, value: str, accepted: str) -> None:
        self.field, self.value, self.accepted = field, value, accepted
        super().__init__(f"no {field} {value!r}; expected {accepted}")


def error_body(message: str, field: str | None = None, value: Any = None,
               accepted: str | None = None, **extra: Any) -> dict[str, Any]:
    """The JSON of every error response."""
    return {"message": message, "field": field, "value": _jsonable(value),
            "accepted": accepted, **extra}


def invalid_schedule_body(exc: ScheduleInvalid, max_violations: int) -> dict[str, Any]:
    """The 422 body of a schedule that breaks the contract: its first `max_violations`
    violations, their count and the grid (built in a worker process for /v1/simulate)."""
    violations = [{"kind": v.kind, "message": v.message, "rank": v.rank,
                   "position": v.position} for v in exc.violations[:max_violations]]
    return error_body(str(exc), "ranks", None, "a schedule that keeps the DESIGN.md contract",
                      violations=violations, violations_total=len(exc.violations),
                      grid=exc.grid)


def install_error_handlers(app: FastAPI) -> None:
    """Map domain and framework errors to JSON responses (the one place that does)."""

    @app.exception_handler(ProfileError)
    async def _profile(request: Request, exc: ProfileError) -> JSONResponse:
        return JSONResponse(error_body(str(exc), exc.field, exc.value, exc.accepted),
                            status_code=422)

    @app.exception_handler(ScheduleInvalid)
    async def _invalid(request: Request, exc: ScheduleInvalid) -> JSONResponse:
        return JSONResponse(invalid_schedule_body(
            exc, request.app.state.settings.max_violations), status_code=422)

    @app.exception_handler(QueueFull)
    async def _full(request: Request, exc: QueueFull) -> JSONResponse:
        return JSONResponse(error_body(str(exc), None, None, f"a retry after "
                                       f"{exc.retry_after_s} s"),
                            status_code=exc.status_code,
                            headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(ClientGone)
    async def _gone(request: Request, exc: ClientGone) -> JSONResponse:
        return JSONResponse(error_body(str(exc)), status_code=499)

    @app.exception_handler(WorkerLost)
    async def _lost(request: Request, exc: WorkerLost) -> JSONResponse:
        retry = str(request.app.state.settings.retry_after_s)
        return JSONResponse(error_body(str(exc), None, None, "a retry"), status_code=503,
                            headers={"Retry-After": retry})

    @app.exception_handler(StoreUnavailable)
    async def _store_down(request: Request, exc: StoreUnavailable) -> JSONResponse:
        # The database is down or restarting: the client retries; the reason is logged
        # once by the store when it goes down, not per request.
        retry = request.app.state.settings.retry_after_s
        return JSONResponse(error_body("the store is unavailable (its database does not "
                                       f"answer); retry in {retry} s", None, None,
                                       f"a retry after {retry} s"), status_code=503,
                            headers={"Retry-After": str(retry)})

    @app.exception_handler(NotFound)
    async def _missing(request: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse(error_body(str(exc), exc.field, exc.value, exc.accepted),
                            status_code=404)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(validation_body(
            exc.errors(), lambda parents: body_fields(request, parents)), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        field, accepted = None, None
        if exc.status_code == 404:
            field, accepted = "path", "a path listed at /docs"
        elif exc.status_code == 405:
            field, accepted = "method", "a method listed at /docs for this path"
        message = f"{exc.detail}: {request.method} {request.url.path}"
        return JSONResponse(error_body(message, field, request.url.path if field == "path"
                                       else request.method, accepted),
                            status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        # The text of an unexpected exception may carry paths of the installation or
        # other internals: it goes to the log only, the client gets the exception's type.
        return JSONResponse(error_body(f"internal error ({type(exc).__name__}); the "
                                       "service's log has the details"), status_code=500)


def validation_body(errors: Any, fields: Callable[[list[str]], list[str]] | None = None,
                    ) -> dict[str, Any]:
    """A request-validation failure as the error body: the first error in the message,
    every error under ``errors``. `fields` gives the field names accepted beside a
    misspelt one (its parents' names in), for a "did you mean"."""
    items = []
    # A misspelt field is both an unknown field and a missing one: the unknown one, with
    # its "did you mean", says more, so it leads.
    errors = sorted(errors, key=lambda e: e.get("type") != "extra_forbidden")
    for error in errors:
        loc = [str(x) for x in error.get("loc", ()) if x not in ("body", "path", "query")]
        original = (error.get("ctx") or {}).get("error")
        if isinstance(original, ProfileError):
            items.append((original.field, original.value, original.accepted))
            continue
        field = ".".join(loc) or "body"
        kind = error.get("type")
        if kind == "json_invalid":
            where = (error.get("ctx") or {}).get("error", "")
            items.append(("body", "text that is not JSON", f"a JSON object ({where})"))
        elif kind == "missing":
            items.append((field, "nothing (the field is missing)", "a value (required)"))
        elif kind == "extra_forbidden":
            known = fields(loc[:-1]) if fields is not None and loc else []
            hint = did_you_mean(loc[-1], known) if known else ""
            listed = f"the fields are {', '.join(known)}; " if known else ""
            items.append((field, error.get("input"), f"no such field ({hint}{listed}"
                          "see /docs)"))
        else:
            items.append((field, error.get("input"), str(error.get("msg", "a valid value"))))
    if not items:
        items.append(("body", None, "a JSON request body"))
    field, value, accepted = items[0]
    message = str(ProfileError(field, value, accepted))
    if len(items) > 1:
        message += f" (and {len(items) - 1} more error{'s' * (len(items) > 2)})"
    return error_body(message, field, value, accepted,
                      errors=[error_body(str(ProfileError(f, v, a)), f, v, a)
                              for f, v, a in items])


def _jsonable(value: Any) -> Any:
    """A value as JSON can carry it (errors echo what the client sent)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(x) for x in value[:50]]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in list(value.items())[:50]}
    return repr(value)[:200]
