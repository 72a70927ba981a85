"""ppsched's solver: the schedule model, simulator, generators, heuristic and views.

Pure Python: it imports neither torch nor fastapi (DESIGN.md section 5).
"""

from ppsched.solver.model.errors import ProfileError, ScheduleInvalid, SolverError, Violation
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import Profile, load_profile, parse_profile
from ppsched.solver.model.schedule import Schedule, parse_schedule
from ppsched.solver.sim.simulator import simulate, validate
from ppsched.solver.solving.entry import solve
from ppsched.solver.solving.method_names import methods

__all__ = [
    "Op", "Problem", "Profile", "ProfileError", "Schedule", "ScheduleInvalid", "SolverError",
    "Violation", "load_profile", "methods", "parse_profile", "parse_schedule", "simulate",
    "solve", "validate",
]
