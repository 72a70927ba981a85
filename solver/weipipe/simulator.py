"""The WeiPipe timing model (DESIGN.md section 6.5): ring steps, each the max of compute
and transfer.

Every rank runs the same program (`schedules`) on its own microbatches. Rules:

- Rank r's step s takes ``T(r, s) = max(compute, transfer)``: ``compute`` is the sum of
  its ops' times (BW = t_b + t_w); ``transfer`` is ``latency + bytes / bandwidth[r]`` for
  the chunks it passes on to rank r+1 during the step: one weight chunk per distinct chunk
  the step uses and one gradient chunk (D) per W or BW. Sending overlaps computing (a
  weight is only read while it is used; D goes out in pieces as the W pass writes it).
- It starts after its own step s-1 and after rank r-1's step s (the chunks rank r-1 used
  in step s are the ones rank r needs).
- Ring wrap: rank 0 needs back the copy rank p-1 used: an op of stream F (F ops), B (B
  and BW) or W (W ops) on chunk c waits for rank p-1's step holding the previous use of
  that stream's chunk c; the first use of chunk c in training step i+1 waits for rank
  p-1's last gradient op on chunk c in step i (the update needs every rank's D).

Figures: ``makespan`` is first start to last end over all ranks (the ring is one
synchronous training step, so there is no per-rank span objective here); ``step_time`` is
makespan / num_iterations; ``bubble_rate`` is ``(makespan - busiest rank's compute) /
makespan`` as in DESIGN.md section 3; memory per rank is the activation level plus the
chunks a step holds (weights, gradients) plus the activation-gradient buffer while a
microbatch's backward is in progress, peaked over ops in step order. This is the slides'
accounting (WeiPipe-Interleave: two weight chunks and one gradient chunk); the buffers
that receive the next step's chunks while this step computes are not counted, so a
double-buffered implementation holds up to one more set of chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppsched.solver.model.errors import ScheduleInvalid, Violation
from ppsched.solver.weipipe.profile import WeiPipeProfile
from ppsched.solver.weipipe.schedules import GRAD_KINDS, Program, WOp, build_program

_STREAM = {"F": "F", "B": "B", "BW": "B", "W": "W"}


@dataclass(frozen=True)
class WeiPipeResult:
    """A timed WeiPipe schedule."""

    method: str
    profile: WeiPipeProfile
    program: Program
    start: tuple[tuple[float, ...], ...]
    """start[r][s]: when rank r begins ring step s."""
    end: tuple[tuple[float, ...], ...]
    compute: tuple[tuple[float, ...], ...]
    """compute[r][s]: the op time inside the step (the rest of the step is waiting on
    the link)."""
    transfer: tuple[tuple[float, ...], ...]
    makespan: float
    step_time: float
    busy: tuple[float, ...]
    bubble_rate: float
    comm_bytes: tuple[float, ...]
    """Bytes each rank sends over the whole run."""
    peak_memory: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the profile, the program (one cell list per step) and the figures."""
        return {
            "schema_version": 1,
            "family": "weipipe",
            "method": self.method,
            "profile": self.profile.model_dump(exclude_none=True),
            "program": [[op.cell() for op in step] for step in self.program],
            "ranks": [[{"step": s, "ops": [op.cell() for op in step],
                        "start": self.start[r][s], "end": self.end[r][s],
                        "compute": self.compute[r][s], "transfer": self.transfer[r][s]}
                       for s, step in enumerate(self.program)]
                      for r in range(self.profile.num_ranks)],
            "metrics": {"makespan": self.makespan, "step_time": self.step_time,
                        "bubble_rate": self.bubble_rate, "busy": list(self.busy),
                        "comm_bytes": list(self.comm_bytes),
                        "peak_memory": list(self.peak_memory)},
        }


def simulate_weipipe(profile: WeiPipeProfile, method: str,
                     program: Program | None = None) -> WeiPipeResult:
    """Time WeiPipe schedule `method` (or a given `program`) on `profile`.

    Raises:
        ProfileError: an unknown method.
        ScheduleInvalid: a program that misses, repeats or misorders ops (every violation).
    """
    p, n = profile.num_ranks, profile.num_microbatches
    if program is None:
        program = build_program(method, p, n, profile.num_iterations)
    validate_program(program, p, n, profile.num_iterations)
    c = profile.chunks
    times = {"F": c["t_f"], "B": c["t_b"], "W": c["t_w"],
             "BW": tuple(b + w for b, w in zip(c["t_b"], c["t_w"], strict=True))}
    compute_l = [sum(times[op.kind][op.chunk] for op in step) for step in program]
    bytes_l = [_step_bytes(step, c["weight_bytes"], c["grad_bytes"]) for step in program]
    wrap = _wrap_predecessors(program)
    num_steps = len(program)
    start = [[0.0] * num_steps for _ in range(p)]
    end = [[0.0] * num_steps for _ in range(p)]
    transfer = [[0.0] * num_steps for _ in range(p)]
    for s in range(num_steps):
        for r in range(p):
            ready = end[r][s - 1] if s else 0.0
            if r:
                ready = max(ready, end[r - 1][s])
            else:
                for prev in wrap[s]:
                    ready = max(ready, end[p - 1][prev])
            if p > 1 and bytes_l[s] > 0:
                transfer[r][s] = profile.latency + bytes_l[s] / c["bandwidth"][r]
            start[r][s] = ready
            end[r][s] = ready + max(compute_l[s], transfer[r][s])
    first = min(start[r][0] for r in range(p)) if num_steps else 0.0
    makespan = max((end[r][-1] for r in range(p)), default=0.0) - first if num_steps else 0.0
    busy = tuple(float(sum(compute_l)) for _ in range(p))
    bubble = (makespan - max(busy)) / makespan if makespan > 0 else 0.0
    sent = float(sum(bytes_l)) if p > 1 else 0.0
    peak = _peak_memory(profile, program)
    return WeiPipeResult(
        method=method, profile=profile, program=program,
        start=tuple(map(tuple, start)), end=tuple(map(tuple, end)),
        compute=tuple(tuple(compute_l) for _ in range(p)),
        transfer=tuple(map(tuple, transfer)), makespan=makespan,
        step_time=makespan / profile.num_iterations, busy=busy, bubble_rate=bubble,
        comm_bytes=tuple(sent for _ in range(p)), peak_memory=tuple(peak for _ in range(p)))


def _step_bytes(step: tuple[WOp, ...], weight: tuple[float, ...],
                grad: tuple[float, ...]) -> float:
    chunks = {op.chunk for op in step}
    return sum(weight[k] for k in chunks) + sum(grad[op.chunk] for op in step
                                                if op.kind in GRAD_KINDS)


def _wrap_predecessors(program: Program) -> list[list[int]]:
    """For each step, the steps whose rank-(p-1) end gates rank 0 (the ring wrap)."""
    last_use: dict[tuple[int, str, int], int] = {}  # (iteration, stream, chunk) -> step
    last_grad: dict[tuple[int, int], int] = {}  # (iteration, chunk) -> step
    out: list[list[int]] = []
    for s, step in enumerate(program):
        gates = []
        for op in step:
            key = (op.iteration, _STREAM[op.kind], op.chunk)
            if key in last_use:
                gates.append(last_use[key])
            elif not any(k[0] == op.iteration and k[2] == op.chunk for k in last_use) and \
                    (op.iteration - 1, op.chunk) in last_grad:
                gates.append(last_grad[(op.iteration - 1, op.chunk)])
        for op in step:
            last_use[(op.iteration, _STREAM[op.kind], op.chunk)] = s
            if op.kind in GRAD_KINDS:
                last_grad[(op.iteration, op.chunk)] = s
        out.append(gates)
    return out


def _peak_memory(profile: WeiPipeProfile, program: Program) -> float:
    c = profile.chunks
    act, alpha = c["activation_bytes"], profile.alpha
    delta = {"F": lambda k: act[k], "B": lambda k: -(1 - alpha) * act[k],
             "W": lambda k: -alpha * act[k], "BW": lambda k: -act[k]}
    # Which steps a microbatch's backward spans (first to last B/BW): it holds the
    # activation-gradient buffer throughout.
    span: dict[tuple[int, int], list[int]] = {}
    for s, step in enumerate(program):
        for op in step:
            if op.kind in ("B", "BW"):
                span.setdefault((op.iteration, op.microbatch), [s, s])[1] = s
    in_backward = [0] * len(program)
    for lo, hi in span.values():
        for s in range(lo, hi + 1):
            in_backward[s] += 1
    level = peak = 0.0
    for s, step in enumerate(program):
        held = sum(c["weight_bytes"][k] for k in {op.chunk for op in step}) + sum(
            c["grad_bytes"][op.chunk] for op in step if op.kind in GRAD_KINDS)
        held += profile.boundary_bytes * in_backward[s]
        peak = max(peak, level + held)
        for op in step:
            level += delta[op.kind](op.chunk)
            peak = max(peak, level + held)
    return peak


def validate_program(program: Program, num_ranks: int, num_microbatches: int,
                     num_iterations: int = 1) -> None:
    """Check a program: every (chunk, microbatch, step) has F and either BW or B then W,
    once, in dependency order (F up the chunks, backward down, W after its B).

    Raises:
        ScheduleInvalid: with every violation found.
    """
    p = num_ranks
    seen: dict[tuple[str, int, int, int], tuple[int, int]] = {}
    violations: list[Violation] = []
    for s, step in enumerate(program):
        for i, op in enumerate(step):
            if op.kind not in _STREAM or not 0 <= op.chunk < p or \
                    not 0 <= op.microbatch < num_microbatches or \
                    not 0 <= op.iteration < num_iterations:
                violations.append(Violation("unknown_op", f"step {s}: {op.cell()} is not an "
                                            f"op of this profile", position=s))
                continue
            key = (op.kind, op.chunk, op.microbatch, op.iteration)
            if key in seen:
                violations.append(Violation("duplicate", f"step {s}: {op.cell()} runs twice",
                                            position=s))
            seen[key] = (s, i)
    for it in range(num_iterations):
        for j in range(num_microbatches):
            for k in range(p):
                needs: list[tuple[str, int] | None] = [("F", k - 1) if k else None]
                fused = ("BW", k, j, it) in seen
                back = "BW" if fused else "B"
                needs_back: list[tuple[str, int] | None] = [
                    (back, k + 1) if k + 1 < p else ("F", p - 1)]
                _require(seen, ("F", k, j, it), needs, violations)
                _require(seen, (back, k, j, it), needs_back, violations)
                if not fused:
                    _require(seen, ("W", k, j, it), [("B", k)], violations)
    if violations:
        grid = "\n".join(f"step {s}: " + " ".join(op.cell() for op in step)
                         for s, step in enumerate(program[:48]))
        raise ScheduleInvalid(violations, grid)


def _require(seen: dict[tuple[str, int, int, int], tuple[int, int]],
             key: tuple[str, int, int, int], needs: Sequence[tuple[str, int] | None],
             violations: list[Violation]) -> None:
    name = WOp(*key).cell()
    if key not in seen:
        violations.append(Violation("missing", f"{name} never runs"))
        return
    for need in needs:
        if need is None:
            continue
        dep = (need[0], need[1], key[2], key[3])
        if dep in seen and seen[dep] >= seen[key]:
            violations.append(Violation(
                "deadlock", f"{name} at step {seen[key][0]} runs before "
                f"{WOp(*dep).cell()} (step {seen[dep][0]}) it depends on",
                position=seen[key][0]))
