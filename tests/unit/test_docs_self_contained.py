"""The README and docs/ stand on their own: no pointer to a document the repository lacks.

The design notes kinflow was built from are not part of the repository, so
a reader following "see engine-model §3" or a ``/work/...`` path finds
nothing. Every ``*.md`` a page names must exist in the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUTSIDE = re.compile(
    r"/work/|engine-model|stack-notes|§\s*\d|\bSCOPE\b|\b[Ss]cenario \d+|"
    r"(?:ARCHITECTURE|GRAPHQL|DEFINITIONS|COHORT-CONTROL)\.md"
)
MD_NAME = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")


def test_no_page_points_outside_the_repository() -> None:
    found = []
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for match in OUTSIDE.finditer(line):
                found.append(f"{page.relative_to(ROOT)}:{number}: {match.group(0)!r}")
    assert found == []


def test_every_named_markdown_file_exists() -> None:
    missing = []
    for page in PAGES:
        for name in MD_NAME.findall(page.read_text()):
            if not any((base / name).exists() for base in (ROOT, page.parent, ROOT / "docs")):
                missing.append(f"{page.relative_to(ROOT)} names {name}")
    assert missing == []


def test_the_readme_shows_the_inspector() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "/inspector" in readme and "(docs/inspector.png)" in readme
    assert (ROOT / "docs" / "inspector.png").stat().st_size > 10_000
