"""The docs are written for users: what the system does now, not how it got there.

A reader of README.md or docs/ has no use for an issue tracker's numbers or
a diary of measuring days; the measurement log lives in one appendix
(docs/measurements-history.md), which may keep its dates but no issue
numbers either. docs/README.md indexes every page.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HISTORY = DOCS / "measurements-history.md"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? \d+|(?<![\w&/#])#\d+\b")
DIARY = re.compile(
    r"this session|this lane|this round|quiet day|slow(?:er)? day|busy day|\bstop \d+",
    re.IGNORECASE,
)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
SECTION_CITE = re.compile(r'docs/([\w-]+\.md)`?,?\s+"([^"]+)"')
LINE_BREAK = re.compile(r"\n\s*(?:#|\*)?\s*")  # a citation may wrap in a comment or a list


def _hits(pattern: re.Pattern[str], pages: list[Path]) -> list[str]:
    return [f"{page.relative_to(ROOT)}:{number}: {match.group(0)!r}"
            for page in pages
            for number, line in enumerate(page.read_text().splitlines(), 1)
            for match in pattern.finditer(line)]


def test_no_page_cites_an_issue_number() -> None:
    assert _hits(ISSUE_NUMBER, PAGES) == []


def test_no_page_but_the_history_reads_as_a_diary() -> None:
    assert _hits(DIARY, [page for page in PAGES if page != HISTORY]) == []


def test_performance_gives_current_figures_by_topic() -> None:
    performance = DOCS / "performance.md"
    text = performance.read_text()
    assert len(text.splitlines()) < 400
    assert _hits(DATE, [performance]) == []
    assert "## Current figures" in text and "## How to reproduce" in text


def _leads(page: Path) -> list[str]:
    """Where a section can start: each line of the page (headings included), without
    heading marks, bold and backticks."""
    return [line.lstrip("#* ").replace("*", "") for line in
            page.read_text().replace("`", "").splitlines()]


def test_every_cited_section_exists() -> None:
    """A page and a quoted section name (``docs/<page>, "Name"``) cited in code, tests,
    benchmarks or docs name a heading, or the opening words of a line, of that page, so
    renaming a section strands no pointer to it."""
    citing = [ROOT / "README.md", *DOCS.glob("*.md"),
              *(path for folder in ("kinflow", "tests", "bench")
                for path in (ROOT / folder).rglob("*.py"))]
    stranded = []
    for path in citing:
        for page, name in SECTION_CITE.findall(LINE_BREAK.sub(" ", path.read_text())):
            target = DOCS / page
            if not target.exists():
                continue  # test_docs_self_contained reports a missing page
            if not any(lead.startswith(name) for lead in _leads(target)):
                stranded.append(f"{path.relative_to(ROOT)} cites {page}, {name!r}")
    assert stranded == []


def test_the_docs_index_lists_every_page() -> None:
    index = (DOCS / "README.md").read_text()
    pages = sorted(page.name for page in DOCS.glob("*.md") if page.name != "README.md")
    assert [name for name in pages if f"`docs/{name}`" not in index] == []
