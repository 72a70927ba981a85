"""The docs' console blocks are what the commands print (their figures: `test_docs_figures`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import readme, transcripts

ROOT = Path(__file__).resolve().parents[1]

QUICK = [t for t in transcripts.ALL if t.quick]


@pytest.mark.parametrize("transcript", QUICK, ids=[t.name for t in QUICK])
def test_a_quick_transcript_prints_today_what_its_file_holds(
        transcript: transcripts.Transcript | transcripts.HttpTranscript) -> None:
    # The CLI's commands, and the service's answers from a real server.
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
