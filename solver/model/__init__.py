"""The data and its closed forms: ops, the profile and its resolved `Problem`, the schedule
type, errors, bounds and layouts. Knows no timing and no algorithm (STYLE.md choice 1).
"""

from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.errors import ProfileError, ScheduleInvalid, SolverError, Violation
from ppsched.solver.model.extras import checkout_root, install_command
from ppsched.solver.model.grid import order_grid, time_grid
from ppsched.solver.model.layers import (
    Layer,
    LayerProfile,
    cut_bounds,
    cut_profile,
    load_layers,
    parse_layers,
)
from ppsched.solver.model.names import closest_name, did_you_mean
from ppsched.solver.model.offload_sizing import with_offload, with_offload_bandwidth
from ppsched.solver.model.ops import KINDS, FBOp, Kind, Op, Orders, parts
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import Profile, load_profile, parse_profile, read_json
from ppsched.solver.model.schedule import (
    Schedule,
    ScheduledOp,
    ScheduleMetrics,
    SolverInfo,
    parse_schedule,
)
from ppsched.solver.model.shapes import shape_warnings

__all__ = [
    "KINDS",
    "FBOp",
    "Kind",
    "Layer",
    "LayerProfile",
    "Op",
    "Orders",
    "Problem",
    "Profile",
    "ProfileError",
    "Schedule",
    "ScheduleInvalid",
    "ScheduleMetrics",
    "ScheduledOp",
    "SolverError",
    "SolverInfo",
    "Violation",
    "checkout_root",
    "closest_name",
    "cut_bounds",
    "cut_profile",
    "did_you_mean",
    "install_command",
    "load_layers",
    "load_profile",
    "lower_bound",
    "order_grid",
    "parse_layers",
    "parse_profile",
    "parse_schedule",
    "parts",
    "read_json",
    "shape_warnings",
    "time_grid",
    "with_chunks",
    "with_offload",
    "with_offload_bandwidth",
]
