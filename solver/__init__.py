"""ppsched's solver: the schedule model, simulator, generators, heuristic and views.

Pure Python: it imports neither torch nor fastapi (DESIGN.md section 5).
"""

from solver.errors import ProfileError, ScheduleInvalid, SolverError, Violation
from solver.ops import Op
from solver.profile import Problem, Profile, load_profile, parse_profile
from solver.schedule import Schedule, parse_schedule
from solver.simulator import simulate, validate
from solver.solve import methods, solve

__all__ = [
    "Op", "Problem", "Profile", "ProfileError", "Schedule", "ScheduleInvalid", "SolverError",
    "Violation", "load_profile", "methods", "parse_profile", "parse_schedule", "simulate",
    "solve", "validate",
]
