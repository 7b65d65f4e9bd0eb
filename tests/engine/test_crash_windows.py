"""A spawn's crash windows 1-6: fail at the exact step, run one heartbeat pass.

The windows and their fault points: docs/subworkflows.md#crash-repair.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kinflow.core.errors import InjectedFault
from kinflow.define.loading import load_definitions
from kinflow.engine import Engine
from kinflow.worker import Worker
from tests.engine.cohort_defs import child, items, parent
from tests.engine.definitions import ARTICLE_REVIEW, TRANSLATE_ARTICLE
from tests.engine.invariants import all_instances, assert_repaired

pytestmark = pytest.mark.lake
RELEASE = Path(__file__).resolve().parents[2] / "examples" / "definitions" / "release.yaml"


async def heartbeat(engine: Engine) -> None:
    engine.faults.disarm()
    report = await Worker(engine, grace_seconds=0).run_pass()
    assert not report.failed, report.failed


async def canonical(engine: Engine, locales: list[str]) -> str:
    await engine.lake.create({"_id": "article-1", "_type": "article", "locales": locales})
    await engine.deploy([ARTICLE_REVIEW, TRANSLATE_ARTICLE])
    started = await engine.start_instance("article-review", fields={"subject": "article-1"})
    return started.instance.id_


async def release_tree(engine: Engine) -> str:
    await engine.lake.create({"_id": "rel-1", "_type": "release"})
    for n, locales in enumerate([["de", "fr"], ["es"]]):
        await engine.lake.create({"_id": f"art-{n}", "_type": "article", "release": "rel-1",
                                  "locales": locales})
    await engine.deploy([*load_definitions(RELEASE), TRANSLATE_ARTICLE])
    return "rel-1"


async def test_window_1_crash_before_the_spawn_commit(engine: Engine) -> None:
    iid = await canonical(engine, ["de", "fr", "es"])
    engine.faults.arm("before-spawn-commit")
    with pytest.raises(InjectedFault):
        await engine.fire_action(iid, "write", "submit")
    left = await engine.get_instance(iid)
    assert left.currentStage == "review" and left.subworkflows == []
    assert await engine.lake.count({"parentInstance": iid}) == 0
    await heartbeat(engine)
    instances = await assert_repaired(engine)
    assert sorted(r.rowKey for r in instances[iid].subworkflows) == ["de", "es", "fr"]


async def test_window_2_crash_after_the_spawn_commit(engine: Engine) -> None:
    await engine.deploy([parent(), child(auto=True)])
    started = await engine.start_instance("p", fields=items("a", "b", "c"))
    engine.faults.arm("after-spawn-commit")
    with pytest.raises(InjectedFault):
        await engine.fire_action(started.instance.id_, "go", "go")
    await heartbeat(engine)
    instances = await assert_repaired(engine)
    assert instances[started.instance.id_].currentStage == "next"
    assert len(instances) == 4


async def test_window_3_crash_before_a_child_first_cascade(engine: Engine) -> None:
    await release_tree(engine)
    engine.faults.arm("before-child-settle")
    with pytest.raises(InjectedFault):
        await engine.start_instance("release", fields={"subject": "rel-1"})
    before = await all_instances(engine)
    assert sum(1 for i in before.values() if i.definition == "translate-article") == 0
    await heartbeat(engine)
    instances = await assert_repaired(engine)
    grandchildren = [i for i in instances.values() if i.definition == "translate-article"]
    assert sorted(i.fields[0].value for i in grandchildren) == ["de", "es", "fr"]


async def test_window_4_crash_after_settling_before_the_parent_stamp(engine: Engine) -> None:
    await release_tree(engine)
    engine.faults.arm("before-batch-stamp")
    with pytest.raises(InjectedFault):
        await engine.start_instance("release", fields={"subject": "rel-1"})
    started = next(i for i in (await all_instances(engine)).values()
                   if i.definition == "release")
    left = await engine.get_instance(started.id_)
    assert all(r.observed.stage == "review" for r in left.subworkflows)  # type: ignore[union-attr]
    await heartbeat(engine)
    await assert_repaired(engine)


async def test_window_5_crash_after_a_child_commit_before_propagation(engine: Engine) -> None:
    iid = await canonical(engine, ["de", "fr"])
    await engine.fire_action(iid, "write", "submit")
    rows = (await engine.get_instance(iid)).subworkflows
    await engine.fire_action(rows[0].child_id, "translate", "submit")
    engine.faults.arm("before-propagation")
    with pytest.raises(InjectedFault):
        await engine.fire_action(rows[1].child_id, "translate", "submit")
    left = await engine.get_instance(iid)
    assert left.subworkflows[1].resolved is None
    await heartbeat(engine)
    instances = await assert_repaired(engine)
    assert instances[iid].open_entry().activity("translate").status == "done"  # type: ignore


async def test_window_6_crash_after_condemning_before_the_drain(engine: Engine) -> None:
    iid = await canonical(engine, ["de", "fr"])
    await engine.fire_action(iid, "write", "submit")
    engine.faults.arm("before-drain")
    with pytest.raises(InjectedFault):
        await engine.fire_action(iid, "approve", "reject")
    left = await engine.get_instance(iid)
    assert left.owesAborts and all(r.abortPending for r in left.subworkflows)
    await heartbeat(engine)
    instances = await assert_repaired(engine)
    assert all(instances[r.child_id].abortedAt for r in instances[iid].subworkflows)


async def test_abort_crash_before_the_drain_is_finished_by_the_heartbeat(engine: Engine) -> None:
    iid = await canonical(engine, ["de", "fr"])
    await engine.fire_action(iid, "write", "submit")
    engine.faults.arm("before-drain")
    with pytest.raises(InjectedFault):
        await engine.abort_instance(iid)
    await heartbeat(engine)
    instances = await assert_repaired(engine)
    assert all(i.abortedAt for i in instances.values())


async def test_a_cohort_beyond_the_transaction_limit_materialises_in_batches(
        engine: Engine) -> None:
    from kinflow.engine import Limits

    small = Engine(engine.lake, clock=engine.clock, limits=Limits(spawn_txn=2))
    await small.deploy([parent(), child()])
    started = await small.start_instance("p", fields=items("a", "b", "c", "d", "e"))
    moved = await small.fire_action(started.instance.id_, "go", "go")
    assert len(moved.instance.subworkflows) == 5
    assert await small.lake.count({"parentInstance": started.instance.id_}) == 5
    left = await small.get_instance(started.instance.id_)
    # rows keep their seeds (read only while ``materialising`` is set: engine/materialise.py)
    assert not left.materialising and all(r.seed is not None for r in left.subworkflows[2:])


async def test_a_crash_mid_materialisation_is_finished_by_the_heartbeat(engine: Engine) -> None:
    from kinflow.engine import Limits

    small = Engine(engine.lake, clock=engine.clock, limits=Limits(spawn_txn=2))
    await small.deploy([parent(), child()])
    started = await small.start_instance("p", fields=items("a", "b", "c", "d", "e"))
    small.faults.arm("mid-materialise")
    with pytest.raises(InjectedFault):
        await small.fire_action(started.instance.id_, "go", "go")
    assert await small.lake.count({"parentInstance": started.instance.id_}) == 4
    left = await small.get_instance(started.instance.id_)
    assert left.materialising and all(r.seed is not None for r in left.subworkflows)
    report = await Worker(small, grace_seconds=0).run_pass()
    assert ("materialise", started.instance.id_) in report.processed and not report.failed
    assert await small.lake.count({"parentInstance": started.instance.id_}) == 5
    await assert_repaired(small)
