"""The service takes torch's schedule names as methods, against a real server process."""

from __future__ import annotations

from tests.api.service.conftest import EASY, Server, assert_error


def test_torch_names_solve_as_our_methods(server: Server) -> None:
    by_torch = server.client.post("/v1/schedules", json={"profile": EASY, "method": "1F1B"})
    ours = server.client.post("/v1/schedules", json={"profile": EASY, "method": "1f1b"})
    assert by_torch.status_code == 200, by_torch.text
    assert by_torch.json()["method"] == "1f1b"
    assert by_torch.json()["ranks"] == ours.json()["ranks"]


def test_a_torch_schedule_we_do_not_build_is_a_422_with_the_csv_route(server: Server) -> None:
    response = server.client.post("/v1/schedules",
                                  json={"profile": EASY, "method": "LoopedBFS"})
    assert_error(response, 422, "method", "LoopedBFS", "ppsched simulate FILE.csv")
