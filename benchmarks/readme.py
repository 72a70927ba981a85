"""Rewrite the docs' result blocks (README.md and docs/**/*.md) from `benchmarks/results/`.

A block between ``<!-- BEGIN results/NAME.md -->`` and ``<!-- END results/NAME.md
-->`` holds exactly the content of ``benchmarks/results/NAME.md``, the file the benchmark
command wrote. Run it after a benchmark::

    python -m benchmarks.readme          # rewrite the blocks of every page
    python -m benchmarks.readme --check  # exit 1 naming every stale block, change nothing

`tests/test_readme_results.py` fails while a block and its file differ, and the docs
site's build (`benchmarks/mkdocs_hooks.py`) refuses a page whose block differs.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "benchmarks" / "results"

_MARKER = re.compile(r"^<!-- (BEGIN|END) results/([A-Za-z0-9_.-]+\.md) -->$", re.MULTILINE)

log = logging.getLogger(__name__)


def pages(root: Path = ROOT) -> list[Path]:
    """The documents: the README and every page of the docs site."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


class ReadmeError(ValueError):
    """A README whose result markers do not pair up, or name a missing result file."""


@dataclass(frozen=True)
class Block:
    """One result block: the file it shows and where its content lies in the README."""

    name: str
    start: int  # offset just after the BEGIN line
    end: int  # offset of the END line
    line: int  # 1-based line of the BEGIN marker


def blocks(text: str) -> list[Block]:
    """The result blocks of a README text, in order.

    Raises:
        ReadmeError: an END without its BEGIN, a BEGIN without its END, or a nested block,
            naming the line.
    """
    found: list[Block] = []
    open_name: str | None = None
    open_at = open_line = 0
    for match in _MARKER.finditer(text):
        kind, name = match.groups()
        line = text.count("\n", 0, match.start()) + 1
        if kind == "BEGIN":
            if open_name is not None:
                raise ReadmeError(f"README line {line}: BEGIN results/{name} inside the block "
                                  f"results/{open_name} opened on line {open_line}")
            open_name, open_line = name, line
            open_at = match.end() + 1  # the content starts on the next line
        else:
            if open_name != name:
                raise ReadmeError(f"README line {line}: END results/{name} without its BEGIN"
                                  + (f" (results/{open_name} is open since line "
                                     f"{open_line})" if open_name else ""))
            found.append(Block(name, min(open_at, match.start()), match.start(), open_line))
            open_name = None
    if open_name is not None:
        raise ReadmeError(f"README line {open_line}: BEGIN results/{open_name} has no "
                          f"<!-- END results/{open_name} -->")
    return found


def result_text(name: str, results: Path = RESULTS) -> str:
    """The content a block shows: the result file, ending with one newline."""
    path = results / name
    try:
        text = path.read_text()
    except OSError as exc:
        raise ReadmeError(f"the README shows results/{name} but {path} cannot be read "
                          f"({exc.strerror}); run the benchmark that writes it") from None
    return text if text.endswith("\n") else text + "\n"


def render(text: str, results: Path = RESULTS) -> str:
    """`text` with every result block replaced by its file's content."""
    out: list[str] = []
    at = 0
    for block in blocks(text):
        out += [text[at:block.start], result_text(block.name, results)]
        at = block.end
    out.append(text[at:])
    return "".join(out)


def stale(text: str, results: Path = RESULTS) -> list[Block]:
    """The blocks whose content differs from their result file."""
    return [b for b in blocks(text) if text[b.start:b.end] != result_text(b.name, results)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.readme",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 naming each block that differs")
    parser.add_argument("--readme", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--results", type=Path, default=RESULTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    worst = 0
    for path in [args.readme] if args.readme else pages():
        worst = max(worst, _one_page(path, args.results, check=args.check))
    return worst


def _one_page(path: Path, results: Path, *, check: bool) -> int:
    text = path.read_text()
    try:
        if check:
            old = stale(text, results)
            for block in old:
                log.error("%s line %d: the block results/%s differs from %s", path.name,
                          block.line, block.name, results / block.name)
            return 1 if old else 0
        new = render(text, results)
    except ReadmeError as exc:
        log.error("error: %s: %s", path.name, exc)
        return 2
    if new != text:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w") as handle:
            handle.write(new)
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    if blocks(new) or new != text:
        log.info("%s: %d result blocks, %s", path.name, len(blocks(new)),
                 "rewritten" if new != text else "already up to date")
    return 0

if __name__ == "__main__":
    sys.exit(main())
