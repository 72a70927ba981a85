"""Warnings about a profile's shape that solve but rarely mean what the user wanted: the
CLI prints them on stderr, the service sends them in a header."""

from __future__ import annotations

from ppsched.solver.model.profile import Profile


def shape_warnings(profile: Profile) -> list[str]:
    """One line per warning; empty for a usual shape."""
    p, m = profile.num_ranks, profile.num_microbatches
    out = []
    if m < p:
        # The waiting comes from the shape, not the schedule: no order of ops removes it,
        # so a solver that succeeds says nothing of it unless told here.
        out.append(f"m={m} < p={p}: fewer microbatches than ranks; the pipeline never "
                   "fills, so ranks idle whatever the schedule (use m >= p)")
    return out
