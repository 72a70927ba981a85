"""The offload options as a user gives them (`solve --offload-ratio/--host-bandwidth/
--gpus-per-node`, the service's fields of the same names, a sweep's axes), read one way
for all three."""

from __future__ import annotations

from ppsched.solver.model import (
    Profile,
    ProfileError,
    parse_profile,
    with_offload,
    with_offload_bandwidth,
)


def with_offload_options(profile: Profile, *, offload_ratio: float | None = None,
                         host_bandwidth: float | None = None,
                         memory_unit_bytes: float = 2.0**30,
                         gpus_per_node: int | None = None) -> Profile:
    """`profile` with a user's offload options applied, the one way the CLI, the service
    and sweeps read them: the copies sized by a ratio (`with_offload`) or by the host
    link's bandwidth (`with_offload_bandwidth`), never both, and the ranks of each node
    sharing one host link. Unchanged when no option is given.

    Raises:
        ProfileError: both sizings given (field ``host_bandwidth``), or a ratio, bandwidth
            or node size the profile cannot take, naming it.
    """
    if offload_ratio is not None and host_bandwidth is not None:
        raise ProfileError("host_bandwidth", host_bandwidth, "null when offload_ratio is "
                           "given (one way to size the copies)")
    if offload_ratio is not None:
        profile = with_offload(profile, offload_ratio)
    elif host_bandwidth is not None:
        profile = with_offload_bandwidth(profile, host_bandwidth, memory_unit_bytes)
    if gpus_per_node is not None:
        profile = parse_profile({**profile.model_dump(mode="json"),
                                 "gpus_per_node": gpus_per_node})
    return profile
