"""The repository stands on its own: nothing in it points at a file it lacks.

The rule is written in docs/README.md, "Every reference resolves": the notes
kinflow was designed from are not part of the repository, so a reader
following a pointer to them, or a path outside the checkout, finds nothing.
This test reads the README and every text file under ``kinflow/``,
``tests/``, ``bench/`` and ``docs/`` and refuses: a path outside the
repository, the name of a design note, and a file path (``docs/api.md``,
``core/cohort/chunks.py``, ``bench/live.py``) or ``#section`` of a Markdown page that
does not exist. Vendored third-party trees are left out (their own text).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("kinflow", "tests", "bench", "docs")
SUFFIXES = {".py", ".md", ".js", ".css", ".html", ".txt", ".toml", ".yaml", ".yml", ".json",
            ".graphql", ".cfg", ".ini", ".sh"}  # fmt: skip
VENDORED = (ROOT / "kinflow" / "graphiql" / "static",
            ROOT / "tests" / "conformance" / "groq-test-suite")
THIS = Path(__file__).resolve()

#: Pointers outside the repository: absolute checkout paths, the design folder and
#: the design notes' names, and their section marks. Spelled in pieces so this file
#: does not match itself.
OUTSIDE = re.compile(
    "|".join([
        r"/wo" + "rk/", r"/home/\w", r"\.\./sha" + r"red\b",
        r"\bsha" + r"red/(?:design|reference)\b",
        r"\b(?:ARCHI" + "TECTURE|GRAPH" + "QL|DEFINI" + "TIONS|SCO" + "PE|COHORT-CON" + "TROL"
        + "|COHORT-SC" + "ALE)\\." + "md\\b",
        r"\bSCO" + r"PE\b", r"engine" + "-model", r"stack" + "-notes", r"embedded" + "-lake\\.md",
        r"(?<!docs/)\bgr" + r"oq\.md\b", "\u00a7" + r"\s*\d", r"\b[Ss]cenario \d+", r"\bADD \d\b",
    ])
)  # fmt: skip
#: A file path the text names: ``dir/name.ext`` or a bare ``name.md``, with an optional
#: ``#anchor``. URLs and ``~/`` or ``/``-rooted paths are not file references here.
FILE_REF = re.compile(
    r"(?<![\w./:~@-])((?:[\w.-]+/)+[\w.-]+\.(?:md|py|json|yaml|yml|graphql|toml|txt|png|js)"
    r"|[\w.-]+\.md)(#[\w-]+)?(?![\w/-])"
)
#: Where a relative path may be rooted: the repository, the package (``core/cohort/chunks.py``),
#: the docs, the tests (``unit/test_readme.py``) and the GROQ suite (``misc/params.yml``).
BASES = (ROOT, ROOT / "kinflow", ROOT / "docs", ROOT / "tests", VENDORED[1] / "test")


def scanned_files() -> Iterator[Path]:
    yield ROOT / "README.md"
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if (path.suffix in SUFFIXES and path.is_file() and path != THIS
                    and not any(path.is_relative_to(v) for v in VENDORED)
                    and "__pycache__" not in path.parts):  # fmt: skip
                yield path


@cache
def anchors(page: Path) -> frozenset[str]:
    """The ``#section`` names a Markdown page's headings give, as GitHub makes them."""
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", page.read_text(), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return frozenset(found)


def broken_reference(source: Path, name: str, anchor: str | None) -> str | None:
    """Why ``name`` (named in ``source``) points nowhere, or None when it resolves."""
    rooted = re.sub(r"^(?:\.\./)+", "", name)  # an example's path relative to its own file
    target = next((base / rooted for base in (source.parent, *BASES) if (base / rooted).exists()),
                  None)  # fmt: skip
    if target is None:
        return f"names {name}, which is not in the repository"
    if anchor and target.suffix == ".md" and anchor[1:] not in anchors(target.resolve()):
        return f"names {name}{anchor}, a section {name} does not have"
    return None


def docstring_lines(body: list[ast.stmt]) -> Iterator[int]:
    """The lines of every docstring among these statements and the ones they hold."""
    first = body[0] if body else None
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):  # fmt: skip
        yield from range(first.lineno, (first.end_lineno or first.lineno) + 1)
    for stmt in body:
        for name in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from docstring_lines(inner)
            elif isinstance(inner, list):
                for handler in inner:
                    yield from docstring_lines(getattr(handler, "body", []))


def comment_starts(text: str) -> dict[int, int]:
    """Line -> column where a ``#`` comment starts, for Python source."""
    return {tok.start[0]: tok.start[1]
            for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.COMMENT}  # fmt: skip


def problems_in(path: Path, text: str) -> list[str]:
    """Every bad pointer in ``text``. In Python only comments and docstrings are read for
    file paths: string literals are data (a profile's paths, a test's fixture)."""
    where = path.relative_to(ROOT)

    def place(match: re.Match[str]) -> tuple[int, int]:
        line_start = text.rfind("\n", 0, match.start()) + 1
        return text.count("\n", 0, match.start()) + 1, match.start() - line_start

    found = [f"{where}:{place(match)[0]}: points outside the repository: {match[0]!r}"
             for match in OUTSIDE.finditer(text)]  # fmt: skip
    named = [(*place(match), match) for match in FILE_REF.finditer(text)]
    if named and path.suffix == ".py":
        docstrings = set(docstring_lines(ast.parse(text).body))
        comments = comment_starts(text) if any(n not in docstrings for n, _, _ in named) else {}
        named = [(n, col, m) for n, col, m in named
                 if n in docstrings or col > comments.get(n, len(text))]  # fmt: skip
    for number, _, match in named:
        why = broken_reference(path, match[1], match[2])
        if why:
            found.append(f"{where}:{number}: {why}")
    return found


def test_nothing_points_outside_the_repository_or_at_a_missing_file() -> None:
    found = [p for path in scanned_files() for p in problems_in(path, path.read_text())]
    assert found == []


def test_the_scan_reaches_code_tests_benchmarks_and_docs() -> None:
    scanned = {path.relative_to(ROOT).parts[0] for path in scanned_files()}
    assert scanned == {"README.md", *SCANNED}


def test_a_pointer_outside_or_to_a_missing_file_is_found() -> None:
    here = ROOT / "kinflow" / "core" / "example.py"
    bad = [
        "# see " + "GRAPHQL" + ".md, section 3",
        "# the rule: " + "engine" + "-model " + "\u00a7" + "5.11",
        "# read /wo" + "rk/sha" + "red/des" + "ign/notes.md",
        "# see docs/no-such-page.md",
        "# see docs/api.md#no-such-section",
        "# the planner lives in core/no_such_module.py",
    ]
    for line in bad:
        assert problems_in(here, line), line
    good = ["# see docs/api.md#errors", "# the planner: core/commit.py",
            "# https://example.com/a/b.md", "# README.md#developing"]  # fmt: skip
    for line in good:
        assert problems_in(here, line) == [], line


def test_the_readme_shows_the_inspector() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "/inspector" in readme and "(docs/inspector.png)" in readme
    assert (ROOT / "docs" / "inspector.png").stat().st_size > 10_000
