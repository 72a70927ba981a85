"""`ppsched torchtitan PROFILE.json -o DIR`: solve, then write the schedule's CSV and the
torchtitan 0.3.0 flags that must match it (solver/integrations/torchtitan.py). A schedule
with a separate W on the model's last stage is refused unless ``--unchunked-loss`` says the
user's torchtitan config has no chunked loss (`CHUNKED_LOSS_REFUSAL` says why)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ppsched.api.cli.options import (
    KEEP,
    layouts,
    memory_limit,
    positive_int,
    with_memory_limit,
)
from ppsched.api.cli.output import summary, warn_about_shape, write_atomically
from ppsched.solver.integrations import (
    CHUNKED_LOSS_REFUSAL,
    last_stage_splits,
    recipe_json,
    recipe_text,
    torchtitan_recipe,
    torchtitan_stage_layers,
)
from ppsched.solver.model import Profile, ProfileError, load_profile
from ppsched.solver.render import dropped_note, render_torch_csv
from ppsched.solver.solving import HEURISTIC, Layout, default_layouts, resolve_method, solve

CSV_NAME = "schedule.csv"
ARGS_NAME = "torchtitan.args"
JSON_NAME = "torchtitan.json"


def add_torchtitan_parser(sub: Any) -> None:
    """Register the `torchtitan` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("torchtitan", help="solve and write the CSV plus the torchtitan "
                       "settings that must match it")
    p.add_argument("profile", help="profile JSON (DESIGN.md section 2)")
    p.add_argument("-m", "--method", default=HEURISTIC,
                   help=f"{HEURISTIC} (default) or a named schedule, ours or torch's")
    p.add_argument("--memory-limit", metavar="X", type=memory_limit, default=KEEP,
                   help="override the profile's memory_limit: a number, or 'none'")
    p.add_argument("--layouts", metavar="LIST", type=layouts, default=(),
                   help="ways the model may be cut (see `ppsched solve --help`)")
    p.add_argument("--layers", metavar="N", type=positive_int,
                   help="the model's transformer layers: sets "
                   "pipeline_parallel_layers_per_stage and shows torchtitan's split")
    p.add_argument("--local-batch-size", metavar="B", type=positive_int,
                   help="samples per data-parallel rank and step: sets the microbatch "
                   "size B / m")
    p.add_argument("--unchunked-loss", action="store_true",
                   help="the torchtitan config's loss is not ChunkedLossWrapper (llama3's "
                   "configs use it): allows a separate W on the last stage")
    p.add_argument("-o", "--output", metavar="DIR", required=True,
                   help=f"folder for {CSV_NAME}, {ARGS_NAME} (torchtitan 0.3.0 flags) "
                   f"and {JSON_NAME}")
    p.add_argument("--mkdir", action="store_true", help="create DIR when missing")
    p.set_defaults(run=run_torchtitan)


def run_torchtitan(args: argparse.Namespace) -> int:
    folder = Path(args.output)
    if args.mkdir:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ProfileError("--output", args.output, f"a folder that can be created "
                               f"({exc.strerror})") from None
    elif not folder.is_dir():
        raise ProfileError("--output", args.output, "an existing folder (create it or pass "
                           "--mkdir)")
    profile = with_memory_limit(load_profile(args.profile), args.memory_limit)
    warn_about_shape(profile)
    schedule = solve(profile, args.method, layouts=args.layouts or _splittable(
        profile, default_layouts(profile, resolve_method(args.method)), args.layers))
    recipe = torchtitan_recipe(schedule, layers=args.layers,
                               local_batch_size=args.local_batch_size)
    if last_stage_splits(schedule) and not args.unchunked_loss:
        raise ProfileError("method", schedule.method, CHUNKED_LOSS_REFUSAL)
    csv_path = str(folder / CSV_NAME)
    text = recipe_text(recipe, csv_path)
    write_atomically(csv_path, render_torch_csv(schedule), "--output")
    write_atomically(str(folder / ARGS_NAME), text, "--output")
    write_atomically(str(folder / JSON_NAME),
                     json.dumps(recipe_json(recipe, csv_path), indent=1), "--output")
    print(summary(schedule))
    print(f"\nwrote {csv_path}, {folder / JSON_NAME} (dotted fields) and "
          f"{folder / ARGS_NAME} (flags for torchtitan 0.3.0 after --module/--config):")
    print(text, end="")
    note = dropped_note(schedule)
    if note:
        print(f"ppsched: note: {csv_path}: {note}")
    return 0


def _splittable(profile: Profile, layouts: tuple[Layout, ...],
                layers: int | None) -> tuple[Layout, ...]:
    """Of the layouts the solver would consider, those torchtitan can split `layers`
    transformer layers into (every stage gets one); all of them without ``--layers``.
    None fitting: the first, whose refusal then names the layer count it needs."""
    if layers is None or not layouts:
        return layouts
    kept = []
    for chunks, placement in layouts:
        try:
            torchtitan_stage_layers(profile.num_ranks * chunks, layers)
        except ProfileError:
            continue
        kept.append((chunks, placement))
    return tuple(kept) or layouts[:1]
