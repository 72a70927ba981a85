"""POST /v1/pack on a real server process: both packings, the step time and the
speed-up; 422s naming the field."""

from __future__ import annotations

from typing import Any

from tests.api.service.conftest import assert_error

BODY: dict[str, Any] = {
    "lengths": [900, 4000, 1200, 300, 7000, 2500, 800, 1600, 3000, 500, 650, 2200],
    "cap": 8192, "replicas": 2, "microbatches": 3,
    "cost": {"a": 1e-4, "b": 1.0, "c": 1.0},
    "profile": {"num_ranks": 2, "num_microbatches": 1, "t_f": 2.0, "t_b": 2.0, "t_w": 1.0,
                "m_b": 1.0, "m_w": 0.5},
}


def test_pack_answers_the_assignment_and_comparison(server: Any) -> None:
    response = server.client.post("/v1/pack", json=BODY)
    assert response.status_code == 200, response.text
    body = response.json()
    for name in ("packed", "naive"):
        packing = body[name]
        placed = sorted(i for r in packing["replicas"] for mb in r["microbatches"]
                        for i in mb["samples"])
        assert placed == list(range(len(BODY["lengths"])))
        costs = [r["cost"] for r in packing["replicas"]]
        assert packing["step_time"] == max(costs)
        assert packing["imbalance"] == (max(costs) - min(costs)) / min(costs)
    assert [r["num_microbatches"] for r in body["packed"]["replicas"]] == [3, 3]
    assert body["speedup"] == body["naive"]["step_time"] / body["packed"]["step_time"]
    counts = dict(BODY, microbatches=[2, 4], method="1f1b", naive_method="gpipe")
    response = server.client.post("/v1/pack", json=counts)
    assert response.status_code == 200, response.text
    assert [r["num_microbatches"] for r in response.json()["packed"]["replicas"]] == [2, 4]
    assert response.json()["naive"]["method"] == "gpipe"


def test_pack_bad_fields_are_422(server: Any) -> None:
    post = server.client.post
    assert_error(post("/v1/pack", json=dict(BODY, cap=4000)), 422, "lengths[4]", "7000")
    assert_error(post("/v1/pack", json=dict(BODY, lengths=[5, "x"])), 422, "lengths[1]")
    assert_error(post("/v1/pack", json=dict(BODY, cap=0)), 422, "cap")
    assert_error(post("/v1/pack", json=dict(BODY, replicas=100)), 422, "replicas",
                 "at most 64")
    assert_error(post("/v1/pack", json=dict(BODY, microbatches=[1, 2, 3])), 422,
                 "microbatches")
    assert_error(post("/v1/pack", json=dict(BODY, cost={"a": -1})), 422, "cost.a")
    assert_error(post("/v1/pack", json=dict(BODY, method="ilp")), 422, "method")
    assert_error(post("/v1/pack", json=dict(BODY, lengths=[])), 422, "lengths")
    assert_error(post("/v1/pack", json=dict(BODY, fit=[[100, 1.0], [100, 2.0]])), 422,
                 "fit")
    assert_error(post("/v1/pack", json=dict(BODY, fit=[[100, 1.0, 3]])), 422, "fit[0]")
    assert_error(post("/v1/pack", json=dict(BODY, profile=dict(BODY["profile"], t_f=-1))),
                 422, "profile.t_f")
    assert_error(post("/v1/pack", json=dict(BODY, lenghts=[1])), 422, "lenghts")
    assert_error(post("/v1/pack", json=[1, 2]), 422, "body")
    big = dict(BODY, profile=dict(BODY["profile"], num_ranks=128))
    assert_error(post("/v1/pack", json=big), 422, "profile.num_ranks", "<= 64")
