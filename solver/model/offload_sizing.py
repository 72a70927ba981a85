"""Sizing the copies of an offload (DESIGN.md 6.3): how long an O or an L takes.

Three ways, from the most to the least measured: the bytes of an activation and the host
link's bandwidth (`copy_time_ms`, `with_offload_bandwidth`); the model's dimensions and
the device's speed, as the Zero Bubble repository's auto offload time does
(`offload_time_ratio`); or a given offload time ratio ``k`` (`with_offload`), where
``k`` is (D2H time + H2D time) / 2 / (F time + B time) of a stage.
"""

from __future__ import annotations

import math

from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.profile import Profile, parse_profile


def _positive(field: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value <= 0:
        raise ProfileError(field, value, "a finite number > 0")
    return float(value)


def copy_time_ms(num_bytes: float, bandwidth_GB_per_s: float) -> float:
    """Milliseconds to copy `num_bytes` over a host link of `bandwidth_GB_per_s` (10^9
    bytes per second; the profile's advised time unit is ms, DESIGN.md section 2).

    Raises:
        ProfileError: `num_bytes` negative or not finite (field ``num_bytes``), or the
            bandwidth not a finite number > 0 (field ``bandwidth_GB_per_s``).
    """
    bandwidth = _positive("bandwidth_GB_per_s", bandwidth_GB_per_s)
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, int | float) \
            or not math.isfinite(num_bytes) or num_bytes < 0:
        raise ProfileError("num_bytes", num_bytes, "a finite number >= 0")
    return num_bytes / (bandwidth * 1e9) * 1e3


def offload_time_ratio(hidden: int, seq: int, tflops: float,
                       bandwidth_GB_per_s: float) -> float:
    """The offload time ratio ``k`` of a transformer layer, from its dimensions (the ZB
    repository's auto offload time): ``k = 10 / (3 (6h + s)) * (TFLOPS * 1000 /
    bandwidth) / 2``.

    The constants are the ZB repository's; what the form says is that a layer's
    compute grows with ``h^2`` and ``s h`` per token while its activation grows with
    ``h``, so the copy-to-compute ratio falls as ``1 / (6h + s)``, scaled by how much
    faster the device computes than the link copies. A100 (220 TFLOPS, 15 GB/s) with
    h = s = 4096 gives 0.8526.

    Args:
        hidden: the model's hidden size h.
        seq: the sequence length s.
        tflops: the device's achieved dense TFLOPS.
        bandwidth_GB_per_s: the host link's bandwidth.

    Raises:
        ProfileError: naming the argument that is not a finite number > 0.
    """
    h, s = _positive("hidden", hidden), _positive("seq", seq)
    speed = _positive("tflops", tflops) * 1000 / _positive("bandwidth_GB_per_s",
                                                          bandwidth_GB_per_s)
    return 10 / (3 * (6 * h + s)) * speed / 2


def with_offload(profile: Profile, ratio: float) -> Profile:
    """`profile` with offload available: ``t_offload = t_reload = ratio * (t_f + t_b)``
    per stage (the ZB repository's offload time ratio k).

    Raises:
        ProfileError: `ratio` negative or not finite (field ``offload_ratio``).
    """
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) \
            or not math.isfinite(ratio) or ratio < 0:
        raise ProfileError("offload_ratio", ratio, "a finite number >= 0 (the offload "
                           "time ratio k = copy time / (t_f + t_b); PipeOffload studies "
                           "0.25 to 1.25)")
    problem = profile.problem
    copy = [ratio * (f + b) for f, b in zip(problem.t_f, problem.t_b, strict=True)]
    return parse_profile({**profile.model_dump(mode="json"), "t_offload": copy,
                          "t_reload": copy})


def with_offload_bandwidth(profile: Profile, bandwidth_GB_per_s: float,
                           bytes_per_memory_unit: float) -> Profile:
    """`profile` with offload available, each stage's copy sized from its activation:
    ``t_offload = t_reload = copy_time_ms((m_b - m_keep) * bytes_per_memory_unit,
    bandwidth)``; the profile's times must be in ms.

    Args:
        profile: the profile; its ``m_b`` (and ``m_keep``, if set) in memory units.
        bandwidth_GB_per_s: the host link's bandwidth.
        bytes_per_memory_unit: bytes in one of the profile's memory units (2**30 for GiB).

    Raises:
        ProfileError: naming a bandwidth or byte count that is not a finite number > 0.
    """
    unit = _positive("bytes_per_memory_unit", bytes_per_memory_unit)
    problem = profile.problem
    keep = problem.m_keep or (0.0,) * problem.num_stages
    copy = [copy_time_ms(max(m - k, 0.0) * unit, bandwidth_GB_per_s)
            for m, k in zip(problem.m_b, keep, strict=True)]
    return parse_profile({**profile.model_dump(mode="json"), "t_offload": copy,
                          "t_reload": copy})
