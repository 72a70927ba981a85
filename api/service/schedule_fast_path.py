"""POST /v1/schedules from its bytes: the request's body goes to a worker as it came, and
the worker does what the route would do in the service's main process (the JSON decode,
the request's validation, the profile's parse, the content key, the store lookup) before
it solves, so the profile is parsed once, in the worker, and the main process only moves
bytes (issue 29: main-process CPU per uncached request at most 1.5 ms).

Measured before, with the route doing it all in the main process (an in-process ASGI
loop, gpt1.5b-p8-m32 with distinct t_f, CPU per request): the route's validation 0.37 ms,
`spec_and_profile` 0.38 ms, the key and the store lookup 0.13 ms, the pool's round trip
0.59 ms; 2.0 ms in all.

Only what the route answers 200 from a synchronous solve or the store takes this path.
Anything else (an invalid request, a limit, a job, an error of the solver, a store
without a file the worker can open: PostgreSQL, an in-memory SQLite) is handed to the
route with the same bytes, which answers it as it always has: the worker says so
(`ROUTE`) instead of answering. The answers are the route's, byte for byte: the same
body, id and headers (`X-Cache`, `X-Ppsched-Warning`).

Concurrent requests with the same bytes share one solve (the route's single-flight is by
content key; here it is by the bytes' digest, which the answer memo uses too).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ppsched.api.service.answer_memo import ANSWER_KEY, digest_of
from ppsched.api.service.asgi_body import read_whole, replayed
from ppsched.api.service.config import Settings
from ppsched.api.service.flight import SingleFlight
from ppsched.api.service.routers.schedules import WARNING_HEADER, router
from ppsched.api.service.schemas import ScheduleRequest
from ppsched.api.service.solving import is_synchronous, spec_and_profile
from ppsched.api.service.tenants import scoped_by
from ppsched.api.service.worker import finished_body, shared_store, solve_profile_json
from ppsched.solver.model import shape_warnings
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

PATH = router.prefix
# The route this path stands in for: the router's match, which the metrics label by.
_POST_ROUTE = next(route for route in router.routes
                   if getattr(route, "path", None) == PATH
                   and "POST" in getattr(route, "methods", ()))
ROUTE = ("route",)
"""The worker's answer for a request the route answers itself."""
_JSON = "application/json"
_DEFAULT_TIME_LIMIT_S = float(ScheduleRequest.model_fields["time_limit_s"].default)


def time_budget_s(settings: Settings) -> float:
    """The pool's time budget for a request on this path: the route's budget (the call's
    budget plus the request's time limit) for the longest time limit a synchronous
    request has by default or for ilp. A request whose time limit is longer goes to the
    route (the worker sees its limit; `answer_request`)."""
    return settings.call_time_budget_s + max(settings.sync_time_limit_s,
                                             min(_DEFAULT_TIME_LIMIT_S,
                                                 settings.max_time_limit_s))


def answer_request(body: bytes, scope: bytes, settings: Settings, cpsat_workers: int,
                   store_path: str, budget_s: float) -> tuple[Any, ...]:
    """In a worker: a schedule request's bytes answered as the route answers them, or
    `ROUTE` for one the route must answer itself.

    Returns ("hit", key, warning, body) for a schedule the store has; ("ok", key, warning,
    body, method, solver status, stored) for one solved here (`stored`: written into the
    store's file); `ROUTE` otherwise. `warning` is the X-Ppsched-Warning value or None."""
    try:
        request = ScheduleRequest.model_validate(json.loads(body))
        spec, profile = spec_and_profile(request, settings)
    except Exception:  # the route names what is wrong (its 422), as it always has
        return ROUTE
    spec = scoped_by(spec, scope)
    if not is_synchronous(spec, settings) or \
            settings.call_time_budget_s + spec.time_limit_s > budget_s + 1e-9:
        return ROUTE  # a job, or a longer budget than the pool's call was given
    warnings = shape_warnings(profile)
    warning = "; ".join(warnings) if warnings else None
    key = spec.key
    try:
        stored = shared_store(store_path).get_schedule(key)
    except Exception:  # a busy or broken store: the route meets it and answers it
        return ROUTE
    if stored is not None:
        return "hit", key, warning, stored
    solved = solve_profile_json(profile, spec.to_dict(), cpsat_workers)
    outcome, payload, status, written = finished_body(solved, key, store_path)
    if outcome != "ok":
        return ROUTE  # the route solves again and answers the solver's refusal
    return "ok", key, warning, payload, spec.method, status, written


class ScheduleFastPath:
    """ASGI middleware in front of POST /v1/schedules (inside the answer memo)."""

    def __init__(self, app: ASGIApp, state: Any, handlers: dict[Any, Any]) -> None:
        self.app, self.state, self._handlers = app, state, handlers
        self._flights: SingleFlight[tuple[Any, ...]] = SingleFlight()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != PATH \
                or not _is_json(scope) or self.state.store.shared_path is None:
            await self.app(scope, receive, send)
            return
        body, cut = await read_whole(receive)
        if cut is not None:  # the client went away mid-body: the route meets it as before
            await self.app(scope, replayed(body, cut, receive), send)
            return
        caller = (scope.get("state") or {}).get("caller")
        secret = bytes(getattr(caller, "scope", b"") or b"")
        flight = digest_of(scope, body).hex()
        try:
            reply = await self._flights.run(flight, lambda: self._solve(body, secret),
                                            receive)
        except Exception as exc:  # the pool's refusals and losses, the store's
            await self._answer_error(scope, receive, send, exc)
            return
        if reply == ROUTE:
            await self.app(scope, replayed(body, None, receive), send)
            return
        hit = reply[0] == "hit"
        key, warning, text = reply[1], reply[2], reply[3]
        (self.state.metrics.cache_hits if hit else self.state.metrics.cache_misses).inc()
        scope["route"] = _POST_ROUTE  # as the router sets it: the metrics' label
        # What these bytes answer, for the next identical request (`answer_memo`).
        scope.setdefault("state", {})[ANSWER_KEY] = (key, warning)
        headers = {"X-Cache": "hit" if hit else "miss"}
        if warning:
            headers[WARNING_HEADER] = warning
        await Response(text, media_type=_JSON, headers=headers)(scope, receive, send)

    async def _solve(self, body: bytes, secret: bytes) -> tuple[Any, ...]:
        """One worker call for these bytes (shared by identical concurrent requests);
        a solve the worker could not write into the store is written here."""
        state = self.state
        settings, store = state.settings, state.store
        budget = time_budget_s(settings)
        reply: tuple[Any, ...] = await state.pool.run(
            answer_request, body, secret, settings, settings.cpsat_workers,
            store.shared_path, budget, timeout_s=budget)
        if reply[0] == "ok":
            _, key, _, text, method, status, written = reply
            if not written:
                await asyncio.to_thread(store.put_schedule, key, text)
            state.metrics.solves.labels(method, status).inc()
        return reply

    async def _answer_error(self, scope: Scope, receive: Receive, send: Send,
                            exc: Exception) -> None:
        """The app's own answer to `exc` (errors.py's handlers): this middleware sits
        outside the app's exception middleware, so it looks the handler up itself."""
        handler = next((self._handlers[kind] for kind in type(exc).__mro__
                        if kind in self._handlers), None)
        if handler is None:
            raise exc
        response = await handler(Request(scope, receive), exc)
        await response(scope, receive, send)


def _is_json(scope: Scope) -> bool:
    """Whether the request says its body is JSON (what the route reads as JSON too);
    other bodies go to the route, which answers them."""
    value = next((v for k, v in scope["headers"] if k == b"content-type"), None)
    return value is not None and value.split(b";", 1)[0].strip().lower() == b"application/json"
