"""The memory guard restarts a leaking daemon, not a large one (kinflow/storage/memory_guard.py).

A real process stands in for the daemon: it grows its resident memory by the
MiB it is told on stdin, so the guard reads true figures from ``/proc``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kinflow.storage.embedded import EmbeddedLake
from kinflow.storage.memory_guard import MemoryGuard, rss_mib

GROWER = ("import sys\nheld = []\nfor line in sys.stdin:\n"
          "    held.append(bytearray(b'\\x01') * (int(line) << 20))\n"
          "    print('ok', flush=True)\n")


class Grower:
    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", GROWER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)

    def grow(self, mib: int) -> float:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{mib}\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "ok"
        time.sleep(0.05)
        return rss_mib(self.process.pid) or 0.0


@pytest.fixture
def grower() -> Iterator[Grower]:
    grown = Grower()
    try:
        yield grown
    finally:
        grown.process.kill()
        grown.process.wait()


def guard_of(process: subprocess.Popen[str], tmp_path: Path, budget: float) -> MemoryGuard:
    daemon = EmbeddedLake(tmp_path)
    daemon._process = process  # type: ignore[assignment]  # the stand-in daemon
    daemon.owned = True
    return MemoryGuard(daemon, budget_mib=budget)


def test_a_daemon_large_after_a_restart_is_restarted_only_once_it_grows_by_half_the_budget(
        grower: Grower, tmp_path: Path) -> None:
    start = grower.grow(0)
    budget = start + 40  # MiB
    guard = guard_of(grower.process, tmp_path, budget)
    assert not guard.over_budget()
    grower.grow(60)
    assert guard.over_budget()  # past the budget, no restart yet: the leak rule as before
    guard.note_restart()  # as if restarted, and come back this large (its data)
    assert not guard.over_budget()  # the first look takes the floor
    grower.grow(int(budget / 4))
    assert not guard.over_budget()  # past the budget, but grown by less than half of it
    grower.grow(int(budget / 4) + 10)
    assert guard.over_budget()  # grown by more than half the budget since the restart


def test_without_a_restart_the_budget_alone_decides(grower: Grower, tmp_path: Path) -> None:
    start = grower.grow(0)
    guard = guard_of(grower.process, tmp_path, start + 40)
    assert not guard.over_budget()
    grower.grow(60)
    assert guard.over_budget() and guard.over_budget()  # every look past it says so
