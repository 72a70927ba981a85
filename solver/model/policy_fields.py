"""The activation-policy fields of a resolved problem (DESIGN.md 6.3), read in one place.

`solver.profile.Problem` gains them with issue 12's contract layer (``can_recompute``,
``can_offload``, ``t_r``, ``m_ckpt``, ``t_offload``, ``t_reload``, ``m_keep``,
``copy_lanes``, ``shared_host_link``, ``host_memory_limit``). The solver's policy code
reads them through `policy_fields`, so that it also runs on a problem built without them
(which then offers no policy: exactly sections 2-4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppsched.solver.model.problem import Problem


@dataclass(frozen=True)
class PolicyFields:
    """A problem's policy fields with their defaults resolved (DESIGN.md 6.3)."""

    can_recompute: bool
    can_offload: bool
    t_r: tuple[float, ...]
    m_ckpt: tuple[float, ...]
    t_offload: tuple[float, ...]
    t_reload: tuple[float, ...]
    m_keep: tuple[float, ...]
    copy_lanes: int
    shared_host_link: tuple[tuple[int, ...], ...]
    host_memory_limit: tuple[float, ...]

    @property
    def any(self) -> bool:
        """Whether the profile makes recompute or offload available."""
        return self.can_recompute or self.can_offload


def policy_fields(problem: Problem) -> PolicyFields:
    """`problem`'s policy fields; a problem without them offers no policy."""
    n = problem.num_stages
    zeros = (0.0,) * n

    def per_stage(name: str, default: tuple[float, ...]) -> tuple[float, ...]:
        value = getattr(problem, name, None)
        return tuple(value) if value else default

    t_offload = per_stage("t_offload", zeros)
    return PolicyFields(
        can_recompute=bool(getattr(problem, "can_recompute", False)),
        can_offload=bool(getattr(problem, "can_offload", False)),
        t_r=per_stage("t_r", problem.t_f),
        m_ckpt=per_stage("m_ckpt", zeros),
        t_offload=t_offload,
        t_reload=per_stage("t_reload", t_offload),
        m_keep=per_stage("m_keep", zeros),
        copy_lanes=int(getattr(problem, "copy_lanes", 2)),
        shared_host_link=tuple(tuple(g) for g in getattr(problem, "shared_host_link", ())),
        host_memory_limit=tuple(getattr(problem, "host_memory_limit", ()))
        or (math.inf,) * problem.num_ranks,
    )
