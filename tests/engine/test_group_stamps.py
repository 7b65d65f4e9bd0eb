"""Group commits owe their parents stamps in one document per parent (engine/stamps.py):
the round honours them without writing the children again, a crash leaves them for the
heartbeat, and a parent that is gone has them dropped."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kinflow.core.errors import InjectedFault
from kinflow.core.state import Instance
from kinflow.engine import Engine
from kinflow.engine.group import Grouper
from kinflow.engine.stamps import STAMP_TYPE, Stamps
from kinflow.worker import Worker
from tests.engine.cohort_defs import child, items, parent
from tests.engine.invariants import assert_repaired

pytestmark = pytest.mark.lake

NAMES = [f"n{i:02d}" for i in range(12)]


async def cohort(engine: Engine) -> tuple[Grouper, Instance]:
    grouper = Grouper(engine.transact)
    engine.driver.grouper = grouper
    await engine.deploy([parent(), child()])
    started = await engine.start_instance("p", fields=items(*NAMES))
    return grouper, (await engine.fire_action(started.instance.id_, "go", "go")).instance


async def stamp_documents(engine: Engine) -> list[dict[str, Any]]:
    return await engine.lake.find({}, dataset=Stamps(engine.lake, engine.dataset).collection)


async def test_grouped_fires_stamp_the_parent_and_are_written_once(engine: Engine) -> None:
    grouper, p = await cohort(engine)
    fired = await asyncio.gather(*(engine.fire_action(r.child_id, "task", "finish")
                                   for r in p.subworkflows))
    await engine.driver.propagator.idle()
    assert grouper.grouped >= 2  # groups did form
    final = await engine.get_instance(p.id_)
    assert all(r.resolved is not None for r in final.subworkflows)
    assert final.currentStage == "next"
    assert await stamp_documents(engine) == []
    # a grouped child's fire was its last write: no round cleared a hint on it
    unchanged = 0
    for result in fired:
        stored = await engine.lake.get(result.instance.id_)
        assert stored is not None and "propagateTo" not in stored
        unchanged += stored["_rev"] == result.instance.rev_
    assert unchanged >= grouper.grouped
    await assert_repaired(engine)


async def test_a_crash_after_a_group_commit_is_repaired_from_its_stamp_document(
        engine: Engine) -> None:
    grouper, p = await cohort(engine)
    engine.faults.arm("before-propagation", times=len(NAMES))
    outcomes = await asyncio.gather(*(engine.fire_action(r.child_id, "task", "finish")
                                      for r in p.subworkflows), return_exceptions=True)
    assert all(isinstance(o, InjectedFault) for o in outcomes), outcomes
    assert grouper.grouped >= 2
    owed = await stamp_documents(engine)
    assert owed and {d["parent"] for d in owed} == {p.id_}
    noted = {c for d in owed for c in d["children"]}
    hinted = {d["_id"] for d in await engine.lake.find({"propagateTo": p.id_})}
    assert noted | hinted == {r.child_id for r in p.subworkflows} and not noted & hinted
    left = await engine.get_instance(p.id_)
    assert all(r.resolved is None for r in left.subworkflows)
    engine.faults.disarm()
    report = await Worker(engine, grace_seconds=0).run_pass()
    assert not report.failed, report.failed
    repaired = await engine.get_instance(p.id_)
    assert all(r.resolved is not None for r in repaired.subworkflows)
    assert await stamp_documents(engine) == []
    await assert_repaired(engine)


async def test_stamps_owed_to_a_parent_that_is_gone_are_dropped(engine: Engine) -> None:
    stamps = Stamps(engine.lake, engine.dataset)
    await engine.lake.create({"_id": "stamps.x", "_type": STAMP_TYPE, "parent": "gone",
                              "children": ["child"]}, dataset=stamps.collection)
    report = await Worker(engine, grace_seconds=0).run_pass()
    assert not report.failed, report.failed
    await engine.maintenance.settle_propagation()
    assert await stamp_documents(engine) == []
