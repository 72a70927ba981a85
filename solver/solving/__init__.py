"""The entry: `solve` (a profile and a method to a validated schedule), the method table
and the layouts a one-chunk profile may be cut into.
"""

from ppsched.solver.solving.entry import solve
from ppsched.solver.solving.layouts import Layout, default_layouts, layout_name, parse_layouts
from ppsched.solver.solving.method_names import (
    HEURISTIC,
    ILP,
    OBJECTIVES,
    ZB_LOOP,
    aliases,
    methods,
    resolve_method,
)
from ppsched.solver.solving.refine import BACKENDS, ExactOptions

__all__ = [
    "BACKENDS",
    "HEURISTIC",
    "ILP",
    "OBJECTIVES",
    "ZB_LOOP",
    "ExactOptions",
    "Layout",
    "aliases",
    "default_layouts",
    "layout_name",
    "methods",
    "parse_layouts",
    "resolve_method",
    "solve",
]
