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
    `s*v .. s*v+v-1`, each with `1/v` of its times and memory. A latency list gives one
    entry per physical link between ranks r and r+1 (DESIGN.md 6.6): in the cut, each
    boundary pays the link its transfer crosses (`_link_latencies`). Memory limits are per
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
    if isinstance(data["t_comm"], list):
        data["t_comm"] = _link_latencies(data["t_comm"], profile.num_ranks, v, placement)
    data["num_chunks"] = v
    data["placement"] = placement
    # A per-layer cut (DESIGN.md 6.7) names whole stages; its halves are no layer's cut.
    data.pop("layers_per_stage", None)
    data.pop("stage_layers", None)
    if profile.name:
        data["name"] = f"{profile.name}-{placement}{v}"
    return parse_profile(data)


def _link_latencies(links: list[Any], num_ranks: int, v: int, placement: str) -> list[Any]:
    """The cut's per-boundary latencies from a one-chunk profile's per-link ones.

    DESIGN.md 6.6: the transfer from stage k to k+1, on ranks a and b = a +- 1, pays link
    min(a, b); between two stages of one rank it pays nothing (the cost model charges no
    latency there, so 0 is written); the loop's wrap-around from rank p-1 to rank 0 pays
    the largest link (element-wise for per-microbatch lists, DESIGN.md 6.2). Charging the
    model boundary instead sent a slow link's latency to the transfers of other links
    (issue 27: a V schedule cost 10.6% more than reported on alternating slow links).
    """
    def rank(stage: int) -> int:
        if placement == "v":
            return stage if stage < num_ranks else 2 * num_ranks - 1 - stage
        return stage % num_ranks

    def largest() -> Any:
        if not links:
            return 0.0
        if isinstance(links[0], list):
            return [max(column) for column in zip(*links, strict=True)]
        return max(links)

    def zero() -> Any:
        return [0.0] * len(links[0]) if links and isinstance(links[0], list) else 0.0

    cut: list[Any] = []
    for k in range(num_ranks * v - 1):
        a, b = rank(k), rank(k + 1)
        if a == b:
            cut.append(zero())
        elif abs(a - b) == 1:
            cut.append(links[min(a, b)])
        else:  # the loop's wrap-around, rank p-1 to rank 0
            cut.append(largest())
    return cut
