"""Settlement's crash windows, with fault points on the real code path
(docs/subworkflows.md#settlement): a crash between a deadline's expiry and the abort,
between a failure and its re-queue, and between the quorum's commit and the stopping of
the rest; each is repaired by one heartbeat with no lost or doubled attempt."""

from __future__ import annotations

from collections import Counter

import pytest

from kinflow.core.errors import InjectedFault
from kinflow.engine import Engine
from tests.engine.conftest import Clock
from tests.engine.invariants import assert_repaired
from tests.engine.settle_defs import child, history, rows, settling, start
from tests.engine.test_settlement import beat

pytestmark = pytest.mark.lake


async def children(engine: Engine, parent_id: str) -> list[str]:
    found = await engine.lake.find({"_type": "kinflow.instance", "parentInstance": parent_id})
    return sorted(str(doc["_id"]) for doc in found)


async def test_a_crash_between_the_deadline_and_the_abort_is_repaired(
        engine: Engine, clock: Clock) -> None:
    p = await start(engine, settling(childTimeoutSeconds=30, retry={"attempts": 2}), ["a"])
    first = rows(p)["a"].child_id
    clock.advance(seconds=31)
    engine.faults.arm("before-drain")
    with pytest.raises(InjectedFault):
        await engine.tick(p.id_)  # the expiry is committed, the abort is not carried out
    left = await engine.get_instance(p.id_)
    row = rows(left)["a"]
    assert row.abortPending is not None and row.resolved is None and left.owesAborts
    assert not (await child(engine, first)).get("abortedAt")
    engine.faults.disarm()
    await beat(engine)
    repaired = await engine.get_instance(p.id_)
    row = rows(repaired)["a"]
    assert (await child(engine, first)).get("abortedAt")
    assert row.attempt == 2 and row.previousChildIds == [first] and not row.queued
    assert await children(engine, p.id_) == sorted([first, f"{first}-a2"])  # one retry
    assert len(history(repaired, "childTimedOut")) == 1
    assert len(history(repaired, "subworkflowRetrying")) == 1
    await beat(engine)
    await assert_repaired(engine)


async def test_a_crash_between_a_failure_and_its_requeue_is_repaired(
        engine: Engine, clock: Clock) -> None:
    p = await start(engine, settling(retry={"attempts": 3}), ["a", "b"])
    first = rows(p)["a"].child_id
    engine.faults.arm("before-propagation")
    with pytest.raises(InjectedFault):
        await engine.fire_action(first, "task", "give-up")  # the child failed, the parent
    left = rows(await engine.get_instance(p.id_))["a"]  # was not told
    assert left.resolved is None and left.attempt is None
    engine.faults.disarm()
    await beat(engine)
    await beat(engine)  # a second pass changes nothing: no second re-queue
    repaired = await engine.get_instance(p.id_)
    row = rows(repaired)["a"]
    assert row.attempt == 2 and row.child_id == f"{first}-a2" and not row.queued
    assert (await child(engine, row.child_id)).get("completedAt") is None  # started, live
    assert len(history(repaired, "subworkflowRetrying")) == 1
    ids = await children(engine, p.id_)
    assert Counter(i.split("-a")[0] for i in ids)[first] == 2  # first attempt + one retry
    await assert_repaired(engine)


async def test_a_crash_between_the_quorum_and_stopping_the_rest_is_repaired(
        engine: Engine, clock: Clock) -> None:
    definition = settling(completeWhen="$cohort.succeeded >= 1", maxActive=2)
    p = await start(engine, definition, ["a", "b", "c", "d"])
    ids = {k: r.child_id for k, r in rows(p).items()}
    engine.faults.arm("before-drain")
    with pytest.raises(InjectedFault):
        await engine.fire_action(ids["a"], "task", "finish", params={"words": 1})
    left = await engine.get_instance(p.id_)
    got = rows(left)
    assert len(history(left, "cohortComplete")) == 1
    assert got["b"].abortPending is not None and got["b"].resolved is None  # owed abort
    assert all(got[k].outcome == "aborted" for k in "cd")  # skipped in the quorum's commit
    assert left.owesAborts
    engine.faults.disarm()
    await beat(engine, passes=2)
    repaired = await engine.get_instance(p.id_)
    got = rows(repaired)
    assert got["b"].outcome == "aborted" and got["b"].abortReason == "cohort-complete"
    assert (await child(engine, ids["b"])).get("abortedAt")
    assert await children(engine, p.id_) == sorted([ids["a"], ids["b"]])  # c, d never ran
    assert len(history(repaired, "cohortComplete")) == 1
    assert repaired.currentStage == "next"
    await assert_repaired(engine)
