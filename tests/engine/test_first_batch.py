"""A batch that reads the open range is read outside the commit's transaction
(engine/first_batch.py): the spawn's first batch, and every batch of a ``forEach``
without a ``_type``. Checked on the wire: while the lake serves such a read no
transaction of the engine is open, the read carries its own deadline (not the
operation timeout), and the cohort registers exactly its rows, once."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pymongo import AsyncMongoClient, monitoring

from kinflow.engine import Engine
from kinflow.storage.lake import Lake
from tests.engine.cohort_defs import WAITING, parent, with_item, with_window
from tests.engine.cohort_defs import child as child_def
from tests.engine.conftest import Clock

pytestmark = pytest.mark.lake

NAMES = [f"item-{n:02d}" for n in range(12)]


class Finds(monitoring.CommandListener):
    """Every batch read (a ``find`` sorted by ``_id``), with the transactions open then."""

    def __init__(self) -> None:
        self.reads: list[dict[str, Any]] = []
        self.open: set[tuple[bytes, int]] = set()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        command = event.command
        session = (bytes(command["lsid"]["id"]) if "lsid" in command else b"",
                   int(command.get("txnNumber", 0)))
        if event.command_name in ("commitTransaction", "abortTransaction"):
            self.open.discard(session)
        elif command.get("startTransaction"):
            self.open.add(session)
        if event.command_name == "find" and command.get("sort") == {"_id": 1}:
            self.reads.append({"filter": dict(command.get("filter") or {}),
                               "transactions_open": len(self.open),
                               "max_ms": int(command.get("maxTimeMS", 0))})

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
async def watched(lake: Lake, lake_uri: str, clock: Clock) -> AsyncIterator[tuple[Engine, Finds]]:
    """An engine on the test's database through a client whose batch reads are recorded."""
    finds = Finds()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        lake_uri, directConnection=True, event_listeners=[finds])
    own = Lake(client, lake.db.name, default_dataset="production",
               operation_timeout=lake.operation_timeout)
    engine = Engine(own, clock=clock)
    engine = Engine(own, clock=clock, limits=dataclasses.replace(engine.limits,
                                                                 registration_batch=5))
    await engine.ensure_ready()
    try:
        yield engine, finds
    finally:
        await client.close()


async def spawn(engine: Engine, for_each: str) -> str:
    definition = with_window(with_item(parent(for_each, settled=WAITING), "$row._id"), 3)
    await engine.deploy([definition, child_def()])
    for name in reversed(NAMES):
        await engine.lake.create({"_id": name, "_type": "item"})
    started = await engine.start_instance("p")
    await engine.fire_action(started.instance.id_, "go", "go")
    await engine.registrar.idle()
    return started.instance.id_


async def test_a_spawns_first_batch_is_read_outside_its_transaction(
        watched: tuple[Engine, Finds]) -> None:
    engine, finds = watched
    parent_id = await spawn(engine, "*[_type == 'item']{_id}")
    opening = [r for r in finds.reads if "_id" not in r["filter"]]
    assert len(opening) == 1, "the first batch reads the open range of the type, once"
    assert opening[0]["transactions_open"] == 0
    assert opening[0]["max_ms"] > engine.lake.operation_timeout * 1000  # a deadline of its own
    later = [r for r in finds.reads if "_id" in r["filter"]]
    assert later and all(r["max_ms"] <= engine.lake.operation_timeout * 1000 for r in later)
    p = await engine.get_instance(parent_id)
    assert [r.rowKey for r in p.subworkflows] == NAMES  # every row, once, in _id order
    assert p.owesRegistration is None


async def test_batches_without_a_type_are_read_outside_their_transactions(
        watched: tuple[Engine, Finds]) -> None:
    engine, finds = watched
    parent_id = await spawn(engine, "*[_id match 'item-*']{_id}")
    assert len(finds.reads) >= len(NAMES) // 5  # one open read per batch at least
    assert all(r["transactions_open"] == 0 for r in finds.reads)
    p = await engine.get_instance(parent_id)
    assert [r.rowKey for r in p.subworkflows] == NAMES
