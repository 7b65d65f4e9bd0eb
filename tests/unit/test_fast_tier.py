"""``make unit`` starts no lake daemon: lake tests are deselected, and the launcher refuses.

Two guards, each shown here: the collection hook in ``tests/conftest.py`` marks
``lake`` every test whose fixtures reach the lake (so ``-m "not lake"`` leaves it
out), and ``KINFLOW_NO_EMBEDDED_LAKE``, which ``make unit`` sets, makes the embedded
launcher refuse before it spawns anything.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kinflow.errors import ConfigurationError
from kinflow.storage import embedded
from kinflow.storage.embedded import NO_LAKE_ENV, EmbeddedLake

ROOT = Path(__file__).resolve().parents[2]
#: Files that use the lake only through fixtures and carry no marker of their own.
UNMARKED_LAKE_FILES = ["tests/lake/test_lake.py", "tests/engine/test_owing_hint.py",
                       "tests/cli/test_cli.py"]  # fmt: skip


@pytest.mark.lake  # it collects lake test files in a second interpreter (6 s): the full suite's
def test_a_test_that_asks_for_the_lake_is_marked_lake() -> None:
    assert not [f for f in UNMARKED_LAKE_FILES if "mark.lake" in (ROOT / f).read_text()]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", "not lake", *UNMARKED_LAKE_FILES],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, NO_LAKE_ENV: "1"},
    )  # fmt: skip
    selected = [line for line in done.stdout.splitlines() if "::" in line]
    assert selected == []
    deselected = re.search(r"no tests collected \((\d+) deselected\)", done.stdout)
    assert deselected is not None, done.stdout + done.stderr
    assert int(deselected[1]) >= 10


def test_the_launcher_refuses_under_the_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spawned: list[object] = []
    monkeypatch.setattr(embedded.subprocess, "Popen", lambda *a, **k: spawned.append(a))
    monkeypatch.setenv(NO_LAKE_ENV, "1")
    with pytest.raises(ConfigurationError) as refused:
        EmbeddedLake(tmp_path / "data").start()
    assert refused.value.code == "configuration-error"
    assert refused.value.details == {"setting": NO_LAKE_ENV}
    assert spawned == []


def test_make_unit_sets_the_guard_and_leaves_lake_tests_out() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^unit:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None, "the Makefile has no unit target"
    assert f"{NO_LAKE_ENV}=1" in recipe[1] and "not lake" in recipe[1]
