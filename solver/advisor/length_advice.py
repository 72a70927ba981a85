"""`ppsched advise CONFIG --lengths SOURCE`: FSDP, ODC and pipeline ranked on real lengths.

The config's model and cluster are the advisor's (`AdvisorConfig`); its ``seq_len`` and
``num_microbatches`` give way to the length source (`solver.advisor.lengths`) and the
minibatch of `Assumptions.samples_per_device` samples per GPU; its ``recompute`` (true,
or a list naming ``fsdp``) and ``fsdp_overlap`` carry over to all three models. The
answer prints every assumption it used beside the pick.
"""

from __future__ import annotations

import dataclasses
import statistics

from ppsched.solver.advisor.data_parallel import (
    FSDP,
    MODELS,
    ODC,
    Assumptions,
    StepResult,
    compare,
)
from ppsched.solver.advisor.lengths import LengthSource, minibatches
from ppsched.solver.advisor.rank import AdvisorConfig


def assumptions_for(config: AdvisorConfig, base: Assumptions) -> Assumptions:
    """`base` with the config's recompute (for FSDP) and overlap."""
    rc = config.recompute
    return dataclasses.replace(base, overlap=config.fsdp_overlap,
                               recompute=rc if isinstance(rc, bool) else FSDP in rc)


def advise_lengths(config: AdvisorConfig, source: LengthSource, base: Assumptions
                   ) -> tuple[list[StepResult], list[list[int]], Assumptions]:
    """The ranked step models, the minibatches they ran on and the assumptions used."""
    a = assumptions_for(config, base)
    batches = minibatches(source, a.samples_per_device * config.cluster.num_gpus, a.steps)
    return compare(config.model, config.cluster, batches, a, MODELS), batches, a


def format_lengths_table(config: AdvisorConfig, source: LengthSource,
                         ranked: list[StepResult], batches: list[list[int]],
                         a: Assumptions) -> str:
    """The table, the pick among FSDP, ODC and pipeline, and every assumption."""
    m, c = config.model, config.cluster
    every = [s for b in batches for s in b]
    rows = [f"{config.name or 'model'}: {m.layers} layers, H={m.hidden}, V={m.vocab} on "
            f"{c.num_gpus} GPUs ({c.gpus_per_node} per node)",
            f"lengths: {source.describe()}; {len(batches)} minibatches of {len(batches[0])}"
            f" samples, median {statistics.median(every):g}, mean "
            f"{statistics.fmean(every):.0f}, max {max(every)} tokens",
            f"{'#':>2} {'strategy':<14}{'step s':>9}{'tok/s/GPU':>11}  note"]
    for i, r in enumerate(ranked, 1):
        if r.step_s is None:
            rows.append(f"{'-':>2} {r.strategy:<14}{'n/a':>9}{'':>11}  {r.note}")
            continue
        assert r.tokens_per_s_per_gpu is not None
        rows.append(f"{i:>2} {r.strategy:<14}{r.step_s:>9.3f}{r.tokens_per_s_per_gpu:>11.1f}"
                    + (f"  {r.note}" if r.note else ""))
    main = [r for r in ranked if r.strategy in (FSDP, ODC, "pipeline") and r.step_s]
    by = {r.strategy: r for r in ranked}
    if main:
        rows.append(f"pick: {main[0].strategy}")
    fsdp, odc = by.get(FSDP), by.get(ODC)
    if fsdp and odc and fsdp.step_s and odc.step_s:
        rows.append(f"ODC over FSDP: {fsdp.step_s / odc.step_s:.3f}x")
    rows.append("assumptions:")
    rows += [f"  {line}" for line in a.lines()]
    rows += [f"  mfu {c.mfu:g} of {c.gpu_tflops:g} TFLOP/s; links {c.intra_node_gbps:g} GB/s "
             f"in a node, {c.inter_node_gbps:g} GB/s across, latency {c.latency_us:g} us",
             "  not modelled: memory (see `ppsched advise` without --lengths), contention "
             "between ODC's transfers, the optimizer step"]
    return "\n".join(rows)
