"""The Dask path: the same sweep on a LocalCluster started here, through --scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest
from ppsched.api.cli import main
from ppsched.api.sweep.expand import expand_grid
from ppsched.api.sweep.grid import load_grid
from ppsched.api.sweep.records import read_rows

from tests.api.sweep.conftest import WriteGrid

distributed = pytest.importorskip("distributed")


def test_sweep_on_a_local_dask_cluster(write_grid: WriteGrid, tmp_path: Path) -> None:
    grid = write_grid("""
        profiles: [{UNIFORM}]
        methods: [1f1b, zb-h2, heuristic]
        axes:
          m: [4, 8, 12]
          memory_limit: [1p, 2p]
    """)
    expected = sorted(t.key for t in expand_grid(load_grid(grid)))
    out = tmp_path / "rows.jsonl"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        code = main(["sweep", str(grid), "-o", str(out), "--scheduler",
                     cluster.scheduler_address, "--no-progress"])
        assert code == 0
        rows = read_rows(out)
        assert sorted(r["key"] for r in rows) == expected
        # A rerun against the cluster resumes: nothing is solved twice.
        assert main(["sweep", str(grid), "-o", str(out), "--scheduler",
                     cluster.scheduler_address, "--no-progress"]) == 0
    assert [r["key"] for r in read_rows(out)] == [r["key"] for r in rows]
    refused = [r for r in rows if r["status"] == "error"]
    assert {r["method"] for r in refused} == {"zb-h2"}  # over the 1p limit only
    assert all(r["memory"] == "1p" for r in refused)


def test_unreachable_scheduler_is_one_line(write_grid: WriteGrid, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ppsched.api.sweep.runner.CONNECT_TIMEOUT_S", 1.0)
    grid = write_grid("profiles: [{UNIFORM}]\nmethods: [heuristic]\n")
    code = main(["sweep", str(grid), "-o", str(tmp_path / "r.jsonl"), "--scheduler",
                 "tcp://127.0.0.1:9", "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ppsched: error: invalid 'scheduler': got "
                                               "'tcp://127.0.0.1:9'; expected the address")
