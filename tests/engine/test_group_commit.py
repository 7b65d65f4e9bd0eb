"""Group commit: concurrent verbs on different instances share a transaction, each keeping
its own fencing, idempotency and error (engine/group.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pymongo.errors import OperationFailure

from kinflow.core.errors import InstanceNotFound
from kinflow.engine import Engine
from kinflow.engine.group import Grouper
from kinflow.errors import KinflowError
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake

COUNTER = simple("counter", [
    {"name": "a", "activities": [{"name": "w", "actions": [
        {"name": "bump", "ops": [{"type": "field.inc", "target": "n"}]},
        {"name": "stop", "status": "done"}]}],
     "transitions": [{"name": "t", "to": "b", "when": "$allActivitiesDone"}]},
    {"name": "b"},
], fields=[{"name": "n", "type": "number", "initialValue": {"type": "literal", "value": 0}}])


async def grouped(engine: Engine, count: int) -> tuple[Grouper, list[str]]:
    grouper = Grouper(engine.transact)
    engine.driver.grouper = grouper
    await engine.deploy([COUNTER])
    ids = [(await engine.start_instance("counter")).instance.id_ for _ in range(count)]
    return grouper, ids


async def counts(engine: Engine, ids: list[str]) -> list[int]:
    return [(await engine.get_instance(i)).fields[0].value for i in ids]


async def test_concurrent_fires_share_transactions_and_each_lands_once(engine: Engine) -> None:
    grouper, ids = await grouped(engine, 24)
    results = await asyncio.gather(*(engine.fire_action(i, "w", "bump") for i in ids))
    assert all(r.changed for r in results)
    assert [r.instance.id_ for r in results] == ids  # each caller gets its own instance
    assert await counts(engine, ids) == [1] * 24
    assert grouper.groups >= 1 and grouper.grouped >= 2  # groups did form
    for i in ids:
        fired = [h for h in (await engine.get_instance(i)).history
                 if h["_type"] == "actionFired"]
        assert len(fired) == 1


async def test_a_refused_member_gets_its_own_error_and_the_others_apply(engine: Engine
                                                                       ) -> None:
    grouper, ids = await grouped(engine, 12)
    await engine.fire_action(ids[3], "w", "stop")  # its stage moves on: "bump" is refused
    calls = [engine.fire_action(i, "w", "bump") for i in ids]
    calls.append(engine.fire_action("instance.missing", "w", "bump"))
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(outcomes[3], KinflowError)
    assert isinstance(outcomes[-1], InstanceNotFound)
    assert all(not isinstance(o, BaseException) for n, o in enumerate(outcomes[:-1]) if n != 3)
    assert await counts(engine, ids) == [0 if n == 3 else 1 for n in range(12)]
    assert grouper.grouped >= 2


async def test_one_key_in_a_group_applies_once(engine: Engine) -> None:
    _, ids = await grouped(engine, 6)
    calls = [engine.fire_action(i, "w", "bump", idempotency_key="k") for i in ids for _ in (0, 1)]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(o, KinflowError) for o in outcomes if isinstance(o, BaseException))
    assert await counts(engine, ids) == [1] * 6  # each instance's own key, applied once


async def test_many_calls_on_one_instance_among_others_land_or_fail_typed(engine: Engine
                                                                         ) -> None:
    _, ids = await grouped(engine, 8)
    calls = [engine.fire_action(ids[0], "w", "bump") for _ in range(10)]
    calls += [engine.fire_action(i, "w", "bump") for i in ids[1:]]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert all(getattr(f, "code", None) == "concurrent-modification" for f in failed), failed
    assert all(not isinstance(o, BaseException) for o in outcomes[10:])  # the others land
    landed_on_first = sum(not isinstance(o, BaseException) for o in outcomes[:10])
    assert await counts(engine, ids) == [landed_on_first] + [1] * 7


async def test_a_conflict_in_one_member_never_fails_another(engine: Engine,
                                                            monkeypatch: Any) -> None:
    _, ids = await grouped(engine, 10)
    write = engine.transact.write
    poisoned = {"left": 1}

    async def conflicting(mutation: Any, rev: Any, session: Any, now: Any) -> None:
        if mutation.instance.id_ == ids[4] and poisoned["left"]:
            poisoned["left"] -= 1
            raise OperationFailure("write conflict", code=112,
                                   details={"errorLabels": ["TransientTransactionError"]})
        await write(mutation, rev, session, now)

    monkeypatch.setattr(engine.transact, "write", conflicting)
    results = await asyncio.gather(*(engine.fire_action(i, "w", "bump") for i in ids))
    assert all(r.changed for r in results)
    assert await counts(engine, ids) == [1] * 10
    assert poisoned["left"] == 0


SPAWNER = simple("spawner", [
    {"name": "a", "activities": [{"name": "w", "actions": [
        {"name": "fan", "spawn": {"forEach": "['x', 'y']", "definition": {"name": "counter"}}},
        {"name": "bump", "ops": [{"type": "field.inc", "target": "n"}]},
        {"name": "stop", "status": "done"}]}],
     "transitions": [{"name": "t", "to": "b", "when": "$allActivitiesDone"}]},
    {"name": "b"},
], fields=[{"name": "n", "type": "number", "initialValue": {"type": "literal", "value": 0}}])


async def test_a_known_cohort_parent_commits_without_waiting_for_a_flight(engine: Engine
                                                                         ) -> None:
    grouper, ids = await grouped(engine, 16)
    await engine.deploy([SPAWNER])
    parent = (await engine.start_instance("spawner")).instance.id_
    assert parent not in grouper.solo
    await engine.fire_action(parent, "w", "fan")
    assert parent in grouper.solo  # its spawn's commit made it a cohort parent
    await asyncio.gather(*(engine.fire_action(i, "w", "bump") for i in ids),
                         engine.fire_action(parent, "w", "bump"))
    bumped = (await engine.get_instance(parent)).fields[0].value
    grouper.flying = grouper.flights  # every flight busy: a queued verb would wait
    try:
        await asyncio.wait_for(engine.fire_action(parent, "w", "bump"), 30)
    finally:
        grouper.flying = 0
    assert (await engine.get_instance(parent)).fields[0].value == bumped + 1
    assert not grouper.queue
