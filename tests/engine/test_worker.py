"""The heartbeat worker: owed work is found by index, and two workers never share an item."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from kinflow.engine import EffectCall, Engine
from kinflow.storage.database import side_name
from kinflow.worker import Worker
from tests.engine.conftest import Clock
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake

TIMED = simple("timed", [
    {"name": "wait", "activities": [{"name": "send", "actions": [
        {"name": "ping", "when": "true", "effects": [{"name": "ping"}]},
        {"name": "stop", "status": "done"}]}],
     "transitions": [{"name": "later", "to": "over",
                      "when": "dateTime($now) > dateTime('2026-01-01T12:30:00Z')"}]},
    {"name": "over"},
])


async def test_two_workers_never_process_the_same_item_twice(engine: Engine,
                                                             clock: Clock) -> None:
    calls: Counter[str] = Counter()

    async def ping(call: EffectCall) -> None:
        calls[call.effect_key] += 1
        await asyncio.sleep(0.01)  # let the other worker reach the same item meanwhile

    engine.register_handler("ping", ping)
    await engine.deploy([TIMED])
    ids = [(await engine.start_instance("timed")).instance.id_ for _ in range(6)]
    clock.advance(hours=1)
    workers = [Worker(engine, worker_id=f"w{n}", grace_seconds=0) for n in range(2)]
    reports = await asyncio.gather(*(w.run_pass() for w in workers))
    handled = [set(r.processed) for r in reports]
    assert not handled[0] & handled[1], "an item was handled by both workers"
    union = handled[0] | handled[1]
    assert {i for kind, i in union if kind == "tick"} == set(ids)
    assert {i for kind, i in union if kind == "effects"} == set(ids)
    assert len(calls) == 6 and set(calls.values()) == {1}  # each effect ran exactly once
    for iid in ids:
        instance = await engine.get_instance(iid)
        assert instance.currentStage == "over"
        assert [h["_type"] for h in instance.history].count("transitionFired") == 1
    assert await engine.lake.count({"_type": "kinflow.lease"}) == 0
    assert await engine.lake.count({}, dataset=side_name(engine.dataset, "engine")) == 0
    again = await workers[0].run_pass()
    assert again.processed == []


@pytest.mark.parametrize("concurrency", [1, 4])
async def test_a_pass_runs_effect_handlers_side_by_side(engine: Engine, clock: Clock,
                                                        concurrency: int) -> None:
    """Up to ``concurrency`` handlers at once: a handler waiting on the network no longer
    holds up every other owed item (one at a time, effects fell behind the load)."""
    running, most = 0, 0
    everyone = asyncio.Event()

    async def ping(call: EffectCall) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        if running == concurrency:
            everyone.set()
        try:  # each waits (bounded) for as many others as the worker may run
            await asyncio.wait_for(everyone.wait(), timeout=2.0)
        except TimeoutError:
            pass
        running -= 1

    engine.register_handler("ping", ping)
    await engine.deploy([TIMED])
    ids = [(await engine.start_instance("timed")).instance.id_ for _ in range(6)]
    report = await Worker(engine, grace_seconds=0, concurrency=concurrency).run_pass()
    assert sorted(report.of("effects")) == sorted(ids) and not report.failed
    assert most == concurrency
    for iid in ids:
        assert [run.status for run in (await engine.get_instance(iid)).effectHistory] == ["done"]


async def test_a_held_lease_is_skipped_until_it_expires(engine: Engine, clock: Clock) -> None:
    await engine.deploy([TIMED])
    iid = (await engine.start_instance("timed")).instance.id_
    clock.advance(hours=1)
    first, second = Worker(engine, worker_id="a", grace_seconds=0), Worker(
        engine, worker_id="b", grace_seconds=0, lease_seconds=60)
    assert await first.leases.acquire(f"lease.tick.{iid}", clock())
    report = await second.run_pass()
    assert ("tick", iid) not in report.processed and report.skipped >= 1
    clock.advance(seconds=120)  # the holder died: its lease expires and is taken over
    report = await second.run_pass()
    assert ("tick", iid) in report.processed


async def test_run_stops_when_asked(engine: Engine) -> None:
    stop = asyncio.Event()
    worker = Worker(engine, interval=0.01)
    task = asyncio.create_task(worker.run(stop))
    await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 5)
