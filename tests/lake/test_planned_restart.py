"""A restart of the embedded daemon that kinflow plans is invisible to callers.

The memory guard restarts the daemon it owns through the keeper's
``restart_planned``: the lake's restart gate holds new operations back,
drains those in flight, and reopens once the new daemon answers. Verbs and
reads running across two such restarts must all succeed, and every keyed
verb must be applied exactly once (the lake's documents say so).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from kinflow.engine import Engine
from kinflow.settings import Settings
from kinflow.storage.connect import LakeConnection, open_lake
from kinflow.storage.embedded import pid_alive
from tests.engine.definitions import counter

pytestmark = [
    pytest.mark.lake,
    pytest.mark.skipif(bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")),
                       reason="embedded lake only"),
]
INSTANCES = 4
WRITERS = 4
HANG_GUARD = 120.0  # seconds: a hang, not a timing


async def _more_fires(fired: dict[str, list[str]], more: int) -> None:
    """Return once ``more`` further fires have been acknowledged."""
    target = sum(map(len, fired.values())) + more
    while sum(map(len, fired.values())) < target:
        assert fired, "nothing fires"
        await asyncio.sleep(0.05)


def _count(instance: Any) -> int:
    return next(field.value for field in instance.fields if field.name == "n")


async def _owned_lake(data_dir: Path, database: str, **settings: Any) -> LakeConnection:
    """An embedded lake this process owns, with no memory guard of its own: the tests
    plan the restarts."""
    return await open_lake(Settings(
        _env_file=None, mongodb_uri=None, data_dir=data_dir, database=database,
        embedded_sync_on_commit=False, embedded_memory_mb=0, **settings))


async def test_verbs_and_reads_across_planned_restarts_see_no_error(data_dir: Path) -> None:
    connection = await _owned_lake(data_dir, "planned")
    keeper, embedded, lake = connection.keeper, connection.embedded, connection.lake
    assert keeper is not None and embedded is not None and lake.gate is not None
    try:
        engine = Engine(lake)
        await engine.ensure_ready()
        await engine.deploy([counter("count")])
        ids = [(await engine.start_instance("count")).instance.id_ for _ in range(INSTANCES)]

        errors: list[BaseException] = []
        fired: dict[str, list[str]] = {iid: [] for iid in ids}
        reads = 0
        running = True

        async def fire(iid: str) -> None:
            n = 0
            while running:
                n += 1
                key = f"{iid}-{n}"
                try:
                    await engine.fire_action(iid, "w", "bump", idempotency_key=key)
                    fired[iid].append(key)
                except Exception as exc:
                    errors.append(exc)

        async def read() -> None:
            nonlocal reads
            while running:
                try:
                    await lake.get(ids[reads % INSTANCES])
                    await lake.find({"_id": {"$in": ids}})
                    await lake.count({"_id": {"$in": ids}})
                    reads += 1
                except Exception as exc:
                    errors.append(exc)

        bumped: dict[str, int] = {}

        async def bump(counter_id: str) -> None:  # a write outside any transaction
            await lake.create({"_id": counter_id, "_type": "note", "n": 0})
            bumped[counter_id] = 0
            while running:
                try:
                    await lake.update(counter_id, {"$inc": {"n": 1}})
                    bumped[counter_id] += 1
                except Exception as exc:
                    errors.append(exc)

        tasks = [asyncio.create_task(fire(iid)) for iid in ids]
        tasks += [asyncio.create_task(read()) for _ in range(2)]
        tasks += [asyncio.create_task(bump(f"counter-{n}")) for n in range(WRITERS)]
        async with asyncio.timeout(HANG_GUARD):
            pids = [embedded.pid]
            for _ in range(2):
                await _more_fires(fired, 20)  # verbs are flowing
                assert await keeper.restart_planned()
                pids.append(embedded.pid)
            await _more_fires(fired, 20)  # and flow on after the second restart
            running = False
            await asyncio.gather(*tasks)

        assert errors == [], errors[:3]
        assert keeper.status.planned == 2 and len(set(pids)) == 3
        assert not any(pid_alive(pid) for pid in pids[:2] if pid is not None)
        assert lake.gate.restarts == 2 and lake.gate.waited > 0  # calls were held, not refused
        assert reads > 0
        for counter_id, done in bumped.items():  # each acknowledged write applied once
            assert (await lake.get(counter_id) or {}).get("n") == done > 0

        for iid in ids:  # each keyed fire applied once: the counter is the number of keys
            stored = await engine.get_instance(iid)
            assert _count(stored) == len(fired[iid]) == len(set(fired[iid]))
        for iid in ids:  # and a replay of every key applies nothing more
            for key in fired[iid]:
                await engine.fire_action(iid, "w", "bump", idempotency_key=key)
            assert _count(await engine.get_instance(iid)) == len(fired[iid])
    finally:
        await connection.close()


async def test_a_long_read_postpones_a_planned_restart_and_a_wait_outlasts_the_call_timeout(
        data_dir: Path) -> None:
    """A read given longer than the operation timeout (a spawn's first batch over a whole
    type) is not cut by a planned restart: the restart waits for it. A call arriving
    during a restart waits for the restart, even past its own timeout."""
    connection = await _owned_lake(data_dir, "postponed", operation_timeout=1.0)
    keeper, embedded, lake = connection.keeper, connection.embedded, connection.lake
    assert keeper is not None and embedded is not None and lake.gate is not None
    gate = lake.gate
    try:
        await lake.ensure_dataset(lake.default_dataset)
        first = embedded.pid

        async def during_long_read() -> bool:
            assert gate.long_inflight == 1
            return await keeper.restart_planned()

        restarted = await lake.read("find", during_long_read, timeout=5.0)
        assert restarted is False and embedded.pid == first and gate.restarts == 0

        async def during_short_read() -> int:
            return gate.long_inflight

        assert await lake.read("find", during_short_read) == 0
        # the gate closes for a restart that may take longer than the 1 s call timeout
        assert await gate.close(drain=1.0, bound=30.0)
        waiting = asyncio.create_task(lake.get("nothing-here"))
        await asyncio.sleep(1.5)  # past the call's own timeout: it still waits
        assert not waiting.done()
        gate.reopen()
        assert await asyncio.wait_for(waiting, HANG_GUARD) is None
        assert await keeper.restart_planned() and embedded.pid != first
    finally:
        await connection.close()


async def test_a_batch_of_new_documents_cut_by_a_planned_restart_is_written_once(
        data_dir: Path) -> None:
    """``create_missing`` (the children a large spawn creates in batches) may outlast the
    restart's drain: cut, it runs again once the daemon is back, skipping what the cut
    attempt stored, so every document is stored once and the caller sees no error."""
    connection = await _owned_lake(data_dir, "cutbatch")
    keeper, embedded, lake = connection.keeper, connection.embedded, connection.lake
    assert keeper is not None and embedded is not None and lake.gate is not None
    gate = lake.gate
    try:
        await lake.ensure_dataset(lake.default_dataset)
        docs = [{"_id": f"item-{n:05}", "_type": "item", "n": n} for n in range(20_000)]
        writing = asyncio.create_task(lake.create_missing(docs))
        while gate._inflight == 0:  # the batch is past the gate: the daemon is writing it
            assert not writing.done(), "the batch was written before the restart could cut it"
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        keeper.drain = 0.0  # no drain: the restart cuts the batch in flight
        assert await keeper.restart_planned()
        assert gate.undrained == 1
        await asyncio.wait_for(writing, HANG_GUARD)
        stored = await lake.collection(None).count_documents({"_type": "item"})
        assert stored == len(docs)
    finally:
        await connection.close()
