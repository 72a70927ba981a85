"""A dump of `solve()` answers, to show that a rebuild changes none (or which it changes).

Run: ``python -m benchmarks.answer_dump OUT.json`` then, after a change,
``python -m benchmarks.answer_dump NEW.json --compare OUT.json``.

Cases: every profile of ``profiles/`` at 0.5p, 0.75p, 1p, 1.5p and 2p memory (multiples of
``p * max(m_b)``), and the 300 random profiles of `benchmarks.heuristic_robustness` (seed
11). For each: the default solve (``heuristic``, default layouts), recorded as its cost,
method, and a SHA-256 of the whole schedule JSON (profile, orders, times, metrics, solver
fields) less its wall time. Two dumps compare as identical, better, worse or changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ppsched.solver import parse_profile, solve

from benchmarks.heuristic_robustness import random_profile

ROOT = Path(__file__).resolve().parent.parent
MEMORY = (0.5, 0.75, 1.0, 1.5, 2.0)


def cases() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted((ROOT / "profiles").glob("*.json")):
        data = json.loads(path.read_text())
        m_b = data["m_b"] if isinstance(data["m_b"], (int, float)) else max(data["m_b"])
        for multiple in MEMORY:
            limit = round(multiple * data["num_ranks"] * m_b, 6)
            yield f"{path.stem}@{multiple}p", {**data, "memory_limit": limit}
    rng = random.Random(11)
    for index in range(300):
        yield f"random-{index}", random_profile(rng, index)


def answer(data: dict[str, Any]) -> dict[str, Any]:
    try:
        schedule = solve(parse_profile(data))
    except ValueError as exc:  # a profile no schedule fits: the message is the answer
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}
    dumped = schedule.model_dump(mode="json", exclude_none=True)
    for volatile in ("wall_s", "progress"):
        dumped.get("solver", {}).pop(volatile, None)
    text = json.dumps(dumped, sort_keys=True)
    return {"cost": schedule.metrics.cost if schedule.metrics else None,
            "method": schedule.method,
            "digest": hashlib.sha256(text.encode()).hexdigest()}


def compare(new: dict[str, Any], old: dict[str, Any]) -> dict[str, list[str]]:
    verdicts: dict[str, list[str]] = {"identical": [], "better": [], "worse": [],
                                      "same cost, other schedule": [], "missing": []}
    for name, before in old.items():
        after = new.get(name)
        if after is None:
            verdicts["missing"].append(name)
        elif after == before:
            verdicts["identical"].append(name)
        elif after.get("cost") is not None and before.get("cost") is not None \
                and after["cost"] < before["cost"] - 1e-9:
            verdicts["better"].append(name)
        elif after.get("cost") == before.get("cost"):
            verdicts["same cost, other schedule"].append(name)
        else:
            verdicts["worse"].append(name)
    return verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--compare", type=Path, help="an earlier dump to compare with")
    args = parser.parse_args(argv)
    dump = {name: answer(data) for name, data in cases()}
    args.out.write_text(json.dumps(dump, indent=1, sort_keys=True) + "\n")
    print(f"{len(dump)} answers written to {args.out}")
    if args.compare is None:
        return 0
    verdicts = compare(dump, json.loads(args.compare.read_text()))
    print(", ".join(f"{kind} {len(names)}" for kind, names in verdicts.items()))
    for kind in ("worse", "same cost, other schedule", "missing"):
        for name in verdicts[kind]:
            print(f"{kind}: {name}")
    return 0 if len(verdicts["identical"]) == len(dump) else 1


if __name__ == "__main__":
    raise SystemExit(main())
