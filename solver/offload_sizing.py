"""Sizing the copies of an offload (DESIGN.md 6.3, issue 12).

STAND-IN for branch policies-model's module of the same name: only `with_offload`, the
function the solver's benchmarks and tests call.
"""

from __future__ import annotations

from solver.profile import Profile, parse_profile


def with_offload(profile: Profile, ratio: float) -> Profile:
    """`profile` with offload available: ``t_offload = t_reload = ratio * (t_f + t_b)`` per
    stage (the ZB repository's offload time ratio k).

    Raises:
        ProfileError: `ratio` negative or not finite (through the profile's validation).
    """
    problem = profile.problem
    copy = [ratio * (f + b) for f, b in zip(problem.t_f, problem.t_b, strict=True)]
    return parse_profile({**profile.model_dump(mode="json"), "t_offload": copy,
                          "t_reload": copy})
