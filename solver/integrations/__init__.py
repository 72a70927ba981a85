"""What ppsched writes for other tools: torchtitan's pipeline settings for a schedule.
"""

from ppsched.solver.integrations.torchtitan import (
    recipe_json,
    recipe_toml,
    torchtitan_recipe,
    torchtitan_stage_layers,
)

__all__ = [
    "recipe_json",
    "recipe_toml",
    "torchtitan_recipe",
    "torchtitan_stage_layers",
]
