"""The docs (README and site pages) show measured results only as copies of
`benchmarks/results/*.md`."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import readme

ROOT = Path(__file__).resolve().parents[1]


def test_every_result_block_of_the_docs_equals_its_result_file() -> None:
    shown: set[str] = set()
    stale = []
    for page in readme.pages():
        text = page.read_text()
        shown |= {b.name for b in readme.blocks(text)}
        stale += [f"{page.name} line {b.line}: results/{b.name}" for b in readme.stale(text)]
    assert shown >= {"bubble_table.md", "solver_quality.md", "service_load.md"}
    assert not stale, ("result blocks differ from benchmarks/results/ (run "
                       f"`python -m benchmarks.readme`): {stale}")


def test_render_replaces_each_block_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("| x |\n| 1 |\n")
    (tmp_path / "b.md").write_text("no newline at the end")
    text = ("intro\n<!-- BEGIN results/a.md -->\nstale\n<!-- END results/a.md -->\n"
            "middle\n<!-- BEGIN results/b.md -->\n<!-- END results/b.md -->\nend\n")
    new = readme.render(text, tmp_path)
    assert new == ("intro\n<!-- BEGIN results/a.md -->\n| x |\n| 1 |\n"
                   "<!-- END results/a.md -->\nmiddle\n<!-- BEGIN results/b.md -->\n"
                   "no newline at the end\n<!-- END results/b.md -->\nend\n")
    assert readme.stale(new, tmp_path) == []
    assert [b.name for b in readme.stale(text, tmp_path)] == ["a.md", "b.md"]
    assert readme.render(new, tmp_path) == new


@pytest.mark.parametrize(("text", "words"), [
    ("<!-- BEGIN results/a.md -->\nx\n", "line 1: BEGIN results/a.md has no"),
    ("x\n<!-- END results/a.md -->\n", "line 2: END results/a.md without its BEGIN"),
    ("<!-- BEGIN results/a.md -->\n<!-- BEGIN results/b.md -->\n", "line 2: BEGIN "
     "results/b.md inside the block results/a.md"),
    ("<!-- BEGIN results/missing.md -->\n<!-- END results/missing.md -->\n",
     "results/missing.md but"),
])
def test_broken_markers_and_missing_files_are_named(text: str, words: str,
                                                    tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("a\n")
    with pytest.raises(readme.ReadmeError, match=words.replace("(", r"\(")):
        readme.render(text, tmp_path)


def test_check_mode_names_stale_blocks_and_changes_nothing(tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture,
                                                           ) -> None:
    (tmp_path / "a.md").write_text("new\n")
    doc = tmp_path / "README.md"
    doc.write_text("<!-- BEGIN results/a.md -->\nold\n<!-- END results/a.md -->\n")
    argv = ["--readme", str(doc), "--results", str(tmp_path)]
    assert readme.main([*argv, "--check"]) == 1
    assert "line 1: the block results/a.md differs" in caplog.text
    assert "old" in doc.read_text()
    assert readme.main(argv) == 0
    assert readme.main([*argv, "--check"]) == 0
    assert doc.read_text() == "<!-- BEGIN results/a.md -->\nnew\n<!-- END results/a.md -->\n"
