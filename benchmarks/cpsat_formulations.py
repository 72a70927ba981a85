"""Which CP-SAT formulation of memory to use, by measurement.

Run: ``python -m benchmarks.cpsat_formulations [--time-limit S]``. For a few paper
configurations at 1p and 2p memory it solves the same model four ways: the reservoir
propagated on start times or expanded into ordering literals (CP-SAT's
``expand_reservoir_constraints``), each with and without the memory-aware lower bound
as a cut, all hinted with the heuristic, and prints objective, bound, time to the first
solution and wall time. ``solver/exact/cpsat.py`` uses the combination this table favours.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ortools.sat.python import cp_model
from ppsched.solver.exact.cpsat import build_model
from ppsched.solver.exact.frame import hint_timing, scale
from ppsched.solver.heuristic.search import zb_heuristic
from ppsched.solver.model.profile import load_profile

from benchmarks.bubble_table import with_limit_multiple

ROOT = Path(__file__).resolve().parent.parent
CASES = [("gpt1.5b-p8-m24", 1), ("gpt1.5b-p8-m24", 2), ("gpt1.5b-p8-m32", 2),
         ("gpt14.6b-p16-m48", 1), ("gpt14.6b-p16-m64", 2)]


class _FirstSolution(cp_model.CpSolverSolutionCallback):
    def __init__(self) -> None:
        super().__init__()
        self.began = time.perf_counter()
        self.first: float | None = None

    def on_solution_callback(self) -> None:
        if self.first is None:
            self.first = time.perf_counter() - self.began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print("| config | memory | reservoir | bound cut | status | objective | bound | "
          "first solution s | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, multiple in CASES:
        profile = with_limit_multiple(load_profile(ROOT / "profiles" / f"{name}.json"),
                                      multiple)
        problem = profile.problem
        scaled = scale(problem)
        hint = zb_heuristic(problem).orders
        ticks, cost, _ = hint_timing(problem, scaled, hint)
        for expand in (False, True):
            for cut in (True, False):
                built = build_model(problem, scaled, ticks, cost, bound_cut=cut)
                solver = cp_model.CpSolver()
                solver.parameters.max_time_in_seconds = args.time_limit
                solver.parameters.num_workers = args.workers
                solver.parameters.expand_reservoir_constraints = expand
                callback = _FirstSolution()
                status = solver.solve(built.model, callback)
                found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
                print(f"| {name} | {multiple}p | {'expanded' if expand else 'propagated'} | "
                      f"{'yes' if cut else 'no'} | {solver.status_name(status)} | "
                      f"{scaled.time_units(solver.objective_value) if found else '-'} | "
                      f"{scaled.time_units(solver.best_objective_bound) if found else '-'} | "
                      f"{'-' if callback.first is None else round(callback.first, 2)} | "
                      f"{solver.wall_time:.1f} |", flush=True)


if __name__ == "__main__":
    main()
