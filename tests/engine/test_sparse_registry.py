"""A parent past ``Limits.sparse_rows`` rows loads without its rows (core/cohort/sparse.py),
on the embedded lake: the threshold is lowered to 64 rows and a commit may read at most a
handful of chunks, so any commit that walked the whole registry would be refused
(``registry-too-large``) instead of passing.

docs/subworkflows.md#large-parents-without-their-rows-in-memory
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest

from kinflow.core.cohort import sparse, tallies
from kinflow.core.cohort.selection import CohortFilter
from kinflow.core.errors import KinflowError
from kinflow.core.state import Instance
from kinflow.engine import Engine
from kinflow.worker import Worker
from tests.engine.cohort_defs import child, parent, with_item, with_window
from tests.engine.conftest import Clock
from tests.engine.outcome_defs import worker

pytestmark = pytest.mark.lake

SETTLED = "$cohort.settled"
ROWS = 200  # 7 chunks
WINDOW = 6


def sparse_engine(engine: Engine, *, chunks: int = 5) -> Engine:
    """Rows 64 and up load sparse; a commit reads at most ``chunks`` chunks."""
    return Engine(engine.lake, clock=engine.clock, limits=dataclasses.replace(
        engine.limits, registration_batch=40, sparse_rows=64, sparse_chunks=chunks))


def definition(window: int = WINDOW, **spawn: Any) -> dict[str, Any]:
    made = with_window(with_item(parent("*[_type == 'item']{_id}", settled=SETTLED),
                                 "$row._id"), window)
    for stage in made["stages"]:
        for activity in stage.get("activities") or []:
            for action in activity["actions"]:
                if "spawn" in action:
                    action["spawn"].update(spawn)
    return made


NAMES = [f"item-{n:03d}" for n in range(ROWS)]


async def started(engine: Engine, parent_def: dict[str, Any] | None = None,
                  names: list[str] = NAMES, child_def: dict[str, Any] | None = None) -> str:
    await engine.deploy([parent_def or definition(), child_def or child()])
    for name in names:
        await engine.lake.create({"_id": name, "_type": "item"})
    p = await engine.start_instance("p")
    await engine.fire_action(p.instance.id_, "go", "go")
    await engine.registrar.idle()
    while (await engine.maintenance.finish_registration(p.instance.id_)) > 0:
        pass
    return p.instance.id_


async def live_children(engine: Engine, parent_id: str) -> list[str]:
    found = await engine.lake.find({"_type": "kinflow.instance", "parentInstance": parent_id,
                                    "completedAt": {"$exists": False}})
    return sorted(str(doc["_id"]) for doc in found)


async def finish_all(engine: Engine, parent_id: str, *, rounds: int = 200) -> None:
    """Finish live children until the parent leaves its stage."""
    for _ in range(rounds):
        await engine.driver.propagator.idle()
        if (await engine.document(parent_id) or {}).get("currentStage") == "next":
            return
        live = await live_children(engine, parent_id)
        assert live, "rows wait but no child is live"
        for child_id in live:
            await engine.fire_action(child_id, "task", "finish")
    raise AssertionError("the cohort did not settle")


def held(engine: Engine, parent_id: str) -> dict[int, Any]:
    kept = engine.transact.kept.get(parent_id)
    assert kept is not None and sparse.is_sparse(kept)
    return sparse.rows_of(kept).held


def stamped_once(p: Instance) -> None:
    resolved = Counter((e.get("instanceRef") or {}).get("id") for e in p.history
                       if e.get("_type") == "subworkflowResolved")
    assert set(resolved.values()) == {1}
    assert len(resolved) == len(p.subworkflows)


async def test_a_windowed_cohort_runs_to_completion_reading_a_few_chunks_per_commit(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse, "KEPT_CHUNKS", 3)  # of 7: the kept state is bounded
    engine = sparse_engine(engine, chunks=3)  # and a commit that walked them is refused
    pid = await started(engine)
    stored = await engine.document(pid)
    assert stored is not None and stored["rowCount"] == ROWS and stored["historyCount"] > ROWS
    assert len(held(engine, pid)) <= sparse.KEPT_CHUNKS
    assert len(await live_children(engine, pid)) == WINDOW
    await finish_all(engine, pid)
    p = await engine.get_instance(pid)
    assert [r.rowKey for r in p.subworkflows] == NAMES
    assert all(r.resolved is not None and r.outcome == "succeeded" for r in p.subworkflows)
    stamped_once(p)
    assert sum(1 for e in p.history if e.get("_type") == "spawned") == ROWS
    assert len(held(engine, pid)) <= sparse.KEPT_CHUNKS  # the process keeps a few chunks
    stored = await engine.document(pid)
    assert stored is not None
    counts = tallies.counts(tallies.find(stored["cohortRows"], "translate", None))
    assert (counts.total, counts.done) == (ROWS, ROWS)


async def test_children_know_their_row(engine: Engine) -> None:
    engine = sparse_engine(engine)
    pid = await started(engine)
    p = await engine.get_instance(pid)
    for child_id in await live_children(engine, pid):
        doc = await engine.document(child_id)
        assert doc is not None
        assert p.subworkflows[doc["rowPlace"]].child_id == child_id


async def test_a_walk_of_every_row_past_the_commit_bound_is_refused(engine: Engine) -> None:
    pid = await started(sparse_engine(engine))
    other = sparse_engine(engine, chunks=3)  # a process that kept nothing of the parent
    state = await other.transact.load(pid, None)
    with pytest.raises(KinflowError) as refused:  # a shell walk (an older parent's drain)
        await other.transact.walkable(state)
    assert refused.value.code == "registry-too-large"
    assert refused.value.details["limit"] == 3


async def test_abort_cascades_on_a_sparse_parent(engine: Engine) -> None:
    engine = sparse_engine(engine, chunks=320)
    pid = await started(engine)
    await engine.abort_instance(pid)
    p = await engine.get_instance(pid)
    assert p.abortedAt is not None
    assert all(r.resolved is not None for r in p.subworkflows)
    assert not await live_children(engine, pid)


async def test_pause_resume_and_a_wider_window_on_a_sparse_parent(engine: Engine) -> None:
    engine = sparse_engine(engine)
    pid = await started(engine)
    await engine.pause_cohort(pid, "translate")
    for child_id in await live_children(engine, pid):
        await engine.fire_action(child_id, "task", "finish")
    await engine.driver.propagator.idle()
    assert not await live_children(engine, pid)  # paused: nothing started
    await engine.resume_cohort(pid, "translate")
    assert len(await live_children(engine, pid)) == WINDOW
    await engine.update_cohort(pid, "translate", max_active=WINDOW + 10)
    assert len(await live_children(engine, pid)) == WINDOW + 10
    await finish_all(engine, pid)
    stamped_once(await engine.get_instance(pid))


async def test_redrive_and_bulk_abort_on_a_sparse_parent(engine: Engine) -> None:
    engine = sparse_engine(engine, chunks=320)
    pid = await started(engine)
    first = await live_children(engine, pid)
    await engine.abort_instance(first[0])
    await engine.driver.propagator.idle()
    result = await engine.redrive_cohort(pid, "translate",
                                         where=CohortFilter(status=("aborted",)))
    assert result.applied == 1
    ended = await engine.abort_cohort(pid, "translate", where=CohortFilter(status=("queued",)))
    assert ended.applied == ROWS - WINDOW  # every queued row, the redriven one among them
    await finish_all(engine, pid)
    p = await engine.get_instance(pid)
    assert all(r.resolved is not None for r in p.subworkflows)


async def beat(engine: Engine) -> None:
    report = await Worker(engine, grace_seconds=0).run_pass()
    assert not report.failed, report.failed


async def test_deadlines_time_out_children_of_a_sparse_parent(engine: Engine,
                                                               clock: Clock) -> None:
    engine = sparse_engine(engine, chunks=320)
    pid = await started(engine, definition(childTimeoutSeconds=60))
    first = await live_children(engine, pid)
    clock.advance(seconds=61)
    await beat(engine)
    await engine.driver.propagator.idle()
    p = await engine.get_instance(pid)
    timed = [r for r in p.subworkflows if r.outcome == "timed-out"]
    assert sorted(r.child_id for r in timed) == first
    assert len(await live_children(engine, pid)) == WINDOW  # the next rows started


async def test_a_quorum_completes_a_sparse_cohort(engine: Engine) -> None:
    engine = sparse_engine(engine, chunks=320)
    pid = await started(engine, definition(completeWhen="$cohort.succeeded >= 3"))
    for child_id in (await live_children(engine, pid))[:3]:
        await engine.fire_action(child_id, "task", "finish")
    await engine.driver.propagator.idle()
    await beat(engine)
    p = await engine.get_instance(pid)
    assert sum(1 for r in p.subworkflows if r.outcome == "succeeded") == 3
    assert all(r.resolved is not None for r in p.subworkflows)
    assert p.currentStage == "next"


async def test_a_failed_attempt_is_retried_on_a_sparse_parent(engine: Engine) -> None:
    engine = sparse_engine(engine)
    pid = await started(engine, definition(retry={"attempts": 2}), child_def=worker())
    first = (await live_children(engine, pid))[0]
    await engine.fire_action(first, "task", "give-up")
    await engine.driver.propagator.idle()
    again = f"{first}-a2"
    assert again in await live_children(engine, pid)  # the retry starts first (its place)
    await engine.fire_action(again, "task", "give-up")
    await engine.driver.propagator.idle()
    p = await engine.get_instance(pid)
    row = next(r for r in p.subworkflows if r.child_id == again)
    assert row.outcome == "failed" and row.attempt == 2 and row.resolved is not None
    assert len(await live_children(engine, pid)) == WINDOW


async def test_a_failure_budget_reads_the_counts_until_it_acts(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse, "KEPT_CHUNKS", 3)
    sparse_run = sparse_engine(engine, chunks=3)  # a walk per commit would be refused
    pid = await started(sparse_run, definition(failureBudget={"count": 1}),
                        child_def=worker())
    first, second = (await live_children(sparse_run, pid))[:2]
    await sparse_run.fire_action(first, "task", "give-up")  # within the budget
    await sparse_run.driver.propagator.idle()
    assert len(await live_children(sparse_run, pid)) == WINDOW
    acting = sparse_engine(engine, chunks=320)  # acting walks the cohort's rows
    await acting.fire_action(second, "task", "give-up")
    await acting.driver.propagator.idle()
    await beat(acting)
    p = await acting.get_instance(pid)
    assert len([e for e in p.history if e.get("_type") == "cohortFailed"]) == 1
    assert not any(r.queued for r in p.subworkflows)  # the rest was skipped


async def test_deadlines_and_retries_read_the_live_rows_chunks_only(
        engine: Engine, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse, "KEPT_CHUNKS", 2)  # of 7: the kept state does not hold them
    engine = sparse_engine(engine, chunks=3)  # a walk of the registry would be refused
    pid = await started(engine, definition(childTimeoutSeconds=60, retry={"attempts": 2}))
    first = await live_children(engine, pid)
    clock.advance(seconds=61)
    await beat(engine)
    await engine.driver.propagator.idle()
    clock.advance(seconds=3600)  # past every retry's backoff
    await beat(engine)
    await engine.driver.propagator.idle()
    p = await engine.get_instance(pid)
    retried = {r.child_id for r in p.subworkflows if r.attempt == 2}
    assert retried == {f"{child_id}-a2" for child_id in first}  # each timed out, retried
    started_ids = {str(doc["_id"]) for doc in await engine.lake.find(
        {"_type": "kinflow.instance", "parentInstance": pid})}
    assert retried <= started_ids  # the retries started once due
