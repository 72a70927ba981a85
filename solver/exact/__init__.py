"""The exact models: CP-SAT and the MILP, the window search (LNS) and the memory
relaxations that prove how far a schedule is from optimal.
"""

# The improvements' listener is the package's surface (the service's jobs checkpoint with
# it); the models themselves are imported where used (OR-Tools only when asked for).
from ppsched.solver.exact.improvements import improved, listening, profile_for

__all__ = ["improved", "listening", "profile_for"]
