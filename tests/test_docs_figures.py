"""Every figure the docs quote matches the result file and key its reference names, and
the check catches a changed digit (`benchmarks/figures.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import figures, readme

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "t.md").write_text(
        "Made by `x` on commit abc.\n\n"
        "| profile | memory | cost | gap |\n|---|---|---|---|\n"
        "| gpt1.5b-p8-m24 | 1p | 1,185.15 | 7.05% |\n"
        "| gpt1.5b-p8-m24 | 2p | **1110.0** (v) | 0.76% |\n\n"
        "Rows where it fits: 44; default <= it on 44 of them, 4.53x faster.\n")
    (results / "t.json").write_text(json.dumps(
        {"rows": [{"profile": "a", "memory": "1p", "cost": 12.5},
                  {"profile": "a", "memory": "2p", "cost": 11}], "n": 3}))
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "p.json").write_text('{"p": 8}')
    figures._read.cache_clear()
    return tmp_path


@pytest.mark.parametrize(("ref", "value"), [
    ("t.md: gpt1.5b-p8-m24, 1p | cost", "1,185.15"),
    ("t.md: 2p | cost", "1110.0"),
    ("t.md: 2p | gap", "0.76%"),
    ('t.md: "Rows where it fits" #2', "44"),
    ('t.md: "Rows where it fits" #3', "4.53x"),
    ("t.json: rows[profile=a,memory=2p].cost", "11"),
    ("t.json: rows[0].cost", "12.5"),
    ("t.json: n", "3"),
    ("profiles/p.json: p", "8"),
])
def test_a_reference_resolves_to_its_cell_line_or_path(sources: Path, ref: str,
                                                       value: str) -> None:
    assert figures.resolve(ref, sources) == value


@pytest.mark.parametrize(("ref", "words"), [
    ("t.md: gpt1.5b-p8-m24 | cost", "2 table rows"),
    ("t.md: 3p | cost", "0 table rows"),
    ("t.md: 1p | price", "0 table rows"),
    ('t.md: "nowhere" #1', "0 lines"),
    ('t.md: "Rows where" #9', "not a #9"),
    ("t.json: rows[profile=a].cost", "2 items match"),
    ("t.json: missing", "no key 'missing'"),
    ("gone.md: 1p | cost", "gone.md cannot be read"),
    ("t.md", "not 'FILE: KEY'"),
])
def test_an_unresolvable_reference_names_why(sources: Path, ref: str, words: str) -> None:
    with pytest.raises(figures.FigureError, match=words):
        figures.resolve(ref, sources)


@pytest.mark.parametrize(("written", "source", "ok"), [
    ("1185.15", "1185.15", True), ("1,185.15", "1185.15", True), ("1185.2", "1185.15", True),
    ("1185", "1185.15", True), ("1185.16", "1185.15", False), ("1185.150", "1185.15", False),
    ("7.1%", "7.05%", True), ("7.0%", "7.05%", False), ("4.53x", "4.53", True),
    ("4.53%", "4.53x", False), ("-14.3%", "-14.3%", True), ("14.3%", "-14.3%", False),
])
def test_prose_may_round_its_source_but_not_add_digits(written: str, source: str,
                                                       ok: bool) -> None:
    assert figures.agrees(written, source) is ok


def test_the_check_reads_prose_only_and_names_each_bad_figure(sources: Path) -> None:
    text = ("# Title\n\nThe cost is 1185.2<!--fig t.md: 1p | cost--> and the gap "
            "7.06%<!--fig t.md: 1p | gap-->; 3<!--nofig--> ranks, and 12 more.\n\n"
            "1. a list item on gpt1.5b-p8-m24 at 1p with `--memory-limit 16`, "
            "torch 2.13, section 6.6 of DESIGN.md, [a link](x/9.md), 2026-11-27\n\n"
            "```console\n$ ppsched 42\n```\n"
            "<!-- BEGIN results/t.md -->\n" + (sources / "benchmarks/results/t.md").read_text()
            + "<!-- END results/t.md -->\n")
    found = figures.problems(text, "page.md", sources)
    assert [(p.figure.line, p.figure.text) for p in found] == [(3, "7.06%"), (3, "12")]
    assert "says 7.05%" in str(found[0]) and "page.md:3" in str(found[0])
    assert "no <!--fig" in found[1].message


def test_write_rewrites_each_referenced_figure_from_its_source(sources: Path) -> None:
    text = "was 1190.1<!--fig t.md: 1p | cost--> and 2,000<!--fig t.json: n-->\n"
    assert figures.write(text, sources) == \
        "was 1185.2<!--fig t.md: 1p | cost--> and 3<!--fig t.json: n-->\n"


def test_every_mutant_of_a_tied_figure_is_caught_and_of_a_nofig_is_not(
        sources: Path) -> None:
    page = sources / "page.md"
    page.write_text("cost 1185.15<!--fig t.md: 1p | cost-->, 44<!--fig t.md: "
                    '"Rows where it fits" #1-->, 9<!--nofig--> ranks\n')
    caught, total, missed = figures.mutation_score([page], sources)
    assert (caught, total, [m.text for m in missed]) == (2, 3, ["9"])


def test_every_figure_of_the_docs_matches_its_source() -> None:
    bad = [str(p) for page in readme.pages()
           for p in figures.problems(page.read_text(), page.name)]
    assert not bad, ("figures not tied to their source (add <!--fig FILE: KEY--> after "
                     "each, or run `python -m benchmarks.figures --write`):\n"
                     + "\n".join(bad))


def test_the_check_catches_at_least_95_percent_of_last_digit_mutants() -> None:
    caught, total, missed = figures.mutation_score(readme.pages())
    assert total >= 100, f"only {total} figures found in the docs: is the scan blind?"
    assert caught >= 0.95 * total, (
        f"{caught} of {total} mutants caught; not caught: "
        + ", ".join(f"{m.where()} {m.text}" for m in missed[:40]))
