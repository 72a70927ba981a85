"""Running a sweep: tasks on local processes or a Dask cluster, rows streamed to JSONL.

Rows already in the output file (same key) are skipped, so a rerun resumes. A bounded
window of tasks is in flight at a time; each finished row is written (flushed, fsynced)
before the next is submitted, so a kill loses only rows still running. Ctrl-C stops
submitting, cancels what is pending and keeps every finished row.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ppsched.api.sweep.expand import Task
from ppsched.api.sweep.records import RowWriter, read_rows
from ppsched.api.sweep.task import ignore_sigint, run_task
from ppsched.solver.model import ProfileError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
"""How long to try reaching a Dask scheduler before giving up."""


@dataclass
class SweepOutcome:
    """What one run of a sweep did."""

    total: int
    """Rows of the grid."""
    skipped: int
    """Rows already in the output file, not solved again."""
    done: int = 0
    """Rows solved and written by this run."""
    errors: int = 0
    """Of those, rows with status 'error' (a method refused the configuration)."""
    lost: int = 0
    """Rows whose worker failed (died, lost its connection): not written, redone on rerun."""
    interrupted: bool = False


def run_sweep(tasks: Sequence[Task], output: str | Path, *, jobs: int | None = None,
              scheduler: str | None = None, keep_dir: str | None = None,
              progress: bool = True) -> SweepOutcome:
    """Solve the tasks whose keys are not yet in `output`, appending a row for each.

    Args:
        tasks: the expanded grid.
        output: the JSONL record (created if missing, appended to otherwise).
        jobs: local worker processes (default: the CPU count); ignored with `scheduler`.
        scheduler: address of a running Dask scheduler (``tcp://HOST:PORT``).
        keep_dir: write each schedule JSON there as ``KEY.json``.
        progress: show a progress bar on stderr.

    Raises:
        ProfileError: an unusable output path, job count or scheduler address.
    """
    if jobs is not None and jobs < 1:
        raise ProfileError("jobs", jobs, "an integer >= 1")
    finished = {row["key"] for row in read_rows(output)}
    todo = [t for t in tasks if t.key not in finished]
    outcome = SweepOutcome(total=len(tasks), skipped=len(tasks) - len(todo))
    if not todo:
        return outcome
    solve_one = partial(run_task, keep_dir=keep_dir)
    with RowWriter(output) as writer, _executor(jobs, scheduler) as (executor, slots), \
            _progress_bar(len(todo), outcome.skipped, enabled=progress) as advance:
        queue = iter(todo)
        in_flight: dict[Future[dict[str, Any]], Task] = {}
        try:
            _fill(executor, solve_one, queue, in_flight, 2 * slots)
            while in_flight:
                ready, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                broken = False
                for future in ready:
                    task = in_flight.pop(future)
                    try:
                        row = future.result()
                    except BrokenProcessPool:
                        outcome.lost += 1
                        broken = True
                        continue
                    except Exception as exc:  # a worker died or a cluster failed
                        log.warning("row %s (%s) was lost: %r", task.key, task.method, exc)
                        outcome.lost += 1
                        continue
                    writer.write(row)
                    outcome.done += 1
                    outcome.errors += row["status"] == "error"
                    advance()
                if broken:
                    outcome.lost += len(in_flight)
                    log.warning("a worker process died; %d rows not run (rerun to resume)",
                                len(todo) - outcome.done)
                    break
                _fill(executor, solve_one, queue, in_flight, 2 * slots)
        except KeyboardInterrupt:
            outcome.interrupted = True
            for future in in_flight:
                future.cancel()
            _stop(executor)
    return outcome


def _fill(executor: Executor, solve_one: Any, queue: Iterator[Task],
          in_flight: dict[Future[dict[str, Any]], Task], window: int) -> None:
    while len(in_flight) < window:
        task = next(queue, None)
        if task is None:
            return
        with _sigint_blocked():  # a submit may start a worker process
            in_flight[executor.submit(solve_one, task)] = task


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Hold Ctrl-C back while worker processes may start.

    A terminal's Ctrl-C reaches the whole process group. A worker still starting up (before
    its initializer ignores SIGINT) would die with a traceback on stderr; started with
    SIGINT blocked, it inherits the mask and never sees it. The parent gets its pending
    KeyboardInterrupt as soon as the block ends.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def _executor(jobs: int | None, scheduler: str | None) -> Iterator[tuple[Executor, int]]:
    """A concurrent.futures executor and its number of slots (tasks it runs at once)."""
    if scheduler:
        from distributed import Client  # only a Dask sweep needs distributed

        try:
            client = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise ProfileError("scheduler", scheduler, "the address of a running Dask "
                               f"scheduler, such as tcp://HOST:8786 ({exc})") from None
        try:
            slots = max(1, sum(client.nthreads().values()))
            executor = client.get_executor(pure=False)
            yield executor, slots
            executor.shutdown(wait=False)
        finally:
            client.close()
        return
    workers = jobs or os.cpu_count() or 1
    # spawn, not fork: the parent has threads (the progress bar's), which fork would copy.
    with _sigint_blocked():  # the pool may start its helper processes here
        pool = ProcessPoolExecutor(max_workers=workers, initializer=ignore_sigint,
                                   mp_context=multiprocessing.get_context("spawn"))
    try:
        yield pool, workers
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _stop(executor: Executor) -> None:
    """Cancel what is pending and end running work now (Ctrl-C)."""
    if not isinstance(executor, ProcessPoolExecutor):
        executor.shutdown(wait=False)  # Dask's executor cancels its futures
        return
    executor.shutdown(wait=False, cancel_futures=True)
    # ProcessPoolExecutor has no public way to end running tasks before Python 3.14.
    processes = getattr(executor, "_processes", None) or {}
    for process in list(processes.values()):
        process.terminate()


@contextmanager
def _progress_bar(total: int, skipped: int, *, enabled: bool) -> Iterator[Any]:
    """A rich progress bar on stderr (done/total, rows/s, elapsed, ETA); yields advance()."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:.1f} rows/s" if speed else "- rows/s")

    label = f"sweep ({skipped} done before)" if skipped else "sweep"
    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), RateColumn(),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                   console=Console(stderr=True), disable=not enabled, transient=False)
    task_id = bar.add_task("sweep", total=total)
    with bar:
        yield lambda: bar.advance(task_id)
