"""The registry of schedule generators: pure functions from a problem to per-rank orders.

A generator only orders ops; the simulator times them (STYLE.md, choice 3). Import this
package to get every generator registered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from solver.errors import ProfileError
from solver.ops import Op
from solver.profile import Problem

Orders = list[list[Op]]
GeneratorFn = Callable[[Problem], Orders]


@dataclass(frozen=True)
class Generator:
    """A registered schedule: its name, what it is, and which shapes it supports."""

    name: str
    fn: GeneratorFn
    summary: str
    num_chunks: tuple[int, ...] = (1,)

    def __call__(self, problem: Problem) -> Orders:
        if problem.num_chunks not in self.num_chunks:
            raise ProfileError("num_chunks", problem.num_chunks,
                               f"{' or '.join(map(str, self.num_chunks))} for schedule "
                               f"'{self.name}'")
        return self.fn(problem)


REGISTRY: dict[str, Generator] = {}


def register(name: str, summary: str, num_chunks: tuple[int, ...] = (1,),
             ) -> Callable[[GeneratorFn], GeneratorFn]:
    """Decorator: add a generator to the registry under `name`."""

    def add(fn: GeneratorFn) -> GeneratorFn:
        if name in REGISTRY:
            raise RuntimeError(f"generator {name!r} registered twice")
        REGISTRY[name] = Generator(name, fn, summary, num_chunks)
        return fn

    return add


def get_generator(name: str) -> Generator:
    """The generator called `name`; a ProfileError lists the valid names otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ProfileError("method", name, "one of " + ", ".join(sorted(REGISTRY))) from None


# Registration happens on import of the modules that define generators.
from solver.generators import classic, zero_bubble  # noqa: E402, F401
