"""Retention: whole finished families are purged, never one with a live member."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kinflow.core.retention import PURGE_MARKER, PurgeFilter
from kinflow.core.state import INSTANCE_TYPE
from kinflow.engine import Engine
from kinflow.engine.retention import Purger
from kinflow.gdr import format_gdr
from kinflow.storage.database import side_name
from kinflow.timestamps import iso
from kinflow.worker import PassReport, Worker
from tests.engine.conftest import Clock
from tests.engine.retention_defs import family

pytestmark = pytest.mark.lake
INSTANCES = {"_type": INSTANCE_TYPE}


async def _members(engine: Engine, root: str, definition: str) -> list[str]:
    docs = await engine.lake.find({**INSTANCES, "definition": definition,
                                   "ancestors.id": format_gdr(engine.dataset, root)},
                                  dataset=engine.dataset, projection={"_id": 1})
    return sorted(str(d["_id"]) for d in docs)


async def _start(engine: Engine, root: str = "root") -> tuple[str, list[str], list[str]]:
    """A root with its children and grandchildren, all live."""
    rid = (await engine.start_instance(root)).instance.id_
    return (rid, await _members(engine, rid, f"{root}-mid"),
            await _members(engine, rid, f"{root}-leaf"))


async def _finish(engine: Engine, *ids: str) -> None:
    for iid in ids:
        result = await engine.fire_action(iid, "task", "finish")
        assert result.instance.completedAt is not None


async def _count(engine: Engine) -> int:
    return await engine.lake.count(INSTANCES, dataset=engine.dataset)


async def _pass(worker: Worker) -> PassReport:
    report = await worker.run_pass()
    assert report.purged is not None
    return report


def _worker(engine: Engine, **kwargs: Any) -> Worker:
    return Worker(engine, worker_id="w", grace_seconds=0, retention_interval=0, **kwargs)


async def test_a_detached_grandchild_still_running_keeps_its_whole_family(
        engine: Engine, clock: Clock) -> None:
    await engine.deploy(family(retention=1))
    rid, mids, leaves = await _start(engine)
    assert len(mids) == 1 and len(leaves) == 1
    await _finish(engine, rid, *mids)  # the grandchild, detached, still runs
    clock.advance(days=3)
    patient = _worker(engine)  # a family just kept is looked at again only minutes later
    assert [(await _pass(patient)).purged.kept for _ in range(2)] == [1, 0]  # type: ignore[union-attr]
    worker = _worker(engine)
    worker.purger.recheck_kept = 0
    for _ in range(2):
        report = await _pass(worker)
        assert report.purged and report.purged.roots == 0 and report.purged.kept == 1
    assert await _count(engine) == 3
    await _finish(engine, *leaves)  # the last member finished just now: a day to go
    report = await _pass(worker)
    assert report.purged and report.purged.roots == 0 and report.purged.kept == 1
    clock.advance(days=1, hours=1)
    report = await _pass(worker)
    assert report.purged and (report.purged.roots, report.purged.instances) == (1, 3)
    assert await _count(engine) == 0
    rows = side_name(engine.dataset, "rows")
    assert await engine.lake.count({"parent": {"$in": [rid, *mids]}}, dataset=rows) == 0


async def test_a_root_is_purged_only_once_its_retention_ran_out(engine: Engine,
                                                                clock: Clock) -> None:
    await engine.deploy(family(retention=2))
    rid, mids, leaves = await _start(engine)
    await _finish(engine, *leaves, *mids, rid)
    worker = _worker(engine)
    clock.advance(days=1, hours=23)
    assert (await _pass(worker)).purged == _nothing()
    clock.advance(hours=2)
    assert (await _pass(worker)).purged.roots == 1  # type: ignore[union-attr]
    assert await _count(engine) == 0


def _nothing() -> Any:
    from kinflow.core.retention import PurgeCounts
    return PurgeCounts(dry_run=False)


async def test_retention_days_of_a_definition_override_the_setting(engine: Engine,
                                                                   clock: Clock) -> None:
    await engine.deploy([*family("kept-long", retention=30), *family("by-setting"),
                         *family("kept-short", retention=1)])
    finished = {}
    for root in ("kept-long", "by-setting", "kept-short"):
        rid, mids, leaves = await _start(engine, root)
        await _finish(engine, *leaves, *mids, rid)
        finished[root] = rid
    clock.advance(days=5)
    report = await _pass(_worker(engine, retention_days=3))
    assert report.purged is not None and report.purged.roots == 2
    left = await engine.lake.find({**INSTANCES, "ancestors": []}, dataset=engine.dataset)
    assert [d["_id"] for d in left] == [finished["kept-long"]]
    # without the setting a definition's own retention still applies; others are kept
    await engine.deploy(family("unset"))
    rid, mids, leaves = await _start(engine, "unset")
    await _finish(engine, *leaves, *mids, rid)
    clock.advance(days=26)
    report = await _pass(_worker(engine))
    assert report.purged is not None and report.purged.roots == 1
    left = await engine.lake.find({**INSTANCES, "ancestors": []}, dataset=engine.dataset)
    assert [d["_id"] for d in left] == [rid]


@pytest.mark.parametrize("point", ["purge-after-marker", "purge-mid-family"])
async def test_an_interrupted_purge_is_finished_by_the_next_pass(
        engine: Engine, clock: Clock, point: str) -> None:
    await engine.deploy(family(retention=1, rows="['a', 'b', 'c']"))
    rid, mids, leaves = await _start(engine)
    assert len(mids) == 3 and len(leaves) == 9
    await _finish(engine, *leaves, *mids, rid)
    clock.advance(days=2)
    worker = _worker(engine)
    worker.purger.batch = 4  # several batches, so mid-family leaves a half family
    engine.faults.arm(point)
    report = await worker.run_pass()
    assert [kind for kind, _, _ in report.failed] == ["retention"]
    # in between: the root carries the marker; what is left is all finished
    root = await engine.lake.get(rid, dataset=engine.dataset)
    assert root is not None and root[PURGE_MARKER] == iso(clock())
    left = await engine.lake.find(INSTANCES, dataset=engine.dataset)
    assert left and all(doc["completedAt"] for doc in left)
    assert len(left) == (13 if point == "purge-after-marker" else 13 - 4)
    for doc in left:  # no member reads as live
        assert (await engine.get_instance(doc["_id"])).terminal
    report = await _pass(worker)
    assert not report.failed and report.purged is not None
    assert (report.purged.roots, report.purged.instances) == (1, len(left))  # what was left
    assert await _count(engine) == 0


async def test_a_dry_run_changes_nothing_and_counts_what_a_purge_removes(
        engine: Engine, clock: Clock) -> None:
    await engine.deploy([*family(), *family("other")])
    rid, mids, leaves = await _start(engine)
    await _finish(engine, *leaves, *mids, rid)
    live, _, _ = await _start(engine)  # a live family is never counted
    oid, omids, _ = await _start(engine, "other")
    await _finish(engine, *omids, oid)  # its grandchild still runs
    clock.advance(days=1)
    purger = Purger(engine.lake, engine.dataset)
    before = await engine.lake.find({}, dataset=engine.dataset)
    where = PurgeFilter(finished_before=iso(clock()))
    dry = await purger.purge(where, clock(), dry_run=True)
    assert (dry.dry_run, dry.roots, dry.instances, dry.kept) == (True, 1, 3, 1)
    assert await engine.lake.find({}, dataset=engine.dataset) == before
    assert (await purger.purge(PurgeFilter(finished_before=iso(clock()), definition="other"),
                               clock())).roots == 0
    done = await purger.purge(where, clock(), dry_run=False)
    assert (done.dry_run, done.roots, done.instances) == (False, 1, 3)
    assert await _count(engine) == 3 + 3  # the live family and the one with a live grandchild
    assert await engine.lake.get(live, dataset=engine.dataset) is not None


async def test_an_explicit_purge_selects_by_root_ids_and_finish_time(engine: Engine,
                                                                     clock: Clock) -> None:
    await engine.deploy(family())
    first, mids, leaves = await _start(engine)
    await _finish(engine, *leaves, *mids, first)
    boundary = iso(clock())
    clock.advance(hours=1)
    second, mids2, leaves2 = await _start(engine)
    await _finish(engine, *leaves2, *mids2, second)
    clock.advance(hours=1)
    purger = Purger(engine.lake, engine.dataset)
    late = PurgeFilter(finished_before=boundary)  # strictly before: neither finished earlier
    assert (await purger.purge(late, clock())).roots == 0
    now = iso(clock())
    only = PurgeFilter(finished_before=now, root_ids=(second, mids[0]))  # a child is no root
    counts = await purger.purge(only, clock(), dry_run=False)
    assert (counts.roots, counts.instances) == (1, 3)
    assert await engine.lake.get(first, dataset=engine.dataset) is not None


async def test_a_family_is_due_days_after_its_last_member_finished(engine: Engine,
                                                                   clock: Clock) -> None:
    """A detached grandchild that finished yesterday keeps a root that finished 40 days ago."""
    await engine.deploy(family(retention=30))
    rid, mids, leaves = await _start(engine)
    await _finish(engine, rid, *mids)
    clock.advance(days=40)
    await _finish(engine, *leaves)
    clock.advance(days=1)
    worker = _worker(engine)
    worker.purger.recheck_kept = 0
    report = await _pass(worker)
    assert report.purged and report.purged.roots == 0 and report.purged.kept == 1
    purger = Purger(engine.lake, engine.dataset)
    ten_days_in = iso(clock() - timedelta(days=31))  # after the root, before the grandchild
    explicit = await purger.purge(PurgeFilter(finished_before=ten_days_in), clock())
    assert (explicit.roots, explicit.kept) == (0, 1)  # an explicit purge follows the same rule
    clock.advance(days=29, hours=1)
    report = await _pass(worker)
    assert report.purged and (report.purged.roots, report.purged.instances) == (1, 3)


async def test_a_held_family_is_kept_whatever_its_age_until_released(engine: Engine,
                                                                     clock: Clock) -> None:
    await engine.deploy(family(retention=1))
    rid, mids, leaves = await _start(engine)
    await _finish(engine, *leaves, *mids, rid)
    purger = Purger(engine.lake, engine.dataset)
    root = await purger.hold(rid, "legal hold 2026-17", "ada", clock())
    assert root["retentionHold"] == {"reason": "legal hold 2026-17", "by": "ada",
                                     "at": iso(clock())}
    clock.advance(days=400)
    worker = _worker(engine)
    worker.purger.recheck_kept = 0
    report = await _pass(worker)
    assert report.purged and report.purged.roots == 0 and report.purged.held == 1
    dry = await purger.purge(PurgeFilter(finished_before=iso(clock())), clock())
    assert (dry.roots, dry.held) == (0, 1)
    forced = await purger.purge(PurgeFilter(finished_before=iso(clock()), root_ids=(rid,)),
                                clock(), dry_run=False)
    assert (forced.roots, forced.held) == (0, 1) and await _count(engine) == 3
    released = await purger.release(rid)
    assert "retentionHold" not in released
    report = await _pass(worker)
    assert report.purged and (report.purged.roots, report.purged.instances) == (1, 3)


async def test_a_hold_names_a_root_and_never_lands_on_a_purge_under_way(engine: Engine,
                                                                        clock: Clock) -> None:
    from kinflow.core.errors import InstanceNotFound
    from kinflow.engine.retention import FamilyBeingPurged
    from kinflow.errors import InvalidInput

    await engine.deploy(family(retention=1))
    rid, mids, _leaves = await _start(engine)
    purger = Purger(engine.lake, engine.dataset)
    with pytest.raises(InvalidInput):
        await purger.hold(mids[0], "not a root", "ada", clock())
    with pytest.raises(InstanceNotFound):
        await purger.hold("instance.nobody-here", "missing", "ada", clock())
    await engine.lake.update(rid, {"$set": {PURGE_MARKER: iso(clock())}},
                             dataset=engine.dataset)  # a purge's first step
    with pytest.raises(FamilyBeingPurged):
        await purger.hold(rid, "too late", "ada", clock())
