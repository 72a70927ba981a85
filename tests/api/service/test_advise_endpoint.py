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
