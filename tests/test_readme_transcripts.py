"""The docs' console blocks are what the commands print (their figures: `test_docs_figures`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import readme, transcripts

ROOT = Path(__file__).resolve().parents[1]

QUICK = [t for t in transcripts.ALL if t.quick]
# The exact solver's runs (on a work limit, so the same on any load) and the sweep.
LONG = [t for t in transcripts.ALL if not t.quick]


@pytest.mark.parametrize("transcript", QUICK, ids=[t.name for t in QUICK])
def test_a_quick_transcript_prints_today_what_its_file_holds(
        transcript: transcripts.Transcript | transcripts.HttpTranscript) -> None:
    # The CLI's commands, and the service's answers from a real server.
    _reproduces(transcript)


@pytest.mark.slow
@pytest.mark.parametrize("transcript", LONG, ids=[t.name for t in LONG])
def test_a_long_transcript_prints_today_what_its_file_holds(
        transcript: transcripts.Transcript | transcripts.HttpTranscript) -> None:
    _reproduces(transcript)


def test_the_long_transcripts_include_the_exact_solvers_on_a_work_limit() -> None:
    # Review item 3: the exact-solver claims are re-run, so they must repeat on any load.
    exact = [t for t in LONG if "--method ilp" in t.args]
    assert {t.name for t in exact} >= {"ilp_12", "ilp_6", "ilp_6_layouts"}
    for t in exact:
        assert "--work-limit" in t.args and "--time-limit" not in t.args, t.args
        assert transcripts.budget(t).startswith("deterministic"), t.name


def test_comparable_leaves_out_the_header_line_only() -> None:
    block = "```console\n$ ppsched x\ncost 1.0\nwall time 0.5 s\n```\n"
    headed = ("Made by `python -m benchmarks.transcripts x` on commit 0123456789ab, "
              "2026-11-27 20:00 UTC; machine x86_64, 2 cores, load average 1.00 before and "
              "2.00 after, 1.0 s of CPU; budget: deterministic.\n\n" + block)
    assert transcripts.comparable(headed) == transcripts.comparable(block) == \
        ["```console", "$ ppsched x", "cost 1.0", "```"]
    assert transcripts.comparable(headed.replace("cost 1.0", "cost 1.1")) != \
        transcripts.comparable(block)


def _reproduces(transcript: transcripts.Transcript | transcripts.HttpTranscript) -> None:
    recorded = transcript.path.read_text()
    assert transcripts.comparable(transcripts.output(transcript)) == \
        transcripts.comparable(recorded), (
        f"`ppsched {transcript.args}` prints something else than {transcript.path.name}: "
        f"run `python -m benchmarks.transcripts {transcript.name}` and "
        "`python -m benchmarks.readme`")


def test_every_transcript_is_shown_in_the_docs() -> None:
    shown = {b.name for page in readme.pages() for b in readme.blocks(page.read_text())}
    missing = [t.path.name for t in transcripts.ALL if t.path.name not in shown]
    assert not missing, f"transcripts no page of the docs shows: {missing}"


@pytest.mark.parametrize("page", readme.pages(), ids=lambda p: p.name)
def test_the_docs_have_no_console_block_outside_a_result_block(page: Path) -> None:
    outside = _outside_result_blocks(page.read_text())
    assert "```console" not in outside, (
        f"a console block in {page.name} is not a transcript: add it to "
        "benchmarks/transcripts.py and show its file between result markers")


def _outside_result_blocks(text: str) -> str:
    out, at = [], 0
    for block in readme.blocks(text):
        out.append(text[at:block.start])
        at = block.end
    out.append(text[at:])
    return "".join(out)
