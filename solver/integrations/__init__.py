"""What ppsched writes for other tools: torchtitan's pipeline settings for a schedule.
"""

from ppsched.solver.integrations.torchtitan import (
    CHUNKED_LOSS_REFUSAL,
    last_stage_splits,
    recipe_args,
    recipe_json,
    recipe_text,
    torchtitan_recipe,
    torchtitan_stage_layers,
)

__all__ = [
    "CHUNKED_LOSS_REFUSAL",
    "last_stage_splits",
    "recipe_args",
    "recipe_json",
    "recipe_text",
    "torchtitan_recipe",
    "torchtitan_stage_layers",
]
