"""The `ppsched` command line (the console script `ppsched = ppsched.api.cli:main`).

`entry.py` holds the parser and the dispatch; one module per subcommand (solve, simulate,
render, catalog, serve, sweep, advise, weipipe, pack, torchtitan) registers its parser and
runs it, sharing `options.py` (option types and groups) and `output.py` (summary, files,
progress, exit codes); no subcommand imports `entry`.
"""

from ppsched.api.cli.entry import main

__all__ = ["main"]
