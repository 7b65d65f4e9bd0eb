"""No module in ``kinflow/`` grows past 450 lines: one past it holds more than one job."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kinflow"
LIMIT = 450


def test_no_module_is_longer_than_the_limit() -> None:
    long = {str(path.relative_to(PACKAGE.parent)): n for path in sorted(PACKAGE.rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > LIMIT}  # fmt: skip
    assert long == {}, f"split these along a seam: {long}"
