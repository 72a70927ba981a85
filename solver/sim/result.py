"""What the simulator returns: a timed order (`Simulation`) and its figures (`Metrics`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ppsched.solver.model.errors import Violation
from ppsched.solver.model.ops import Op


@dataclass(frozen=True)
class Metrics:
    """The figures of a timed schedule (DESIGN.md section 3)."""

    cost: float
    makespan: float
    bubble_rate: float
    peak_memory: tuple[float, ...]
    lower_bound: float
    span: tuple[float, ...]
    busy: tuple[float, ...]
    idle_fraction: tuple[float, ...]  # per rank: idle share of its own span

    def objective(self, name: str) -> float:
        """The value of objective ``cost`` (largest span) or ``makespan``."""
        return self.makespan if name == "makespan" else self.cost


@dataclass
class Simulation:
    """What the simulator found: times (where an op could be timed), memory, violations."""

    order: list[list[Op]]
    start: list[list[float | None]]
    end: list[list[float | None]]
    memory_peak: tuple[float, ...]
    violations: list[Violation] = field(default_factory=list)
    metrics: Metrics | None = None

    @property
    def ok(self) -> bool:
        return not self.violations
