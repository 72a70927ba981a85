"""The registry of schedule generators: name -> pure function from a problem to orders.

Generator modules register themselves here on import; `ppsched.solver.generators` imports
them all and looks names up (`get_generator`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.lazy_orders import LazyOrders
from ppsched.solver.model.ops import Op, Orders
from ppsched.solver.model.problem import Problem

GeneratorFn = Callable[[Problem], Orders]
RowsFn = Callable[[Problem], list[Iterator[Op]]]


@dataclass(frozen=True)
class Generator:
    """A registered schedule: its name, what it is, and which shapes it supports."""

    name: str
    fn: GeneratorFn
    summary: str
    num_chunks: tuple[int, ...] = (1,)
    """The chunk counts `v` it supports; an empty tuple means any `v >= 2`."""
    placement: str | None = None
    """The placement it needs when `v > 1` (``loop`` or ``v``); None for single-chunk."""
    rows: RowsFn | None = None
    """Each rank's order as an iterator, for a generator written so (`register_rows`)."""

    def supports(self, problem: Problem) -> bool:
        """Whether this generator can order `problem` (its chunk count and placement)."""
        if problem.num_chunks == 1:
            return 1 in self.num_chunks
        return (not self.num_chunks or problem.num_chunks in self.num_chunks) and \
            problem.placement == self.placement

    def __call__(self, problem: Problem) -> Orders:
        if not self.supports(problem):
            raise self.refusal(problem)
        return self.fn(problem)

    def lazy(self, problem: Problem) -> LazyOrders:
        """The orders as `LazyOrders`: generated as far as they are read where the
        generator writes rank by rank, else complete at once."""
        if not self.supports(problem):
            raise self.refusal(problem)
        if self.rows is None:
            return LazyOrders.of(self.fn(problem))
        return LazyOrders(self.rows(problem))

    def refusal(self, problem: Problem) -> ProfileError:
        """The error naming why `problem`'s shape is not one this generator orders."""
        chunks = "= " + " or ".join(map(str, self.num_chunks)) if self.num_chunks else ">= 2"
        wanted = f"num_chunks {chunks}" + (
            f" with placement '{self.placement}'" if self.placement else "")
        chunks_ok = problem.num_chunks in self.num_chunks or (
            not self.num_chunks and problem.num_chunks > 1)
        if chunks_ok and problem.num_chunks > 1:
            return ProfileError("placement", problem.placement,
                                f"'{self.placement}' for schedule '{self.name}'")
        hint = ""
        if problem.num_chunks == 1 and self.placement:
            layout = "v" if self.placement == "v" else "loop2"
            hint = f" (allow layout '{layout}' to re-cut a one-chunk profile's model)"
        return ProfileError("num_chunks", problem.num_chunks, f"{wanted} for schedule "
                            f"'{self.name}'{hint}")


REGISTRY: dict[str, Generator] = {}


def register(name: str, summary: str, num_chunks: tuple[int, ...] = (1,),
             placement: str | None = None) -> Callable[[GeneratorFn], GeneratorFn]:
    """Decorator: add a generator to the registry under `name`."""

    def add(fn: GeneratorFn) -> GeneratorFn:
        if name in REGISTRY:
            raise RuntimeError(f"generator {name!r} registered twice")
        REGISTRY[name] = Generator(name, fn, summary, num_chunks, placement)
        return fn

    return add


def register_rows(name: str, summary: str, num_chunks: tuple[int, ...] = (1,),
                  placement: str | None = None) -> Callable[[RowsFn], RowsFn]:
    """Decorator: add a generator that writes each rank's order as an iterator; its
    orders are those iterators drained (`Generator.lazy` reads them as they come)."""

    def add(rows: RowsFn) -> RowsFn:
        if name in REGISTRY:
            raise RuntimeError(f"generator {name!r} registered twice")

        def orders(problem: Problem) -> Orders:
            return [list(row) for row in rows(problem)]

        REGISTRY[name] = Generator(name, orders, summary, num_chunks, placement, rows)
        return rows

    return add
