"""The checker is not vacuous: each kind of damage a crash could do makes it fail."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import pytest

from kinflow.engine import Engine
from kinflow.storage import Lake
from kinflow.storage.database import side_name
from tests.reliability.family import Shape, definitions, instance_id, release_id, seed_release
from tests.reliability.invariants import InvariantViolation, Ledger, settle

pytestmark = pytest.mark.lake
Damage = Callable[[Lake, str, str], Awaitable[None]]


async def lose_child(lake: Lake, parent: str, child: str) -> None:
    await lake.collection().delete_one({"_id": child})


async def rewrite_history(lake: Lake, parent: str, child: str) -> None:
    # a new _rev, as every write through the lake gives (readers memoise by _rev)
    await lake.collection().update_one({"_id": parent}, {"$set": {"history.0.at": "1970",
                                                                  "_rev": "damaged"}})


async def second_child(lake: Lake, parent: str, child: str) -> None:
    rows = lake.collection(side_name(lake.default_dataset, "rows"))
    chunk = await rows.find_one({"parent": parent, "chunk": 0})
    assert chunk is not None
    twin = dict(chunk["rows"][0], _key="twin")
    await rows.update_one({"_id": chunk["_id"]}, {"$push": {"rows": twin}})
    await lake.collection().update_one({"_id": parent}, {"$inc": {"rowCount": 1},
                                                         "$set": {"_rev": "damaged"}})


async def owe_a_stamp(lake: Lake, parent: str, child: str) -> None:
    await lake.collection().update_one({"_id": child}, {"$set": {"propagateTo": parent}})


async def finish_unstamped(lake: Lake, parent: str, child: str) -> None:
    await lake.collection().update_one({"_id": child}, {"$set": {"completedAt": "2026"}})


@pytest.mark.parametrize("damage", [lose_child, rewrite_history, second_child, owe_a_stamp,
                                    finish_unstamped])
async def test_the_checker_sees_the_damage(lake: Lake, damage: Damage) -> None:
    engine = Engine(lake)
    await engine.ensure_ready()
    await engine.deploy(definitions())
    await seed_release(lake, 0, Shape(1, 2, 1))
    await engine.start_instance("release", fields={"subject": release_id(0)},
                                instance_id=instance_id(0))
    await settle(engine)
    ledger = Ledger()
    await ledger.check(engine, random.Random(1))
    parent = (await engine.get_instance(instance_id(0)))
    await damage(lake, parent.id_, parent.subworkflows[0].child_id)
    with pytest.raises(InvariantViolation):
        await ledger.check(engine, random.Random(1))
