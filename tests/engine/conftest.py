"""Engine fixtures: an Engine over the per-test lake, with a controllable clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kinflow.engine import Engine
from kinflow.storage import Lake


class Clock:
    """A clock tests move by hand; every reading is the same until advanced."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def engine(lake: Lake, clock: Clock) -> Engine:
    built = Engine(lake, clock=clock)
    await built.ensure_ready()
    return built
