"""Engine bookkeeping lives beside the content dataset, never in it."""

from __future__ import annotations

import pytest

from kinflow.engine import Engine
from kinflow.engine.leases import LEASE_TYPE, prepare_engine_side
from kinflow.storage.database import side_name
from kinflow.worker import Worker
from tests.engine.conftest import Clock
from tests.engine.definitions import counter

pytestmark = pytest.mark.lake


async def test_start_moves_a_first_version_lakes_leases_out_of_the_content_dataset(
        engine: Engine, clock: Clock) -> None:
    await engine.deploy([counter("c")])
    ids = [(await engine.start_instance("c")).instance.id_ for _ in range(3)]
    await engine.lake.create({"_id": "article-1", "_type": "article", "title": "A"})
    # what the first version left: leases in the content dataset, one still held
    for n, iid in enumerate(ids):
        await engine.lake.create({"_id": f"lease.tick.{iid}", "_type": LEASE_TYPE,
                                  "holder": f"old-{n}", "expiresAt": "2999-01-01T00:00:00.000Z"})
    assert await engine.query("count(*)") == 1 + 3 + 1 + 3
    await Worker(engine, worker_id="new").ensure_ready()  # what every start runs
    side = side_name(engine.dataset, "engine")
    assert await engine.lake.count({"_type": LEASE_TYPE}) == 0
    moved = await engine.lake.find({"_type": LEASE_TYPE}, dataset=side)
    assert sorted(d["holder"] for d in moved) == ["old-0", "old-1", "old-2"]
    definitions = await engine.query("count(*[_type == 'kinflow.definition'])")
    instances = await engine.query("count(*[_type == 'kinflow.instance'])")
    content = await engine.query("count(*[!(_type match 'kinflow.*')])")
    assert (definitions, instances, content) == (1, 3, 1)
    assert await engine.query("count(*)") == definitions + instances + content
    # idempotent: a second start (or one interrupted after the copy) changes nothing
    await engine.lake.create_missing(moved[:1], dataset=engine.dataset)  # a copy left behind
    assert await prepare_engine_side(engine.lake, engine.dataset) == 1
    assert await prepare_engine_side(engine.lake, engine.dataset) == 0
    assert await engine.lake.count({"_type": LEASE_TYPE}, dataset=side) == 3
    assert await engine.query("count(*)") == 5


async def test_a_pass_writes_its_leases_beside_the_dataset(engine: Engine, clock: Clock) -> None:
    await engine.deploy([counter("c")])
    iid = (await engine.start_instance("c")).instance.id_
    worker = Worker(engine, worker_id="w", grace_seconds=0)
    await worker.ensure_ready()
    assert await worker.leases.acquire(f"lease.tick.{iid}", clock())
    assert await engine.query("count(*[_type == $t])", {"t": LEASE_TYPE}) == 0
    side = side_name(engine.dataset, "engine")
    assert await engine.lake.count({"_id": f"lease.tick.{iid}"}, dataset=side) == 1
    await worker.leases.release(f"lease.tick.{iid}")
    assert await engine.lake.count({}, dataset=side) == 0
