"""WeiPipe: weight-passing pipelines (DESIGN.md section 6.5), timed by their own ring model.

Activations stay on their rank; weight chunks and their gradients travel a ring of ranks.
`profile` holds the input type, `schedules` the four programs of the WeiPipe slides,
`simulator` the ring-step timing model, `render` the text grid and the SVG.
"""

from ppsched.solver.weipipe.profile import WeiPipeProfile, parse_weipipe_profile
from ppsched.solver.weipipe.render import weipipe_grid, weipipe_svg
from ppsched.solver.weipipe.schedules import SCHEDULES, build_program
from ppsched.solver.weipipe.simulator import WeiPipeResult, simulate_weipipe

__all__ = ["SCHEDULES", "WeiPipeProfile", "WeiPipeResult", "build_program",
           "parse_weipipe_profile", "simulate_weipipe", "weipipe_grid", "weipipe_svg"]
