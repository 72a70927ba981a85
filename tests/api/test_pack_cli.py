"""`ppsched pack`: the real command (a subprocess) packs, solves and compares; bad input is
one line on stderr and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ppsched.api.cli import main

REPO = Path(__file__).resolve().parents[2]
LENGTHS = [900, 4000, 1200, 300, 7000, 2500, 800, 1600, 3000, 500, 650, 2200, 5100, 150,
           420, 3900]


@pytest.fixture
def base(tmp_path: Path) -> Path:
    path = tmp_path / "base.json"
    path.write_text(json.dumps({"num_ranks": 2, "num_microbatches": 1, "t_f": 2.0,
                                "t_b": 2.0, "t_w": 1.0, "m_b": 1.0, "m_w": 0.5}))
    return path


def test_pack_command_end_to_end(tmp_path: Path, base: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps({"id": i, "num_tokens": s})
                              for i, s in enumerate(LENGTHS)))
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "ppsched.api.cli", "pack", str(data), "--field", "num_tokens",
         "--cap", "8192", "--replicas", "2", "--microbatches", "3",
         "--profile", str(base), "--cost", "1e-4,1,2", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "16 samples, 34220 tokens, cap 8192, 2 replica(s)" in text
    assert "naive packing (arrival order, filled to the cap)" in text
    assignment = json.loads((out / "assignment.json").read_text())
    # The counts were given, so naive packing's own assignment is not a candidate.
    packed = assignment["packed"]
    assert packed["strategy"] in ("balanced", "fill")
    moves = packed["moves"]
    assert (f"ppsched packing ({packed['strategy']} assignment, {moves} rebalancing "
            f"move{'s' if moves != 1 else ''}), method heuristic: step time") in text
    assert f"{assignment['speedup']:.4f}" in text
    placed = sorted(i for r in assignment["packed"]["replicas"] for mb in r["microbatches"]
                    for i in mb["samples"])
    assert placed == list(range(len(LENGTHS)))
    for r in assignment["packed"]["replicas"]:
        assert r["num_microbatches"] == 3
        assert all(mb["tokens"] <= 8192 for mb in r["microbatches"])
        assert all(mb["memory"] == 2 * mb["tokens"] for mb in r["microbatches"])
    # Each replica's schedule is the CLI's own schedule JSON: `ppsched simulate` accepts it.
    schedule = out / "packed-replica0.schedule.json"
    check = subprocess.run([sys.executable, "-m", "ppsched.api.cli", "simulate", str(schedule)],
                           cwd=REPO, capture_output=True, text=True, timeout=120,
                           check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert (out / "naive-replica1.profile.json").exists()


def test_pack_inline_lengths_json_and_fit(tmp_path: Path, base: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    points = tmp_path / "points.json"
    points.write_text(json.dumps([[1024, 1.2], [4096, 6.0], [8192, 15.0]]))
    assert main(["pack", ",".join(map(str, LENGTHS)), "--cap", "8192", "--replicas", "2",
                 "--profile", str(base), "--fit", str(points), "--method", "1f1b",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["num_samples"] == len(LENGTHS)
    assert result["packed"]["method"] == "1f1b"
    assert result["naive"]["step_time"] / result["packed"]["step_time"] == \
        pytest.approx(result["speedup"])


@pytest.mark.parametrize(("args", "needle"), [
    (["--cap", "4000"], "'lengths[4]': got 7000"),
    (["--cap", "0"], "'cap'"),
    (["--cap", "8192", "--replicas", "0"], "'replicas'"),
    (["--cap", "8192", "--microbatches", "1,x"], "'microbatches'"),
    (["--cap", "8192", "--microbatches", "1"], "'microbatches'"),
    (["--cap", "8192", "--cost", "1,2"], "'cost'"),
    (["--cap", "8192", "--cost=-1,1,1"], "'cost.a'"),
    (["--cap", "8192", "--cost-b", "0,0"], "'cost_b'"),
    (["--cap", "8192", "--method", "zb-9"], "'method'"),
    (["--cap", "8192", "--fit", "/nonexistent.json"], "'fit'"),
])
def test_pack_errors_are_one_line(base: Path, capsys: pytest.CaptureFixture[str],
                                  args: list[str], needle: str) -> None:
    assert main(["pack", ",".join(map(str, LENGTHS)), "--profile", str(base), *args]) == 2
    err = capsys.readouterr().err
    assert needle in err, err
    assert err.count("\n") == 1


def test_pack_bad_files(tmp_path: Path, base: Path, capsys: pytest.CaptureFixture[str]
                        ) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"n": 5}\n{"m": 6}\n')
    assert main(["pack", str(data), "--field", "n", "--cap", "10", "--profile",
                 str(base)]) == 2
    assert "d.jsonl line 2.n" in capsys.readouterr().err
    assert main(["pack", str(tmp_path / "none.txt"), "--cap", "10", "--profile",
                 str(base)]) == 2
    assert "a readable file" in capsys.readouterr().err
    assert main(["pack", "5,6", "--cap", "10", "--profile", str(tmp_path / "x.json")]) == 2
    assert "'profile'" in capsys.readouterr().err


@pytest.mark.parametrize(("lengths", "needle"), [
    ("512,-3,900", "'lengths[1]': got -3; expected a whole number of tokens from 1"),
    ("512,abc,900", "'lengths[1]': got 'abc'; expected a whole number of tokens (inline"),
    ("512,,900", "'lengths[1]'"),
    ("-3", "'lengths[0]': got -3"),
])
def test_bad_inline_lengths_are_named_not_read_as_a_file(
        base: Path, capsys: pytest.CaptureFixture[str], lengths: str, needle: str) -> None:
    assert main(["pack", lengths, "--cap", "8192", "--profile", str(base)]) == 2
    err = capsys.readouterr().err
    assert needle in err, err
    assert "readable file" not in err and err.count("\n") == 1


def test_inline_lengths_longer_than_a_file_name_pack(
        base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lengths = ",".join(["1000"] * 52)  # 259 characters: over NAME_MAX (255)
    assert len(lengths) > 255
    assert main(["pack", lengths, "--cap", "8192", "--profile", str(base), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["num_samples"] == 52


def test_a_file_named_like_inline_lengths_is_read_as_a_file(
        tmp_path: Path, base: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "512,900").write_text("7\n8\n9\n")
    assert main(["pack", "512,900", "--cap", "8192", "--profile", str(base), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_samples"] == 3
