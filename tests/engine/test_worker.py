"""The heartbeat worker: owed work is found by index, and two workers never share an item."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from pymongo import AsyncMongoClient, monitoring

from kinflow.core.owing import FIELD as OWING
from kinflow.engine import EffectCall, Engine
from kinflow.storage import Lake
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


class OwingReads(monitoring.CommandListener):
    """Counts the ``find`` commands that search the owing instances."""

    def __init__(self) -> None:
        self.count = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name == "find" and OWING in (event.command.get("filter") or {}):
            self.count += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def test_a_pass_reads_the_owing_instances_once_for_every_flag(
        lake: Lake, lake_uri: str, clock: Clock) -> None:
    """Five kinds follow a repair flag; one read of the owing instances serves them all,
    and each kind still gets the instances holding its own flag."""
    reads = OwingReads()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        lake_uri, directConnection=True, event_listeners=[reads])
    own = Lake(client, lake.db.name, default_dataset="production",
               operation_timeout=lake.operation_timeout)
    try:
        engine = Engine(own, clock=clock)
        await engine.ensure_ready()
        await engine.deploy([TIMED])
        started = [(await engine.start_instance("timed")).instance.id_ for _ in range(2)]
        flags = {started[0]: "owesAborts", started[1]: "owesCancels"}
        for instance_id, flag in flags.items():  # as a crash between two commits leaves them
            await own.collection().update_one({"_id": instance_id},
                                              {"$set": {flag: True, OWING: flag}})
        report = await Worker(engine, worker_id="w", grace_seconds=0).run_pass()
        assert reads.count == 1
        assert ("drain", started[0]) in report.processed
        assert ("cancel", started[1]) in report.processed
        for instance_id, flag in flags.items():  # repaired: nothing was owed after all
            stored = await own.collection().find_one({"_id": instance_id}) or {}
            assert not stored.get(flag) and not stored.get(OWING)
    finally:
        await client.close()
