"""A results table in Markdown, as the benchmarks write it under `benchmarks/results/`."""

from __future__ import annotations

from collections.abc import Sequence


def markdown_table(rows: Sequence[dict[str, object]]) -> list[str]:
    """The lines of a Markdown table of `rows`: the first row's keys are the columns."""
    columns = list(rows[0])
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *("| " + " | ".join(str(row[c]) for c in columns) + " |" for row in rows)]
