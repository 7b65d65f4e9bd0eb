"""The checker is not vacuous: each kind of damage a crash could do makes it fail."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import pytest

from kinflow.engine import Engine
from kinflow.storage import Lake
from tests.reliability.family import Shape, definitions, instance_id, release_id, seed_release
from tests.reliability.invariants import InvariantViolation, Ledger, settle

pytestmark = pytest.mark.lake
Damage = Callable[[Lake, str, str], Awaitable[None]]


async def lose_child(lake: Lake, parent: str, child: str) -> None:
    await lake.collection().delete_one({"_id": child})


async def rewrite_history(lake: Lake, parent: str, child: str) -> None:
    await lake.collection().update_one({"_id": parent}, {"$set": {"history.0.at": "1970"}})


async def second_child(lake: Lake, parent: str, child: str) -> None:
    doc = await lake.collection().find_one({"_id": parent})
    assert doc is not None
    twin = dict(doc["subworkflows"][0], _key="twin")
    await lake.collection().update_one({"_id": parent}, {"$push": {"subworkflows": twin}})


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
