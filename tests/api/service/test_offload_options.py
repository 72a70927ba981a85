"""Offload without hand-written copy fields over HTTP (issue 31): `offload_ratio`,
`host_bandwidth` and `gpus_per_node` on a schedule request, and the host memory each rank
holds in the answer's metrics; on a real server process."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.service.conftest import REPO, assert_error

GPT = json.loads((REPO / "profiles" / "gpt1.5b-p8-m24.json").read_text())


def test_offload_ratio_solves_and_reports_host_memory(server: Any) -> None:
    answer = server.client.post("/v1/schedules", json={
        "profile": GPT, "memory_limit": 4, "offload_ratio": 0.5, "gpus_per_node": 2})
    assert answer.status_code == 200, answer.text
    schedule = answer.json()
    assert schedule["profile"]["gpus_per_node"] == 2
    cut = schedule["profile"]  # the solved layout's: its stages' own times
    t_f, t_b = (x if isinstance(x, list) else [x] * len(cut["t_offload"])
                for x in (cut["t_f"], cut["t_b"]))
    assert cut["t_offload"] == pytest.approx([0.5 * (f + b) for f, b in zip(t_f, t_b, strict=True)])
    host = schedule["metrics"]["host_memory"]
    assert len(host) == GPT["num_ranks"] and max(host) > 0


def test_a_keep_only_answer_has_no_host_memory(server: Any) -> None:
    answer = server.client.post("/v1/schedules", json={"profile": GPT})
    assert answer.status_code == 200, answer.text
    assert "host_memory" not in answer.json()["metrics"]


@pytest.mark.parametrize(("extra", "field", "words"), [
    ({"offload_ratio": 0.5, "host_bandwidth": 20}, "host_bandwidth",
     "null when offload_ratio is given"),
    ({"offload_ratio": -1}, "offload_ratio", "greater than or equal to 0"),
    ({"gpus_per_node": 3}, "profile.gpus_per_node", "divides num_ranks"),
])
def test_bad_offload_options_are_422_naming_the_field(server: Any, extra: dict[str, Any],
                                                       field: str, words: str) -> None:
    assert_error(server.client.post("/v1/schedules", json={"profile": GPT, **extra}), 422,
                 field, words)
