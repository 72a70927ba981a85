"""Sample lengths in: a list, a JSONL file's field, a Parquet column, or a plain text file
with one number a line. Every bad value is a `LengthsError` naming where it is."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.extras import install_command

# Larger counts lose precision as floats (2**53); no real sample comes near.
MAX_TOKENS = 10**12


class LengthsError(ProfileError):
    """Sample lengths that cannot be used (the field or line, the value, what is accepted)."""


def check_lengths(values: Sequence[Any], field: str = "lengths") -> list[int]:
    """Lengths as positive integers (whole floats accepted); a named error otherwise."""
    if len(values) == 0:
        raise LengthsError(field, [], "at least one sample length")
    lengths = []
    for i, x in enumerate(values):
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) \
                or x != int(x) or not 1 <= x <= MAX_TOKENS:
            raise LengthsError(f"{field}[{i}]", x, f"a whole number of tokens from 1 to "
                               f"{MAX_TOKENS:.0e}")
        lengths.append(int(x))
    return lengths


def read_lengths(path: str | Path, field: str | None = None) -> list[int]:
    """The lengths in a file: ``.jsonl`` (each line an object; `field` names the length,
    or holds a list/string whose length counts), ``.parquet`` (column `field`), else text
    with one number a line.

    Raises:
        LengthsError: an unreadable file, a missing field, or a bad value (with its line).
    """
    path = Path(path)
    if path.suffix == ".parquet":
        return _read_parquet(path, field)
    try:
        text = path.read_text()
    except OSError as exc:
        raise LengthsError("lengths", str(path), f"a readable file ({exc.strerror})") from None
    if path.suffix == ".jsonl":
        return _read_jsonl(path, text, field)
    values: list[Any] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            values.append(float(line))
        except ValueError:
            raise LengthsError(f"{path.name} line {n}", line.strip()[:40],
                               "one number a line (or a .jsonl / .parquet file)") from None
    return check_lengths(values, f"{path.name}")


def _read_jsonl(path: Path, text: str, field: str | None) -> list[int]:
    if not field:
        raise LengthsError("field", None, "the JSONL field that holds each sample's length "
                           "(a number, or a list or string whose length counts)")
    values: list[Any] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name} line {n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LengthsError(where, line[:40], f"a JSON object ({exc.msg})") from None
        if not isinstance(row, dict) or field not in row:
            keys = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise LengthsError(f"{where}.{field}", keys, f"an object with the field '{field}'")
        value = row[field]
        values.append(len(value) if isinstance(value, list | str) else value)
    return check_lengths(values, f"{path.name}.{field}")


def _read_parquet(path: Path, field: str | None) -> list[int]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise LengthsError("lengths", str(path), "pyarrow installed for Parquet files (the "
                           f"'sweep' extra: {install_command('sweep')}), or a .jsonl / text "
                           "file") from None
    if not field:
        raise LengthsError("field", None, "the Parquet column of sample lengths")
    try:
        table = pq.read_table(path, columns=[field])
    except (OSError, KeyError, ValueError) as exc:
        raise LengthsError(f"{path.name}.{field}", str(path),
                           f"a readable Parquet file with the column '{field}' ({exc})") \
            from None
    column = table.column(field).to_pylist()
    values = [len(v) if isinstance(v, list | str) else v for v in column]
    return check_lengths(values, f"{path.name}.{field}")
