"""The grid file of `ppsched sweep`: YAML read with line numbers, checked field by field.

A grid names base profiles, the methods to run, the axes to vary and optional filters;
`load_grid` returns a `Grid` or raises `GridError` naming the line and the fix, before
any work starts. Expansion into configurations is `api.sweep.expand`.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from ppsched.api.sweep.filters import Filter, compile_filter
from ppsched.solver.model import Profile, ProfileError, load_profile
from ppsched.solver.solving import OBJECTIVES, methods, resolve_method

TOP_LEVEL = ("profiles", "methods", "axes", "filters", "objective", "time_limit_s",
             "work_limit")
FIELD_AXES = ("t_f", "t_b", "t_w", "t_comm", "m_b", "m_w")
"""Axes that set a profile field to one number on every stage (or boundary)."""
SCALE_FIELDS = ("t_f", "t_b", "t_w", "t_comm", "m_b", "m_w")
SPREAD_AXIS = "microbatch_spread"
"""Unequal microbatches (DESIGN.md 6.2): the sigma of their lognormal sizes (0: alike)."""
POLICY_AXES = ("offload_ratio", "host_bandwidth", "gpus_per_node", "recompute_stages")
"""Activation policies (DESIGN.md 6.3): offload at a time ratio k or over a host link of
so many GB/s (memory in GiB, times in ms), the ranks of each node sharing one host link,
or the first K stages of a named schedule recomputed (api.sweep.expand applies them)."""
NAMED_AXES = ("p", "m", "v", "placement", "memory_limit", *FIELD_AXES, SPREAD_AXIS,
              *POLICY_AXES)
AXIS_HELP = ("p, m, v, placement, memory_limit, t_f, t_b, t_w, t_comm, m_b, m_w, "
             f"{SPREAD_AXIS}, offload_ratio, host_bandwidth, gpus_per_node, recompute_stages, "
             "scale.FIELD and scale.FIELD[STAGE] (FIELD one of t_f, t_b, t_w, t_comm, m_b, m_w)")
_SCALE = re.compile(r"^scale\.(?P<field>[a-z_]+)(?:\[(?P<stage>-?\d+)\])?$")
_MULTIPLE = re.compile(r"^(?P<k>\d+(?:\.\d+)?|\.\d+)\s*p$")


class GridError(ValueError):
    """A grid file that cannot be swept; the message names the file, the line and the fix."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        where = f"{path}, line {line}" if line else str(path)
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Memory:
    """One value of the `memory_limit` axis: absolute, a multiple of `p*m_b`, or none."""

    label: str
    """As written: '1.5p', '12', 'none'."""
    ratio: float | None = None
    """k of 'kp': the limit is k times 1F1B's reference memory `p * max(m_b)`."""
    absolute: float | None = None
    """A limit in the profile's memory unit."""


@dataclass(frozen=True)
class Axis:
    """One axis of the grid: its name, values, and the lines they were written on."""

    name: str
    values: tuple[Any, ...]
    line: int
    value_lines: tuple[int, ...]

    @property
    def column(self) -> str:
        """The axis as a result column and a filter name: 'scale.t_f[-1]' -> 'scale_t_f_1'."""
        return re.sub(r"[^0-9A-Za-z_]+", "_", self.name).strip("_")


@dataclass(frozen=True)
class BaseProfile:
    """A base profile named by the grid, loaded and validated."""

    path: Path
    profile: Profile
    line: int


@dataclass(frozen=True)
class Grid:
    """A checked grid file."""

    path: Path
    profiles: tuple[BaseProfile, ...]
    methods: tuple[str, ...]
    methods_line: int
    axes: tuple[Axis, ...]
    filters: tuple[Filter, ...]
    filters_line: int | None
    objective: str = "cost"
    time_limit_s: float | None = None
    """Seconds for method `ilp` (the CLI's --time-limit overrides it)."""
    work_limit: float | None = None
    """A reproducible budget for method `ilp`: CP-SAT deterministic time (`ExactOptions`;
    the CLI's --work-limit overrides it)."""

    def axis(self, name: str) -> Axis | None:
        return next((a for a in self.axes if a.name == name), None)


def load_grid(path: str | Path) -> Grid:
    """Read and check a grid file.

    Raises:
        GridError: unreadable file, bad YAML, unknown key or axis, a value an axis does not
            accept, a profile that does not load; the message names the line.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise GridError(path, None, f"cannot read the grid file ({exc.strerror})") from None
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise GridError(path, mark.line + 1 if mark else None,
                        f"not valid YAML ({problem})") from None
    if not isinstance(data, dict) or node is None:
        raise GridError(path, 1, "expected a mapping with the keys " + ", ".join(TOP_LEVEL))
    return _GridReader(path, node).read(data)


class _GridReader:
    """Checks the decoded YAML against the grid schema, with the composed nodes for lines."""

    def __init__(self, path: Path, root: yaml.Node) -> None:
        self.path = path
        self.root = root

    def fail(self, line: int | None, message: str) -> GridError:
        return GridError(self.path, line, message)

    def read(self, data: dict[str, Any]) -> Grid:
        lines = _key_lines(self.root)
        for key in data:
            if key not in TOP_LEVEL:
                raise self.fail(lines.get(key), f"unknown key {key!r}"
                                f"{_did_you_mean(key, TOP_LEVEL)}; the keys are "
                                + ", ".join(TOP_LEVEL))
        for key in ("profiles", "methods"):
            if key not in data:
                raise self.fail(None, f"missing key {key!r}: add `{key}: [...]` (the keys are "
                                f"{', '.join(TOP_LEVEL)})")
        profiles = self._profiles(data["profiles"], self._child("profiles"), lines["profiles"])
        methods_, methods_line = self._methods(data["methods"], self._child("methods"),
                                               lines["methods"])
        axes = self._axes(data.get("axes") or {}, self._child("axes"), lines.get("axes"))
        filters = self._filters(data.get("filters") or [], self._child("filters"),
                                lines.get("filters"), axes)
        objective = data.get("objective", "cost")
        if objective not in OBJECTIVES:
            raise self.fail(lines.get("objective"), f"objective {objective!r} is not one of "
                            f"{', '.join(OBJECTIVES)}")
        limit = data.get("time_limit_s")
        if limit is not None and (not _is_number(limit) or not limit > 0):
            raise self.fail(lines.get("time_limit_s"), f"time_limit_s {limit!r}: expected a "
                            "number of seconds > 0 (for method ilp)")
        work = data.get("work_limit")
        if work is not None and (not _is_number(work) or not 0 < work < math.inf):
            raise self.fail(lines.get("work_limit"), f"work_limit {work!r}: expected a finite "
                            "number > 0 (CP-SAT deterministic seconds, for method ilp)")
        return Grid(path=self.path, profiles=profiles, methods=methods_,
                    methods_line=methods_line, axes=axes, filters=filters,
                    filters_line=lines.get("filters"), objective=str(objective),
                    time_limit_s=float(limit) if limit is not None else None,
                    work_limit=float(work) if work is not None else None)

    def _child(self, key: str) -> yaml.Node | None:
        assert isinstance(self.root, yaml.MappingNode)
        for k, v in self.root.value:
            if k.value == key:
                return v
        return None

    def _profiles(self, value: Any, node: yaml.Node | None, line: int) -> tuple[BaseProfile, ...]:
        items, item_lines = _as_list(value, node, line)
        if not items:
            raise self.fail(line, "profiles is empty: name at least one profile JSON file "
                            "(a path relative to the grid file)")
        out = []
        for item, item_line in zip(items, item_lines, strict=True):
            if not isinstance(item, str):
                raise self.fail(item_line, f"profile {item!r}: expected a path to a profile "
                                "JSON file, relative to the grid file")
            path = (self.path.parent / item) if not Path(item).is_absolute() else Path(item)
            try:
                profile = load_profile(path)
            except ProfileError as exc:
                raise self.fail(item_line, f"profile {item}: {exc}") from None
            if profile.num_chunks != 1:
                raise self.fail(item_line, f"profile {item} has num_chunks = "
                                f"{profile.num_chunks}; give the one-chunk profile and sweep "
                                "the 'v' and 'placement' axes")
            out.append(BaseProfile(path=path, profile=profile, line=item_line))
        return tuple(out)

    def _methods(self, value: Any, node: yaml.Node | None, line: int) -> tuple[tuple[str, ...],
                                                                             int]:
        items, item_lines = _as_list(value, node, line)
        known = methods()
        if not items:
            raise self.fail(line, "methods is empty: name at least one of " + ", ".join(known))
        resolved = []
        for item, item_line in zip(items, item_lines, strict=True):
            try:  # our names, and torch's schedule names (solver/solving/method_names.py)
                resolved.append(resolve_method(str(item), known))
            except ProfileError as exc:
                raise self.fail(item_line, f"unknown method {item!r}"
                                f"{_did_you_mean(str(item), known)}; expected "
                                f"{exc.accepted}") from None
        return tuple(dict.fromkeys(resolved)), line

    def _axes(self, value: Any, node: yaml.Node | None, line: int | None) -> tuple[Axis, ...]:
        if not isinstance(value, dict) or not isinstance(node, (yaml.MappingNode, type(None))):
            raise self.fail(line, "axes: expected a mapping of axis name -> list of values, "
                            "e.g. `p: [4, 8]`")
        lines = _key_lines(node) if node is not None else {}
        value_nodes = {k.value: v for k, v in node.value} if node is not None else {}
        axes = []
        for name, raw in value.items():
            axis_line = lines.get(name, line or 1)
            if not _known_axis(str(name)):
                raise self.fail(axis_line, f"unknown axis {name!r}"
                                f"{_did_you_mean(str(name), NAMED_AXES)}; the axes are "
                                + AXIS_HELP)
            items, item_lines = _as_list(raw, value_nodes.get(name), axis_line)
            if not items:
                raise self.fail(axis_line, f"axis {name!r} has no values: give a list such "
                                "as [1, 2], or remove the axis")
            checked = tuple(self._axis_value(str(name), x, ln)
                            for x, ln in zip(items, item_lines, strict=True))
            axes.append(Axis(name=str(name), values=checked, line=axis_line,
                             value_lines=tuple(item_lines)))
        names = {a.name for a in axes}
        v_axis = next((a for a in axes if a.name == "v"), None)
        if v_axis and any(x > 1 for x in v_axis.values) and "placement" not in names:
            raise self.fail(v_axis.line, "axis 'v' has values > 1 but there is no "
                            "'placement' axis: add `placement: [loop]` (or [v], or both)")
        return tuple(axes)

    def _axis_value(self, name: str, x: Any, line: int) -> Any:
        if name in ("p", "m", "v"):
            if not isinstance(x, int) or isinstance(x, bool) or x < 1:
                raise self.fail(line, f"axis {name!r}: {x!r} is not an integer >= 1")
            return x
        if name == "gpus_per_node":
            if not isinstance(x, int) or isinstance(x, bool) or x < 1:
                raise self.fail(line, f"axis 'gpus_per_node': {x!r} is not an integer >= 1")
            return x
        if name == "host_bandwidth":
            if not _is_number(x) or not x > 0 or not math.isfinite(x):
                raise self.fail(line, f"axis 'host_bandwidth': {x!r} is not a bandwidth > 0 "
                                "(GB/s)")
            return float(x)
        if name == "recompute_stages":
            if not isinstance(x, int) or isinstance(x, bool) or x < 0:
                raise self.fail(line, f"axis 'recompute_stages': {x!r} is not an integer "
                                ">= 0 (how many stages, from the first, are recomputed)")
            return x
        if name == "placement":
            if x not in ("loop", "v"):
                raise self.fail(line, f"axis 'placement': {x!r} is not 'loop' or 'v'")
            return x
        if name == "memory_limit":
            return self._memory(x, line)
        scale = _SCALE.match(name)
        if scale:
            if not _is_number(x) or not x > 0 or not math.isfinite(x):
                raise self.fail(line, f"axis {name!r}: {x!r} is not a factor > 0")
            return float(x)
        if not _is_number(x) or x < 0 or not math.isfinite(x):
            raise self.fail(line, f"axis {name!r}: {x!r} is not a number >= 0")
        return float(x)

    def _memory(self, x: Any, line: int) -> Memory:
        if x is None or (isinstance(x, str) and x.strip().lower() in ("none", "null")):
            return Memory(label="none")
        if _is_number(x):
            if not x > 0 or not math.isfinite(x):
                raise self.fail(line, f"axis 'memory_limit': {x!r} is not a number > 0; "
                                "give a number, a multiple of p*m_b such as 1.5p, or none")
            return Memory(label=f"{x:g}", absolute=float(x))
        match = _MULTIPLE.match(x.strip()) if isinstance(x, str) else None
        if not match or not float(match["k"]) > 0:
            raise self.fail(line, f"axis 'memory_limit': {x!r} is not a number > 0, a "
                            "multiple of p*m_b such as 1p or 1.5p, or none")
        k = float(match["k"])
        return Memory(label=f"{k:g}p", ratio=k)

    def _filters(self, value: Any, node: yaml.Node | None, line: int | None,
                 axes: tuple[Axis, ...]) -> tuple[Filter, ...]:
        items, item_lines = _as_list(value, node, line or 1)
        names = {"p", "m", "v", "placement", "memory", "t_comm", "method",
                 "profile", *(a.column for a in axes)}
        out = []
        for item, item_line in zip(items, item_lines, strict=True):
            if not isinstance(item, str):
                raise self.fail(item_line, f"filter {item!r}: expected an expression in "
                                "quotes, such as \"m >= p\"")
            try:
                out.append(compile_filter(item, names))
            except ValueError as exc:
                raise self.fail(item_line, f"filter {item!r}: {exc}") from None
        return tuple(out)


def _known_axis(name: str) -> bool:
    if name in NAMED_AXES:
        return True
    match = _SCALE.match(name)
    return bool(match and match["field"] in SCALE_FIELDS)


def _as_list(value: Any, node: yaml.Node | None, line: int) -> tuple[list[Any], list[int]]:
    """A scalar or a list as a list, with the line of each item (1-based)."""
    if isinstance(value, list) and isinstance(node, yaml.SequenceNode):
        return value, [child.start_mark.line + 1 for child in node.value]
    if isinstance(value, list):
        return value, [line] * len(value)
    if isinstance(value, dict):
        return [value], [line]
    return [value], [node.start_mark.line + 1 if node is not None else line]


def _key_lines(node: yaml.Node) -> dict[Any, int]:
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: k.start_mark.line + 1 for k, _ in node.value}


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _did_you_mean(name: str, choices: Any) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
