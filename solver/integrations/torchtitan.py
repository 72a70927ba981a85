"""The torchtitan settings that must match a solved schedule's CSV.

torchtitan runs a ppsched CSV through torch's ``_PipelineScheduleRuntime`` but builds the
stages itself, from its own settings; they must agree with the schedule's p, v, placement
and m, or the CSV names stages a rank does not hold. What torchtitan reads (pytorch/
torchtitan, ``torchtitan/distributed/pipeline_parallel.py`` and ``torchtitan/config/``;
the TOML-era ``job_config.py`` up to 238fa99 of 2026-02-23, the dataclass config since):

- ``_build_pipeline_schedule``: ``if pp_schedule_csv: schedule_class =
  _PipelineScheduleRuntime`` then ``schedule._load_csv(pp_schedule_csv)``; the CSV, not
  ``pipeline_parallel_schedule``, gives the order.
- ``_get_pipeline_metadata``: ``schedule_class = get_schedule_class(
  parallelism.pipeline_parallel_schedule)``; ``is_single_stage_schedule`` decides the
  stages per rank: 1 for a ``PipelineScheduleSingle``, else 2 unless
  ``pipeline_parallel_layers_per_stage`` is set, when ``num_virtual_stages =
  ceil((num_layers + input_weight + output_weight) / layers_per_stage)`` (the weights are
  ``pipeline_parallel_first_stage_less_layers`` and ``..._last_stage_less_layers``,
  default 1 each).
- ``_get_pp_rank_to_stage_indices_mapping`` / ``_pipeline_module_split``: ``style = "v"
  if schedule_class in (ScheduleZBVZeroBubble, ScheduleDualPipeV) else "loop"``; loop gives
  rank r the stages ``r + s * pp_degree``, V the pairs ``(r, num_stages - 1 - r)`` and
  asserts 2 stages per rank. So a V schedule must name ``ZBVZeroBubble`` (or
  ``DualPipeV``), a looped one a multi-stage class that is neither.
- ``_generate_llm_fqn_per_model_part``: the layer split, `torchtitan_stage_layers` below.
- Microbatches: ``n_microbatches = training.local_batch_size //
  parallelism.pipeline_parallel_microbatch_size`` (``_build_pipeline_schedule``; the
  trainer's ``__post_init__`` refuses a size that does not divide).

torchtitan 0.3.0 (PyPI, the release a user installs) reads no TOML: the config comes
from ``--module``/``--config`` (a ``config_registry`` function such as
``llama3_debugmodel``) and ``--section.field`` flags parsed by tyro
(``torchtitan/config/manager.py``), so the recipe is a list of flags. Its
``Trainer.Config.__post_init__`` refuses pipeline parallelism unless
``--training.disable_cuda_graphs`` is set, and its default selective activation
checkpointing breaks a separate W pass ("Trying to backward an extra time"): split-backward
schedules get the ``activation-checkpoint:none`` sub-command.

The last stage's W (`last_stage_splits`): torchtitan 0.3.0's llama3 configs use
``ChunkedLossWrapper``, which runs ``lm_head``'s forward and backward inside the loss, that
is during the schedule's F, and ``apply_fsdp_to_decoder`` always wraps ``[norm, lm_head]``
in one FSDP2 unit (at dp = 1 too). That unit's gradients are reduced when lm_head's backward
ends (and the wrapper reshards the unit, norm included, before the stage's backward), so
the final norm's weight gradient, which a separate W computes later, is lost: None with
torchtitan's own wrapper, 38% off with a one-chunk stand-in
(tests/interop/test_torchtitan_last_stage.py, torch's own runtime on 2 gloo ranks; exact
with a fused B on that stage or an unchunked loss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.schedule import Schedule

# torchtitan's defaults for pipeline_parallel_first/last_stage_less_layers: the embedding
# and the output count as one layer each when it spreads layers over stages.
INPUT_WEIGHT = 1
OUTPUT_WEIGHT = 1


@dataclass(frozen=True)
class TorchtitanRecipe:
    """What torchtitan must be told to run a schedule's CSV."""

    pipeline_parallel_degree: int
    """p, the physical pipeline ranks."""
    pipeline_parallel_schedule: str
    """A torch schedule class name giving torchtitan the stages per rank and placement."""
    stages_per_rank: int
    num_microbatches: int
    layers_per_stage: int | None
    """``pipeline_parallel_layers_per_stage``; None where torchtitan's default fits."""
    stage_layers: tuple[int, ...] | None
    """Transformer layers in each stage of torchtitan's split (with ``--layers``)."""
    local_batch_size: int | None
    microbatch_size: int | None
    split_backward: bool = False
    """The CSV has W ops (torch's I and W): activation checkpointing must be off."""


def torchtitan_recipe(schedule: Schedule, *, layers: int | None = None,
                      local_batch_size: int | None = None) -> TorchtitanRecipe:
    """The settings for `schedule` (its profile's p, v, placement and m).

    Args:
        schedule: a solved schedule (the profile it echoes is the one solved, re-cut if a
            layout won).
        layers: the model's transformer layer count, to set the layers per stage.
        local_batch_size: samples per data-parallel rank and step, to set the microbatch
            size ``local_batch_size / m``.

    Raises:
        ProfileError: ``--layers`` that torchtitan cannot split into p * v stages, v > 2
            without ``--layers``, a V placement other than 2 chunks, or a
            ``--local-batch-size`` that m does not divide.
    """
    profile = schedule.profile
    p, v, m = profile.num_ranks, profile.num_chunks, profile.num_microbatches
    v_shape = v > 1 and profile.placement == "v"
    if v_shape and v != 2:
        raise ProfileError("num_chunks", v, "2 for a V placement (torchtitan's V style "
                           "asserts 2 stages per rank)")
    layers_per_stage = stage_layers = None
    if layers is not None:
        layers_per_stage = _layers_per_stage(layers, p * v)
        stage_layers = torchtitan_stage_layers(p * v, layers)
    if layers_per_stage is None and v > 2:
        raise ProfileError("--layers", "not given", f"the model's layer count, with one k such "
                           f"that ceil((layers + 2) / k) = {p * v} (torchtitan assumes 2 "
                           f"stages per rank unless pipeline_parallel_layers_per_stage is "
                           f"set, and this schedule has {v})")
    microbatch_size = None
    if local_batch_size is not None:
        if local_batch_size < 1 or local_batch_size % m:
            raise ProfileError("--local-batch-size", local_batch_size, f"a positive "
                               f"multiple of num_microbatches = {m} (torchtitan's "
                               "microbatch size is local_batch_size / m)")
        microbatch_size = local_batch_size // m
    return TorchtitanRecipe(
        pipeline_parallel_degree=p, pipeline_parallel_schedule=_schedule_class(schedule),
        stages_per_rank=v, num_microbatches=m, layers_per_stage=layers_per_stage,
        stage_layers=stage_layers, local_batch_size=local_batch_size,
        microbatch_size=microbatch_size,
        split_backward=any(op.kind == "W" for ops in schedule.orders() for op in ops))


def last_stage_splits(schedule: Schedule) -> bool:
    """Whether the model's last stage (norm and lm_head in torchtitan's split) runs a
    separate W: unsafe under torchtitan 0.3.0's chunked loss (module docstring)."""
    last = schedule.profile.num_ranks * schedule.profile.num_chunks - 1
    return any(op.kind == "W" and op.stage == last for ops in schedule.orders() for op in ops)


CHUNKED_LOSS_REFUSAL = (
    "a schedule whose last stage runs a fused backward: under torchtitan 0.3.0's chunked "
    "loss (ChunkedLossWrapper, every llama3 config) FSDP2 reduces the [norm, lm_head] "
    "gradients inside the loss, before the last stage's W, so the final norm's weight "
    "gradient is lost; use a fused-backward method (1f1b, 1f1b-interleaved, gpipe) or a "
    "config whose loss is unchunked (e.g. CrossEntropyLoss.Config()) and pass "
    "--unchunked-loss")


def _schedule_class(schedule: Schedule) -> str:
    profile = schedule.profile
    if profile.num_chunks == 1:
        return "PipelineScheduleSingle"  # one stage per rank; the CSV gives the order
    if profile.placement == "v":
        return "DualPipeV" if schedule.method == "dualpipe-v" else "ZBVZeroBubble"
    return "PipelineScheduleMulti"  # loop style, the stages per rank from the settings


def _layers_per_stage(layers: int, num_stages: int) -> int | None:
    """The k with ``ceil((layers + 2) / k) == num_stages`` (the smallest), or None."""
    if layers < 1:
        raise ProfileError("--layers", layers, "an integer >= 1")
    effective = layers + INPUT_WEIGHT + OUTPUT_WEIGHT
    return next((k for k in range(1, effective + 1)
                 if math.ceil(effective / k) == num_stages), None)


def torchtitan_stage_layers(num_stages: int, layers: int) -> tuple[int, ...]:
    """Transformer layers per stage as torchtitan's ``_generate_llm_fqn_per_model_part``
    spreads them: the embedding and the output weigh one layer each, the remainder goes
    to the first stages.

    Raises:
        ProfileError: ``--layers`` too few for `num_stages` (torchtitan refuses the split).
    """
    if num_stages == 1:
        return (layers,)
    effective = layers + INPUT_WEIGHT + OUTPUT_WEIGHT
    base, extra = divmod(effective, num_stages)
    if base < max(INPUT_WEIGHT, OUTPUT_WEIGHT):
        raise ProfileError("--layers", layers, f"at least {num_stages - 2} layers for "
                           f"{num_stages} stages (torchtitan gives every stage a layer, the "
                           "embedding and the output counting one each)")
    counts: list[int] = []
    placed = 0
    for stage in range(num_stages):
        share = base + (1 if stage < extra else 0)
        share -= INPUT_WEIGHT if stage == 0 else OUTPUT_WEIGHT if stage == num_stages - 1 \
            else 0
        share = min(share, layers - placed)
        counts.append(share)
        placed += share
    return tuple(counts)


def recipe_args(recipe: TorchtitanRecipe, csv_path: str) -> list[str]:
    """The recipe as torchtitan 0.3.0's command-line flags, to follow ``--module M
    --config C`` (``torchrun ... -m torchtitan.train``)."""
    args = [f"--{key}={value}" for key, value in recipe_json(recipe, csv_path).items()
            if not isinstance(value, bool)]
    # PP is refused with CUDA graphs on (Trainer.Config._validate_cuda_graphs).
    args.append("--training.disable_cuda_graphs")
    if recipe.split_backward:
        # A tyro sub-command, so last: the default selective checkpointing cannot run
        # a separate W ("Trying to backward an extra time").
        args.append("activation-checkpoint:none")
    return args


def recipe_text(recipe: TorchtitanRecipe, csv_path: str) -> str:
    """`recipe_args` as a file: comment lines, then one flag per line (a shell reads it
    with ``$(grep -v '^#' FILE)``)."""
    lines = [f"# ppsched torchtitan: flags for torchtitan 0.3.0, after --module/--config; "
             f"p = {recipe.pipeline_parallel_degree}, {recipe.stages_per_rank} stage(s) "
             f"per rank, m = {recipe.num_microbatches}"]
    if recipe.stage_layers is not None:
        lines.append("# transformer layers per stage (torchtitan's split): "
                     + " ".join(map(str, recipe.stage_layers)))
    if recipe.microbatch_size is None:
        lines.append(f"# also set --training.local_batch_size = {recipe.num_microbatches} "
                     "x --parallelism.pipeline_parallel_microbatch_size (or pass "
                     "--local-batch-size to ppsched)")
    return "\n".join(lines + recipe_args(recipe, csv_path)) + "\n"


def recipe_json(recipe: TorchtitanRecipe, csv_path: str) -> dict[str, object]:
    """The recipe as torchtitan 0.3.0's config fields (dotted names, as its command line
    takes them: ``--parallelism.pipeline_parallel_degree=2``)."""
    settings: dict[str, object] = {
        "parallelism.pipeline_parallel_degree": recipe.pipeline_parallel_degree,
        "parallelism.pipeline_parallel_schedule": recipe.pipeline_parallel_schedule,
        "parallelism.pipeline_parallel_schedule_csv": csv_path,
    }
    if recipe.layers_per_stage is not None:
        settings["parallelism.pipeline_parallel_layers_per_stage"] = recipe.layers_per_stage
    if recipe.microbatch_size is not None:
        settings["parallelism.pipeline_parallel_microbatch_size"] = recipe.microbatch_size
        settings["training.local_batch_size"] = recipe.local_batch_size
    settings["training.disable_cuda_graphs"] = True
    return settings
