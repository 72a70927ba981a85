"""The advisor: one model on one cluster, every strategy timed and ranked.

Per-op times and bytes come from `solver.advisor_costs` (formulas in its docstring). Each
activation-passing strategy (1F1B, ZB-1p and ZB-2p: the ZB heuristic at p and 2p
microbatches of activation memory, ZB-V, interleaved 1F1B, DualPipe-V when its generator
is registered) is built by ppsched's generator or heuristic for a profile of those costs
and timed by the simulator (DESIGN.md section 3); each WeiPipe variant by the ring model
(section 6.5); FSDP by an all-gather / reduce-scatter time model. All run on all GPUs as
one pipeline (or one ring, or one FSDP group). Step time is the makespan: every strategy
ends its step with a synchronous optimizer update.

The activation-passing simulator times `t_comm` as a latency, so transfers never queue on
a link; when a link is the bottleneck that is optimistic. The advisor therefore also
applies the bound that a directed link carries its step's bytes one after another: a
pipeline's step lasts at least its busiest link's ``bytes / bandwidth`` (noted as
``link-bound`` when it decides).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ppsched.solver.advisor.costs import (
    GB,
    Cluster,
    LayerCosts,
    ModelDims,
    layer_costs,
    link_gbps,
    ring_collective_s,
    transfer_s,
)
from ppsched.solver.generators import REGISTRY
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.names import did_you_mean
from ppsched.solver.model.profile import Profile
from ppsched.solver.solving.entry import solve
from ppsched.solver.solving.method_names import HEURISTIC
from ppsched.solver.weipipe import parse_weipipe_profile, simulate_weipipe
from pydantic import BaseModel, ConfigDict, Field, ValidationError

log = logging.getLogger(__name__)

# strategy -> (method, chunks per rank, placement, memory limit in units of p*m_b or
# None); activation passing. ZB-1p/2p are the paper's: the ZB heuristic at 1F1B's
# activation memory (p*m_b) and at twice it.
PIPELINES: dict[str, tuple[str, int, str | None, float | None]] = {
    "1f1b": ("1f1b", 1, None, None),
    "zb-1p": (HEURISTIC, 1, None, 1.0),
    "zb-2p": (HEURISTIC, 1, None, 2.0),
    "zb-v": ("zb-v", 2, "v", None),
    "interleaved": ("1f1b-interleaved", 2, "loop", None),
    "dualpipe-v": ("dualpipe-v", 2, "v", None),
}
WEIPIPE = ("weipipe-naive", "weipipe-interleave", "weipipe-zb1", "weipipe-zb2")
FSDP = "fsdp"
STRATEGIES = (*PIPELINES, *WEIPIPE, FSDP)


class AdvisorConfig(BaseModel):
    """What `ppsched advise MODEL.yaml` reads."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str | None = Field(None, description="Optional label.")
    model: ModelDims
    cluster: Cluster
    num_microbatches: int = Field(
        description="N: microbatches in one training step (all strategies train N*G "
        "sequences per step).", ge=1)
    strategies: list[str] | None = Field(None, description="Which to compare (default all).")
    alpha: float = Field(0.5, description="Share of a layer's activations a B leaves for "
                         "its W.", ge=0, le=1)
    act_bytes_per_token_hidden: float = Field(34.0, description="Activation bytes per token "
                                              "and hidden unit of one layer.", gt=0)
    recompute: bool | list[str] = Field(
        False, description="Full activation checkpointing: true for every strategy, or "
        "the list of strategies that use it.")
    fsdp_overlap: bool = Field(
        True, description="FSDP hides each layer's collectives behind the previous layer's "
        "compute (prefetch); false: collectives and compute run one after the other.")
    state_bytes_per_param: float = Field(16.0, description="Training-state bytes per "
                                         "parameter (weights, gradient, optimizer).", gt=0)


@dataclass(frozen=True)
class Candidate:
    """One strategy's predicted step."""

    strategy: str
    step_time_s: float | None  # None: not applicable to this shape (see note)
    tokens_per_s_per_gpu: float | None
    peak_memory_gb: float | None
    fits: bool
    bubble_rate: float | None = None
    comm_gb_per_gpu: float | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def parse_advisor_config(data: Any) -> AdvisorConfig:
    """An AdvisorConfig from YAML/JSON data; errors name the field, value and fix.

    Raises:
        ProfileError: the first problem found.
    """
    if not isinstance(data, dict):
        raise ProfileError("config", data, "a mapping with model, cluster and "
                           "num_microbatches")
    try:
        config = AdvisorConfig.model_validate(data)
    except ValidationError as exc:
        raise _named(exc) from None
    for field in ("strategies", "recompute"):
        names = getattr(config, field)
        for i, name in enumerate(names if isinstance(names, list) else ()):
            if name not in STRATEGIES:
                hint = did_you_mean(name, STRATEGIES)
                raise ProfileError(f"{field}[{i}]", name, (f"a strategy ({hint.strip()}): "
                                   if hint else "") + "one of " + ", ".join(STRATEGIES))
    return config


def _named(exc: ValidationError) -> ProfileError:
    # A misspelt field is both an unknown field and a missing one: the unknown one, with
    # its "did you mean", says more, so it leads.
    err = min(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    cause = err.get("ctx", {}).get("error")
    if isinstance(cause, ProfileError):
        return cause
    loc = [x for x in err["loc"] if isinstance(x, int) or x not in ("float", "int")]
    field = ".".join(str(x) for x in loc) or "config"
    if err["type"] == "extra_forbidden":
        sections: dict[str, type[BaseModel]] = {"model": ModelDims, "cluster": Cluster}
        owner = sections.get(str(loc[0]), AdvisorConfig) if len(loc) > 1 else AdvisorConfig
        hint = did_you_mean(str(loc[-1]), owner.model_fields)
        accepted = f"no such field ({hint}the fields are " + ", ".join(owner.model_fields) + ")"
    elif err["type"] == "missing":
        accepted = "a value (the field is required)"
    else:
        msg = err["msg"]
        accepted = ("a value " + msg.removeprefix("Input should be ")
                    if msg.startswith("Input should be ") else msg)
    return ProfileError(field, err.get("input"), accepted)


def advise(config: AdvisorConfig) -> list[Candidate]:
    """Every requested strategy, ranked: those that fit by step time, then the rest."""
    return rank([run_strategy(config, name) for name in (config.strategies or STRATEGIES)])


def uses_recompute(config: AdvisorConfig, strategy: str) -> bool:
    """Whether `strategy` runs with full activation checkpointing under `config`."""
    rc = config.recompute
    return rc if isinstance(rc, bool) else strategy in rc


def run_strategy(config: AdvisorConfig, strategy: str) -> Candidate:
    """One strategy's predicted step under `config` (unranked)."""
    costs = layer_costs(config.model, config.cluster, config.act_bytes_per_token_hidden,
                        uses_recompute(config, strategy))
    if strategy == FSDP:
        return _fsdp(config, costs)
    if strategy in PIPELINES:
        return _pipeline(config, costs, strategy)
    return _weipipe(config, costs, strategy)


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """Those that fit by step time, then those that do not, then the inapplicable."""
    return sorted(candidates, key=lambda c: (c.step_time_s is None, not c.fits,
                                             c.step_time_s or 0.0))


def winner(ranked: list[Candidate]) -> str | None:
    """The advisor's pick: the first of a ranking if it fits and applies, else None."""
    best = ranked[0] if ranked else None
    return best.strategy if best and best.fits and best.step_time_s is not None else None


def _candidate(config: AdvisorConfig, strategy: str, step_s: float, peak_gb: float,
               bubble: float, comm_gb: float, note: str = "") -> Candidate:
    tokens = config.num_microbatches * config.model.tokens
    return Candidate(strategy, step_s, tokens / step_s / config.cluster.num_gpus, peak_gb,
                     peak_gb <= config.cluster.gpu_memory_gb, bubble, comm_gb, note)


def _skip(strategy: str, why: str) -> Candidate:
    return Candidate(strategy, None, None, None, False, note=why)


def _rank_of(stage: int, p: int, v: int, placement: str | None) -> int:
    if v == 1 or placement == "loop":
        return stage % p
    return stage if stage < p else 2 * p - 1 - stage


def _pipeline(config: AdvisorConfig, k: LayerCosts, strategy: str) -> Candidate:
    generator, v, placement, memory_p = PIPELINES[strategy]
    if generator != HEURISTIC and generator not in REGISTRY:
        return _skip(strategy, f"generator '{generator}' is not in this build")
    m, c = config.model, config.cluster
    p, stages = c.num_gpus, c.num_gpus * v
    if m.layers % stages:
        return _skip(strategy, f"{m.layers} layers do not split into {stages} stages")
    per = m.layers // stages
    last = stages - 1
    ms = 1e3  # profile times in milliseconds, memory in GB
    t_f = [(per * k.t_f + (k.head_f if s == last else 0.0)) * ms for s in range(stages)]
    t_b = [(per * k.t_b + (k.head_b if s == last else 0.0)) * ms for s in range(stages)]
    t_w = [(per * k.t_w + (k.head_w if s == last else 0.0)) * ms for s in range(stages)]
    m_b = [per * k.act_bytes / GB] * stages
    ranks = [_rank_of(s, p, v, placement) for s in range(stages)]
    t_comm = [transfer_s(c, k.boundary_bytes, link_gbps(c, ranks[s], ranks[s + 1])) * ms
              for s in range(stages - 1)]
    data: dict[str, Any] = dict(
        name=f"advise-{strategy}", num_ranks=p, num_microbatches=config.num_microbatches,
        num_chunks=v, t_f=t_f, t_b=t_b, t_w=t_w, t_comm=t_comm or 0.0, m_b=m_b,
        m_w=[config.alpha * x for x in m_b])
    if placement:
        data["placement"] = placement
    if memory_p is not None:
        data["memory_limit"] = memory_p * p * max(m_b)
    try:
        schedule = solve(Profile.model_validate(data), generator)
    except ProfileError as exc:
        return _skip(strategy, str(exc))
    assert schedule.metrics is not None
    static = [0.0] * p
    for s in range(stages):
        params = per * m.layer_params + (m.vocab_params if s in (0, last) else 0.0)
        static[ranks[s]] += config.state_bytes_per_param * params / GB
    peak = max(a + b for a, b in zip(static, schedule.metrics.peak_memory, strict=True)) \
        + k.full_act_bytes / GB
    crossings = sum(1 for s in range(stages - 1) if ranks[s] != ranks[s + 1])
    comm = 2 * config.num_microbatches * crossings * k.boundary_bytes / p / GB
    # Each directed link's step: N activations forward, N gradients back, per boundary.
    link_s: dict[tuple[int, int], float] = {}
    for s in range(stages - 1):
        a, b = ranks[s], ranks[s + 1]
        if a != b:
            one = transfer_s(c, k.boundary_bytes, link_gbps(c, a, b))
            for pair in ((a, b), (b, a)):
                link_s[pair] = link_s.get(pair, 0.0) + config.num_microbatches * one
    step = schedule.metrics.makespan / ms
    bound = max(link_s.values(), default=0.0)
    note = ""
    if bound > step:
        step, note = bound, "link-bound"
    busy = schedule.metrics.makespan / ms * (1 - schedule.metrics.bubble_rate)
    return _candidate(config, strategy, step, peak, 1 - busy / step, comm, note)


def _weipipe(config: AdvisorConfig, k: LayerCosts, strategy: str) -> Candidate:
    m, c = config.model, config.cluster
    p = c.num_gpus
    if m.layers % p:
        return _skip(strategy, f"{m.layers} layers do not split into {p} chunks")
    if config.num_microbatches % p:
        return _skip(strategy, f"num_microbatches {config.num_microbatches} is not a "
                     f"multiple of {p} GPUs (each rank runs its own microbatches)")
    per = m.layers // p
    ms = 1e3
    vocab_bytes = 2.0 * m.vocab_params
    weights = [(per * k.weight_bytes + (vocab_bytes if i in (0, p - 1) else 0.0)) / GB
               for i in range(p)]
    profile = parse_weipipe_profile(dict(
        name=f"advise-{strategy}", num_ranks=p,
        num_microbatches=config.num_microbatches // p,
        t_f=[(per * k.t_f + (k.head_f if i == p - 1 else 0.0)) * ms for i in range(p)],
        t_b=[(per * k.t_b + (k.head_b if i == p - 1 else 0.0)) * ms for i in range(p)],
        t_w=[(per * k.t_w + (k.head_w if i == p - 1 else 0.0)) * ms for i in range(p)],
        weight_bytes=weights, grad_bytes=weights,
        activation_bytes=per * k.act_bytes / GB, alpha=config.alpha,
        boundary_bytes=k.boundary_bytes / GB,
        # GB per millisecond on the link from rank r to rank r+1 (the ring closes p-1 -> 0)
        bandwidth=[link_gbps(c, r, (r + 1) % p) / ms for r in range(p)],
        latency=c.latency_us * 1e-3))
    result = simulate_weipipe(profile, strategy)
    static = (config.state_bytes_per_param * m.total_params / p + k.full_act_bytes) / GB
    return _candidate(config, strategy, result.step_time / ms,
                      static + max(result.peak_memory), result.bubble_rate,
                      max(result.comm_bytes))


def _fsdp(config: AdvisorConfig, k: LayerCosts) -> Candidate:
    """FSDP (ZeRO-3) over all GPUs: each GPU runs N/P microbatches through every layer;
    per microbatch and layer it all-gathers the layer's bf16 weights for F and again for
    the backward, and reduce-scatters its gradient; the next layer's collective overlaps
    this layer's compute, so a layer costs ``max(compute, collectives)`` (with
    ``fsdp_overlap``; otherwise ``compute + collectives``)."""
    m, c = config.model, config.cluster
    p = c.num_gpus
    if config.num_microbatches % p:
        return _skip(FSDP, f"num_microbatches {config.num_microbatches} is not a multiple "
                     f"of {p} GPUs")
    n = config.num_microbatches // p
    units = [(k.t_f, k.t_b + k.t_w, k.weight_bytes)] * m.layers
    units.append((k.head_f, k.head_b + k.head_w, 2.0 * 2.0 * m.vocab_params))
    per_mb = ring_collective_s(c, units[0][2])  # the first gather is never hidden
    busy = 0.0
    for fwd, bwd, nbytes in units:
        gather = ring_collective_s(c, nbytes)
        if config.fsdp_overlap:
            per_mb += max(fwd, gather) + max(bwd, 2 * gather)  # backward: gather + scatter
        else:
            per_mb += fwd + bwd + 3 * gather
        busy += fwd + bwd
    step = n * per_mb
    gathered = 2 * 2 * max(u[2] for u in units)  # this unit's and the prefetched one
    peak = (config.state_bytes_per_param * m.total_params / p + gathered
            + m.layers * k.act_bytes + k.full_act_bytes) / GB
    comm = n * 3 * (p - 1) / p * sum(u[2] for u in units) / GB
    return _candidate(config, FSDP, step, peak, (step - n * busy) / step, comm)


def format_table(config: AdvisorConfig, ranked: list[Candidate]) -> str:
    """The ranked table `ppsched advise` prints."""
    c = config.cluster
    head = (f"{config.name or 'model'}: {config.model.layers} layers, H={config.model.hidden},"
            f" S={config.model.seq_len}, G={config.model.microbatch_size}, "
            f"N={config.num_microbatches} on {c.num_gpus} GPUs "
            f"({c.gpu_memory_gb:g} GB each)")
    rows = [head, f"{'#':>2} {'strategy':<19}{'step s':>9}{'tok/s/GPU':>11}{'peak GB':>9}"
            f"{'fits':>6}{'bubble':>8}{'comm GB':>9}"]
    for i, x in enumerate(ranked, 1):
        if x.step_time_s is None:
            rows.append(f"{'-':>2} {x.strategy:<19}{'n/a: ' + x.note:>9}")
            continue
        rows.append(f"{i:>2} {x.strategy:<19}{x.step_time_s:>9.3f}"
                    f"{x.tokens_per_s_per_gpu:>11.1f}{x.peak_memory_gb:>9.1f}"
                    f"{'yes' if x.fits else 'NO':>6}{x.bubble_rate or 0.0:>8.3f}"
                    f"{x.comm_gb_per_gpu or 0.0:>9.2f}" + (f"  {x.note}" if x.note else ""))
    return "\n".join(rows)
