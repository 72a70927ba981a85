"""The terminal summary of a sweep: the best method per configuration, speed-up over 1F1B.

A configuration is a row's columns other than the method and the results. 1F1B's cost does
not depend on the memory limit (its order is fixed), and comparisons across `v` are made
for the same model (DESIGN.md section 2), so the speed-up of a configuration is taken
against the plain 1F1B row of the same model at any memory limit it fits and any `v`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppsched.api.sweep.exports import columns
from ppsched.api.sweep.task import RESULT_FIELDS

REFERENCE = "1f1b"
_NOT_CONFIG = {"key", "method", "objective", *RESULT_FIELDS}
_NOT_MODEL = ("memory", "memory_limit", "memory_ratio", "v", "placement")


@dataclass(frozen=True)
class Best:
    """The best method of one configuration."""

    config: dict[str, Any]
    method: str | None
    """None when every method refused the configuration."""
    cost: float | None
    bubble_rate: float | None
    peak_memory: float | None
    reference_cost: float | None
    """1F1B's cost on the same configuration (any memory limit), when swept."""
    num_errors: int

    @property
    def speedup(self) -> float | None:
        if self.cost is None or self.reference_cost is None or self.cost <= 0:
            return None
        return self.reference_cost / self.cost


def config_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The columns that describe a configuration (not the method, not a result)."""
    return [c for c in columns(rows) if c not in _NOT_CONFIG]


def best_per_config(rows: Sequence[dict[str, Any]]) -> list[Best]:
    """One `Best` per configuration, in order of first appearance."""
    names = config_columns(rows)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    reference: dict[tuple[Any, ...], float] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(c) for c in names), []).append(row)
        if row["method"] == REFERENCE and row["status"] != "error":
            reference[_same_model(row, names)] = row["cost"]
    out = []
    for config, group in groups.items():
        ok = [r for r in group if r["status"] != "error"]
        best = min(ok, key=lambda r: (r["cost"], r["method"])) if ok else None
        out.append(Best(config=dict(zip(names, config, strict=True)),
                        method=best["method"] if best else None,
                        cost=best["cost"] if best else None,
                        bubble_rate=best["bubble_rate"] if best else None,
                        peak_memory=best["peak_memory"] if best else None,
                        reference_cost=reference.get(_same_model(group[0], names)),
                        num_errors=len(group) - len(ok)))
    return out


def render_summary(rows: Sequence[dict[str, Any]], *, max_rows: int = 40) -> Any:
    """A rich Table of `best_per_config` (columns that never vary go in the caption)."""
    from rich.table import Table

    bests = best_per_config(rows)
    names = config_columns(rows)
    # memory_limit and memory_ratio restate `memory` (the grid's label): shown in the exports.
    names = [c for c in names if c not in ("memory_limit", "memory_ratio")]
    varying = [c for c in names if len({_text(b.config[c]) for b in bests}) > 1]
    constant = [f"{c}={_text(bests[0].config[c])}" for c in names if c not in varying] \
        if bests else []
    shown = bests[:max_rows]
    caption = "; ".join(filter(None, [
        ", ".join(constant),
        f"{len(bests) - len(shown)} more configurations in the exports"
        if len(shown) < len(bests) else "",
        "speed-up: 1F1B's cost / the best cost (1F1B of the same model, any memory limit)",
    ]))
    table = Table(title=f"Best method per configuration ({len(bests)})", caption=caption)
    for name in varying:
        table.add_column(name, justify="right")
    for name in ("best method", "cost", "bubble", "peak mem", "1F1B cost", "speed-up",
                 "errors"):
        table.add_column(name, justify="left" if name == "best method" else "right")
    for best in shown:
        table.add_row(*(_text(best.config[c]) for c in varying),
                      best.method or "(all refused)", _num(best.cost, ".4g"),
                      _num(best.bubble_rate, ".4f"), _num(best.peak_memory, ".4g"),
                      _num(best.reference_cost, ".4g"),
                      f"{best.speedup:.3f}x" if best.speedup else "-", str(best.num_errors))
    return table


def _same_model(row: dict[str, Any], names: Sequence[str]) -> tuple[Any, ...]:
    return tuple(row.get(c) for c in names if c not in _NOT_MODEL)


def _text(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:g}" if isinstance(x, float) else str(x)


def _num(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)
