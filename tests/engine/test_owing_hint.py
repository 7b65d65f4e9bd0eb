"""The repair flags behind one index on the lake: the heartbeat's queries, the
materialisation's clear, and a dataset stored before ``owing`` existed."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.owing import ANY_OWED, FLAGS
from kinflow.engine import Engine
from kinflow.engine.indexes import RETIRED_FLAG_INDEXES
from kinflow.engine.owing_hint import clear_flag
from kinflow.storage import Lake
from kinflow.worker import Worker

INSTANCE = {"_type": "kinflow.instance"}


async def _plan(lake: Lake, query: dict[str, Any]) -> str:
    explained = await lake.collection().find(query).explain()
    return str(explained["queryPlanner"]["winningPlan"])


async def test_each_flag_is_found_through_the_one_index(engine: Engine, lake: Lake) -> None:
    await lake.create({"_id": "both", **INSTANCE, "owing": "materialising owesAborts",
                       "materialising": True, "owesAborts": True})
    await lake.create({"_id": "cancels", **INSTANCE, "owing": "owesCancels",
                       "owesCancels": True})
    await lake.create({"_id": "registering", **INSTANCE, "owing": "owesRegistration",
                       "owesRegistration": True})
    await lake.create({"_id": "idle", **INSTANCE})
    worker = Worker(engine, grace_seconds=0)
    found = {flag: sorted(await worker._flagged(flag, [])) for flag in FLAGS}
    assert found == {"materialising": ["both"], "owesBulk": [], "owesAborts": ["both"],
                     "owesCancels": ["cancels"], "owesRegistration": ["registering"]}
    assert await worker._flagged("owesAborts", ["both"]) == []  # seen this pass
    plan = await _plan(lake, {**INSTANCE, **ANY_OWED})
    assert "IXSCAN" in plan and "instance_owing" in plan, plan
    names = {index["name"] async for index in await lake.collection().list_indexes()}
    assert "instance_owing" in names and not names & set(RETIRED_FLAG_INDEXES)


async def test_clearing_materialising_derives_owing_from_the_flags_left(
        engine: Engine, lake: Lake) -> None:
    await lake.create({"_id": "p", **INSTANCE, "owing": "materialising owesAborts",
                       "materialising": True, "owesAborts": True})
    await lake.create({"_id": "q", **INSTANCE, "owing": "materialising", "materialising": True})
    assert await clear_flag(lake, "production", "p", "materialising")
    assert await clear_flag(lake, "production", "q", "materialising")
    p, q = await lake.get("p"), await lake.get("q")
    assert p is not None and q is not None
    assert "materialising" not in p and p["owing"] == "owesAborts" and p["owesAborts"] is True
    assert "materialising" not in q and "owing" not in q
    assert not await clear_flag(lake, "production", "gone", "materialising")


@pytest.mark.parametrize("flag", FLAGS)
async def test_an_older_dataset_keeps_every_repair_it_owes(lake: Lake, flag: str) -> None:
    coll = lake.collection()
    old = {"materialising": "instance_materialising_now", "owesBulk": "instance_owing_bulk",
           "owesAborts": "instance_owing_aborts", "owesCancels": "instance_owing_cancels"}
    for field, name in old.items():  # the indexes an older version declared
        await coll.create_index([(field, 1)], name=name,
                                partialFilterExpression={**INSTANCE, field: True})
    await lake.create({"_id": "owing", **INSTANCE, flag: True})  # no ``owing`` then
    await lake.create({"_id": "two", **INSTANCE, flag: True, "owesCancels": True})
    await lake.create({"_id": "idle", **INSTANCE})
    await Engine(lake).ensure_ready()
    owing, two, idle = [await lake.get(i) for i in ("owing", "two", "idle")]
    assert owing is not None and owing["owing"] == flag
    assert two is not None and set(two["owing"].split()) == {flag, "owesCancels"}
    assert idle is not None and "owing" not in idle
    found = await Worker(Engine(lake), grace_seconds=0)._flagged(flag, [])
    assert sorted(found) == ["owing", "two"]
    names = {index["name"] async for index in await coll.list_indexes()}
    assert "instance_owing" in names and not names & set(old.values())
