"""Figures of a sweep (matplotlib, PNG and SVG): bubble rate vs memory limit per method,
cost vs m per method, and the speed-up over 1F1B as a heat-map over (p, m).

Each figure has one panel per combination of the other configuration columns (at most
`MAX_PANELS`, the first ones in sweep order); in the line plots a curve is a method at one
`v`, in one colour throughout; rows a method refused are left out.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppsched.api.sweep.summary import Best, best_per_config, config_columns

log = logging.getLogger(__name__)

MAX_PANELS = 9
FORMATS = ("png", "svg")
SVG_ID_SALT = "ppsched"


def write_plots(rows: Sequence[dict[str, Any]], directory: str | Path) -> list[Path]:
    """Write every figure the rows can support; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ok = [r for r in rows if r["status"] != "error"]
    written: list[Path] = []
    for name, draw in (("bubble_vs_memory", _bubble_vs_memory), ("cost_vs_m", _cost_vs_m),
                       ("speedup_heatmap", _speedup_heatmap)):
        figure = draw(ok if name != "speedup_heatmap" else rows)
        if figure is None:
            log.info("plot %s: not enough data in the sweep", name)
            continue
        for fmt in FORMATS:
            path = out / f"{name}.{fmt}"
            # No date and a fixed salt for the SVG's element ids (matplotlib draws them
            # from uuid4 by default) keep a figure byte-identical across runs of the same
            # data, so plots kept in git (docs/sweep-zb/) change only when the data does.
            metadata = {"Date": None} if fmt == "svg" else {"Software": None}
            with matplotlib.rc_context({"svg.hashsalt": SVG_ID_SALT}):
                figure.savefig(path, format=fmt, dpi=110, bbox_inches="tight",
                               metadata=metadata)
            written.append(path)
        import matplotlib.pyplot as plt

        plt.close(figure)
    return written


def _bubble_vs_memory(rows: Sequence[dict[str, Any]]) -> Any:
    rows = [r for r in rows if r.get("memory_ratio") is not None]
    return _line_panels(rows, x="memory_ratio", y="bubble_rate",
                        xlabel="memory limit (multiples of p*m_b)", ylabel="bubble rate",
                        title="Bubble rate vs memory limit",
                        exclude=("memory", "memory_limit", "memory_ratio", "v", "placement"))


def _cost_vs_m(rows: Sequence[dict[str, Any]]) -> Any:
    return _line_panels(rows, x="m", y="cost", xlabel="microbatches m", ylabel="cost",
                        title="Cost vs m",
                        exclude=("m", "memory_limit", "memory_ratio", "v", "placement"))


def _line_panels(rows: Sequence[dict[str, Any]], *, x: str, y: str, xlabel: str, ylabel: str,
                 title: str, exclude: Sequence[str]) -> Any:
    panels = _panels(rows, exclude)
    if not any(len({r[x] for r in group}) > 1 for group in panels.values()):
        return None  # a single x value per panel is a dot, not a curve
    series = list(dict.fromkeys(_series(r) for r in rows))
    colors = {name: f"C{i % 10}" for i, name in enumerate(series)}
    fig, axes = _grid_of(len(panels))
    for ax, (label, group) in zip(axes, panels.items(), strict=False):
        for name in dict.fromkeys(_series(r) for r in group):
            points = sorted((r[x], r[y]) for r in group if _series(r) == name)
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name,
                    color=colors[name], linestyle="--" if "v=" in name else "-")
        ax.set_title(label, fontsize=8)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
    # One legend for the figure: the colours mean the same in every panel.
    handles = {h.get_label(): h for ax in axes for h in ax.get_lines()}
    fig.legend([handles[n] for n in series if n in handles],
               [n for n in series if n in handles], loc="outside right upper", fontsize=8)
    fig.suptitle(title + _more(rows, exclude))
    return fig


def _speedup_heatmap(rows: Sequence[dict[str, Any]]) -> Any:
    bests = [b for b in best_per_config(rows) if b.speedup is not None]
    if not bests:
        return None
    panels: dict[str, list[Best]] = {}
    names = [c for c in config_columns(rows) if c not in ("p", "m", "memory_limit",
                                                          "memory_ratio")]
    varying = [c for c in names if len({str(b.config[c]) for b in bests}) > 1]
    for best in bests:
        panels.setdefault(_label(best.config, varying), []).append(best)
    panels = dict(list(panels.items())[:MAX_PANELS])
    # One colour scale for every panel, so that colours compare across them.
    low = min(b.speedup or 1.0 for group in panels.values() for b in group)
    high = max(b.speedup or 1.0 for group in panels.values() for b in group)
    fig, axes = _grid_of(len(panels))
    for ax, (label, group) in zip(axes, panels.items(), strict=False):
        ps = sorted({b.config["p"] for b in group})
        ms = sorted({b.config["m"] for b in group})
        grid = [[math.nan] * len(ms) for _ in ps]
        for b in group:
            grid[ps.index(b.config["p"])][ms.index(b.config["m"])] = b.speedup or math.nan
        image = ax.imshow(grid, cmap="viridis", origin="lower", aspect="auto",
                          vmin=low, vmax=max(high, low + 1e-9))
        ax.set_xticks(range(len(ms)), [str(m) for m in ms], fontsize=7)
        ax.set_yticks(range(len(ps)), [str(p) for p in ps], fontsize=7)
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                if not math.isnan(value):
                    ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                            color="black" if image.norm(value) > 0.5 else "white")
        ax.set_xlabel("microbatches m", fontsize=8)
        ax.set_ylabel("ranks p", fontsize=8)
        ax.set_title(label, fontsize=8)
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.suptitle("Speed-up of the best method over 1F1B")
    return fig


def _series(row: dict[str, Any]) -> str:
    """A curve's name: the method, and its chunks per rank when more than one."""
    v = row.get("v") or 1
    return row["method"] if v == 1 else f"{row['method']} (v={v}, {row.get('placement')})"


def _panels(rows: Sequence[dict[str, Any]], exclude: Sequence[str],
            ) -> dict[str, list[dict[str, Any]]]:
    names = [c for c in config_columns(rows) if c not in exclude]
    varying = [c for c in names if len({str(r.get(c)) for r in rows}) > 1]
    panels: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        panels.setdefault(_label(row, varying), []).append(row)
    return dict(list(panels.items())[:MAX_PANELS])


def _more(rows: Sequence[dict[str, Any]], exclude: Sequence[str]) -> str:
    names = [c for c in config_columns(rows) if c not in exclude]
    count = len({tuple(str(r.get(c)) for c in names) for r in rows})
    return f" (first {MAX_PANELS} of {count} panels)" if count > MAX_PANELS else ""


def _label(row: dict[str, Any], names: Sequence[str]) -> str:
    return ", ".join(f"{c}={_text(row.get(c))}" for c in names) or "all rows"


def _text(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:g}" if isinstance(x, float) else str(x)


def _grid_of(count: int) -> tuple[Any, list[Any]]:
    import matplotlib.pyplot as plt

    cols = min(3, count)
    rows = math.ceil(count / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False,
                             layout="constrained")
    flat = [ax for line in axes for ax in line]
    for ax in flat[count:]:
        ax.set_visible(False)
    return fig, flat[:count]

