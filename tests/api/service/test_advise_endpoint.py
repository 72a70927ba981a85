"""POST /v1/advise on a real server process: the ranking, and 422s naming the field."""

from __future__ import annotations

import copy
from typing import Any

from tests.api.service.conftest import assert_error

CONFIG: dict[str, Any] = {
    "model": {"layers": 8, "hidden": 1024, "heads": 8, "seq_len": 4096,
              "microbatch_size": 2, "vocab": 32000},
    "cluster": {"num_gpus": 4, "gpus_per_node": 2, "gpu_tflops": 312.0,
                "gpu_memory_gb": 80.0, "intra_node_gbps": 200.0, "inter_node_gbps": 1.25},
    "num_microbatches": 8,
}


def test_advise_ranks_the_strategies(server: Any) -> None:
    response = server.client.post("/v1/advise", json=CONFIG)
    assert response.status_code == 200, response.text
    body = response.json()
    names = [c["strategy"] for c in body["ranked"]]
    assert {"1f1b", "zb-1p", "zb-2p", "fsdp", "weipipe-interleave"} <= set(names)
    timed = [c for c in body["ranked"] if c["step_time_s"] is not None and c["fits"]]
    assert [c["step_time_s"] for c in timed] == sorted(c["step_time_s"] for c in timed)
    assert body["table"].splitlines()[2].split()[1] == names[0]


def test_advise_bad_field_is_a_422(server: Any) -> None:
    bad = copy.deepcopy(CONFIG)
    bad["cluster"]["mfu"] = 2
    assert_error(server.client.post("/v1/advise", json=bad), 422, "cluster.mfu", "2")
    bad = dict(CONFIG, strategies=["1f1b", "pipedream"])
    assert_error(server.client.post("/v1/advise", json=bad), 422, "strategies[1]",
                 "pipedream")
    big = dict(CONFIG, num_microbatches=4096)
    assert_error(server.client.post("/v1/advise", json=big), 422, "num_microbatches",
                 "at most 256")
    assert_error(server.client.post("/v1/advise", json=[1, 2]), 422, "body")


def test_advise_names_its_assumptions_and_on_request_their_sensitivity(server: Any) -> None:
    body = dict(CONFIG, fsdp_overlap=False, strategies=["1f1b", "fsdp", "weipipe-naive"])
    answer = server.client.post("/v1/advise", json=body).json()
    fields = {a["field"]: a for a in answer["assumptions"]}
    assert fields["fsdp_overlap"]["value"] is False
    assert fields["fsdp_overlap"]["source"] == "config"
    assert fields["cluster.mfu"] == {**fields["cluster.mfu"], "value": 0.5,
                                     "source": "default"}
    assert answer["winner"] == answer["ranked"][0]["strategy"]
    assert answer["sensitivity"] is None
    probed = server.client.post("/v1/advise?sensitivity=true", json=body).json()
    sens = probed["sensitivity"]
    assert sens["winner"] == answer["winner"] and 0 < sens["runs"] <= sens["max_runs"]
    assert "num_microbatches" in {i["field"] for i in sens["items"]}
