"""CSV and Parquet exports of a sweep's rows (the JSONL file stays the record)."""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from ppsched.solver.model import ProfileError


def unique_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with distinct keys, the first of each kept, in file order."""
    seen: set[str] = set()
    out = []
    for row in rows:
        if row["key"] not in seen:
            seen.add(row["key"])
            out.append(row)
    return out


def columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every field of the rows, in order of first appearance."""
    return list(dict.fromkeys(name for row in rows for name in row))


def write_csv(rows: Sequence[dict[str, Any]], path: str | Path) -> None:
    """One line per row, a header of every column; None is written as an empty cell."""
    names = columns(rows)

    def write(out: Any) -> None:
        writer = csv.DictWriter(out, fieldnames=names, restval="")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})

    _atomically(path, write, newline="")


def write_parquet(rows: Sequence[dict[str, Any]], path: str | Path) -> None:
    """A Parquet table of the rows (pyarrow infers each column's type)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = columns(rows)
    table = pa.Table.from_pylist([{k: row.get(k) for k in names} for row in rows])
    _atomically(path, lambda out: pq.write_table(table, out), binary=True)


def _atomically(path: str | Path, write: Any, *, binary: bool = False,
                newline: str | None = None) -> None:
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        out: IO[Any]
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", newline=newline)) as out:
            write(out)
        os.replace(tmp, target)
    except OSError as exc:
        raise ProfileError("output", str(path), f"a writable file path ({exc.strerror})") \
            from None
