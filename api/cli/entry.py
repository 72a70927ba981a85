"""The `ppsched` command line's parser and dispatch: each subcommand's module registers
its parser and its `run`; `main` runs the one asked for.

Every user error ends in one line on stderr and a non-zero exit (2 for bad input, 1 for
an invalid schedule); a reader that closes the pipe early (`| head`) ends the command
quietly with the same exit status, the files already written (output.py writes them
whole, before any printing).
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ppsched.api.cli.advise import add_advise_parser
from ppsched.api.cli.catalog import add_methods_parser, add_schema_parser
from ppsched.api.cli.keys import add_keys_parser
from ppsched.api.cli.output import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_USAGE
from ppsched.api.cli.pack import add_pack_parser
from ppsched.api.cli.partition import add_partition_parser
from ppsched.api.cli.render import add_render_parser
from ppsched.api.cli.serve import add_serve_parser
from ppsched.api.cli.simulate import add_simulate_parsers
from ppsched.api.cli.solve import add_solve_parser
from ppsched.api.cli.sweep import add_sweep_parser
from ppsched.api.cli.torchtitan import add_torchtitan_parser
from ppsched.api.cli.weipipe import add_weipipe_parser
from ppsched.solver.model import ProfileError, ScheduleInvalid, install_command

# The modules each optional extra brings (pyproject.toml), and the commands that need one.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "service": ("fastapi", "uvicorn", "pydantic_settings", "prometheus_client"),
    "sweep": ("yaml", "dask", "distributed", "rich", "matplotlib", "pyarrow"),
    "torch": ("torch",),
}
COMMAND_EXTRAS = {"serve": "service", "sweep": "sweep"}


class MissingExtra(ValueError):
    """A command needs an optional extra that is not installed."""

    def __init__(self, command: str, extra: str, module: str) -> None:
        self.command, self.extra, self.module = command, extra, module
        super().__init__(f"ppsched {command} needs the '{extra}' extra (module '{module}' "
                         f"is missing): {install_command(extra)}")


def require_extra(command: str) -> None:
    """Raise MissingExtra when a module of the extra `command` needs is not installed."""
    extra = COMMAND_EXTRAS.get(command)
    if extra is None:
        return
    for module in EXTRA_MODULES[extra]:
        if importlib.util.find_spec(module) is None:
            raise MissingExtra(command, extra, module)


def _extra_of(module: str | None) -> str | None:
    top = (module or "").split(".")[0]
    return next((extra for extra, mods in EXTRA_MODULES.items() if top in mods), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `ppsched` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    default_level = logging.INFO if args.command == "serve" else logging.WARNING
    logging.basicConfig(level=logging.DEBUG if args.verbose else default_level,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        require_extra(args.command)
        code = int(args.run(args))
        # Flush here, not at the interpreter's exit: a reader gone by then (`| head`)
        # would turn the exit status into 120 with a traceback-like note.
        sys.stdout.flush()
        return code
    except MissingExtra as exc:
        print(f"ppsched: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:
        # A module of an extra imported deeper down than require_extra looks.
        extra = _extra_of(exc.name)
        if extra is None:
            raise
        print(f"ppsched: error: {MissingExtra(args.command, extra, str(exc.name))}",
              file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader closed stdout (`| head`): what was asked for is done, the files are
        # written; end quietly, with the verdict the command reached before printing (an
        # invalid schedule still exits 1, so `set -o pipefail` sees it). Point stdout at
        # /dev/null so the interpreter's final flush cannot raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return int(getattr(args, "verdict", 0))
    except ProfileError as exc:
        print(f"ppsched: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ScheduleInvalid as exc:
        print(f"ppsched: error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        print("ppsched: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: the message, not the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ppsched", description="Pipeline-parallel schedules: Zero Bubble and classics, "
        "simulated and validated under the DESIGN.md cost model.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)

    add_solve_parser(sub)  # api/cli/solve.py
    add_simulate_parsers(sub)  # simulate, import-csv: api/cli/simulate.py
    add_render_parser(sub)  # api/cli/render.py
    add_methods_parser(sub)  # api/cli/catalog.py
    add_serve_parser(sub)  # api/cli/serve.py (the service: api/service/)
    add_keys_parser(sub)  # `ppsched keys hash TENANT`: api/cli/keys.py (the service's keys)
    add_schema_parser(sub)  # api/cli/catalog.py
    add_sweep_parser(sub)  # `ppsched sweep GRID.yaml`: api/cli/sweep.py (engine: api/sweep/)
    add_advise_parser(sub)  # `ppsched advise MODEL.yaml`: api/cli/advise.py
    add_weipipe_parser(sub)  # `ppsched weipipe PROFILE.json`: api/cli/weipipe.py
    add_pack_parser(sub)  # `ppsched pack LENGTHS ...`: api/cli/pack.py
    add_torchtitan_parser(sub)  # `ppsched torchtitan PROFILE.json -o DIR`: api/cli/torchtitan.py
    add_partition_parser(sub)  # `ppsched partition LAYERS.json -o OUT.json`: api/cli/partition.py
    return parser
