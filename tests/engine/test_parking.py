"""A heartbeat item that fails with a permanent refusal is parked, backs off, and ``tick``
un-parks it."""

from __future__ import annotations

import pytest

from kinflow.core.context import Limits
from kinflow.core.errors import CascadeLimit
from kinflow.engine import Engine
from kinflow.engine.parking import PARKED_TYPE, Parking
from kinflow.storage import Lake
from kinflow.storage.database import side_name
from kinflow.worker import Worker
from tests.engine.conftest import Clock
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake

# waits for a time gate, then ping-pongs between two stages for ever
LOOPING = simple("looping", [
    {"name": "wait", "transitions": [
        {"name": "go", "to": "ping", "when": "dateTime($now) > dateTime('2026-01-01T12:30:00Z')"}]},
    {"name": "ping", "transitions": [{"name": "to-pong", "to": "pong"}]},
    {"name": "pong", "transitions": [{"name": "to-ping", "to": "ping"}]},
])


@pytest.fixture
async def engine(lake: Lake, clock: Clock) -> Engine:
    """The engine of tests/engine/conftest.py with a cascade limit of 10: the same parking,
    each refused cascade ten times shorter (every move rewrites a longer history)."""
    built = Engine(lake, clock=clock, limits=Limits(cascade_moves=10))
    await built.ensure_ready()
    return built


async def _stored(engine: Engine, iid: str) -> tuple[str, int]:
    doc = await engine.lake.get(iid, dataset=engine.dataset)
    assert doc is not None
    return doc["_rev"], len(doc["history"])


async def test_a_looping_instance_is_parked_after_one_pass_and_costs_nothing_until_tick(
        engine: Engine, clock: Clock) -> None:
    await engine.deploy([LOOPING])
    iid = (await engine.start_instance("looping")).instance.id_
    clock.advance(hours=1)
    worker = Worker(engine, worker_id="w", grace_seconds=0)
    first = await worker.run_pass()
    assert first.parked == [("tick", iid, "cascade-limit")]
    parked = await Parking(engine.lake, engine.dataset).get(iid)
    assert parked is not None and parked.code == "cascade-limit" and parked.failures == 1
    assert parked.details["limit"] == engine.limits.cascade_moves
    before = await _stored(engine, iid)
    print("commits of the parked pass (history entries):", before[1])
    for _ in range(3):  # passes inside the back-off: not one commit
        clock.advance(seconds=10)
        again = await worker.run_pass()
        assert ("tick", iid) not in again.processed and not again.failed
    assert await _stored(engine, iid) == before
    # a tick un-parks it (and is refused the same way); the next pass tries once more
    with pytest.raises(CascadeLimit):
        await engine.tick(iid)
    assert await Parking(engine.lake, engine.dataset).get(iid) is None
    retried = await worker.run_pass()
    assert retried.parked == [("tick", iid, "cascade-limit")]


async def test_the_back_off_doubles_and_a_success_unparks(engine: Engine, clock: Clock) -> None:
    await engine.deploy([LOOPING])
    iid = (await engine.start_instance("looping")).instance.id_
    clock.advance(hours=1)
    worker = Worker(engine, worker_id="w", grace_seconds=0, park_seconds=60)
    await worker.run_pass()
    clock.advance(seconds=61)  # the back-off ended: tried again, parked for twice as long
    report = await worker.run_pass()
    assert report.parked == [("tick", iid, "cascade-limit")]
    parked = await Parking(engine.lake, engine.dataset).get(iid)
    assert parked is not None and parked.failures == 2
    clock.advance(seconds=61)
    assert ("tick", iid) not in (await worker.run_pass()).processed
    # the loop is broken by hand: the next attempt succeeds and the parking goes
    await engine.abort_instance(iid, reason="loops")
    clock.advance(seconds=120)
    await worker.run_pass()
    side = side_name(engine.dataset, "engine")
    assert await engine.lake.count({"_type": PARKED_TYPE}, dataset=side) == 0


async def test_transient_failures_are_not_parked(engine: Engine, clock: Clock) -> None:
    from kinflow.engine.parking import permanent
    from kinflow.errors import ConcurrentModification, LakeUnavailable

    assert not permanent(ConcurrentModification("x"))
    assert not permanent(LakeUnavailable("x"))
    assert not permanent(RuntimeError("x"))
    assert permanent(CascadeLimit("x", limit=1))
