"""The cohort window (``spawn.maxActive``, ``updateCohort``) against the embedded lake."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.core.errors import CohortNotFound, DefinitionInvalid, InjectedFault
from kinflow.core.state import Instance
from kinflow.engine import Engine
from kinflow.worker import Worker
from tests.engine.cohort_defs import SETTLED, child, items, windowed
from tests.engine.invariants import assert_repaired

pytestmark = pytest.mark.lake



NAMES = [f"n{i:02d}" for i in range(10)]


async def into_review(engine: Engine, names: list[str], max_active: int = 3) -> Instance:
    await engine.deploy([windowed(max_active), child()])
    started = await engine.start_instance("p", fields=items(*names))
    return (await engine.fire_action(started.instance.id_, "go", "go")).instance


async def live_children(engine: Engine, parent_id: str) -> list[dict[str, Any]]:
    return await engine.lake.find({"_type": "kinflow.instance", "parentInstance": parent_id,
                                   "completedAt": {"$exists": False}})


async def statuses(engine: Engine, parent_id: str) -> list[str]:
    instance = await engine.get_instance(parent_id)
    return [r["status"] for r in subworkflow_rows(instance, instance.open_entry())]


async def test_a_spawn_beyond_the_window_registers_queued_rows_without_children(
        engine: Engine) -> None:
    p = await into_review(engine, NAMES)
    rows = p.subworkflows
    assert [r.rowKey for r in rows] == NAMES
    assert [bool(r.queued) for r in rows] == [False] * 3 + [True] * 7
    assert all(r.seed is not None and r.seed.fields == {"item": r.rowKey}
               for r in rows[3:])
    children = await engine.lake.find({"_type": "kinflow.instance", "parentInstance": p.id_})
    assert sorted(c["_id"] for c in children) == sorted(r.child_id for r in rows[:3])
    assert await statuses(engine, p.id_) == ["active"] * 3 + ["queued"] * 7
    assert p.open_entry().activity("translate").status == "active"  # type: ignore[union-attr]


async def test_finishing_children_starts_the_next_rows_in_order_within_the_window(
        engine: Engine) -> None:
    p = await into_review(engine, NAMES)
    started: list[str] = []
    for _ in NAMES:
        live = await live_children(engine, p.id_)
        assert 0 < len(live) <= 3
        row_of = {r.child_id: r.rowKey for r in (await engine.get_instance(p.id_)).subworkflows}
        first = min(live, key=lambda c: row_of[c["_id"]])
        started.append(row_of[first["_id"]])
        await engine.fire_action(first["_id"], "task", "finish")
        assert len(await live_children(engine, p.id_)) <= 3
        assert (await statuses(engine, p.id_)).count("active") <= 3
    assert started == NAMES
    final = await engine.get_instance(p.id_)
    assert final.currentStage == "next"
    assert [r.resolved is not None for r in final.subworkflows] == [True] * 10
    await assert_repaired(engine)


async def test_twenty_concurrent_finishes_never_exceed_the_window(engine: Engine) -> None:
    names = [f"c{i:02d}" for i in range(40)]
    p = await into_review(engine, names, max_active=20)
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, len(await live_children(engine, p.id_)))
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    try:
        for _ in range(2):
            live = await live_children(engine, p.id_)
            assert len(live) == 20
            await asyncio.gather(*(engine.fire_action(c["_id"], "task", "finish")
                                   for c in live))
            await engine.driver.propagator.idle()
            assert len(await live_children(engine, p.id_)) <= 20
    finally:
        watcher.cancel()
    print(f"peak live children sampled: {peak}")
    assert peak <= 20
    final = await engine.get_instance(p.id_)
    assert all(r.resolved is not None for r in final.subworkflows)
    assert final.currentStage == "next"


async def test_a_crash_before_the_parent_is_told_is_refilled_by_one_heartbeat(
        engine: Engine) -> None:
    p = await into_review(engine, NAMES[:5], max_active=2)
    first = p.subworkflows[0].child_id
    engine.faults.arm("before-propagation")
    with pytest.raises(InjectedFault):
        await engine.fire_action(first, "task", "finish")
    left = await engine.get_instance(p.id_)
    assert left.subworkflows[0].resolved is None and left.subworkflows[2].queued
    assert len(await live_children(engine, p.id_)) == 1  # under-filled: one place free
    engine.faults.disarm()
    report = await Worker(engine, grace_seconds=0).run_pass()
    assert not report.failed, report.failed
    repaired = await engine.get_instance(p.id_)
    assert repaired.subworkflows[0].resolved is not None
    assert not repaired.subworkflows[2].queued and repaired.subworkflows[3].queued
    assert len(await live_children(engine, p.id_)) == 2
    await assert_repaired(engine)


async def test_update_cohort_raises_then_lowers_the_window_mid_run(engine: Engine) -> None:
    p = await into_review(engine, NAMES, max_active=2)
    raised = await engine.update_cohort(p.id_, "translate", max_active=5)
    assert [bool(r.queued) for r in raised.subworkflows] == [False] * 5 + [True] * 5
    assert len(await live_children(engine, p.id_)) == 5
    lowered = await engine.update_cohort(p.id_, "translate", max_active=1)
    assert len(await live_children(engine, p.id_)) == 5  # running children keep running
    assert sum(1 for r in lowered.subworkflows if r.queued) == 5
    for row in lowered.subworkflows[:4]:
        await engine.fire_action(row.child_id, "task", "finish")
        assert len(await live_children(engine, p.id_)) == 4 - lowered.subworkflows.index(row)
    assert sum(1 for r in (await engine.get_instance(p.id_)).subworkflows if r.queued) == 5
    await engine.fire_action(lowered.subworkflows[4].child_id, "task", "finish")
    after = await engine.get_instance(p.id_)
    assert sum(1 for r in after.subworkflows if r.queued) == 4  # one place: one start
    assert len(await live_children(engine, p.id_)) == 1
    assert after.cohorts and after.cohorts[0].maxActive == 1


async def test_update_cohort_refuses_an_activity_that_never_spawned(engine: Engine) -> None:
    p = await into_review(engine, NAMES[:2])
    with pytest.raises(CohortNotFound) as refused:
        await engine.update_cohort(p.id_, "edit", max_active=4)
    assert refused.value.code == "cohort-not-found"
    assert refused.value.details == {"parentId": p.id_, "activity": "edit"}


@pytest.mark.parametrize("bad", [0, -2, 2.5, "3", True])
async def test_deploy_refuses_a_window_that_is_not_a_positive_integer(
        engine: Engine, bad: Any) -> None:
    with pytest.raises(DefinitionInvalid) as refused:
        await engine.deploy([windowed(bad), child()])
    assert any("maxActive" in str(issue) for issue in refused.value.details["issues"])


async def test_leaving_the_stage_with_on_exit_abort_skips_queued_rows(engine: Engine) -> None:
    await engine.deploy([windowed(1, on_exit="abort"), child()])
    started = await engine.start_instance("p", fields=items(*NAMES[:3]))
    p = (await engine.fire_action(started.instance.id_, "go", "go")).instance
    left = await engine.set_stage(p.id_, "elsewhere")
    rows = left.instance.subworkflows
    assert [r.resolved is not None and r.resolved.aborted for r in rows] == [True] * 3
    assert [r.resolved.detail for r in rows[1:]] == ["queued-skipped"] * 2  # type: ignore
    assert len(await engine.lake.find({"_type": "kinflow.instance",
                                       "parentInstance": p.id_})) == 1


async def test_the_canonical_settled_condition_waits_for_queued_rows(engine: Engine) -> None:
    definition = windowed(2)
    gate = definition["stages"][1]["activities"][0]["actions"][-1]
    gate["when"] = SETTLED  # counts only "active" rows: queued ones must not let it fire
    await engine.deploy([definition, child()])
    started = await engine.start_instance("p", fields=items(*NAMES[:5]))
    p = (await engine.fire_action(started.instance.id_, "go", "go")).instance
    for index in range(5):
        assert (await engine.get_instance(p.id_)).currentStage == "review"
        row = (await engine.get_instance(p.id_)).subworkflows[index]
        await engine.fire_action(row.child_id, "task", "finish")
    assert (await engine.get_instance(p.id_)).currentStage == "next"


async def test_on_exit_detach_keeps_the_window_running(engine: Engine) -> None:
    p = await into_review(engine, NAMES[:4], max_active=1)
    await engine.set_stage(p.id_, "elsewhere")
    for index in range(4):
        left = await engine.get_instance(p.id_)
        assert [bool(r.queued) for r in left.subworkflows] == [i > index for i in range(4)]
        await engine.fire_action(left.subworkflows[index].child_id, "task", "finish")
    final = await engine.get_instance(p.id_)
    assert all(r.resolved is not None and not r.resolved.aborted for r in final.subworkflows)


async def test_two_engines_finishing_children_at_once_never_overfill(engine: Engine) -> None:
    names = [f"w{i:02d}" for i in range(16)]
    p = await into_review(engine, names, max_active=6)
    other = Engine(engine.lake, clock=engine.clock)  # a second worker process's engine
    await other.ensure_ready()
    finished = 0
    while finished < len(names):
        live = await live_children(engine, p.id_)
        assert 0 < len(live) <= 6
        await asyncio.gather(*(
            (engine if n % 2 else other).fire_action(c["_id"], "task", "finish")
            for n, c in enumerate(live)))
        finished += len(live)
        for built in (engine, other):
            await built.driver.propagator.idle()
        assert len(await live_children(engine, p.id_)) <= 6
    final = await engine.get_instance(p.id_)
    assert all(r.resolved is not None for r in final.subworkflows)
    await assert_repaired(engine)


async def test_a_raise_beyond_the_transaction_limit_materialises_the_rest(
        engine: Engine) -> None:
    from kinflow.engine import Limits

    small = Engine(engine.lake, clock=engine.clock, limits=Limits(spawn_txn=2))
    p = await into_review(small, NAMES[:8], max_active=1)
    small.faults.arm("mid-materialise")
    with pytest.raises(InjectedFault):
        await small.update_cohort(p.id_, "translate", max_active=8)
    left = await small.get_instance(p.id_)
    assert left.materialising and not any(r.queued for r in left.subworkflows)
    assert len(await live_children(small, p.id_)) < 8
    report = await Worker(small, grace_seconds=0).run_pass()
    assert ("materialise", p.id_) in report.processed and not report.failed
    assert len(await live_children(small, p.id_)) == 8
    await assert_repaired(small)
