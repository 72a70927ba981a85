"""Which result files were measured on code older than the code they measure.

Each benchmark module that writes results declares, as literal tuples at its top level::

    WRITES = ("bubble_table.md", "bubble_table.csv")   # its files (glob patterns allowed)
    MEASURES = ("solver/heuristic", "solver/sim", "benchmarks/bubble_table.py")

``MEASURES`` names the code (and inputs) the figures depend on, narrowly, always with the
module's own file. Every file under ``benchmarks/results/`` carries a header
(`benchmarks.result_header`: a ``.md``'s first line, a ``.json``'s ``"header"`` key, the
companion ``.md`` for anything else) naming the commit it was measured on. A file is
stale when

- the last commit that changed its benchmark's ``MEASURES`` (``git log -1 -- PATHS``) is
  not the recorded commit nor one of its ancestors, and those paths differ between the
  recorded commit and ``HEAD`` (a change undone since leaves the measured code as it was);
- the recorded commit is ``+dirty`` (the tree had changes that could be measured code),
  ``unknown``, or not in this repository's history;
- it has no header (or one without load before and after, or a budget kind other than
  deterministic or wall), or its header names another benchmark's command;
- no benchmark claims it, or more than one does.

    python -m benchmarks.freshness             # exit 1 listing each stale file, else 0
    python -m benchmarks.freshness --commands  # the commands that regenerate them
    python -m benchmarks.freshness --ci        # exit 1 only for the files CI keeps fresh

CI (``tests/test_freshness.py``) keeps fresh every result file whose run took at most
`CI_CPU_S` seconds of CPU, as its header records: a change to the code such a file measures
must come with its regeneration. The longer benchmarks (up to hours of CPU on this
project's machines) are listed by the plain check, and by ``--ci`` as not enforced, with
their commands; `make check-docs` fails on any of them.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.result_header import carrier, read_header

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Benchmark:
    """A benchmark module's declarations."""

    module: str
    """``benchmarks.NAME``."""
    results: tuple[str, ...]
    measures: tuple[str, ...]

    def claims(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.results)


@dataclass(frozen=True)
class Stale:
    """A result file the check lists, why, and the command that regenerates it."""

    path: Path
    reason: str
    command: str | None


class DeclarationError(ValueError):
    """A benchmark whose WRITES or MEASURES is not a literal tuple of strings, or whose
    MEASURES leaves out its own file or names a path git does not track."""


def benchmarks(root: Path = ROOT) -> list[Benchmark]:
    """The modules of ``root/benchmarks`` that declare WRITES, read without importing
    them (some import torch).

    Raises:
        DeclarationError: WRITES without MEASURES, a non-literal value, or MEASURES
            without the module's own file.
    """
    found = []
    for path in sorted((root / "benchmarks").glob("*.py")):
        values: dict[str, tuple[str, ...]] = {}
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name) and \
                    node.targets[0].id in ("WRITES", "MEASURES"):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    value = None
                if not (isinstance(value, tuple) and value and
                        all(isinstance(x, str) for x in value)):
                    raise DeclarationError(f"{path.name}: {node.targets[0].id} must be a "
                                           "literal tuple of strings")
                values[node.targets[0].id] = value
        if "WRITES" not in values:
            continue
        own = path.relative_to(root).as_posix()
        if own not in values.get("MEASURES", ()):
            raise DeclarationError(f"{path.name}: MEASURES must name the module's own file "
                                   f"{own}")
        found.append(Benchmark(f"benchmarks.{path.stem}", values["WRITES"],
                               values["MEASURES"]))
    return found


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=False)


def last_change(root: Path, paths: tuple[str, ...]) -> str:
    """The last commit that changed any of `paths` (full hash).

    Raises:
        DeclarationError: git tracks nothing under one of the paths (a typo would make the
            check pass for ever).
    """
    for path in paths:
        if not _git(root, "ls-files", "--", path).stdout.strip():
            raise DeclarationError(f"MEASURES names {path}, which git does not track")
    done = _git(root, "log", "-1", "--format=%H", "--", *paths)
    if done.returncode != 0 or not done.stdout.strip():
        raise DeclarationError(f"git log finds no commit for {', '.join(paths)}: "
                               f"{done.stderr.strip()}")
    return done.stdout.strip()


def stale_files(root: Path = ROOT) -> list[Stale]:
    """Every result file under ``root/benchmarks/results`` the check lists, in name order."""
    declared = benchmarks(root)
    changes: dict[str, str] = {}
    out = []
    for path in sorted((root / "benchmarks" / "results").iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        owners = [b for b in declared if b.claims(path.name)]
        default = f"python -m {owners[0].module}" if len(owners) == 1 else None
        if not owners:
            out.append(Stale(path, "no benchmark claims it (no module's WRITES matches)",
                             None))
            continue
        if len(owners) > 1:
            out.append(Stale(path, "claimed by " + ", ".join(b.module for b in owners),
                             None))
            continue
        owner = owners[0]
        header = read_header(path)
        where = "" if carrier(path) == path else f" (its header is {carrier(path).name}'s)"
        if header is None:
            out.append(Stale(path, f"no header{where}", default))
            continue
        if not header.command.startswith(f"python -m {owner.module}") or \
                header.command[len(f"python -m {owner.module}"):][:1] not in ("", " "):
            out.append(Stale(path, f"its header names `{header.command}`, not "
                             f"{owner.module}", default))
            continue
        if header.load_before is None or header.load_after is None or \
                header.budget_kind is None:
            out.append(Stale(path, f"its header{where} lacks the load before and after or "
                             "a budget kind (deterministic or wall)", header.command))
            continue
        reason = _commit_reason(root, header.commit, owner, changes)
        if reason:
            out.append(Stale(path, reason + where, header.command))
    return out


def _commit_reason(root: Path, recorded: str, owner: Benchmark,
                   changes: dict[str, str]) -> str | None:
    """Why `recorded` is too old for `owner`'s code; None when it is not."""
    if recorded.endswith("+dirty"):
        return f"measured on {recorded}: a tree with uncommitted changes"
    if recorded == "unknown":
        return "measured outside a git checkout (commit unknown)"
    if _git(root, "cat-file", "-e", f"{recorded}^{{commit}}").returncode != 0:
        return f"measured on {recorded}, which is not in this repository's history"
    if owner.module not in changes:
        changes[owner.module] = last_change(root, owner.measures)
    last = changes[owner.module]
    if _git(root, "merge-base", "--is-ancestor", last, recorded).returncode == 0:
        return None
    if _git(root, "diff", "--quiet", recorded, "HEAD", "--", *owner.measures).returncode == 0:
        return None  # changed and changed back: the code it measures is what it measured
    subject = _git(root, "log", "-1", "--format=%h %s", last).stdout.strip()
    return (f"measured on {recorded}; what it measures ({', '.join(owner.measures)}) "
            f"changed since, last in {subject[:90]}")


CI_CPU_S = 300.0
"""The most CPU seconds a result file's run may have taken for CI to hold it fresh."""


def enforced_in_ci(item: Stale) -> bool:
    """Whether CI fails on this stale file: its header records a run of at most
    `CI_CPU_S` seconds of CPU (a file with no such header is a long or never-run one)."""
    header = read_header(item.path)
    return header is not None and header.cpu_s is not None and header.cpu_s <= CI_CPU_S


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.freshness",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--commands", action="store_true",
                        help="print the command that regenerates each stale file, one a line")
    parser.add_argument("--ci", action="store_true",
                        help=f"fail only on stale files whose run took at most {CI_CPU_S:g} s "
                        "of CPU; list the others as not enforced")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        found = stale_files(args.root)
    except DeclarationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.ci:
        enforced = [s for s in found if enforced_in_ci(s)]
        for item in found:
            print(("stale" if item in enforced else "not enforced (a long run)")
                  + f": {item.path.relative_to(args.root)}: {item.reason}"
                  + (f"; regenerate: {item.command}" if item.command else ""))
        if not enforced:
            print(f"no stale result file of a run under {CI_CPU_S:g} s of CPU")
        return 1 if enforced else 0
    if args.commands:
        commands = dict.fromkeys(s.command or f"# {s.path.name}: no benchmark writes it"
                                 for s in found)
        print("\n".join(commands))
        return 1 if found else 0
    for item in found:
        print(f"{item.path.relative_to(args.root)}: {item.reason}"
              + (f"; regenerate: {item.command}" if item.command else ""))
    if not found:
        print("no stale result files")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
