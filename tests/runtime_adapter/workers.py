"""Functions the dist tests run on every rank (module level, so spawn can pickle them)."""

from __future__ import annotations

import copy
import gc
import os
import signal
import time
import warnings
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from ppsched.runtime_adapter.comm import PipelineTimeout
from ppsched.runtime_adapter.engines import make_engine
from ppsched.runtime_adapter.executor import PipelineExecutor
from ppsched.runtime_adapter.gpt import GPTConfig, gpt_batch, gpt_loss, gpt_model, split_stages
from ppsched.runtime_adapter.model import example_batch, mlp_stages, mse_loss
from ppsched.runtime_adapter.optim import step_optimizer
from ppsched.solver.model.ops import Op
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.sim.emit import schedule_from_orders
from ppsched.solver.solving.entry import solve
from torch import nn

from tests.runtime_adapter import grid

HIDDEN = 16
CUSTOM = "gpipe-per-chunk"  # built here: valid for any placement


def unit_profile(p: int, m: int, v: int = 1, placement: str | None = None) -> Any:
    data: dict[str, Any] = {"num_ranks": p, "num_microbatches": m, "num_chunks": v,
                            "t_f": 1.0, "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 0.5}
    if placement is not None:
        data["placement"] = placement
    return parse_profile(data)


def gpipe_per_chunk(p: int, m: int, v: int, placement: str) -> Schedule:
    """Per rank: every F of its stages (stage order, then microbatch order), then per
    stage in reverse order all its B, then all W: valid for any placement."""
    profile = unit_profile(p, m, v, placement)
    orders: list[list[Op]] = []
    for stages in profile.problem.rank_to_stages:
        order = [Op("F", s, j) for s in stages for j in range(m)]
        order += [Op("B", s, j) for s in reversed(stages) for j in range(m)]
        order += [Op("W", s, j) for s in reversed(stages) for j in range(m)]
        orders.append(order)
    return schedule_from_orders(profile, orders, CUSTOM)


POLICIES_BY_HAND = "1f1b+policies"  # built here: 1F1B with R, O and L inserted
SOLVER_OFFLOAD = "solver-offload"  # the solver's choice below 1F1B's memory, offload on


def policies_by_hand(p: int, m: int) -> Schedule:
    """1F1B where, on every stage, microbatch 0's activation is offloaded (O right after
    its F, L right before its B) and microbatch 1's recomputed (R right before its B)."""
    profile = parse_profile({**unit_profile(p, m).model_dump(mode="json"),
                             "t_offload": 0.5, "t_r": 1.0})
    orders: list[list[Op]] = []
    for ops in solve(profile, "1f1b").orders():
        order: list[Op] = []
        for op in ops:
            if op.kind in ("B", "BW") and op.microbatch == 0:
                order.append(Op("L", op.stage, 0))
            if op.kind in ("B", "BW") and op.microbatch == 1:
                order.append(Op("R", op.stage, 1))
            order.append(op)
            if op.kind == "F" and op.microbatch == 0:
                order.append(Op("O", op.stage, 0))
        orders.append(order)
    return schedule_from_orders(profile, orders, POLICIES_BY_HAND)


def build_schedule(method: str, p: int, m: int, v: int = 1,
                   placement: str | None = None) -> Schedule:
    if method == CUSTOM:
        return gpipe_per_chunk(p, m, v, placement or "loop")
    if method == POLICIES_BY_HAND:
        return policies_by_hand(p, m)
    if method == SOLVER_OFFLOAD:
        return solve(parse_profile({**unit_profile(p, m).model_dump(mode="json"),
                                    "t_offload": 0.5, "memory_limit": 1.5}))
    return solve(unit_profile(p, m, v, placement), method)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def equivalence(rank: int, world: int, cases: list[tuple[str, int, int, str | None]],
                ) -> dict[str, dict[str, float]]:
    """Per case (method, m, v, placement): the largest relative error of the loss, of any
    gradient, and of any parameter after an Adam step, against the unpipelined model."""
    out: dict[str, dict[str, float]] = {}
    for method, m, v, placement in cases:
        schedule = build_schedule(method, world, m, v, placement)
        problem = schedule.profile.problem
        num_stages = problem.num_stages
        stages = mlp_stages(num_stages, hidden=HIDDEN, layers_per_stage=1, seed=7)
        inputs, targets = example_batch(m, hidden=HIDDEN, seed=3)
        # The reference: the whole model, unpipelined, loss = mean over microbatches.
        reference = nn.Sequential(*copy.deepcopy(stages))
        ref_loss = sum(mse_loss(reference(x), y) for x, y in zip(inputs, targets, strict=True)) / m
        ref_loss.backward()
        ref_grads = {s: [p.grad.clone() for p in reference[s].parameters()]
                     for s in range(num_stages)}
        torch.optim.Adam(reference.parameters(), lr=1e-2).step()

        mine = {s: copy.deepcopy(stages[s]) for s in problem.rank_to_stages[rank]}
        executor = PipelineExecutor(schedule, mine, mse_loss, timeout_s=30)
        result = executor.run(inputs, targets)
        loss_err = abs(result.loss - ref_loss.item()) / abs(ref_loss.item()) \
            if result.loss is not None else 0.0
        grad_err = max(_rel(p.grad, g) for s in mine
                       for p, g in zip(mine[s].parameters(), ref_grads[s], strict=True))
        optimizer = torch.optim.Adam(executor.parameters(), lr=1e-2)
        step_optimizer(optimizer, executor.parameters())
        param_err = max(_rel(p.detach(), q.detach()) for s in mine
                        for p, q in zip(mine[s].parameters(), reference[s].parameters(),
                                        strict=True))
        held = [r.held() for r in executor.runners.values()]
        out[f"{method}-v{v}-{placement}"] = {
            "loss": loss_err, "grad": grad_err, "param": param_err,
            "num_params": float(sum(p.numel() for p in executor.parameters())),
            "held": float(sum(a + b for a, b in held)),
            "has_loss": float(result.loss is not None)}
    return out


def _executor(rank: int, world: int, method: str, m: int, *, hidden: int = HIDDEN,
              layers: int = 1, timeout_s: float = 30.0, microbatch_size: int = 8,
              ) -> tuple[PipelineExecutor, list[torch.Tensor], list[torch.Tensor]]:
    schedule = build_schedule(method, world, m)
    stages = mlp_stages(schedule.profile.problem.num_stages, hidden=hidden,
                        layers_per_stage=layers, seed=7)
    mine = {s: stages[s] for s in schedule.profile.problem.rank_to_stages[rank]}
    inputs, targets = example_batch(m, hidden=hidden, microbatch_size=microbatch_size,
                                    seed=3)
    return PipelineExecutor(schedule, mine, mse_loss, timeout_s=timeout_s), inputs, targets


def post_validation(rank: int, world: int) -> list[dict[str, Any]]:
    """Three steps (passing check, an inf gradient on rank 1, clipping), each done both
    ways from the same gradients: post-update validation on the executor's parameters,
    the synchronous step on a copy. Returns, per step, the outcome and whether the two
    ends are identical (parameters and optimizer state)."""
    executor, inputs, targets = _executor(rank, world, "zb-h1", 4)
    params = executor.parameters()
    twins = [nn.Parameter(p.detach().clone()) for p in params]
    post = torch.optim.Adam(params, lr=1e-2)
    sync = torch.optim.Adam(twins, lr=1e-2)
    report = []
    for step, (inject_inf, max_norm) in enumerate([(False, None), (True, None),
                                                   (False, 1e-3)]):
        executor.run(inputs, targets)
        if inject_inf and rank == 1:
            params[0].grad.view(-1)[0] = float("inf")
        before = [p.detach().clone() for p in params]
        for t, p in zip(twins, params, strict=True):
            t.grad = p.grad.clone()
        a = step_optimizer(post, params, post_validation=True, max_grad_norm=max_norm)
        b = step_optimizer(sync, twins, post_validation=False, max_grad_norm=max_norm)
        state_a, state_b = post.state_dict()["state"], sync.state_dict()["state"]
        same_state = state_a.keys() == state_b.keys() and all(
            torch.equal(state_a[k][name], state_b[k][name])
            for k in state_a for name in state_a[k])
        report.append({
            "step": step, "post": a, "sync": b,
            "same_params": all(torch.equal(p, t) for p, t in zip(params, twins, strict=True)),
            "same_state": same_state,
            "unchanged": all(torch.equal(p, q) for p, q in zip(params, before, strict=True)),
        })
    return report


def timeout(rank: int, world: int, store_path: str) -> str:
    """Step 1 runs on both ranks; in step 2 rank 0 never starts, rank 1 must time out.

    Rank 0 stays alive (its connections open) until rank 1 says it is done, so rank 1
    meets its own deadline, never a closed connection, however loaded the machine.
    """
    store = dist.FileStore(store_path, world)
    # Step 1 waits as long as a loaded machine needs (with the short limit already, a
    # slow step 1 timed rank 1 out and rank 0 saw its connection close: a third run of
    # the suite under a busy loop on both cores). Only step 2's waits are short.
    executor, inputs, targets = _executor(rank, world, "1f1b", 2, timeout_s=120.0)
    executor.run(inputs, targets)
    executor.timeout_s = 1.5
    if rank == 0:
        store.wait(["rank1-done"], timedelta(seconds=120))
        return ""
    start = time.monotonic()
    try:
        executor.run(inputs, targets)
    except RuntimeError as exc:
        return f"{type(exc).__name__} after {time.monotonic() - start:.1f} s: {exc}"
    finally:
        store.set("rank1-done", "1")
    return "no error"


def killed(rank: int, world: int, victim: int, when: int, engine: str = "ppsched",
           timeout_s: float | None = None) -> str:
    """Two steps of 1F1B on the GPT under `engine`; in step 2 rank `victim` kills itself
    (SIGKILL) at the start of its F number `when`. Every other rank must raise, naming the
    op (or torch's action) and the peer. `timeout_s`: the ppsched engine's wait limit."""
    schedule = grid.schedule_for("1f1b", world)
    stages = split_stages(gpt_model(GPTConfig(layers=world)), world)
    module = copy.deepcopy(stages[rank])
    armed, calls = [False], [0]

    def die_in_step_two(_module: nn.Module, _args: Any) -> None:
        # Armed after step 1, so that step 1's forwards (the engine's one-time set-up
        # forward included) are not counted.
        if armed[0]:
            calls[0] += 1
            if calls[0] == 1 + when:
                os.kill(os.getpid(), signal.SIGKILL)

    if rank == victim:
        module.register_forward_pre_hook(die_in_step_two)
    options = {} if timeout_s is None else {"timeout_s": timeout_s}
    runner = make_engine(engine, schedule, {rank: module}, gpt_loss, **options)
    tokens, targets = gpt_batch(GPTConfig(layers=world), schedule.profile.num_microbatches)
    runner.run(tokens, targets)
    armed[0] = True
    start = time.monotonic()
    try:
        runner.run(tokens, targets)
    except PipelineTimeout as exc:
        # Raised (not returned): the launcher then skips the process group's teardown,
        # which would wait for the dead rank.
        raise type(exc)(f"after {time.monotonic() - start:.2f} s: {exc}") from None
    return "no error"


def mismatch(rank: int, world: int, what: str) -> str:
    """Both ranks build an executor; rank 1 is wrong (`what`); each returns its error."""
    schedule = build_schedule("1f1b", 4 if what == "world" else world, 2)
    stages = mlp_stages(schedule.profile.problem.num_stages, hidden=HIDDEN,
                        layers_per_stage=1)
    mine = {rank: stages[rank]}
    if what == "stages" and rank == 1:
        mine = {0: stages[0]}
    try:
        PipelineExecutor(schedule, mine, mse_loss, timeout_s=10)
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "accepted"


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def leak(rank: int, world: int, steps: int) -> dict[str, float]:
    """`steps` steps of ZB-H1 (B/W split) with Adam: resident memory and live tensors
    after step 10 and after the last; what the runners still hold at the end."""
    executor, inputs, targets = _executor(rank, world, "zb-h1", 8, hidden=256, layers=2,
                                          microbatch_size=64)
    optimizer = torch.optim.Adam(executor.parameters(), lr=1e-4)
    marks: dict[int, tuple[int, int]] = {}
    for step in range(1, steps + 1):
        executor.run(inputs, targets)
        step_optimizer(optimizer, executor.parameters(), post_validation=True)
        if step in (10, steps):
            gc.collect()
            with warnings.catch_warnings():  # isinstance on some objects warns
                warnings.simplefilter("ignore")
                live = sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor))
            marks[step] = (_rss_bytes(), live)
    held = sum(a + b for r in executor.runners.values() for a, b in [r.held()])
    return {"rss_growth_mib": (marks[steps][0] - marks[10][0]) / 2**20,
            "tensor_growth": float(marks[steps][1] - marks[10][1]), "held": float(held)}


class DictOut(nn.Module):
    """Stage 0: a dict for the next stage's keyword arguments (with an int tensor)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        ids = (x[:, :1] > 0).long()
        return {"h": torch.tanh(self.lin(x)), "skip": 2 * x, "ids": ids}


class KwargsToTuple(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, h: torch.Tensor, skip: torch.Tensor, ids: torch.Tensor,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.lin(h) * (1 + ids), skip


class TupleIn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, h: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.tanh(h)) + skip


def structured_stages() -> list[nn.Module]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        return [DictOut(), KwargsToTuple(), TupleIn(), nn.Sequential(nn.LayerNorm(HIDDEN),
                                                                     nn.Linear(HIDDEN, HIDDEN))]


def structured(rank: int, world: int, methods: list[str]) -> dict[str, float]:
    """Stages passing a dict (keyword arguments, one int tensor) and a tuple: largest
    relative gradient and loss error against the unpipelined model, per method."""
    out = {}
    for method in methods:
        schedule = grid.schedule_for(method, world)
        stages = structured_stages()
        m = schedule.profile.num_microbatches
        inputs, targets = example_batch(m, hidden=HIDDEN, seed=3)
        reference = copy.deepcopy(stages)
        ref_losses = []
        for x, y in zip(inputs, targets, strict=True):
            h = reference[1](**reference[0](x))
            loss = mse_loss(reference[3](reference[2](*h)), y)
            (loss / m).backward()
            ref_losses.append(loss.item())
        mine = {s: copy.deepcopy(stages[s]) for s in schedule.profile.problem.rank_to_stages[rank]}
        result = PipelineExecutor(schedule, mine, mse_loss, timeout_s=30).run(inputs, targets)
        errors = [_rel(p.grad, q.grad) for s in mine
                  for p, q in zip(mine[s].parameters(), reference[s].parameters(), strict=True)]
        if result.loss is not None:
            ref = sum(ref_losses) / m
            errors.append(abs(result.loss - ref) / ref)
        out[method] = max(errors)
    return out


def loss_scaling(rank: int, world: int) -> dict[str, Any]:
    """The GPT under 1F1B: (a) fp32 with loss scale 1024 ends where scale 1 ends; (b) fp16
    autocast from a scale that overflows: steps are skipped on every rank alike and the
    scale backs off until one is finite."""
    from ppsched.runtime_adapter.optim import LossScaler

    schedule = grid.schedule_for("1f1b", world)
    config = GPTConfig(layers=world)
    stages = split_stages(gpt_model(config, seed=7), world)
    tokens, targets = gpt_batch(config, schedule.profile.num_microbatches)
    ends = []
    for scale in (1.0, 1024.0):
        mine = copy.deepcopy({rank: stages[rank]})
        executor = PipelineExecutor(schedule, mine, gpt_loss, timeout_s=30)
        executor.run(tokens, targets, loss_scale=scale)
        optimizer = torch.optim.AdamW(executor.parameters(), lr=1e-2)
        step_optimizer(optimizer, executor.parameters(), loss_scale=scale)
        ends.append([p.detach().clone() for p in executor.parameters()])
    fp32_err = max(_rel(a, b) for a, b in zip(*ends, strict=True))

    mine = copy.deepcopy({rank: stages[rank]})
    executor = PipelineExecutor(schedule, mine, gpt_loss, timeout_s=30,
                                autocast_dtype=torch.float16)
    optimizer = torch.optim.AdamW(executor.parameters(), lr=1e-2)
    scaler = LossScaler(init_scale=2.0**40)
    before = [p.detach().clone() for p in executor.parameters()]
    history = []
    for _ in range(40):
        executor.run(tokens, targets, loss_scale=scaler.scale)
        outcome = step_optimizer(optimizer, executor.parameters(), loss_scale=scaler.scale)
        history.append((scaler.scale, outcome.finite, outcome.stepped))
        scaler.update(outcome.finite)
        if outcome.stepped:
            break
    moved = any(not torch.equal(p, q) for p, q in zip(executor.parameters(), before,
                                                      strict=True))
    return {"fp32_err": fp32_err, "history": history, "moved": moved}


def assert_equals_unpipelined(per_rank: list[dict[str, float]], tolerance: float) -> None:
    """The figures `equivalence` returned for one case, one dict per rank: loss, every
    gradient and every parameter within `tolerance` of the unpipelined model, nothing left
    stashed, and exactly one rank (the last stage's) reporting the loss."""
    for rank, figures in enumerate(per_rank):
        assert figures["num_params"] > 0
        assert figures["loss"] <= tolerance, (rank, figures)
        assert figures["grad"] <= tolerance, (rank, figures)
        assert figures["param"] <= tolerance, (rank, figures)
        assert figures["held"] == 0, f"rank {rank} still holds stashed microbatches"
    assert sum(f["has_loss"] for f in per_rank) == 1


def first_step_dropout(rank: int, world: int, engine: str, method: str) -> float:
    """The largest relative gradient error of the FIRST step, seeded, of a model whose
    last stage ends in a dropout, against the unpipelined model run from the same seed.

    Only the last stage draws random numbers, and its forwards run in microbatch order on
    every schedule, so the pipeline draws the unpipelined model's masks exactly when
    nothing else (the engine's one-time setup included) consumes the seeded state.
    """
    m, seed = 4, 11
    schedule = build_schedule(method, world, m)
    num_stages = schedule.profile.problem.num_stages
    stages: list[nn.Module] = list(mlp_stages(num_stages, hidden=HIDDEN, layers_per_stage=1,
                                              seed=7))
    stages[-1] = nn.Sequential(stages[-1], nn.Dropout(0.5))
    inputs, targets = example_batch(m, hidden=HIDDEN, seed=3)
    reference = nn.Sequential(*copy.deepcopy(stages))
    torch.manual_seed(seed)
    ref_loss = sum(mse_loss(reference(x), y) for x, y in zip(inputs, targets, strict=True)) / m
    ref_loss.backward()
    mine = {s: copy.deepcopy(stages[s]) for s in schedule.profile.problem.rank_to_stages[rank]}
    runner = make_engine(engine, schedule, mine, mse_loss)
    torch.manual_seed(seed)  # as a user seeds the step: after building the engine
    runner.run(inputs, targets)
    return max(_rel(p.grad, q.grad) for s in mine
               for p, q in zip(mine[s].parameters(), reference[s].parameters(), strict=True))


class _WithUnused(nn.Module):
    """A stage holding a trained parameter its forward never uses (the shape of a weight
    a runtime leaves without a gradient)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.unused = nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def tied_misuse(rank: int, world: int, engine: str, case: str) -> str:
    """The error `engine` raises for a misuse of ``tied=`` ("" if none): a parameter of no
    stage (``foreign``), a tie whose members differ in shape (``shape``), or a stage
    parameter left without a gradient under ``check_grads`` (``no-grad``)."""
    schedule = build_schedule("1f1b", world, 4)
    stages = mlp_stages(world, hidden=HIDDEN, layers_per_stage=1, seed=7)
    mine: dict[int, nn.Module] = {rank: stages[rank]}
    params = list(mine[rank].parameters())
    group = dist.group.WORLD
    tied: list[tuple[nn.Parameter, Any]] = []
    options: dict[str, Any] = {}
    if case == "foreign":
        tied = [(nn.Parameter(torch.zeros(3)), group)]
    elif case == "shape":
        tied = [(params[2] if rank == 0 else params[3], group)]  # a weight and a bias
    elif case == "no-grad":
        mine = {rank: _WithUnused(stages[rank])}
        options["check_grads"] = True
    try:
        runner = make_engine(engine, schedule, mine, mse_loss, tied=tied, **options)
        inputs, targets = example_batch(4, hidden=HIDDEN, seed=3)
        runner.run(inputs, targets)
    except (ValueError, RuntimeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def tied_before_fully_shard(rank: int, world: int) -> tuple[str, bool]:
    """FSDP2 stages on a mesh of both ranks (one pipeline rank each): the error for a tied
    weight taken before `fully_shard_stages`, and whether the weight it returns with
    ``tied=`` is the sharded stage's own parameter, accepted by the engine. (The sums of a
    real tie, across pipeline ranks, are checked by the grid's FSDP2 cases.)"""
    from ppsched.runtime_adapter.dp_wrappers import fully_shard_stages
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor

    pp_groups = [dist.new_group([r]) for r in range(world)]
    schedule = build_schedule("1f1b", 1, 4)
    mesh = DeviceMesh.from_group(dist.group.WORLD, "cpu")
    stale = mlp_stages(1, hidden=HIDDEN, layers_per_stage=1, seed=7)
    before = next(stale[0].parameters())
    fully_shard_stages({0: stale[0]}, mesh)
    try:
        make_engine("torch", schedule, {0: stale[0]}, mse_loss, group=pp_groups[rank],
                    tied=[(before, pp_groups[rank])])
        refused = ""
    except ValueError as exc:
        refused = str(exc)
    fresh = mlp_stages(1, hidden=HIDDEN, layers_per_stage=1, seed=7)
    sharded, (weight,) = fully_shard_stages({0: fresh[0]}, mesh,
                                            tied=[next(fresh[0].parameters())])
    make_engine("torch", schedule, sharded, mse_loss, group=pp_groups[rank],
                tied=[(weight, pp_groups[rank])])
    return refused, isinstance(weight, DTensor) and weight is next(sharded[0].parameters())
