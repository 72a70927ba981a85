"""The README's console blocks are what the commands print, and its prose quotes only
figures that a committed result file (or a published source) holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import readme, transcripts

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT.parent / "shared" / "seeds"

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


def test_every_transcript_is_shown_in_the_readme() -> None:
    shown = {b.name for b in readme.blocks((ROOT / "README.md").read_text())}
    missing = [t.path.name for t in transcripts.ALL if t.path.name not in shown]
    assert not missing, f"transcripts no README block shows: {missing}"


def test_the_readme_has_no_console_block_outside_a_result_block() -> None:
    text = (ROOT / "README.md").read_text()
    outside = _outside_result_blocks(text)
    assert "```console" not in outside, (
        "a console block in the README is not a transcript: add it to "
        "benchmarks/transcripts.py and show its file between result markers")


# Numbers that are not measured figures: versions and the closed-form constants of the
# cost model's prose.
_NOT_FIGURES = {"2.13", "2.13.0", "0.5", "1.5", "0.75", "1e-5"}
# A decimal number or a percentage: the form every measured figure takes in the README.
_FIGURE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?%|\d+\.\d+)(?![\w.])")


def test_every_figure_in_the_readme_prose_is_in_a_result_file() -> None:
    sources = [p.read_text() for p in (ROOT / "benchmarks" / "results").glob("*.md")]
    sources += [p.read_text() for p in (ROOT / "benchmarks" / "results").glob("*.csv")]
    if SEEDS.is_dir():  # the published figures the README compares with
        sources += [p.read_text(errors="replace") for p in SEEDS.iterdir() if p.is_file()]
    behind = "\n".join(sources)
    unbacked = []
    for number, line in _figures(_outside_result_blocks((ROOT / "README.md").read_text())):
        if number in _NOT_FIGURES:
            continue
        if not re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", behind):
            unbacked.append(f"{number} in: {line.strip()[:100]}")
    assert not unbacked, ("README figures no file in benchmarks/results/ holds (quote "
                          "them from a result file, or remove them):\n"
                          + "\n".join(unbacked))


def test_the_figure_check_finds_an_invented_figure() -> None:
    text = "intro\n<!-- BEGIN results/a.md -->\n1.25\n<!-- END results/a.md -->\n" \
           "the cost falls by 12.5% to 871.2 on 2.13\n"
    assert [n for n, _ in _figures(_outside_result_blocks(text))] == ["12.5%", "871.2",
                                                                     "2.13"]


def _outside_result_blocks(text: str) -> str:
    out, at = [], 0
    for block in readme.blocks(text):
        out.append(text[at:block.start])
        at = block.end
    out.append(text[at:])
    return "".join(out)


_FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`]*`")  # may wrap over a line end
# "DESIGN.md section 6.1", "(DESIGN.md 6.5)", "arXiv 2503.01328": references, not figures.
_SECTION = re.compile(r"(DESIGN\.md|section|arXiv)\s+(section\s+)?\d+(\.\d+)*")


def _figures(text: str) -> list[tuple[str, str]]:
    """Decimal numbers and percentages of the prose (code, fenced or inline, is not
    prose), with their line."""
    prose = _SECTION.sub("", _INLINE_CODE.sub("", _FENCED.sub("", text)))
    return [(match, line) for line in prose.splitlines() for match in _FIGURE.findall(line)]
