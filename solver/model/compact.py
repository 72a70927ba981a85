"""The compact op encoding of a schedule's ranks (opt-in): one string per rank.

A p=128, m=1024 V schedule has 786,432 ops; one JSON object per op with its start and
end makes a 100 MB file (issue 27). The compact form writes each rank as one string of
actions in torch's syntax (DESIGN.md section 4: stage, action, microbatch, comma
separated, e.g. ``0F0,0I0,0W0``; our ``B`` is torch's ``I``, our ``BW`` torch's ``B``, an
FB is torch's ``(0F3;7B2)OVERLAP_F_B``). torch has no recompute or copy actions, so
DESIGN.md 6.3's R, O and L keep our letters (``0R3``, ``0O3``, ``0L3``): a compact rank
holds every op, unlike torch's CSV export, which drops them.

The encoding holds the order only: start and end are left out, as is each op's lane and
policy (both implied: the lane by the profile's ``copy_lanes``, the policy by the R or O
of its activation). A reader re-times the order with the simulator, as it does any
schedule it reads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import TORCH_OVERLAP, FBOp, Op

ENCODING = "actions"
"""The value of a schedule's ``ops_encoding`` when its ranks are compact strings."""

# Our kinds in the compact text: torch's actions for F, B, W and BW, our letters for the
# kinds torch has none of.
_KIND_TO_ACTION = {"F": "F", "B": "I", "W": "W", "BW": "B", "R": "R", "O": "O", "L": "L"}
_ACTION_TO_KIND = {v: k for k, v in _KIND_TO_ACTION.items()}
_ACTION = re.compile(r"^(\d+)([FIWBROL])(\d+)$")
_OVERLAP = re.compile(r"^\((\d+)F(\d+);(\d+)B(\d+)\)" + TORCH_OVERLAP + "$")


def encode_rank(ops: Sequence[Op]) -> str:
    """One rank's ops as one compact string, e.g. ``0F0,0F1,0I0,0W0``."""
    kind_to_action = _KIND_TO_ACTION
    cells = []
    for op in ops:
        if type(op) is Op:
            kind, stage, microbatch = op
            cells.append(f"{stage}{kind_to_action[kind]}{microbatch}")
        else:
            assert isinstance(op, FBOp), op
            cells.append(f"({op.stage}F{op.microbatch};{op.stage_b}B{op.microbatch_b})"
                         f"{TORCH_OVERLAP}")
    return ",".join(cells)


def encode_scheduled(ops: Sequence[Any]) -> str:
    """`encode_rank` of a rank of the schedule model's ops (`ScheduledOp`), read from
    their fields without making an `Op` of each (a third of the time at 10^6 ops)."""
    kind_to_action = _KIND_TO_ACTION
    cells = []
    for x in ops:
        fields = x.__dict__
        kind = fields["kind"]
        if kind == "FB":
            cells.append(f"({fields['stage']}F{fields['microbatch']};{fields['stage_b']}B"
                         f"{fields['microbatch_b']}){TORCH_OVERLAP}")
        else:
            cells.append(f"{fields['stage']}{kind_to_action[kind]}{fields['microbatch']}")
    return ",".join(cells)


def decode_rank(text: str, rank: int) -> list[dict[str, Any]]:
    """A compact rank string as the ops' JSON objects of DESIGN.md section 4, without
    times (``{"kind": "F", "stage": 0, "microbatch": 0}``...), for the schedule model to
    validate. An empty string is a rank without ops.

    Raises:
        ProfileError: naming the rank and the cell (``ranks.3.17``) that is not an action.
    """
    action_to_kind = _ACTION_TO_KIND
    out: list[dict[str, Any]] = []
    if not text.strip():
        return out
    for i, cell in enumerate(text.split(",")):
        cell = cell.strip()
        match = _ACTION.match(cell)
        if match is not None:
            stage, action, microbatch = match.groups()
            out.append({"kind": action_to_kind[action], "stage": int(stage),
                        "microbatch": int(microbatch)})
            continue
        overlap = _OVERLAP.match(cell)
        if overlap is None:
            raise ProfileError(f"ranks.{rank}.{i}", cell,
                               "an action in torch's syntax (0F3, 0I3, 0W3, 0B3, "
                               "(0F3;7B2)OVERLAP_F_B) or our 0R3, 0O3, 0L3")
        stage, microbatch, stage_b, microbatch_b = map(int, overlap.groups())
        out.append({"kind": "FB", "stage": stage, "microbatch": microbatch,
                    "stage_b": stage_b, "microbatch_b": microbatch_b})
    return out


def decode_ranks(data: Any) -> Any:
    """A decoded schedule JSON with compact ranks (strings) turned into op lists; any
    other value unchanged (the model's validation names what is wrong with it).

    A schedule may mix the forms rank by rank; ``ops_encoding`` is informative only.
    """
    if not isinstance(data, dict) or not isinstance(data.get("ranks"), list):
        return data
    ranks = data["ranks"]
    if not any(isinstance(rank, str) for rank in ranks):
        return data
    out = dict(data)
    out["ranks"] = [decode_rank(rank, r) if isinstance(rank, str) else rank
                    for r, rank in enumerate(ranks)]
    return out
