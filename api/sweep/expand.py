"""Grid expansion: the cartesian product of profiles and axes, filtered, resolved to tasks.

Each configuration is resolved to a validated profile here, before any work starts, so an
impossible value is refused with its line. Rules (docs/getting-started.md, "Sweeps"):

- `p` of a profile with per-stage lists cannot change (the lists have one value per
  stage); scalars can.
- Order of application: `p`, `m`, field axes (`t_comm: 0.5` sets every boundary), scales
  (`scale.t_f[-1]: 1.5` multiplies the last stage), the memory limit, then `v`/placement
  through `solver.chunking.with_chunks` (the same model cut into `v` chunks per rank).
- A limit `kp` is k times 1F1B's reference memory `p * max(m_b)` of the one-chunk model
  (the same absolute number for every `v`).
- For `v = 1` placement does not apply: those rows are made once, with placement null.
- `microbatch_spread: sigma` gives the profile unequal microbatches (DESIGN.md 6.2): time
  and memory scales of a lognormal spread (`spread_scales`), applied before the memory
  limit, whose `kp` then counts the largest microbatch.
- `offload_ratio: k` (DESIGN.md 6.3) comes last: `t_offload = t_reload = k (t_f + t_b)`
  per stage of the cut model (`solver.offload_sizing.with_offload`); or `host_bandwidth:
  GB/s`, each copy sized from its activation (memory in GiB, times in ms;
  `with_offload_bandwidth`); a row with both is refused. `gpus_per_node: N` puts the ranks
  of each node on one shared host link.
- `recompute_stages: K` runs each named schedule as `NAME+recompute:K` (0: NAME itself);
  a profile that offers no recompute gets `m_ckpt: 0` (so `t_r` defaults to `t_f`).
  `heuristic` and `ilp` choose their own policies: with K > 0 they are refused, naming
  a filter that drops them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import re
import statistics
from dataclasses import dataclass
from typing import Any

from ppsched.api.offload_options import with_offload_options
from ppsched.api.sweep.grid import (
    SCALE_FIELDS,
    SPREAD_AXIS,
    Axis,
    BaseProfile,
    Grid,
    GridError,
    Memory,
)
from ppsched.solver.generators import recompute_name
from ppsched.solver.model import (
    Profile,
    ProfileError,
    parse_profile,
    with_chunks,
)
from ppsched.solver.solving import HEURISTIC, ILP

GIB = 2.0**30  # bytes in the memory unit a host_bandwidth axis assumes

MAX_ROWS = 200_000
_SCALE = re.compile(r"^scale\.(?P<field>[a-z_]+)(?:\[(?P<stage>-?\d+)\])?$")
_LIST_FIELDS = ("t_f", "t_b", "t_w", "t_comm", "m_b", "m_w", "memory_limit")


@dataclass(frozen=True)
class Task:
    """One row to solve: its key, configuration columns, resolved profile and method."""

    key: str
    config: dict[str, Any]
    """Result columns that describe the configuration (profile, p, m, v, ...)."""
    profile: dict[str, Any]
    """The resolved profile as JSON."""
    method: str
    objective: str
    options: dict[str, Any]
    """Options of the method that change its answer (e.g. time_limit_s for ilp)."""


def expand_grid(grid: Grid, *, time_limit_s: float | None = None,
                work_limit: float | None = None) -> list[Task]:
    """The grid's tasks, in product order, one per distinct key. Method ``ilp`` gets the
    time limit (the argument's, else the grid's, else 10 s) or, given a work limit (the
    argument's, else the grid's), that and no wall limit unless one was given.

    Raises:
        GridError: an impossible configuration (naming the line of the value that makes
            it so), more than MAX_ROWS rows, or no rows at all after the filters.
    """
    limit_s = time_limit_s if time_limit_s is not None else grid.time_limit_s
    work = work_limit if work_limit is not None else grid.work_limit
    ilp_options: dict[str, Any] = {"time_limit_s": limit_s or 10.0} if work is None else \
        {"work_limit": work, **({"time_limit_s": limit_s} if limit_s is not None else {})}
    total = len(grid.profiles) * len(grid.methods)
    for axis in grid.axes:
        total *= len(axis.values)
    if total > MAX_ROWS:
        raise GridError(grid.path, None, f"the grid expands to {total} rows before filters; "
                        f"at most {MAX_ROWS}: split it into several grids or shorten axes")
    tasks: dict[str, Task] = {}
    considered = 0
    for base in grid.profiles:
        for values in itertools.product(*(range(len(a.values)) for a in grid.axes)):
            point = {a.name: (a, i) for a, i in zip(grid.axes, values, strict=True)}
            config = _config_columns(base, point)
            rows = []
            for method in grid.methods:
                considered += 1
                names = {**config, "method": method}
                if all(f.keeps(names) for f in grid.filters):
                    rows.append(method)
            if not rows:
                continue
            profile, reference = _resolve(grid, base, point)
            limit = profile.memory_limit
            config["memory_limit"] = limit if isinstance(limit, float) else None
            # The limit as a multiple of 1F1B's reference memory p * max(m_b), for plots.
            config["memory_ratio"] = round(limit / reference, 6) \
                if isinstance(limit, float) and reference > 0 else None
            data = profile.model_dump(mode="json")
            for method in rows:
                method_data, solved = _with_recompute(grid, point, data, method,
                                                      profile.problem.num_stages)
                options = dict(ilp_options) if solved == ILP else {}
                if "v" in point and profile.num_chunks == 1:
                    # A grid that sweeps `v` compares the cuts itself: its v = 1 rows
                    # keep one chunk, where the solver would otherwise also try V and
                    # loop (issue 27) and answer for another row's layout.
                    options["layouts"] = "1"
                key = row_key(method_data, solved, grid.objective, options)
                tasks.setdefault(key, Task(key=key, config=config, profile=method_data,
                                           method=solved, objective=grid.objective,
                                           options=options))
    if not tasks:
        where = grid.filters_line if grid.filters else None
        why = (f"the filters drop all {considered} rows; loosen them" if grid.filters
               else "nothing to solve")
        raise GridError(grid.path, where, f"the grid expands to no rows: {why}")
    return list(tasks.values())


def row_key(profile: dict[str, Any], method: str, objective: str,
            options: dict[str, Any]) -> str:
    """The resume identity of a row: a hash of what determines its answer."""
    blob = json.dumps({"profile": profile, "method": method, "objective": objective,
                       "options": options}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _config_columns(base: BaseProfile, point: dict[str, tuple[Axis, int]]) -> dict[str, Any]:
    profile = base.profile
    value = {name: axis.values[i] for name, (axis, i) in point.items()}
    memory: Memory | None = value.get("memory_limit")
    t_comm = value.get("t_comm", profile.t_comm)
    config: dict[str, Any] = {
        "profile": profile.name or base.path.stem,
        "p": value.get("p", profile.num_ranks),
        "m": value.get("m", profile.num_microbatches),
        "v": value.get("v", 1),
        "placement": value.get("placement"),
        "memory": memory.label if memory else _limit_label(profile.memory_limit),
        "memory_limit": None,  # the absolute limit, known once the profile is resolved
        "memory_ratio": None,
        "t_comm": t_comm if not isinstance(t_comm, list) else None,
    }
    if config["v"] == 1:
        config["placement"] = None
    for name, (axis, i) in point.items():
        if name not in ("p", "m", "v", "placement", "memory_limit", "t_comm"):
            config[axis.column] = axis.values[i]
    return config


def _resolve(grid: Grid, base: BaseProfile, point: dict[str, tuple[Axis, int]],
             ) -> tuple[Profile, float]:
    """The profile of one configuration, validated, and its reference memory `p*max(m_b)`.

    Raises:
        GridError: naming the line of the value that makes the configuration impossible.
    """
    data: dict[str, Any] = base.profile.model_dump(mode="json")
    value = {name: axis.values[i] for name, (axis, i) in point.items()}

    def line_of(name: str) -> int:
        if name in point:
            axis, i = point[name]
            return axis.value_lines[i]
        return base.line

    p = value.get("p", data["num_ranks"])
    memory: Memory | None = value.get("memory_limit")
    if p != data["num_ranks"]:
        verb = "is a per-stage list"
        lists = [f for f in _LIST_FIELDS if isinstance(data[f], list)
                 and f not in value and not (f == "memory_limit" and memory is not None)]
        if lists:
            raise GridError(grid.path, line_of("p"), f"axis 'p': {p} differs from the "
                            f"{data['num_ranks']} ranks of profile {base.path.name}, whose "
                            f"{', '.join(lists)} "
                            f"{verb if len(lists) == 1 else 'are per-stage lists'}; keep p at "
                            f"{data['num_ranks']} for it, or use a profile with scalar values")
    data["num_ranks"] = p
    data["num_microbatches"] = value.get("m", data["num_microbatches"])
    for field in SCALE_FIELDS:
        if field in value:
            data[field] = value[field]
    for name, factor in value.items():
        match = _SCALE.match(name)
        if match:
            _scale(grid, data, match["field"], match["stage"], factor, line_of(name))
    spread = value.get(SPREAD_AXIS, 0.0)
    if spread > 0:
        if data.get("microbatches") or any(
                isinstance(data[f], list) and data[f] and isinstance(data[f][0], list)
                for f in SCALE_FIELDS):
            raise GridError(grid.path, line_of(SPREAD_AXIS), f"axis '{SPREAD_AXIS}': profile "
                            f"{base.path.name} already has per-microbatch values; use a "
                            "profile with alike microbatches")
        data["microbatches"] = [{"scale": x, "memory_scale": x}
                                for x in spread_scales(data["num_microbatches"], spread)]
    try:
        one_chunk = parse_profile({**data, "memory_limit": None})
    except ProfileError as exc:
        raise _impossible(grid, base, point, exc, line_of) from None
    # 1F1B's memory with its largest microbatch in every slot (the largest microbatch's
    # m_b when they differ), so that 1p always fits 1F1B.
    reference = p * max(max(row) for row in one_chunk.problem.m_b_mb)
    if memory is not None:
        if memory.ratio is not None:
            data["memory_limit"] = memory.ratio * reference
        else:
            data["memory_limit"] = memory.absolute
    try:
        profile = parse_profile(data)
        v = value.get("v", 1)
        profile = with_chunks(profile, v, value.get("placement") if v > 1 else None)
        profile = with_offload_options(
            profile, offload_ratio=value.get("offload_ratio"),
            host_bandwidth=value.get("host_bandwidth"), memory_unit_bytes=GIB,
            gpus_per_node=value.get("gpus_per_node"))
    except ProfileError as exc:
        raise _impossible(grid, base, point, exc, line_of) from None
    return profile, reference


def spread_scales(m: int, sigma: float) -> list[float]:
    """`m` microbatch sizes of a lognormal spread `sigma`, deterministic: the distribution's
    quantiles at ``(j + 0.5) / m``, scaled to mean 1, in a fixed shuffled order (seeded by
    `m`, so a sweep's rows are reproducible and the input order is not sorted)."""
    normal = statistics.NormalDist()
    sizes = [math.exp(sigma * normal.inv_cdf((j + 0.5) / m)) for j in range(m)]
    mean = math.fsum(sizes) / m
    sizes = [x / mean for x in sizes]
    random.Random(m).shuffle(sizes)
    return sizes


def _with_recompute(grid: Grid, point: dict[str, tuple[Axis, int]], data: dict[str, Any],
                    method: str, num_stages: int) -> tuple[dict[str, Any], str]:
    """The profile and method of one row under the `recompute_stages` axis (see the
    module docstring); the row as it is without the axis or at 0.

    Raises:
        GridError: K over the model's stages, or K > 0 for heuristic or ilp.
    """
    if "recompute_stages" not in point:
        return data, method
    axis, i = point["recompute_stages"]
    stages = axis.values[i]
    if stages == 0:
        return data, method
    line = axis.value_lines[i]
    if method in (HEURISTIC, ILP):
        raise GridError(grid.path, line, f"axis 'recompute_stages': {stages} applies to "
                        f"named schedules (NAME+recompute:K), not {method!r}, which chooses "
                        "its own policies; add a filter such as \"recompute_stages == 0 or "
                        f"method != '{method}'\"")
    if stages > num_stages:
        raise GridError(grid.path, line, f"axis 'recompute_stages': {stages} is over the "
                        f"{num_stages} stages of the model (p*v); give 0..{num_stages}, or a "
                        "filter that drops the row")
    offers = any(data.get(name) is not None for name in ("t_r", "m_ckpt"))
    return (data if offers else {**data, "m_ckpt": 0.0}), recompute_name(method, stages)


def _scale(grid: Grid, data: dict[str, Any], field: str, stage: str | None, factor: float,
           line: int) -> None:
    current = data[field]
    if stage is None:
        data[field] = ([x * factor for x in current] if isinstance(current, list)
                       else current * factor)
        return
    count = data["num_ranks"] - (1 if field == "t_comm" else 0)
    index = int(stage)
    if not -count <= index < count:
        what = "boundary" if field == "t_comm" else "stage"
        raise GridError(grid.path, line, f"axis 'scale.{field}[{stage}]': {what} {index} does "
                        f"not exist at p = {data['num_ranks']} ({count} {what}s: indices "
                        f"0..{count - 1}, or -1 for the last)")
    values = list(current) if isinstance(current, list) else [current] * count
    values[index] *= factor
    data[field] = values


def _impossible(grid: Grid, base: BaseProfile, point: dict[str, tuple[Axis, int]],
                exc: ProfileError, line_of: Any) -> GridError:
    field = exc.field.split("[")[0]
    axis_of = {"num_ranks": "p", "num_microbatches": "m", "num_chunks": "v",
               "placement": "placement", "memory_limit": "memory_limit"}
    name = axis_of.get(field, field)
    scale = next((n for n in point if n.startswith(f"scale.{field}")), None)
    culprit = name if name in point else scale
    where = line_of(culprit) if culprit else base.line
    values = ", ".join(f"{n}={_show(a.values[i])}" for n, (a, i) in point.items())
    return GridError(grid.path, where, f"the configuration {base.path.name}"
                     f"{' with ' + values if values else ''} is impossible: {exc}; change the "
                     "value or add a filter that drops it")


def _show(x: Any) -> str:
    return x.label if isinstance(x, Memory) else str(x)


def _limit_label(limit: Any) -> str:
    if limit is None:
        return "none"
    if isinstance(limit, list):
        return "per-rank"
    return f"{limit:g}"
