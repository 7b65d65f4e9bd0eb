"""A cohort parent kept parsed between rounds is never planned from a stale copy."""

from __future__ import annotations

import asyncio
from typing import Any

from kinflow.engine import Engine
from kinflow.storage import Lake
from tests.engine.cohort_defs import child, items, parent
from tests.engine.conftest import Clock

SIZE = 300  # rows + their spawned history: a heavy instance (kept between commits)


async def test_a_kept_parent_is_read_again_after_another_process_wrote_it(
        lake: Lake, clock: Clock) -> None:
    here, elsewhere = Engine(lake, clock=clock), Engine(lake, clock=clock)
    await here.ensure_ready()
    await here.deploy([child(), parent()])
    names = [f"row-{n:03d}" for n in range(SIZE)]
    started = await here.start_instance("p", fields=items(*names))
    parent_id = started.instance.id_
    spawned = await here.fire_action(parent_id, "go", "go")
    children = [row.child_id for row in spawned.instance.subworkflows]
    assert len(children) == SIZE

    await here.fire_action(children[0], "task", "finish")  # a round here keeps the parent
    await here.maintenance.settle_propagation()
    assert parent_id in here.transact.kept

    edited = ["row-000", "edited"]  # another process writes the parent meanwhile
    await elsewhere.edit_field(parent_id, "items", [{"name": n} for n in edited])

    await here.fire_action(children[1], "task", "finish")
    await here.maintenance.settle_propagation()
    stored = await here.get_instance(parent_id)
    value = next(f.value for f in stored.fields if f.name == "items")
    assert [entry["name"] for entry in value] == edited  # not reverted by a stale copy
    resolved = {row.child_id for row in stored.subworkflows if row.resolved is not None}
    assert {children[0], children[1]} <= resolved


async def test_the_heartbeat_leaves_alone_a_spawn_this_process_is_materialising(
        lake: Lake, clock: Clock) -> None:
    """A large spawn outlives the heartbeat's grace period; the worker must not redo it."""
    from kinflow.engine import Limits
    from kinflow.worker import Worker

    engine = Engine(lake, clock=clock, limits=Limits(spawn_txn=2))
    await engine.ensure_ready()
    await engine.deploy([parent(), child()])
    started = await engine.start_instance("p", fields=items("a", "b", "c", "d", "e"))
    parent_id = started.instance.id_
    held, release = asyncio.Event(), asyncio.Event()
    insert = engine.materialiser.insert
    built: list[str] = []

    async def slow_insert(documents: list[dict[str, Any]]) -> None:
        built.extend(str(d["_id"]) for d in documents)
        held.set()
        await release.wait()  # the spawn's batches take longer than the grace period
        await insert(documents)

    engine.materialiser.insert = slow_insert  # type: ignore[method-assign]
    spawning = asyncio.create_task(engine.fire_action(parent_id, "go", "go"))
    await asyncio.wait_for(held.wait(), 30)
    # before: the pass rebuilt the children itself (and here waited on the held batch)
    report = await asyncio.wait_for(Worker(engine, grace_seconds=0).run_pass(), 10)
    assert ("materialise", parent_id) not in report.processed
    assert len(built) == len(set(built))  # no child was built a second time
    release.set()
    await spawning
    assert await lake.count({"parentInstance": parent_id}) == 5
    assert not (await engine.get_instance(parent_id)).materialising


async def test_a_parent_stays_kept_when_its_spawn_materialises_children_after_its_commit(
        lake: Lake, clock: Clock) -> None:
    """Clearing ``materialising`` after a large spawn renews the parent's ``_rev``; the
    process keeps its copy valid instead of reading every row again at the next commit
    (a registering cohort did so at every batch: its commits grew with its rows)."""
    from kinflow.engine import Limits

    engine = Engine(lake, clock=clock, limits=Limits(spawn_txn=2))
    await engine.ensure_ready()
    await engine.deploy([parent(), child()])
    started = await engine.start_instance("p", fields=items("a", "b", "c", "d", "e"))
    parent_id = started.instance.id_
    spawned = await engine.fire_action(parent_id, "go", "go")
    children = [row.child_id for row in spawned.instance.subworkflows]
    assert await lake.count({"parentInstance": parent_id}) == 5  # 3 made after the commit
    stored = await engine.document(parent_id)
    assert stored is not None and not stored.get("materialising")
    kept = engine.transact.kept[parent_id]
    assert kept.rev_ == stored["_rev"] and not kept.materialising

    attach = engine.transact.rows.attach
    reads: list[str] = []

    async def counted(state: Any, session: Any = None) -> Any:
        reads.append(state.id_)
        return await attach(state, session)

    engine.transact.rows.attach = counted  # type: ignore[method-assign]
    await engine.fire_action(children[0], "task", "finish")
    await engine.maintenance.settle_propagation()
    assert parent_id not in reads  # the round planned on the kept copy
    stamped = await engine.get_instance(parent_id)
    assert stamped.subworkflows[0].resolved is not None
    assert not stamped.materialising


async def test_a_kept_parents_commit_runs_with_the_cyclic_collector_held_off(
        lake: Lake, clock: Clock) -> None:
    """engine/collector.py: a commit on a kept parent holds the collector off (a full pass
    would walk every row the copy holds) and turns it on again, refused or not; a commit of
    an instance not kept leaves it alone."""
    import gc

    from kinflow.core import verbs
    from kinflow.core.context import Actor
    from kinflow.core.errors import KinflowError

    engine = Engine(lake, clock=clock)
    await engine.ensure_ready()
    await engine.deploy([child(), parent()])
    started = await engine.start_instance("p", fields=items("a", "b", "c"))
    parent_id = started.instance.id_
    children = [r.child_id for r in (await engine.fire_action(parent_id, "go", "go"))
                .instance.subworkflows]
    await engine.get_instance(parent_id)
    assert parent_id in engine.transact.kept and children[0] not in engine.transact.kept
    planned: dict[str, bool] = {}

    def looking(state: Any, ctx: Any) -> Any:
        planned[state.id_] = gc.isenabled()
        return verbs.plan_hop(state, ctx)

    def refusing(state: Any, ctx: Any) -> Any:
        planned["refused"] = gc.isenabled()
        raise KinflowError("refused here", code="action-disabled")

    assert gc.isenabled()
    for target in (parent_id, children[0]):
        await engine.transact.commit(target, looking, verb="look", actor=Actor.system())
        assert gc.isenabled()
    assert planned == {parent_id: False, children[0]: True}
    try:
        await engine.transact.commit(parent_id, refusing, verb="look", actor=Actor.system())
    except KinflowError:
        pass
    assert planned["refused"] is False and gc.isenabled()
