"""A commit reads the clock once: the plan's moment is the moment written on the document."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kinflow.engine import Engine
from kinflow.storage import Lake
from tests.engine.definitions import counter

pytestmark = pytest.mark.lake


class Ticking:
    """A clock that moves one second on every reading (a second reading shows)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 2, 1, 8, 0, tzinfo=UTC)
        self.readings = 0

    def __call__(self) -> datetime:
        self.readings += 1
        self.now += timedelta(seconds=1)
        return self.now


def editable() -> dict[str, object]:
    return counter("one-clock")


async def test_start_and_edit_write_the_moment_they_planned_with(lake: Lake) -> None:
    clock = Ticking()
    engine = Engine(lake, clock=clock)
    await engine.ensure_ready()
    await engine.deploy([editable()])
    started = await engine.start_instance("one-clock")
    stored = await lake.get(started.instance.id_)
    assert stored is not None
    # the insert is stamped with the plan's moment, not a later reading
    assert stored["_createdAt"] == stored["_updatedAt"] == stored["startedAt"]

    for verb in (engine.edit_field(started.instance.id_, "n", 5),
                 engine.fire_action(started.instance.id_, "w", "bump")):
        result = await verb
        stored = await lake.get(started.instance.id_)
        assert stored is not None and result.changed
        # a fenced diff: _updatedAt is the moment the plan stamped lastChangedAt with
        assert stored["_updatedAt"] == stored["lastChangedAt"]
    print(f"clock readings over start + edit + fire: {clock.readings}")
