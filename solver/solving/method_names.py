"""Method names: ours, and torch.distributed.pipelining's schedule names as aliases.

`resolve_method` is the one place a method name given by a user (the CLI, the service,
a sweep grid) becomes the name `solve` knows. torch's names are matched without regard
to case, as torch's own ``get_schedule_class`` matches them.
"""

from __future__ import annotations

from ppsched.solver.generators import REGISTRY
from ppsched.solver.generators.recompute import recompute_name, split_recompute
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.names import did_you_mean
from ppsched.solver.policies import (  # noqa: F401  (registers the PipeOffload schedules)
    pipeoffload,
)

HEURISTIC = "heuristic"
ILP = "ilp"
# The heuristic on the loop placement: torch's InterleavedZeroBubble's stage layout and op
# set (F, B and W per chunk), with the heuristic's order rather than torch's own.
ZB_LOOP = "zb-loop"
OBJECTIVES = ("cost", "makespan")

# torch's schedule class names (``get_schedule_class``) -> the ppsched method that builds
# the same per-rank order of the same ops (InterleavedZeroBubble: the same ops only).
TORCH_ALIASES: dict[str, str] = {
    "GPipe": "gpipe",
    "1F1B": "1f1b",
    "Interleaved1F1B": "1f1b-interleaved",
    "ZBVZeroBubble": "zb-v",
    "DualPipeV": "dualpipe-v",
    # torch's loop-placement zero bubble: the same layout and ops, not the same order (no
    # ppsched generator builds torch's; `zb-loop` is the heuristic on that layout).
    "InterleavedZeroBubble": "zb-loop",
}

# torch's schedules with no ppsched generator of the same order: say what to do instead.
TORCH_WITHOUT_EQUIVALENT: dict[str, str] = {
    "LoopedBFS": "a breadth-first loop-placement order ppsched does not generate",
    "PipelineScheduleSingle": "torch's base class, not a schedule",
    "PipelineScheduleMulti": "torch's base class, not a schedule",
}

_CSV_ROUTE = ("dump torch's order with its _dump_csv and time it with `ppsched simulate "
              "FILE.csv --profile P.json`")


def resolve_method(name: str, known: dict[str, str] | None = None) -> str:
    """The ppsched method `name` stands for: itself, or the target of a torch alias.

    Args:
        name: a ppsched method (``heuristic``, ``ilp``, ``zb-v``, ...) or one of torch's
            schedule names (``GPipe``, ``1F1B``, ``Interleaved1F1B``, ``ZBVZeroBubble``,
            ``InterleavedZeroBubble``).
        known: the methods available (default: `methods()`).

    Raises:
        ProfileError: field ``method``, naming the accepted names; for a torch schedule
            with no ppsched equivalent, how to time torch's own order instead.
    """
    if known is None:
        known = methods()
    if name in known:
        return name
    recomputed = split_recompute(name)
    if recomputed is not None:  # NAME+recompute[:K] (DESIGN.md 6.3): NAME resolved
        base, stages = recomputed
        schedules = {k: v for k, v in known.items() if k not in ("heuristic", "ilp")}
        try:
            return recompute_name(resolve_method(base, schedules), stages)
        except ProfileError as exc:
            raise ProfileError("method", name, f"a named schedule before '+recompute' "
                               f"({exc.accepted})") from None
    lowered = {alias.lower(): alias for alias in TORCH_ALIASES}
    alias = lowered.get(name.lower())
    if alias is not None and TORCH_ALIASES[alias] in known:
        return TORCH_ALIASES[alias]
    if name.lower() in known:  # 'GPIPE', 'ZB-V'
        return name.lower()
    without = {key.lower(): key for key in TORCH_WITHOUT_EQUIVALENT}
    torch_name = without.get(name.lower()) or alias
    if torch_name is not None:
        why = TORCH_WITHOUT_EQUIVALENT.get(torch_name, "not available in this build")
        raise ProfileError("method", name, f"one of {', '.join(known)} or torch's "
                           f"{', '.join(aliases(known))} (torch's {torch_name} is {why}: "
                           f"{_CSV_ROUTE})")
    hint = did_you_mean(name, [*known, *aliases(known)])
    raise ProfileError("method", name, (f"a known method ({hint.strip()}): " if hint else "")
                       + f"one of {', '.join(known)}, or torch's names "
                       f"{', '.join(aliases(known))}")


def aliases(known: dict[str, str] | None = None) -> dict[str, str]:
    """torch's names that resolve here, each with the ppsched method it stands for."""
    if known is None:
        known = methods()
    return {alias: target for alias, target in TORCH_ALIASES.items() if target in known}


def methods() -> dict[str, str]:
    """Method name -> one-line description, for listings and error messages."""
    listing = {
        HEURISTIC: "Zero Bubble heuristic (paper section 3.1) with a search over its "
        "warm-up and W-fill knobs; honours per-stage times, t_comm and memory_limit",
        ILP: "the heuristic refined by an exact model (CP-SAT, or the paper's MILP via "
        "PuLP), with a proven bound and gap; anytime within --time-limit",
        ZB_LOOP: "the heuristic on the loop placement (2 chunks per rank for a one-chunk "
        "profile): torch's InterleavedZeroBubble's layout and op set, the heuristic's order",
    }
    listing.update({name: gen.summary for name, gen in sorted(REGISTRY.items())})
    return listing
