"""A partition's answer as data, for the `ppsched partition` command and the service's
`POST /v1/partition` alike: the search's figures (the schedule JSON's extra `partition`
field) and the torchtitan setting that runs the chosen cut."""

from __future__ import annotations

import math
from typing import Any

from ppsched.solver.model import Schedule
from ppsched.solver.partition import Partition


def partition_record(found: Partition) -> dict[str, Any]:
    """The search's figures: the bound and its scope, whether the cut is proven best
    under the heuristic, how many cuts were judged, and the cuts compared (the rules'
    and ppsched's) with step time and peak memory (null: the cut does not fit)."""
    return {
        "lower_bound": found.lower_bound, "bound_scope": found.bound_scope,
        "proven": found.proven, "judged": found.judged,
        "compared": [{"cut": c.label, "layers_per_stage": list(c.judged.cut),
                      "step_time": _finite(c.judged.step_time),
                      "peak_memory": _finite(c.judged.peak_memory), "note": c.note}
                     for c in found.compared if c.judged is not None],
    }


def torchtitan_recipe(schedule: Schedule) -> dict[str, Any]:
    """torchtitan 0.3.0's `[parallelism]` settings for the cut: the layer names as module
    FQNs per model part, and the pipeline degree."""
    names = schedule.profile.stage_layers
    assert names is not None, "a partition's schedule names its stages' layers"
    return {"module_fqns_per_model_part": names,
            "pipeline_parallel_degree": schedule.profile.num_ranks}


def _finite(x: float) -> float | None:
    return None if math.isinf(x) else x
