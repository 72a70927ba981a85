"""The same model cut into more stages: a one-chunk profile re-expressed with `v` chunks.

DESIGN.md section 2: "the same model cut into `v` chunks per rank has `p*v` stages, each
with about `1/v` of the one-chunk times and memory". Comparisons across placements (the
solver's choice among them, sweeps over `v`) are made on profiles derived here.
"""

from __future__ import annotations

from typing import Any

from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.profile import Profile, parse_profile

PLACEMENTS = ("loop", "v")
PER_STAGE_FIELDS = ("t_f", "t_b", "t_w", "m_b", "m_w")
# DESIGN.md 6.3: a chunk's recompute, copies and kept memory scale like its activations.
POLICY_FIELDS = ("t_r", "m_ckpt", "t_offload", "t_reload", "m_keep")


def with_chunks(profile: Profile, num_chunks: int, placement: str | None) -> Profile:
    """`profile` (one chunk per rank) with its model cut into `num_chunks` chunks per rank.

    Model stage `s` of the `p`-stage profile becomes the `num_chunks` consecutive stages
    `s*v .. s*v+v-1`, each with `1/v` of its times and memory. The latency of a boundary
    that was already a boundary keeps its value; a new boundary inside an old stage takes
    the latency of the old stage's outgoing boundary (the last one for the last stage):
    a transformer's activations are the same size at every layer. Memory limits are per
    rank and do not change.

    Raises:
        ProfileError: `profile` already has several chunks, or the shape is not one the
            placement supports.
    """
    if num_chunks == profile.num_chunks and (num_chunks == 1 or placement == profile.placement):
        return profile
    if profile.num_chunks != 1:
        raise ProfileError("num_chunks", profile.num_chunks,
                           "1 in a profile to re-cut into several chunks per rank")
    if num_chunks < 1:
        raise ProfileError("num_chunks", num_chunks, "an integer >= 1")
    if num_chunks == 1:
        return profile
    if placement not in PLACEMENTS:
        raise ProfileError("placement", placement, "'loop' or 'v' for num_chunks > 1")
    v = num_chunks
    data: dict[str, Any] = profile.model_dump(mode="json")
    for field in PER_STAGE_FIELDS + POLICY_FIELDS:
        value = data.get(field)
        if value is None:
            continue  # a policy the profile does not offer
        if isinstance(value, list):  # per stage, or per stage and microbatch (6.2)
            data[field] = [[c / v for c in x] if isinstance(x, list) else x / v
                           for x in value for _ in range(v)]
        else:
            data[field] = value / v
    t_comm = data["t_comm"]
    if isinstance(t_comm, list):
        last = len(t_comm) - 1
        # New boundary b sits between new stages b and b+1, inside old stage b // v when
        # (b + 1) % v != 0, else on old boundary (b + 1) // v - 1. One rank has no
        # boundary to copy: its new ones all lie on the rank, without latency.
        data["t_comm"] = [t_comm[min(b // v, last)] if t_comm else 0.0
                          for b in range(profile.num_ranks * v - 1)]
    data["num_chunks"] = v
    data["placement"] = placement
    if profile.name:
        data["name"] = f"{profile.name}-{placement}{v}"
    return parse_profile(data)
