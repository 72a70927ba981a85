"""GET /v1/methods and GET /v1/examples: what can be solved, and ready profiles."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from ppsched.api.service.deps import State
from ppsched.api.service.schemas import Examples, Methods
from ppsched.solver.model import ProfileError, load_profile
from ppsched.solver.solving import methods

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1", tags=["catalog"])


@router.get("/methods", response_model=Methods, summary="List the solve methods")
def list_methods() -> Methods:
    """Every `method` a schedule request accepts, with a one-line description."""
    return Methods.model_validate(
        {"methods": [{"name": k, "description": v} for k, v in methods().items()]})


@router.get("/examples", response_model=Examples, summary="List the example profiles")
def list_examples(state: State) -> Examples:
    """The repository's `profiles/*.json` (the paper's configurations), by name."""
    return Examples.model_validate({"examples": state.examples})


def load_examples(folder: Path) -> list[dict[str, Any]]:
    """Every valid `*.json` profile in `folder`, by file name; others are logged, skipped."""
    examples = []
    for path in sorted(folder.glob("*.json")):
        try:
            profile = load_profile(path)
        except ProfileError as exc:
            log.warning("skipping example %s: %s", path, exc)
            continue
        examples.append({"name": path.stem,
                         "profile": profile.model_dump(mode="json", exclude_none=True)})
    if not examples:
        log.warning("no example profiles in %s (set PPSCHED_PROFILES_DIR)", folder)
    return examples
