"""POST /v1/partition on a real server process: the same cut, record and torchtitan
settings as `ppsched partition`, a schedule the simulator accepts, and 422s naming the
field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ppsched.api.cli import main
from ppsched.solver.model import parse_schedule

from tests.api.service.conftest import assert_error

ROOT = Path(__file__).resolve().parents[3]
LLAMA = ROOT / "profiles" / "layers" / "llama3-8b-p4-m16.json"


def test_partition_answers_what_the_cli_writes(server: Any, tmp_path: Path) -> None:
    layers = json.loads(LLAMA.read_text())
    response = server.client.post("/v1/partition", json={"layers": layers,
                                                         "memory_limit": 17.0})
    assert response.status_code == 200, response.text
    body = response.json()
    schedule = parse_schedule(body["schedule"])  # validated again by the simulator
    assert schedule.profile.memory_limit == 17.0
    counts = schedule.profile.layers_per_stage
    assert counts is not None and sum(counts) == len(layers["layers"])
    assert body["partition"]["lower_bound"] <= schedule.metrics.makespan
    assert body["torchtitan"] == {"module_fqns_per_model_part": schedule.profile.stage_layers,
                                  "pipeline_parallel_degree": 4}
    # The command line's answer, field for field.
    out = tmp_path / "cut.json"
    assert main(["partition", str(LLAMA), "--memory-limit", "17", "-o", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["partition"] == body["partition"]
    assert written["profile"]["layers_per_stage"] == counts


def test_partition_bad_fields_are_422(server: Any) -> None:
    post = server.client.post
    layers = json.loads(LLAMA.read_text())
    assert_error(post("/v1/partition", json={"layers": {**layers, "num_ranks": 0}}), 422,
                 "layers.num_ranks")
    bad_layer = {**layers, "layers": [{**layers["layers"][0], "t_f": -1.0},
                                      *layers["layers"][1:]]}
    assert_error(post("/v1/partition", json={"layers": bad_layer}), 422,
                 "layers.layers[0].t_f")
    assert_error(post("/v1/partition", json={"layers": {**layers, "num_ranks": 128}}), 422,
                 "layers.num_ranks", "<= 64")
    # No cut fits the limit: named where the body set it.
    assert_error(post("/v1/partition", json={"layers": layers, "memory_limit": 0.5}), 422,
                 "memory_limit", "0.5")
    assert_error(post("/v1/partition", json={"layers": {**layers, "memory_limit": 0.5}}),
                 422, "layers.memory_limit", "0.5")
    assert_error(post("/v1/partition", json={"layers": layers, "candidates": 0}), 422,
                 "candidates")
    assert_error(post("/v1/partition", json={"layer": layers}), 422, "layer",
                 "did you mean 'layers'?")
    assert_error(post("/v1/partition", json=[1]), 422, "body")
