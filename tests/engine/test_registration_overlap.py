"""A registration run creates a batch's overflow children behind its next commit
(engine/materialise.py, docs/subworkflows.md#registration-and-limits), on the embedded lake.

A batch whose window starts more children than the transaction takes
(``spawn_txn``) leaves the rest to be created after its commit. The run goes on
to read and plan the next batch meanwhile, at most one batch behind, and keeps
the parent's ``materialising`` mark until every batch's children exist.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from kinflow.core.errors import InjectedFault
from kinflow.core.mutation import Mutation
from kinflow.engine import Engine
from kinflow.worker import Worker
from tests.engine.cohort_defs import child, parent, with_item, with_window

pytestmark = pytest.mark.lake

ITEMS = [f"item-{n:03d}" for n in range(200)]


def overlapping(engine: Engine) -> Engine:
    """Batches of 40 rows whose children all start (and finish) in their commit: 4 are
    created inside it, 36 behind it."""
    return Engine(engine.lake, clock=engine.clock, limits=dataclasses.replace(
        engine.limits, registration_batch=40, spawn_txn=4))


async def spawned(engine: Engine) -> str:
    """The parent, its first batch registered by the spawn; the rest left to the test."""
    definition = with_window(with_item(parent("*[_type == 'item']{_id}",
                                              settled="$cohort.settled"), "$row._id"), 50)
    engine.faults.arm("mid-registration")  # the background run stops before its first batch
    await engine.ensure_ready()
    await engine.deploy([definition, child(auto=True)])
    await engine.lake.collection().insert_many([{"_id": n, "_type": "item"} for n in ITEMS])
    started = await engine.start_instance("p")
    p = (await engine.fire_action(started.instance.id_, "go", "go")).instance
    await engine.registrar.idle()
    return p.id_


async def assert_one_child_per_row(engine: Engine, parent_id: str) -> None:
    p = await engine.get_instance(parent_id)
    assert sorted(r.rowKey for r in p.subworkflows) == ITEMS
    children = await engine.lake.find({"parentInstance": parent_id})
    assert sorted(str(doc["_id"]) for doc in children) == sorted(
        r.child_id for r in p.subworkflows)
    assert not p.materialising and p.currentStage == "next"


async def test_a_batch_s_children_are_created_while_the_next_batch_commits(
        engine: Engine) -> None:
    engine = overlapping(engine)
    parent_id = await spawned(engine)
    insert, after_commit = engine.materialiser.insert, engine.transact.after_commit
    seen: dict[str, Any] = {}
    commits: list[int] = []  # the run's commits, by the rows registered after each
    next_commit = asyncio.Event()

    async def noted(mutation: Mutation) -> None:
        await after_commit(mutation)
        commits.append(mutation.instance.rowCount or 0)
        if len(commits) > 1:
            next_commit.set()

    async def held_insert(documents: list[dict[str, Any]]) -> None:
        if not seen:  # the first batch's children wait until the next batch has committed
            seen["marked"] = (await engine.document(parent_id) or {}).get("materialising")
            seen["busy"] = parent_id in engine.maintenance.materialising_now
            report = await Worker(engine, grace_seconds=0).run_pass()
            seen["repaired"] = ("materialise", parent_id) in report.processed
            await next_commit.wait()
            seen["rows"] = commits[:2]
        await insert(documents)

    engine.transact.after_commit = noted
    engine.materialiser.insert = held_insert
    batches = await asyncio.wait_for(engine.registrar.run(parent_id), 20)
    assert batches == 4  # 160 rows after the spawn's 40
    assert seen["rows"] == [80, 120]  # the first batch's children waited for the second
    assert seen["marked"] and seen["busy"] and not seen["repaired"]
    await assert_one_child_per_row(engine, parent_id)
    assert parent_id not in engine.maintenance.materialising_now


async def test_a_batch_whose_children_were_not_all_created_keeps_the_mark_for_the_heartbeat(
        engine: Engine) -> None:
    engine = overlapping(engine)
    parent_id = await spawned(engine)
    engine.faults.arm("mid-materialise")  # the first batch's second statement of children
    with pytest.raises(InjectedFault):
        await engine.registrar.run(parent_id)
    stored = await engine.document(parent_id)
    assert stored is not None and stored.get("materialising")
    assert parent_id not in engine.maintenance.materialising_now
    report = await Worker(engine, grace_seconds=0).run_pass()
    assert ("materialise", parent_id) in report.processed
    await engine.registrar.run(parent_id)  # (the pass went on with the rows, too)
    await assert_one_child_per_row(engine, parent_id)
