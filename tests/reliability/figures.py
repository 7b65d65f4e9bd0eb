"""Where the reliability tests leave their figures: printed, and kept for docs/reliability.md.

pytest captures output, so each figure line also goes to
``test-artifacts/reliability/<name>.txt`` (git-ignored), one file per test.
"""

from __future__ import annotations

from tests.reliability.family import ROOT

FIGURES = ROOT / "test-artifacts" / "reliability"


def record(name: str, line: str) -> None:
    print(line)
    FIGURES.mkdir(parents=True, exist_ok=True)
    (FIGURES / f"{name}.txt").write_text(line + "\n")
