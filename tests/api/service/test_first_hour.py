"""What a new user meets first over HTTP, on a real server process: a misspelt field or
method gets a "did you mean", /favicon.ico answers, and a profile with fewer
microbatches than ranks solves with a warning."""

from __future__ import annotations

import copy
from typing import Any

from tests.api.service.conftest import EASY, REPO, assert_error
from tests.api.service.test_advise_endpoint import CONFIG


def test_a_misspelt_top_level_field_gets_a_did_you_mean(server: Any) -> None:
    body = assert_error(server.client.post("/v1/schedules", json={
        "profile": EASY, "memor y_limt": 3}), 422, "memor y_limt", "no such field",
        "did you mean 'memory_limit'?")
    # The fields listed are the schedule request's own (its OpenAPI schema).
    assert "the fields are profile, method," in body["accepted"]
    # Nothing close: the list alone, no guess.
    body = assert_error(server.client.post("/v1/schedules", json={
        "profile": EASY, "zzzz": 1}), 422, "zzzz", "no such field")
    assert "did you mean" not in body["message"]


def test_a_misspelt_method_gets_a_did_you_mean(server: Any) -> None:
    assert_error(server.client.post("/v1/schedules", json={"profile": EASY,
                                                            "method": "zbh1"}),
                 422, "method", "did you mean 'zb-h1'?")


def test_a_misspelt_advisor_field_gets_a_did_you_mean(server: Any) -> None:
    bad = copy.deepcopy(CONFIG)
    bad["num_microbaches"] = bad.pop("num_microbatches")
    # Misspelt, the field is also missing: the unknown name, with its guess, leads.
    assert_error(server.client.post("/v1/advise", json=bad), 422, "num_microbaches",
                 "did you mean 'num_microbatches'?")
    bad = copy.deepcopy(CONFIG)
    bad["cluster"]["gpu_memroy_gb"] = bad["cluster"].pop("gpu_memory_gb")
    assert_error(server.client.post("/v1/advise", json=bad), 422, "cluster.gpu_memroy_gb",
                 "did you mean 'gpu_memory_gb'?")


def test_the_favicon_answers(server: Any) -> None:
    response = server.client.get("/favicon.ico")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("image/svg+xml")
    assert response.text.startswith("<svg") and response.text.count("<rect") == 3
    # (This module's server serves an empty static folder: the page is read from disk.)
    page = (REPO / "api" / "service" / "static" / "index.html").read_text()
    assert '<link rel="icon" href="/favicon.ico"' in page


def test_fewer_microbatches_than_ranks_solves_with_a_warning(server: Any) -> None:
    few = {**EASY, "num_microbatches": EASY["num_ranks"] - 1}
    for cache in ("miss", "hit"):  # the stored answer carries it too
        response = server.client.post("/v1/schedules", json={"profile": few})
        assert response.status_code == 200, response.text
        assert response.headers["x-cache"] == cache
        warning = response.headers["x-ppsched-warning"]
        assert warning.startswith(f"m={few['num_microbatches']} < p={EASY['num_ranks']}:")
        assert response.json()["metrics"]["cost"] > 0
    response = server.client.post("/v1/schedules", json={"profile": EASY})
    assert response.status_code == 200 and "x-ppsched-warning" not in response.headers
