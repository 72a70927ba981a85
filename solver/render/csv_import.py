"""A torch.distributed.pipelining compute-only CSV, as a problem ppsched can time.

torch's ``_dump_csv`` writes one row per rank and nothing else: ``_load_csv`` turns every
row into a rank (``enumerate(csv.reader(...))``) and ``_validate_schedule`` asserts the row
count equals the group size, so no header line can ride along that torch would ignore.
The shape is in the actions themselves instead: p is the row count, the stage count
``p*v`` is one more than the largest stage, m one more than the largest microbatch, and
the placement is the stage-to-rank map the rows show. Options override any of them; the
times and memory come from a profile (unit times without one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import Op
from ppsched.solver.model.profile import Profile, parse_profile
from ppsched.solver.render.torch_csv import parse_torch_csv

# The profile used when none is given: every op takes 1, no latency, no memory limit.
UNIT_TIMES: dict[str, Any] = {"t_f": 1.0, "t_b": 1.0, "t_w": 1.0, "t_comm": 0.0,
                              "m_b": 1.0, "m_w": 0.5, "memory_limit": None}


@dataclass(frozen=True)
class CsvShape:
    """p, m, v and placement of a schedule read from torch's CSV."""

    num_ranks: int
    num_microbatches: int
    num_chunks: int
    placement: str | None


def infer_shape(orders: list[list[Op]]) -> CsvShape:
    """The shape the ops of a CSV show (see the module docstring).

    Raises:
        ProfileError: no ops at all, a stage count that is not a multiple of the rank
            count, or a stage-to-rank map that is neither loop nor V placement.
    """
    ops = [op for rank in orders for op in rank]
    if not ops:
        raise ProfileError("csv", "no compute actions", "at least one row with actions "
                           "such as 0F0, 0I0, 0W0 or 0B0")
    p = len(orders)
    stages = max(op.stage for op in ops) + 1
    m = max(op.microbatch for op in ops) + 1
    if stages % p:
        raise ProfileError("csv", f"{stages} stages on {p} ranks",
                           "a stage count that is a multiple of the row (rank) count; give "
                           "--ranks and --chunks if some ranks or stages have no actions")
    v = stages // p
    if v == 1:
        return CsvShape(p, m, 1, None)
    seen = {op.stage: r for r, rank in enumerate(orders) for op in rank}
    for placement in ("loop", "v"):
        if v != 2 and placement == "v":
            continue
        expected = _stage_to_rank(p, v, placement)
        if all(expected[s] == r for s, r in seen.items()):
            return CsvShape(p, m, v, placement)
    mapping = ", ".join(f"{s}->{r}" for s, r in sorted(seen.items()))
    raise ProfileError("placement", mapping, "loop placement (stage s on rank s % p) or V "
                       "placement (stage s < p on rank s, s >= p on rank 2p-1-s)")


def profile_for_csv(shape: CsvShape, base: dict[str, Any] | None, name: str,
                    overrides: dict[str, Any] | None = None) -> Profile:
    """The profile a CSV schedule is timed under: `base`'s times at the CSV's shape.

    Args:
        shape: the inferred shape.
        base: a profile JSON object (its own p, m, v and placement are replaced), or None
            for unit times (`UNIT_TIMES`).
        name: the profile's name when `base` has none.
        overrides: num_ranks, num_microbatches, num_chunks or placement given by the user;
            they win over the inferred shape.
    """
    data = dict(base) if base is not None else {"name": f"{name} (unit times)", **UNIT_TIMES}
    data.setdefault("name", name)
    data.update(num_ranks=shape.num_ranks, num_microbatches=shape.num_microbatches,
                num_chunks=shape.num_chunks)
    data.pop("placement", None)
    if shape.placement is not None:
        data["placement"] = shape.placement
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return parse_profile(data)


def read_torch_csv(text: str, base: dict[str, Any] | None, name: str,
                   overrides: dict[str, Any] | None = None) -> tuple[Profile, list[list[Op]]]:
    """Read torch's compute-only CSV: the profile to time it under, and per-rank orders.

    Raises:
        ProfileError: a cell that is not an action, a shape that cannot be inferred, more
            rows than ``num_ranks``, or a profile that does not fit the shape.
    """
    try:
        orders = parse_torch_csv(text)
    except ValueError as exc:
        raise ProfileError("csv", name, f"torch's compute-only CSV ({exc})") from None
    overrides = overrides or {}
    ranks = overrides.get("num_ranks")
    if ranks is not None:
        if len(orders) > ranks:
            raise ProfileError("num_ranks", ranks, f">= the CSV's {len(orders)} rows")
        orders += [[] for _ in range(ranks - len(orders))]  # ranks with no actions
    if overrides.get("num_chunks") is not None:
        ops = [op for rank in orders for op in rank]
        shape = CsvShape(len(orders), max((op.microbatch for op in ops), default=0) + 1,
                         overrides["num_chunks"], overrides.get("placement"))
    else:
        shape = infer_shape(orders)
    return profile_for_csv(shape, base, name, overrides), orders


def _stage_to_rank(p: int, v: int, placement: str) -> list[int]:
    if placement == "v":
        return [s if s < p else 2 * p - 1 - s for s in range(p * v)]
    return [s % p for s in range(p * v)]
