"""The JSONL record of a sweep: one finished row per line, appended and synced as it lands.

Reading tolerates what a crash leaves: a last line cut short is ignored (and cut off
before appending, so its row is redone), and a line that is not a row is skipped with a
warning.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import IO, Any

from ppsched.solver.model import ProfileError

log = logging.getLogger(__name__)


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The complete rows of a JSONL record (none if the file does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    with path.open("rb") as src:
        for number, raw in enumerate(src, start=1):
            if not raw.endswith(b"\n"):
                log.info("%s: ignoring a cut-off last line %d", path, number)
                break
            try:
                row = json.loads(raw)
            except ValueError:
                log.warning("%s: line %d is not JSON; ignored", path, number)
                continue
            if isinstance(row, dict) and isinstance(row.get("key"), str):
                rows.append(row)
            else:
                log.warning("%s: line %d is not a sweep row (no 'key'); ignored", path, number)
    return rows


class RowWriter:
    """Appends rows to a JSONL file, one line each, flushed and fsynced as written."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _cut_partial_line(self.path)
            self._out: IO[str] = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise ProfileError("output", str(path),
                               f"a writable file path ({exc.strerror})") from None

    def write(self, row: dict[str, Any]) -> None:
        self._out.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._out.flush()
        os.fsync(self._out.fileno())

    def close(self) -> None:
        self._out.close()

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cut_partial_line(path: Path) -> None:
    """Truncate a last line without its newline (a crash mid-write) so appends stay whole."""
    if not path.exists():
        return
    with path.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        # Walk back to the previous newline (rows are small: read a few KiB at a time).
        end = size
        while end > 0:
            start = max(0, end - 65536)
            f.seek(start)
            chunk = f.read(end - start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                f.truncate(start + cut + 1)
                return
            end = start
        f.truncate(0)
