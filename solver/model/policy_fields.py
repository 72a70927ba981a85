"""The activation-policy fields of a resolved problem (DESIGN.md 6.3), with their defaults.

`Problem` always carries them (``can_recompute``, ``can_offload``, ``t_r``, ``m_ckpt``,
``t_offload``, ``t_reload``, ``m_keep``, ``copy_lanes``, ``shared_host_link``,
``host_memory_limit``); a per-stage field left empty (a problem that offers no policy, or
one built without them) reads here as its default, so the policy code sees every field
filled in.
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
    """`problem`'s policy fields, each empty one at its default (a recompute as long as
    its F, no copy time or kept memory, the reload as long as the offload, no host
    limit)."""
    zeros = (0.0,) * problem.num_stages
    t_offload = problem.t_offload or zeros
    return PolicyFields(
        can_recompute=problem.can_recompute,
        can_offload=problem.can_offload,
        t_r=problem.t_r or problem.t_f,
        m_ckpt=problem.m_ckpt or zeros,
        t_offload=t_offload,
        t_reload=problem.t_reload or t_offload,
        m_keep=problem.m_keep or zeros,
        copy_lanes=problem.copy_lanes,
        shared_host_link=problem.shared_host_link,
        host_memory_limit=problem.host_memory_limit or (math.inf,) * problem.num_ranks,
    )
