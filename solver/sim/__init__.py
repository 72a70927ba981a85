"""The timing: the simulator (the only source of figures, STYLE.md choice 3), its lanes for
activation policies, and the schedule JSON built from a timed order.
"""

from ppsched.solver.sim.emit import schedule_from_orders, schedule_from_simulation
from ppsched.solver.sim.result import Metrics, Simulation
from ppsched.solver.sim.simulator import simulate, validate

__all__ = [
    "Metrics",
    "Simulation",
    "schedule_from_orders",
    "schedule_from_simulation",
    "simulate",
    "validate",
]
