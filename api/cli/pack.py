"""`ppsched pack LENGTHS --cap N --replicas R --profile BASE.json`: samples into microbatches
and data-parallel replicas, each replica solved, beside naive packing (DESIGN.md 6.2).

LENGTHS is a file (one number a line, ``.jsonl`` with ``--field``, ``.parquet`` with
``--field``) or the lengths inline, comma-separated. Prints the assignment's summary and
the comparison; ``--out DIR`` writes the assignment, each replica's profile and schedule.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Any

from ppsched.solver.model import ProfileError, load_profile, read_json
from ppsched.solver.packing import (
    CostModel,
    Packing,
    PackResult,
    PackSpec,
    Quadratic,
    check_lengths,
    fit_quadratic,
    pack,
    parse_coefficients,
    read_lengths,
)


def add_pack_parser(sub: Any) -> None:
    """Register the `pack` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("pack", help="pack samples into microbatches and data-parallel "
                       "replicas, solve each replica, compare with naive packing")
    p.add_argument("lengths", help="sample lengths: a file (one number a line, .jsonl or "
                   ".parquet with --field) or inline, e.g. 512,2048,900")
    p.add_argument("--field", help="the JSONL field or Parquet column of the lengths (a "
                   "number, or a list/string whose length counts)")
    p.add_argument("--cap", required=True, type=int, help="most tokens per microbatch")
    p.add_argument("--replicas", type=int, default=1, help="data-parallel replicas "
                   "(default 1)")
    p.add_argument("--microbatches", metavar="M[,M2,...]", help="microbatches per replica: "
                   "one count, or one per replica (default: as many as naive packing "
                   "needs, spread evenly)")
    p.add_argument("--profile", required=True, help="base profile JSON: its per-stage "
                   "times and memory are those of one sample of --reference-tokens tokens")
    p.add_argument("--cost", metavar="A,B,C", help="F's time a*s^2 + b*s and memory c*s "
                   "of a sample of s tokens (default 0,1,1: proportional to tokens)")
    p.add_argument("--cost-b", metavar="A,B", help="B's own a,b (default: B scales as F)")
    p.add_argument("--cost-w", metavar="A,B", help="W's own a,b (default: W scales as F)")
    p.add_argument("--fit", metavar="POINTS.json", help="fit F's a,b to profiled points "
                   "[[tokens, time], ...] by least squares (instead of --cost's a,b)")
    p.add_argument("--reference-tokens", type=int, help="the sample length the base "
                   "profile was measured at (default: the cap)")
    p.add_argument("-m", "--method", default="heuristic", help="solve method for ppsched's "
                   "packing (default heuristic; see `ppsched methods`)")
    p.add_argument("--naive-method", help="solve method for naive packing (default: the "
                   "same as --method)")
    p.add_argument("--out", metavar="DIR", help="write assignment.json and each replica's "
                   "profile and schedule JSON there (created if missing)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=run_pack)


def parse_lengths_arg(text: str, field: str | None) -> list[int]:
    """A file's lengths, or inline comma-separated numbers.

    A file that exists wins; otherwise text with a comma, or one number, is inline, each
    part named by its index when it is not a length (``lengths[1]: got -3``). The file
    test is os.path.exists, which answers False for a name the system refuses (longer
    than NAME_MAX, as 52 lengths of 1000 are), where Path.exists raises.
    """
    if os.path.exists(text) or ("," not in text and not _is_number(text)):
        return read_lengths(text, field)
    values: list[float] = []
    for i, part in enumerate(text.split(",")):
        if not _is_number(part):
            raise ProfileError(f"lengths[{i}]", part.strip(), "a whole number of tokens "
                               "(inline lengths: comma-separated numbers, e.g. "
                               "512,2048,900), or the path of a file of lengths")
        value = float(part)
        values.append(int(value) if value.is_integer() else value)  # -3, not -3.0
    return check_lengths(values)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_counts(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ProfileError("microbatches", text, "one integer >= 1, or one per replica, "
                           "comma-separated") from None


def cost_model(cost: str | None, cost_b: str | None, cost_w: str | None,
               fit: str | None) -> CostModel:
    """The cost model from the command's options (named errors)."""
    a, b, c = parse_coefficients(cost, "cost", 3) if cost else (0.0, 1.0, 1.0)
    forward = Quadratic(a, b)
    if fit:
        points = read_json(fit, "fit")
        if not isinstance(points, list) or not all(
                isinstance(x, list) and len(x) == 2 for x in points):
            raise ProfileError("fit", fit, "a JSON list of [tokens, time] pairs")
        try:
            pairs = [(float(s), float(t)) for s, t in points]
        except (TypeError, ValueError):
            raise ProfileError("fit", fit, "a JSON list of [tokens, time] number pairs") \
                from None
        forward = fit_quadratic(pairs, "fit")
    backward = Quadratic(*parse_coefficients(cost_b, "cost_b", 2)) if cost_b else None
    weight = Quadratic(*parse_coefficients(cost_w, "cost_w", 2)) if cost_w else None
    return CostModel(forward=forward, memory_per_token=c, backward=backward, weight=weight)


def run_pack(args: argparse.Namespace) -> int:
    base = load_profile(args.profile)
    spec = PackSpec(lengths=tuple(parse_lengths_arg(args.lengths, args.field)),
                    cap=args.cap, num_replicas=args.replicas,
                    microbatches=parse_counts(args.microbatches),
                    cost=cost_model(args.cost, args.cost_b, args.cost_w, args.fit),
                    reference_tokens=args.reference_tokens, method=args.method,
                    naive_method=args.naive_method)
    result = pack(base, spec)
    if args.out:
        write_outputs(Path(args.out), result)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(pack_summary(result))
    return 0


def _imbalance(packing: Packing) -> str:
    x = packing.imbalance
    return "inf (a replica got no microbatch)" if math.isinf(x) else f"{100 * x:.2f}%"


def pack_summary(result: PackResult) -> str:
    """The lines `ppsched pack` prints: both packings, per replica, and the speed-up."""
    spec = result.spec
    f = spec.cost.forward
    lines = [f"{len(spec.lengths)} samples, {sum(spec.lengths)} tokens, cap {spec.cap}, "
             f"{spec.num_replicas} replica(s); cost a={f.a:g} b={f.b:g} "
             f"c={spec.cost.memory_per_token:g}, reference {spec.reference} tokens"]
    packed = result.packed
    moves = f", {packed.moves} rebalancing move{'s' if packed.moves != 1 else ''}"
    for title, packing in ((f"ppsched packing ({packed.strategy} assignment{moves})",
                            packed),
                           ("naive packing (arrival order, filled to the cap)",
                            result.naive)):
        lines.append(f"{title}, method {packing.method}: step time "
                     f"{packing.step_time:.6g}, imbalance {_imbalance(packing)}")
        for r, replica in enumerate(packing.replicas):
            order = replica.microbatch_order
            lines.append(f"  replica {r}: cost {replica.cost:.6g}, "
                         f"{len(replica.microbatches)} microbatches, tokens "
                         f"{sum(mb.tokens for mb in replica.microbatches)}"
                         + (f", order {order}" if order is not None else ""))
    lines.append(f"speed-up (naive step time / ppsched's): {result.speedup:.4f}")
    return "\n".join(lines)


def write_outputs(folder: Path, result: PackResult) -> None:
    """assignment.json, and per packing and replica its profile and schedule JSON."""
    files = {"assignment.json": json.dumps(result.to_dict(), indent=1)}
    for packing in (result.packed, result.naive):
        for r, replica in enumerate(packing.replicas):
            if replica.profile is None or replica.schedule is None:
                continue
            stem = f"{packing.name}-replica{r}"
            files[f"{stem}.profile.json"] = replica.profile.model_dump_json(
                indent=1, exclude_none=True)
            files[f"{stem}.schedule.json"] = replica.schedule.model_dump_json(indent=1)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text + "\n")
    except OSError as exc:
        raise ProfileError("out", str(folder), f"a writable folder ({exc.strerror})") \
            from None
