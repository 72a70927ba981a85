"""Run the README's command-line examples and keep what they print in `benchmarks/results/`.

Each transcript is one command of the README, run here from the repository root through
the real command line (`python -m ppsched.api.cli`, shown as `ppsched`), with its output
written to ``benchmarks/results/cli_NAME.md`` as a console block. The README shows those files
between result markers (`python -m benchmarks.readme`), so every figure of an example is
one this command printed. Run it after a change that moves a figure::

    python -m benchmarks.transcripts                 # every transcript
    python -m benchmarks.transcripts solve_2p ilp_12 # some of them
    python -m benchmarks.transcripts --list

`tests/test_readme_transcripts.py` re-runs every one (the long ones marked slow) and compares
everything but the header line and the lines that are measured wall time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.result_header import result_header, start

ROOT = Path(__file__).resolve().parents[1]
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("cli_*.md",)
MEASURES = (
    "solver", "api", "profiles/gpt1.5b-p8-m24.json", "profiles/uniform-p4-m8.json",
    "examples/sweep-zb.yaml", "examples/sweep-typo.yaml", "benchmarks/transcripts.py",
)
RESULTS = ROOT / "benchmarks" / "results"

log = logging.getLogger(__name__)

# Lines whose figures are measured, not computed: a re-run may print other values.
MEASURED_PREFIXES = ("wall time",)
MEASURED_WORDS = ('"wall_s"',)


@dataclass(frozen=True)
class Transcript:
    """One README example: the command, how its output is shown, whether tests re-run it."""

    name: str
    args: str
    """The arguments after ``ppsched``, as the README shows them."""
    exit_code: int = 0
    quick: bool = True
    """Its test is quick (a second or two); False for long searches, whose test is marked
    slow (every transcript is re-run by `tests/test_readme_transcripts.py`)."""
    head: int | None = None
    """Show only the first lines of the output (the rest is counted in a closing line)."""
    before: tuple[str, ...] = ()
    """Files to delete first, so that the run starts from nothing (a sweep's output)."""

    @property
    def path(self) -> Path:
        return RESULTS / f"cli_{self.name}.md"


TRANSCRIPTS = (
    Transcript("solve_2p", "solve profiles/gpt1.5b-p8-m24.json --memory-limit 16 "
               "--svg docs/gpt1.5b-p8-m24-2p.svg"),
    Transcript("solve_1f1b", "solve profiles/gpt1.5b-p8-m24.json --method 1f1b"),
    Transcript("solve_1p", "solve profiles/gpt1.5b-p8-m24.json"),
    Transcript("grid_zb_h1", "solve profiles/uniform-p4-m8.json --method zb-h1 --grid"),
    Transcript("error_zb_h2", "solve profiles/gpt1.5b-p8-m24.json --method zb-h2",
               exit_code=2),
    Transcript("sweep_zb", "sweep examples/sweep-zb.yaml -o out/sweep-zb.jsonl "
               "--csv out/sweep-zb.csv --plots docs/sweep-zb --no-progress",
               quick=False, head=12, before=("out/sweep-zb.jsonl",)),
    Transcript("sweep_typo", "sweep examples/sweep-typo.yaml", exit_code=2),
    # The exact searches run on a work limit (CP-SAT's deterministic time, no wall-time
    # limit): the same figures on any load, tens of seconds of CPU each, so their tests
    # are marked slow (`make test` runs them; `-m "not slow"` leaves them).
    Transcript("ilp_12", "solve profiles/gpt1.5b-p8-m24.json --memory-limit 12 --method ilp "
               "--work-limit 30 --layouts 1", quick=False),
    Transcript("ilp_6", "solve profiles/gpt1.5b-p8-m24.json --memory-limit 6 --method ilp "
               "--work-limit 10 --layouts 1", quick=False),
    # Every layout (the default): the V cut refined, the bound over all three layouts.
    Transcript("ilp_6_layouts", "solve profiles/gpt1.5b-p8-m24.json --memory-limit 6 "
               "--method ilp --work-limit 30", quick=False),
    Transcript("layouts_1p", "solve profiles/gpt1.5b-p8-m24.json --layouts 1,v,loop2 "
               "--svg docs/gpt1.5b-p8-m24-v.svg"),
    # --unchunked-loss: the heuristic splits W on the last stage, which torchtitan 0.3.0's
    # chunked loss cannot run (solver/integrations/torchtitan.py); without it, refused.
    Transcript("torchtitan", "torchtitan profiles/gpt1.5b-p8-m24.json --layers 22 "
               "--local-batch-size 144 --unchunked-loss -o out/torchtitan --mkdir"),
)


@dataclass(frozen=True)
class Request:
    """One HTTP request to a real `ppsched serve` (on a free port, shown as `make run`'s
    8000, with an empty store), shown as the curl command and its answer. The answer's
    echoed profile and each rank's ops after its first are shortened to ``...``, and
    long lines wrapped."""

    body: dict[str, Any]
    path: str = "/v1/schedules"

    def command(self) -> list[str]:
        data = json.dumps(self.body)
        return [f"$ curl -s -X POST http://127.0.0.1:8000{self.path} "
                "-H 'content-type: application/json' \\",
                *textwrap.wrap(f"-d '{data}'", 96, initial_indent="    ",
                               subsequent_indent="      ")]


@dataclass(frozen=True)
class HttpTranscript:
    """Requests to the service, one console block."""

    name: str
    requests: tuple[Request, ...]
    quick: bool = True

    @property
    def path(self) -> Path:
        return RESULTS / f"cli_{self.name}.md"

    @property
    def args(self) -> str:
        return f"(a real server) {', '.join(r.path for r in self.requests)}"


_UNIT_P4 = {"num_ranks": 4, "num_microbatches": 8, "t_f": 1, "t_b": 1, "t_w": 1, "m_b": 1,
            "m_w": 0.5}
HTTP_TRANSCRIPTS = (
    HttpTranscript("service_solve", (
        Request({"profile": _UNIT_P4, "method": "zb-h1"}),
        Request({"profile": {**_UNIT_P4, "num_ranks": 100}}),
    )),
)
ALL = (*TRANSCRIPTS, *HTTP_TRANSCRIPTS)
BY_NAME = {t.name: t for t in ALL}


def _pythonpath() -> str:
    """The checkout first; a PYTHONPATH the caller set (a worktree's links) kept after it."""
    return os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


def run(transcript: Transcript) -> str:
    """Run one transcript's command; its console block (the file's content).

    Raises:
        RuntimeError: the command exited with another status than the transcript expects.
    """
    for name in transcript.before:
        (ROOT / name).unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": _pythonpath(), "COLUMNS": "120", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "ppsched.api.cli", *shlex.split(transcript.args)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != transcript.exit_code:
        raise RuntimeError(f"ppsched {transcript.args} exited {done.returncode}, expected "
                           f"{transcript.exit_code}:\n{done.stdout}{done.stderr}")
    # stderr carries progress lines on long solves; errors are the whole of it.
    output = done.stdout if transcript.exit_code == 0 else done.stderr
    return console_block(transcript, output)


def output(transcript: Transcript | HttpTranscript) -> str:
    """Run a transcript of either kind; its console block."""
    return run_http(transcript) if isinstance(transcript, HttpTranscript) else run(transcript)


def run_http(transcript: HttpTranscript) -> str:
    """Start a real server, send the transcript's requests; its console block."""
    lines = ["```console"]
    with _server() as url, httpx.Client(base_url=url, timeout=120) as client:
        for request in transcript.requests:
            answer = client.post(request.path, json=request.body)
            lines += [*request.command(), *_shown(answer.json())]
    return "\n".join([*lines, "```"]) + "\n"


def _shown(answer: Any) -> list[str]:
    """The answer as JSON: the top two levels of objects one key a line, deeper values on
    one line."""
    if isinstance(answer, dict) and "ranks" in answer:
        answer = {**answer, "profile": _CUT, "ranks": [[ops[0], _MORE] for ops in
                                                        answer["ranks"]]}
    return _lines(answer, 0)


def _lines(value: Any, depth: int) -> list[str]:
    if isinstance(value, list) and value and all(isinstance(x, list) for x in value):
        pad = "  " * (depth + 1)  # the ranks: one a line
        return ["[", *[f"{pad}{_compact(x)}," for x in value[:-1]],
                f"{pad}{_compact(value[-1])}", "  " * depth + "]"]
    if not isinstance(value, dict) or depth >= 2 or not value:
        return [_compact(value)]
    pad = "  " * (depth + 1)
    out = ["{"]
    for i, (key, item) in enumerate(value.items()):
        inner = _lines(item, depth + 1)
        comma = "," if i < len(value) - 1 else ""
        out += [f"{pad}{json.dumps(key)}: {inner[0]}", *inner[1:-1]] if len(inner) > 1 \
            else [f"{pad}{json.dumps(key)}: {inner[0]}{comma}"]
        if len(inner) > 1:
            out.append(inner[-1] + comma)
    out.append("  " * depth + "}")
    return out


_CUT, _MORE = "\0", "\1"  # placeholders for what the transcript shortens


def _compact(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return text.replace('"\\u0000"', "{...}").replace(',"\\u0001"', ",...")


@contextlib.contextmanager
def _server() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder, socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        env = {**os.environ, "PYTHONPATH": _pythonpath(),
               "PPSCHED_DB_PATH": str(Path(folder) / "store.sqlite3")}
        log = (Path(folder) / "server.log").open("wb")
        process = subprocess.Popen([sys.executable, "-m", "ppsched.api.cli", "serve", "--port",
                                    str(port)], cwd=ROOT, env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(process, url, Path(folder) / "server.log")
            yield url
        finally:
            process.terminate()
            process.wait(timeout=60)
            log.close()


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    # Polls a state (the server answers /readyz), with a generous limit for a loaded
    # machine: the limit only turns a server that never starts into an error.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ppsched serve exited: {log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"ppsched serve did not get ready: {log.read_text()[-2000:]}")


def console_block(transcript: Transcript, output: str) -> str:
    lines = output.rstrip("\n").split("\n")
    if transcript.head is not None and len(lines) > transcript.head:
        cut = len(lines) - transcript.head - 1
        lines = [*lines[:transcript.head], f"... ({cut} lines cut)", lines[-1]]
    return "\n".join(["```console", f"$ ppsched {transcript.args}", *lines, "```"]) + "\n"


def comparable(text: str) -> list[str]:
    """A transcript's lines without the measured ones (what a re-run must reproduce): its
    console block alone (a file's header line, `benchmarks.result_header`, says when and
    where it was made, which no re-run repeats), less the lines of measured wall time."""
    at = text.find("```console")
    if at < 0:
        raise ValueError(f"no console block in {text[:200]!r}")
    return [line for line in text[at:].splitlines()
            if not line.lstrip().startswith(MEASURED_PREFIXES)
            and not any(word in line for word in MEASURED_WORDS)]


def budget(transcript: Transcript | HttpTranscript) -> str:
    """The header's budget: the exact solver's runs name their work limit (CP-SAT's
    deterministic time); the rest are deterministic computations. A `wall time` line is
    measured, and left out of the comparison (`comparable`)."""
    args = shlex.split(transcript.args)
    if "--work-limit" in args:
        return (f"deterministic (CP-SAT --work-limit {args[args.index('--work-limit') + 1]}, "
                "no wall-time limit; the wall time line is wall)")
    if "--time-limit" in args:
        return "wall (--time-limit: the answer depends on the load)"
    return "deterministic (no time limit; any wall time line is wall)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.transcripts",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="transcripts to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the transcripts and exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.list:
        for t in ALL:
            log.info("%-12s ppsched %s", t.name, t.args)
        return 0
    unknown = [n for n in args.names if n not in BY_NAME]
    if unknown:
        log.error("error: no transcript %s; the transcripts are %s", ", ".join(unknown),
                  ", ".join(BY_NAME))
        return 2
    (ROOT / "out").mkdir(exist_ok=True)
    for name in args.names or list(BY_NAME):
        transcript = BY_NAME[name]
        started = start()
        block = output(transcript)
        header = result_header(f"python -m benchmarks.transcripts {name}",
                               budget=budget(transcript), started=started)
        transcript.path.write_text("\n".join(header) + "\n" + block)
        log.info("wrote %s", transcript.path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
