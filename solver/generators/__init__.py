"""The schedule generators: pure functions from a problem to per-rank orders.

A generator only orders ops; the simulator times them (STYLE.md, choice 3). Importing this
package registers every generator of its modules (`registry.REGISTRY`).
"""

from __future__ import annotations

from ppsched.solver.generators import (  # noqa: F401  (imported to register them)
    classic,
    dualpipe_v,
    interleaved,
    v_shape,
    zero_bubble,
)
from ppsched.solver.generators.recompute import recompute_name, split_recompute, with_recompute
from ppsched.solver.generators.registry import (
    REGISTRY,
    Generator,
    GeneratorFn,
    register,
    register_rows,
)
from ppsched.solver.model.errors import ProfileError

__all__ = ["REGISTRY", "Generator", "GeneratorFn", "get_generator", "recompute_name",
           "register", "register_rows"]


def get_generator(name: str) -> Generator:
    """The generator called `name`; a ProfileError lists the valid names otherwise.

    ``NAME+recompute`` and ``NAME+recompute:K`` are NAME followed by the recompute pass
    (`solver.generators.recompute`, DESIGN.md 6.3).
    """
    recomputed = split_recompute(name)
    if recomputed is not None:
        base, stages = recomputed
        return with_recompute(get_generator(base), stages)
    try:
        return REGISTRY[name]
    except KeyError:
        raise ProfileError("method", name, "one of " + ", ".join(sorted(REGISTRY))
                           + ", or any of them + '+recompute' (every stage) or "
                           "'+recompute:K' (the first K stages)") from None
