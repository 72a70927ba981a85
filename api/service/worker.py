"""What runs in worker processes: a synchronous solve, the views, and the pieces of a
job's result (`job_result`; the job's process itself is `job_process.run_job`). Nothing
here touches the network; the store is touched only in a SQLite file, where a
synchronous solve's schedule is looked up and written (`solve_body`,
`schedule_fast_path.answer_request`), which spares the service's main process both.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppsched.solver.model import (
    Profile,
    ProfileError,
    Schedule,
    ScheduleInvalid,
    parse_profile,
)
from ppsched.solver.solving import ExactOptions, Layout, parse_layouts, solve

if TYPE_CHECKING:
    from ppsched.api.service.store.sqlite import SqliteStore

log = logging.getLogger(__name__)


def watch_parent(interval_s: float = 1.0, service_pid: int | None = None) -> None:
    """Exit this worker when the service process that started it is gone (killed, not
    shut down), so no orphan keeps solving for nobody.

    `service_pid`: the service, for a worker that is not its child: a job's process is
    the fork server's, and the fork server outlives the service while any job holds its
    end of the server's pipe, so its parent never changes."""
    parent = os.getppid()

    def _gone() -> bool:
        return os.getppid() != parent if service_pid is None else not _alive(service_pid)

    def _watch() -> None:
        while True:
            time.sleep(interval_s)
            if _gone():
                os._exit(3)

    threading.Thread(target=_watch, name="watch-parent", daemon=True).start()


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: the pid was taken again
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # no /proc: the signal's answer stands
        return True


def serve_calls(conn: Connection) -> None:
    """A pool worker's life: run each (function, args) the pipe brings and send back
    ("ok", result) or ("error", exception); end at None or when the service is gone.
    First the modules of the calls are imported and ("ready", None) sent, so that no
    call's time budget pays for them."""
    watch_parent()
    preload()
    conn.send(("ready", None))
    while True:
        try:
            call = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if call is None:
            return
        fn, args = call
        try:
            reply: tuple[str, Any] = ("ok", fn(*args))
        except Exception as exc:  # handed to the caller, which raises it there
            reply = ("error", exc)
        try:
            conn.send(reply)
        except Exception as exc:  # an exception that does not pickle
            conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))


# The modules whose functions the pool runs (the bounded routes' work, the solver).
PRELOADED = ("ppsched.api.service.bounded", "ppsched.api.service.schedule_fast_path",
             "ppsched.api.service.routers.pack",
             "ppsched.api.service.routers.advise", "ppsched.api.service.routers.checks",
             "ppsched.solver.solving", "ppsched.solver.render")


def preload() -> None:
    """Import the pool's work before the first call (a second or more when loaded)."""
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)


def solve_body(spec: dict[str, Any], key: str, cpsat_workers: int,
               store_path: str | None = None) -> tuple[str, Any, str, bool]:
    """Solve one request into the final response body, so that the service's event loop
    never parses or serialises a schedule: ("ok", body, solver status, stored) with the
    body the schedule JSON of DESIGN.md section 4 plus its id and links; or
    ("profile_error", (field, value, accepted), "", False) or ("invalid", message, "",
    False) for what the solver refuses (exceptions with their own arguments do not cross
    processes whole).

    `store_path`: the service's SQLite file (`Store.shared_path`), where the body is
    written under `key` here, off the main process (its write of a 100 KB body is about
    half a millisecond of the main process's CPU per request); `stored` says whether it
    was. Any failure to write leaves it to the service, which meets the same error and
    answers it as it always has (503 for a busy store)."""
    return finished_body(solve_json(spec, cpsat_workers), key, store_path)


def finished_body(solved: tuple[str, Any], key: str,
                  store_path: str | None) -> tuple[str, Any, str, bool]:
    """`solve_body`'s answer from `solve_json`'s: the body with its id and links, written
    into the SQLite file at `store_path` when one is given."""
    outcome, payload = solved
    if outcome != "ok":
        return outcome, payload, "", False
    schedule = json.loads(payload)
    status = str((schedule.get("solver") or {}).get("status", "unknown"))
    body = body_with_links(schedule, key)
    return "ok", body, status, store_path is not None and _stored(store_path, key, body)


_STORES: dict[str, SqliteStore] = {}
"""This worker's connections to the service's SQLite file, opened at its first use (a
lookup or a write) and kept for the life of the process."""


def shared_store(path: str) -> SqliteStore:
    """This worker's connection to the service's SQLite file at `path`, opened at its
    first use (a `SqliteStore`)."""
    from ppsched.api.service.store.sqlite import SqliteStore

    store = _STORES.get(path)
    if store is None:
        store = _STORES[path] = SqliteStore(Path(path))
    return store


def _stored(path: str, key: str, body: str) -> bool:
    try:
        shared_store(path).put_schedule(key, body)
    except Exception as exc:  # the service writes it, and answers the error if it recurs
        log.warning("the worker could not store schedule %s (%s: %s); the service will",
                    key, type(exc).__name__, exc)
        return False
    return True


def body_with_links(schedule: dict[str, Any], schedule_id: str) -> str:
    """The stored body: the schedule JSON with its id and links at the top."""
    return json.dumps({"id": schedule_id, "links": schedule_links(schedule_id), **schedule},
                      separators=(",", ":"))


def schedule_links(schedule_id: str) -> dict[str, str]:
    base = f"/v1/schedules/{schedule_id}"
    return {"self": base, "svg": f"{base}.svg", "csv": f"{base}.csv", "trace": f"{base}/trace"}


VIEWS = ("svg", "csv", "trace")


def render_view(body: str, kind: str) -> str:
    """A stored schedule body drawn as `kind` (svg, csv or trace), in a worker process:
    drawing 10^5 ops takes seconds and would hold the service's GIL."""
    from ppsched.solver.model import parse_schedule
    from ppsched.solver.render import render_svg, render_torch_csv, render_trace

    schedule = parse_schedule(json.loads(body))
    if schedule.ops_encoding is not None:
        # Compact ranks hold no times: the views draw the simulator's.
        from ppsched.solver.sim import schedule_from_orders

        schedule = schedule_from_orders(schedule.profile, schedule.orders(), schedule.method,
                                        microbatch_order=schedule.microbatch_order)
    if kind == "svg":
        return render_svg(schedule)
    if kind == "csv":
        return render_torch_csv(schedule)
    assert kind == "trace", kind
    return json.dumps(render_trace(schedule))


def solve_json(spec: dict[str, Any], cpsat_workers: int) -> tuple[str, Any]:
    """Solve one request: ("ok", schedule JSON of DESIGN.md section 4), or
    ("profile_error", (field, value, accepted)) or ("invalid", message) for what the
    solver refuses."""
    try:
        profile = parse_profile(spec["profile"])
    except ProfileError as exc:
        return "profile_error", (exc.field, _plain(exc.value), exc.accepted)
    return solve_profile_json(profile, spec, cpsat_workers)


def solve_profile_json(profile: Profile, spec: dict[str, Any],
                       cpsat_workers: int) -> tuple[str, Any]:
    """`solve_json` for a profile already parsed from ``spec["profile"]``."""
    try:
        options = ExactOptions(backend=spec["backend"], time_limit_s=spec["time_limit_s"],
                               work_limit=spec.get("work_limit"), workers=cpsat_workers)
        schedule = solve(profile, spec["method"], spec["objective"], exact=options,
                         layouts=layouts_of(spec))
    except ProfileError as exc:
        return "profile_error", (exc.field, _plain(exc.value), exc.accepted)
    except ScheduleInvalid as exc:
        return "invalid", str(exc)
    return "ok", schedule_json(schedule, spec)


def schedule_json(schedule: Schedule, spec: dict[str, Any]) -> str:
    """The schedule's JSON as the request asked: DESIGN.md section 4's, or with compact
    ranks (`Schedule.compact_dump`)."""
    if spec.get("compact"):
        return json.dumps(schedule.compact_dump())
    return schedule.model_dump_json()


def layouts_of(spec: dict[str, Any]) -> tuple[Layout, ...]:
    text = spec.get("layouts") or ""
    return parse_layouts(text) if text else ()


def _plain(value: Any) -> Any:
    return value if isinstance(value, int | float | str | list | dict | None) else repr(value)


def content_id(schedule_json: str) -> str:
    """The id of a schedule that answers no request (a cancelled job's best, a simulated
    schedule): the hash of its own content."""
    return "s" + hashlib.sha256(schedule_json.encode()).hexdigest()[:31]


JobResult = tuple[str, str, str, str, float | None, float | None]
"""(body under the request's key, content id, body under it, status, objective, bound)."""


def job_result(schedule_json: str, key: str) -> JobResult:
    """What a job's process hands back for a schedule, ready to store, so the service
    never parses it: (body under the request's key, its content id, body under that id,
    solver status, objective, bound). The body under the key answers the request (a
    finished job); the one under the content id answers nothing (a checkpoint, a
    cancelled job's best)."""
    schedule = json.loads(schedule_json)
    solver = schedule.get("solver") or {}
    cid = content_id(schedule_json)
    objective = float(solver["objective"]) if solver else None
    bound = float(solver["bound"]) if solver else None
    return (body_with_links(schedule, key), cid, body_with_links(schedule, cid),
            str(solver.get("status", "unknown")), objective, bound)
