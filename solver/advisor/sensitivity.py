"""Does the advisor's pick hold? Each assumption moved over a stated range, the advisor
rerun, and the value at which the winner changes, if it does.

For a numeric assumption the range is a grid of values (`probe_grid`; the current value is
on it). Both ends are checked; where an end's winner differs from the answer's, a bisection
over the grid between the current value and that end finds a grid value whose winner
differs, next to one whose winner does not: the flip. A boolean is flipped; recompute is
flipped for one strategy at a time. Only the strategies an assumption moves are rerun
(`assumptions.ASSUMED`; the GPU memory moves none, only what fits).

Limits, said with every answer: the work is capped (`max_runs` reruns of the advisor, in
`probe_order`; what the cap leaves out is reported as not examined), and a winner that
changes and changes back between two checked values goes unseen.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ppsched.solver.advisor.assumptions import ASSUMED, format_value, set_field
from ppsched.solver.advisor.rank import (
    STRATEGIES,
    AdvisorConfig,
    Candidate,
    parse_advisor_config,
    rank,
    run_strategy,
    uses_recompute,
    winner,
)
from ppsched.solver.model.errors import ProfileError

GRID_POINTS = 33  # a continuous range is cut into 32 steps: bisection takes at most 5 runs
DEFAULT_MAX_RUNS = 48
NONE_FITS = "(none fits)"


@dataclass(frozen=True)
class Side:
    """One direction of one assumption's range."""

    end: Any  # the range's end in this direction
    winner: str  # the winner at the end (NONE_FITS: nothing fits there)
    # A checked value whose winner differs (None: the pick holds at every value checked this
    # way), and the winner there; held_until keeps the answer and is flip_at's neighbour on
    # the grid unless the cap stopped the bisection early.
    flip_at: Any = None
    flip_to: str | None = None
    held_until: Any = None


@dataclass(frozen=True)
class Sensitivity:
    """One assumption's probe: the range checked and whether the pick flips in it."""

    field: str
    value: Any
    range: tuple[Any, Any] | None  # None: a boolean (flipped) or not examined
    sides: tuple[Side, ...]  # empty: not examined (the cap, or not probed; see note)
    note: str = ""

    @property
    def flips(self) -> bool:
        return any(s.flip_at is not None for s in self.sides)

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "value": self.value,
                "range": list(self.range) if self.range else None, "flips": self.flips,
                "sides": [dataclasses.asdict(s) for s in self.sides], "note": self.note}


@dataclass(frozen=True)
class SensitivityReport:
    """Every assumption's probe, and the reruns they took."""

    winner: str
    items: list[Sensitivity]
    runs: int
    max_runs: int

    @property
    def complete(self) -> bool:
        return all(i.sides or i.note != NOT_EXAMINED for i in self.items)

    def to_dict(self) -> dict[str, Any]:
        return {"winner": self.winner, "runs": self.runs, "max_runs": self.max_runs,
                "complete": self.complete, "items": [i.to_dict() for i in self.items]}


NOT_EXAMINED = "not examined: the cap on advisor runs was reached"


def probe_grid(config: AdvisorConfig, field: str) -> list[Any] | None:
    """The values `field` is checked at, ascending, the current value among them; None
    for a field that is not probed (a boolean, or a fact of the cluster or model)."""
    c = config.cluster
    if field == "num_microbatches":
        n, p = config.num_microbatches, c.num_gpus
        # A quarter to four times N; multiples of the GPU count when N is one (WeiPipe and
        # FSDP need it), so every value checked is one all strategies accept.
        step = p if n % p == 0 else 1
        lo, hi = max(step, (n // 4) // step * step), 4 * n
        return list(range(lo, hi + 1, step))
    ranges: dict[str, tuple[float, float, bool]] = {  # lo, hi, geometric
        "cluster.mfu": (0.2, 0.8, False),
        "cluster.inter_node_gbps": (c.inter_node_gbps / 10, c.inter_node_gbps * 10, True),
        "cluster.intra_node_gbps": (c.intra_node_gbps / 10, c.intra_node_gbps * 10, True),
        "cluster.latency_us": ((c.latency_us / 10, c.latency_us * 10, True)
                               if c.latency_us > 0 else (0.0, 100.0, False)),
        "act_bytes_per_token_hidden": (config.act_bytes_per_token_hidden / 2,
                                       config.act_bytes_per_token_hidden * 2, True),
        "state_bytes_per_param": (config.state_bytes_per_param * 0.75,
                                  config.state_bytes_per_param * 1.25, False),
        "alpha": (0.0, 1.0, False),
        "cluster.gpu_memory_gb": (c.gpu_memory_gb / 2, c.gpu_memory_gb * 2, True),
    }
    if field not in ranges:
        return None
    low, high, geometric = ranges[field]
    steps = GRID_POINTS - 1
    if geometric:
        grid = [low * (high / low) ** (i / steps) for i in range(GRID_POINTS)]
    else:
        grid = [low + (high - low) * i / steps for i in range(GRID_POINTS)]
    current = _get(config, field)
    return sorted({*(round(x, 6) for x in grid), current})


def probe_order(config: AdvisorConfig) -> list[str]:
    """The probes, in the order the cap spends runs on them: the shared assumptions that
    moved the slides' replay most first, recompute per strategy, then the rest."""
    names = config.strategies or list(STRATEGIES)
    order = ["num_microbatches", "cluster.mfu", "fsdp_overlap", "cluster.inter_node_gbps"]
    order += [f"recompute[{s}]" for s in names]
    order += [f for f in ASSUMED if f not in order and f != "recompute"]
    return order


def _get(config: AdvisorConfig, field: str) -> Any:
    if field == "model.ffn_hidden":
        return config.model.ffn  # its default is derived (8H/3)
    node: Any = config
    for key in field.split("."):
        node = getattr(node, key)
    return node


class _Runner:
    """Reruns the advisor at one changed value, rerunning only the strategies it moves."""

    def __init__(self, data: dict[str, Any], config: AdvisorConfig,
                 ranked: list[Candidate], max_runs: int) -> None:
        self.data, self.config, self.max_runs = data, config, max_runs
        self.base = {c.strategy: c for c in ranked}
        self.runs = 0

    @property
    def spent(self) -> bool:
        return self.runs >= self.max_runs

    def winner_at(self, field: str, value: Any, moves: tuple[str, ...] | None) -> str:
        config = parse_advisor_config(set_field(self.data, field, value))
        names = config.strategies or STRATEGIES
        # Only a rerun of some strategy counts against the cap; a refit is free.
        self.runs += any(moves is None or name in moves for name in names)
        limit = config.cluster.gpu_memory_gb
        out = []
        for name in names:
            if moves is None or name in moves:
                out.append(run_strategy(config, name))
            else:  # unchanged figures; only what fits can move (the GPU memory)
                old = self.base[name]
                fits = old.peak_memory_gb is not None and old.peak_memory_gb <= limit
                out.append(dataclasses.replace(old, fits=fits))
        return winner(rank(out)) or NONE_FITS


def _probe_range(run: _Runner, field: str, grid: list[Any], current: Any,
                 base: str) -> tuple[Side, ...]:
    at = grid.index(current)
    sides = []
    free = ASSUMED.get(field) == ()  # moves no strategy: no rerun, nothing to cap
    for end_index in (0, len(grid) - 1):
        if end_index == at:
            continue
        if run.spent and not free:
            return ()
        end_winner = run.winner_at(field, grid[end_index], ASSUMED.get(field))
        if end_winner == base:
            sides.append(Side(grid[end_index], end_winner))
            continue
        held, flipped, flip_to = at, end_index, end_winner
        # Invariant: the winner at grid[held] is the answer's, at grid[flipped] it is not.
        while abs(flipped - held) > 1 and (free or not run.spent):
            mid = (held + flipped) // 2
            w = run.winner_at(field, grid[mid], ASSUMED.get(field))
            if w == base:
                held = mid
            else:
                flipped, flip_to = mid, w
        sides.append(Side(grid[end_index], end_winner, grid[flipped], flip_to, grid[held]))
    return tuple(sides)


def probe_sensitivity(data: dict[str, Any], ranked: list[Candidate],
                      max_runs: int = DEFAULT_MAX_RUNS,
                      ceilings: dict[str, float] | None = None) -> SensitivityReport:
    """Every assumption of config `data` probed for whether it flips the winner of
    `ranked` (the advisor's answer for `data`), in at most `max_runs` reruns; `ceilings`
    cut a field's range (the service's limits: no probe asks for more than a request may)."""
    config = parse_advisor_config(data)
    base = winner(ranked) or NONE_FITS
    run = _Runner(data, config, ranked, max_runs)
    items = []
    for probe in probe_order(config):
        if probe.startswith("recompute["):
            strategy = probe[len("recompute["):-1]
            on = uses_recompute(config, strategy)
            names = config.strategies or list(STRATEGIES)
            value = [s for s in names if uses_recompute(config, s) != (s == strategy)]
            if run.spent:
                items.append(Sensitivity(probe, on, None, (), NOT_EXAMINED))
                continue
            w = run.winner_at("recompute", value, (strategy,))
            items.append(Sensitivity(probe, on, None, (Side(
                not on, w, *((not on, w, on) if w != base else ())),)))
            continue
        current = _get(config, probe)
        if isinstance(current, bool):
            if run.spent:
                items.append(Sensitivity(probe, current, None, (), NOT_EXAMINED))
                continue
            w = run.winner_at(probe, not current, ASSUMED[probe])
            items.append(Sensitivity(probe, current, None, (Side(
                not current, w, *((not current, w, current) if w != base else ())),)))
            continue
        grid = probe_grid(config, probe)
        if grid is not None and probe in (ceilings or {}):
            top = max((ceilings or {})[probe], current)
            grid = [x for x in grid if x <= top]
        if grid is None:
            why = ("moves no strategy's figures" if ASSUMED.get(probe) == ()
                   else "a fact of the cluster or the model, not probed")
            items.append(Sensitivity(probe, current, None, (), why))
            continue
        try:
            sides = _probe_range(run, probe, grid, current, base)
        except ProfileError as exc:  # a value of the range the config rejects
            items.append(Sensitivity(probe, current, (grid[0], grid[-1]), (),
                                     f"not examined: {exc}"))
            continue
        items.append(Sensitivity(probe, current, (grid[0], grid[-1]), sides,
                                 "" if sides else NOT_EXAMINED if len(grid) > 1
                                 else "no value to check besides the current one"))
    return SensitivityReport(base, items, run.runs, max_runs)


def format_sensitivity(report: SensitivityReport) -> list[str]:
    """One line per assumption: its range and, each way, whether the pick holds."""
    lines = []
    for item in report.items:
        head = f"  {item.field:<28}{format_value(item.value):>14}  "
        if not item.sides:
            lines.append(head + item.note)
            continue
        if item.range is None:
            s = item.sides[0]
            lines.append(head + (f"set to {format_value(s.end)}: "
                                 + (f"{s.flip_to} wins" if s.flip_at is not None
                                    else "holds")))
            continue
        parts = []
        for s in item.sides:
            way = "down" if s.end < item.value else "up"
            parts.append(f"{way} to {format_value(s.end)}: " + (
                f"{s.flip_to} wins at {format_value(s.flip_at)} (holds at "
                f"{format_value(s.held_until)})" if s.flip_at is not None else "holds"))
        lines.append(head + "; ".join(parts))
    return lines


def summary_line(report: SensitivityReport) -> str:
    flips = [i.field for i in report.items if i.flips]
    cap = (f"{report.runs} advisor runs of at most {report.max_runs}"
           + ("" if report.complete else ", some assumptions not examined"))
    if flips:
        return (f"sensitivity: the pick {report.winner} flips with "
                + ", ".join(flips) + f" ({cap})")
    return f"sensitivity: the pick {report.winner} holds over every range checked ({cap})"
