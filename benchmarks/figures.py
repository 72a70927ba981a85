"""Every figure the docs quote is tied to a result file and a key, and checked against it.

The prose of the docs (README.md and every page under docs/, outside code, HTML comments
and result blocks) quotes a measured figure as the number followed at once by a reference
in an HTML comment, which renders as nothing on GitHub and on the docs site::

    the default solve costs 1185.15<!--fig layout_search.md: gpt1.5b-p8-m24, 1p | default-->
    and finds no schedule on 24<!--fig layout_search.md: "Rows where the reference" #1--> rows

A reference names a file (under ``benchmarks/results/``, or a path from the repository root
when it holds a ``/``, such as ``profiles/gpt1.5b-p8-m24.json``) and a key:

- ``FILE.md: CELL, CELL | COLUMN``: the one table row holding every CELL, the cell under the
  column headed COLUMN (``| COLUMN #2``: that cell's second number); ``.csv`` files alike;
- ``FILE.md: "TEXT" #N``: the N-th number on the one line holding TEXT;
- ``FILE.json: a.b[2].c`` or ``rows[profile=gpt1.5b-p8-m24,memory=1p].cost``: a JSON path.

The prose may round the source (``7.1%`` for ``7.05%``) but never adds digits. A number in
prose that is not a measured figure (a count in an example) says so with ``<!--nofig-->``;
numbers inside words and names (``gpt1.5b``, ``1p``, ``ZB-H1``), versions, dates, list
markers and references such as "section 6.6" or "Table 5" are not figures at all.

    python -m benchmarks.figures --check   # exit 1 naming every figure that does not match
    python -m benchmarks.figures --write   # rewrite each referenced figure from its source
    python -m benchmarks.figures --mutants # how many last-digit changes the check catches

The docs site's build (``mkdocs build --strict``, through ``benchmarks/mkdocs_hooks.py``)
runs the same check on every page and fails on any mismatch, so a figure cannot drift.
"""

from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import logging
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from benchmarks import readme

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

log = logging.getLogger(__name__)


class FigureError(ValueError):
    """A reference that cannot be resolved: its file, row, column, line or path is missing
    or ambiguous."""


# A number as prose writes a figure: 1185.15, -14.3%, 4.53x, 2,000. Not part of a word, a
# name, a version or a date (no letter, digit, dot, hyphen, slash or underscore touches it).
_NUMBER = r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?"
_TOKEN = re.compile(rf"(?<![\w.\-/=#:])(?P<num>{_NUMBER})(?P<unit>%|x(?![\w]))?(?![\w.\-/])")
_REF = re.compile(r"<!--\s*(?P<kind>fig|nofig)\b(?P<body>.*?)-->", re.DOTALL)

# Spans of a page that are not prose.
_FENCED = re.compile(r"^(?P<fence>```|~~~).*?^(?P=fence)[^\n]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_LINK_TARGET = re.compile(r"\]\([^)]*\)|\]\[[^\]]*\]|^\[[^\]]+\]:.*$|https?://\S+",
                          re.MULTILINE)
_LIST_MARKER = re.compile(r"^\s*\d+[.)]\s", re.MULTILINE)
_HTML_TAG = re.compile(r"<[A-Za-z/][^>]*>")
# "section 6.6", "DESIGN.md 6.5", "Table 5", "arXiv 2503.01328": references, not figures.
_CITATION = re.compile(r"(?:DESIGN\.md|[Ss]ections?|§|Table|Figure|Fig\.|arXiv|[Ii]ssue|"
                       r"torch|Python|PostgreSQL|OR-Tools|[Ss]tep|[Ww]ave|ICLR|NeurIPS|ICML|MLSys|SC)\s+"
                       r"(?:section\s+)?\d+(?:\.\d+)*")


@dataclass(frozen=True)
class Figure:
    """A number of a page's prose, with its reference if it has one."""

    page: str
    line: int
    start: int  # offset of the number in the page
    end: int  # offset just after the number and its unit
    text: str  # the number as written, unit included
    kind: str | None  # "fig", "nofig" or None (no reference)
    ref: str  # the reference's body, for "fig"

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _blank(text: str, spans: Iterator[tuple[int, int]]) -> str:
    """`text` with the spans replaced by spaces (offsets and line numbers kept)."""
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def _non_prose(text: str) -> Iterator[tuple[int, int]]:
    for block in readme.blocks(text):
        yield block.start, block.end
    for pattern in (_FENCED, _INLINE_CODE, _COMMENT, _LINK_TARGET, _HTML_TAG, _CITATION):
        for match in pattern.finditer(text):
            yield match.start(), match.end()
    for match in _LIST_MARKER.finditer(text):
        yield match.start(), match.end()


def figures(text: str, page: str = "<text>") -> list[Figure]:
    """The numbers of a page's prose, each with the reference that follows it."""
    # Fenced code first, so that a comment or a marker inside code is not read as one.
    prose = _blank(text, _non_prose(text))
    found = []
    for match in _TOKEN.finditer(prose):
        end = match.end()
        ref = _REF.match(text, end)
        kind = ref.group("kind") if ref else None
        found.append(Figure(page, text.count("\n", 0, match.start()) + 1, match.start(), end,
                            text[match.start():end], kind,
                            ref.group("body").strip() if ref else ""))
    return found


# --- resolving a reference ---------------------------------------------------------------

_TABLE_KEY = re.compile(r"^(?P<cells>[^|\"]*?)\s*\|\s*(?P<column>[^#]+?)\s*(?:#(?P<n>\d+))?$")
_LINE_KEY = re.compile(r'^"(?P<text>[^"]+)"\s*#(?P<n>\d+)$')


def _source_path(name: str, root: Path) -> Path:
    return root / name if "/" in name else root / "benchmarks" / "results" / name


@functools.lru_cache(maxsize=256)
def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise FigureError(f"{path.name} cannot be read ({exc.strerror})") from None


def _clean(cell: str) -> str:
    return re.sub(r"[*`_]", "", cell).strip()


def _tables(text: str, suffix: str) -> list[tuple[list[str], list[list[str]]]]:
    """The tables of a markdown or CSV text: (header, rows), cells cleaned."""
    if suffix == ".csv":
        rows = [[_clean(c) for c in row] for row in csv.reader(io.StringIO(text)) if row]
        return [(rows[0], rows[1:])] if rows else []
    tables: list[tuple[list[str], list[list[str]]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if (lines[i].lstrip().startswith("|") and i + 1 < len(lines)
                and re.match(r"^\s*\|[\s:|-]+\|?\s*$", lines[i + 1])):
            header = [_clean(c) for c in lines[i].strip().strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append([_clean(c) for c in lines[i].strip().strip("|").split("|")])
                i += 1
            tables.append((header, rows))
        else:
            i += 1
    return tables


def _nth_number(text: str, n: int, what: str) -> str:
    numbers = [m.group(0) for m in _TOKEN.finditer(text)]
    if not 1 <= n <= len(numbers):
        raise FigureError(f"{what} holds {len(numbers)} number(s), not a #{n}: {text!r}")
    return numbers[n - 1]


def _from_table(text: str, suffix: str, key: re.Match[str], name: str) -> str:
    cells = [_clean(c) for c in key.group("cells").split(",") if c.strip()]
    column = _clean(key.group("column"))
    hits = []
    for header, rows in _tables(text, suffix):
        if column not in header:
            continue
        at = header.index(column)
        hits += [row[at] for row in rows if at < len(row) and all(c in row for c in cells)]
    if len(hits) != 1:
        raise FigureError(f"{name}: {len(hits)} table rows hold {cells} under a column "
                          f"{column!r}; a reference needs exactly one")
    return _nth_number(hits[0], int(key.group("n") or 1), f"{name} [{', '.join(cells)} | "
                       f"{column}]")


_PATH_PART = re.compile(r"([^.\[\]]+)|\[([^\]]+)\]")


def _from_json(text: str, path: str, name: str) -> str:
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FigureError(f"{name} is not JSON ({exc.msg})") from None
    for match in _PATH_PART.finditer(path):
        field, index = match.groups()
        if field is not None:
            if not isinstance(value, dict) or field not in value:
                raise FigureError(f"{name}: no key {field!r} at {path!r}")
            value = value[field]
        elif index.lstrip("-").isdigit():
            if not isinstance(value, list) or not -len(value) <= int(index) < len(value):
                raise FigureError(f"{name}: no item [{index}] at {path!r}")
            value = value[int(index)]
        else:
            wanted = dict(pair.split("=", 1) for pair in index.split(","))
            found = [item for item in (value if isinstance(value, list) else [])
                     if isinstance(item, dict)
                     and all(str(item.get(k)) == v for k, v in wanted.items())]
            if len(found) != 1:
                raise FigureError(f"{name}: {len(found)} items match [{index}] at {path!r}")
            value = found[0]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise FigureError(f"{name}: {path!r} is not a number but {type(value).__name__}")
    return _nth_number(str(value), 1, f"{name} {path}")


def resolve(ref: str, root: Path = ROOT) -> str:
    """The figure a reference names, as its source writes it."""
    name, sep, key = ref.partition(":")
    name, key = name.strip(), key.strip()
    if not sep or not name or not key:
        raise FigureError(f"reference {ref!r} is not 'FILE: KEY'")
    path = _source_path(name, root)
    text = _read(path)
    if path.suffix == ".json":
        return _from_json(text, key, name)
    if (line_key := _LINE_KEY.match(key)) is not None:
        lines = [line for line in text.splitlines() if line_key.group("text") in line]
        if len(lines) != 1:
            raise FigureError(f"{name}: {len(lines)} lines hold {line_key.group('text')!r}; "
                              "a reference needs exactly one")
        return _nth_number(lines[0], int(line_key.group("n")), f"{name} line")
    if (table_key := _TABLE_KEY.match(key)) is not None:
        return _from_table(text, path.suffix, table_key, name)
    raise FigureError(f"{name}: key {key!r} is neither 'CELL, ... | COLUMN', '\"TEXT\" #N' "
                      "nor a JSON path")


def _split(token: str) -> tuple[Decimal, int, str]:
    unit = token[-1] if token[-1] in "%x" else ""
    digits = token.rstrip("%x").replace(",", "")
    try:
        value = Decimal(digits)
    except InvalidOperation:
        raise FigureError(f"{token!r} is not a number") from None
    places = len(digits.partition(".")[2])
    return value, places, unit


def agrees(written: str, source: str) -> bool:
    """Whether prose's `written` quotes `source`: the same value, rounded to the places the
    prose writes and never to more than the source has, with the same unit if the prose
    writes one that the source also writes."""
    value, places, unit = _split(written)
    exact, source_places, source_unit = _split(source)
    if places > source_places or (unit and source_unit and unit != source_unit):
        return False
    return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP) == value


def rounded(written: str, source: str) -> str:
    """`source` written with `written`'s places, thousands separators and unit."""
    _, places, unit = _split(written)
    exact = _split(source)[0].quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    text = f"{exact:,.{places}f}" if "," in written else f"{exact:.{places}f}"
    return text + unit


@dataclass(frozen=True)
class Problem:
    figure: Figure
    message: str

    def __str__(self) -> str:
        return f"{self.figure.where()}: {self.figure.text}: {self.message}"


def problems(text: str, page: str = "<text>", root: Path = ROOT) -> list[Problem]:
    """Every figure of a page's prose that has no reference, or whose reference does not
    resolve to it; every result block that differs from its file."""
    found = []
    for figure in figures(text, page):
        if figure.kind == "nofig":
            continue
        if figure.kind is None:
            found.append(Problem(figure, "a figure with no <!--fig FILE: KEY--> after it "
                                 "(or <!--nofig--> if it is not a measured figure)"))
            continue
        try:
            source = resolve(figure.ref, root)
        except FigureError as exc:
            found.append(Problem(figure, str(exc)))
            continue
        if not agrees(figure.text, source):
            found.append(Problem(figure, f"its source {figure.ref!r} says {source}"))
    return found


def write(text: str, root: Path = ROOT) -> str:
    """`text` with each referenced figure rewritten from its source (its places kept)."""
    out, at = [], 0
    for figure in figures(text):
        if figure.kind != "fig":
            continue
        try:
            source = resolve(figure.ref, root)
        except FigureError:
            continue  # --check names it
        out += [text[at:figure.start], rounded(figure.text, source)]
        at = figure.end
    out.append(text[at:])
    return "".join(out)


def mutants(text: str) -> Iterator[tuple[Figure, str]]:
    """Each prose figure with its last digit changed by one, as a whole page text."""
    for figure in figures(text):
        digits = [i for i, ch in enumerate(figure.text) if ch.isdigit()]
        last = digits[-1]
        digit = int(figure.text[last])
        changed = figure.text[:last] + str(digit - 1 if digit == 9 else digit + 1) + \
            figure.text[last + 1:]
        yield figure, text[:figure.start] + changed + text[figure.end:]


def mutation_score(paths: list[Path], root: Path = ROOT) -> tuple[int, int, list[Figure]]:
    """(caught, total, missed): of every last-digit mutant of every prose figure, how many
    make the check fail."""
    caught = total = 0
    missed: list[Figure] = []
    for path in paths:
        text = path.read_text()
        page = str(path.relative_to(root)) if path.is_relative_to(root) else path.name
        before = {(p.figure.start, p.message) for p in problems(text, page, root)}
        for figure, mutant in mutants(text):
            total += 1
            after = {(p.figure.start, p.message) for p in problems(mutant, page, root)}
            if after - before:
                caught += 1
            else:
                missed.append(figure)
    return caught, total, missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.figures",
                                     description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 naming each bad figure "
                      "(the default)")
    mode.add_argument("--write", action="store_true", help="rewrite referenced figures "
                      "from their sources")
    mode.add_argument("--mutants", action="store_true", help="count the last-digit "
                      "mutants the check catches")
    parser.add_argument("paths", nargs="*", type=Path, help="pages (default: README.md "
                        "and docs/**/*.md)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    paths = args.paths or readme.pages()
    if args.mutants:
        caught, total, missed = mutation_score(paths)
        for figure in missed:
            log.info("not caught: %s %s", figure.where(), figure.text)
        log.info("%d of %d last-digit mutants caught (%.1f%%)", caught, total,
                 100 * caught / max(total, 1))
        return 0
    if args.write:
        for path in paths:
            text = path.read_text()
            new = write(text)
            if new != text:
                path.write_text(new)
                log.info("%s: figures rewritten", path)
        return 0
    bad = []
    for path in paths:
        page = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        bad += problems(path.read_text(), page)
    for problem in bad:
        log.error("%s", problem)
    log.info("%d page(s), %d figure(s) not tied to their source", len(paths), len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
