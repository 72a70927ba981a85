"""The README stays a short landing page (issue 32): what ppsched is, the two commands, a
worked example, the map of the code and links; everything else lives on the docs site."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOST_LINES = 300


def test_the_readme_is_at_most_300_lines() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= MOST_LINES, (
        f"README.md has {lines} lines, more than {MOST_LINES}: move detail to a page under "
        "docs/ and link it")


def test_the_readme_links_each_page_of_the_docs_site() -> None:
    text = (ROOT / "README.md").read_text()
    missing = [page.name for page in sorted((ROOT / "docs").glob("*.md"))
               if f"(docs/{page.name}" not in text]
    assert not missing, f"README.md links no docs page named {missing}"
