"""Whole-cohort condemnations of a sparse parent paged in bounded commits
(core/cohort/sweep.py, engine/sweeps.py), on the embedded lake: rows load sparse from 64
on and a commit may read at most 3 chunks of the 7, so an abort, a stage exit or a drain
that walked every row would be refused (``registry-too-large``) instead of passing.

docs/subworkflows.md#large-parents-without-their-rows-in-memory
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kinflow.core.cohort import tallies
from kinflow.core.errors import InjectedFault
from kinflow.core.state import Instance
from kinflow.engine import Engine
from tests.engine.outcome_defs import worker
from tests.engine.test_sparse_registry import (
    NAMES,
    ROWS,
    beat,
    definition,
    live_children,
    sparse_engine,
    started,
)

pytestmark = pytest.mark.lake

BOUND = 3  # chunks a commit may read; pages are one chunk
WIDE = 70  # a window whose live children fill three chunks


async def children(engine: Engine, parent_id: str) -> list[dict[str, Any]]:
    return await engine.lake.find({"_type": "kinflow.instance", "parentInstance": parent_id})


def resolved_once(p: Instance) -> None:
    """Every row resolved, each by one history entry."""
    resolved = Counter((e.get("instanceRef") or {}).get("id") for e in p.history
                       if e.get("_type") == "subworkflowResolved")
    assert len(resolved) == ROWS and set(resolved.values()) == {1}
    assert all(r.resolved is not None for r in p.subworkflows)


async def assert_cohort_aborted(engine: Engine, pid: str, started_ids: list[str]) -> None:
    """Every row resolved once and aborted, every child aborted once, the counts agree,
    nothing left owed."""
    p = await engine.get_instance(pid)
    assert [r.rowKey for r in p.subworkflows] == NAMES
    resolved_once(p)
    assert {r.outcome for r in p.subworkflows} == {"aborted"}
    kids = await children(engine, pid)
    assert sorted(str(k["_id"]) for k in kids) == sorted(started_ids)
    for kid in kids:
        assert kid.get("abortedAt"), kid["_id"]
        aborts = [e for e in kid.get("history") or [] if e.get("_type") == "aborted"]
        assert len(aborts) == 1, kid["_id"]  # aborted once, however often the drain ran
    stored = await engine.document(pid)
    assert stored is not None
    counts = tallies.counts(tallies.find(stored["cohortRows"], "translate", None))
    assert (counts.total, counts.aborted, counts.active, counts.queued) == (ROWS, ROWS, 0, 0)
    assert not stored.get("sweeps") and not stored.get("owesAborts")
    assert stored["owedChunks"] == {"aborts": [], "cancels": []}


async def test_a_parent_abort_pages_every_row_past_the_commit_bound(engine: Engine) -> None:
    pid = await started(sparse_engine(engine))
    first = await live_children(engine, pid)
    bounded = sparse_engine(engine, chunks=BOUND)  # a process that kept nothing of it
    result = await bounded.abort_instance(pid)
    assert result.instance.abortedAt is not None
    assert not await live_children(engine, pid)
    await assert_cohort_aborted(bounded, pid, first)


async def test_an_on_exit_abort_pages_the_cohort_it_leaves(engine: Engine) -> None:
    pid = await started(sparse_engine(engine), definition(onExit="abort"))
    first = await live_children(engine, pid)
    bounded = sparse_engine(engine, chunks=BOUND)
    moved = await bounded.set_stage(pid, "next")
    assert moved.instance.currentStage == "next" and moved.instance.abortedAt is None
    assert not await live_children(engine, pid)
    await assert_cohort_aborted(bounded, pid, first)
    p = await bounded.get_instance(pid)
    assert {r.resolved.detail for r in p.subworkflows if r.resolved and r.queued is None
            and r.child_id not in first} == {"queued-skipped"}


async def test_an_on_exit_cancel_pages_its_cancel_requests(engine: Engine) -> None:
    pid = await started(sparse_engine(engine), definition(onExit="cancel"))
    first = await live_children(engine, pid)
    bounded = sparse_engine(engine, chunks=BOUND)
    await bounded.set_stage(pid, "next")
    kids = await children(engine, pid)
    assert sorted(str(k["_id"]) for k in kids) == sorted(first)  # no queued row started
    assert all(k.get("cancelledAt") for k in kids)  # (no cancel stage: CANCELLED at once)
    stored = await bounded.document(pid)
    assert stored is not None and not stored.get("owesCancels")
    counts = tallies.counts(tallies.find(stored["cohortRows"], "translate", None))
    assert (counts.total, counts.cancelled) == (ROWS, ROWS)


@pytest.mark.parametrize(("point", "times"), [
    ("before-drain", 1),  # the first page condemned, its children not aborted
    ("before-drain", 2),  # a page stamped, the next one condemned, its children not aborted
    ("before-drain-stamp", 1),  # the first page's children aborted, its rows not stamped
    ("before-drain-stamp", 3),  # the third page's children aborted, its rows not stamped
    ("mid-sweep", 2),  # two pages condemned and drained, the third not condemned
    ("mid-sweep", 6),
])
async def test_a_crash_between_pages_is_resumed_by_the_heartbeat(
        engine: Engine, point: str, times: int) -> None:
    pid = await started(sparse_engine(engine), definition(window=WIDE))
    first = await live_children(engine, pid)
    assert len(first) == WIDE  # live children in three chunks: three pages to abort
    bounded = sparse_engine(engine, chunks=BOUND)
    bounded.faults.arm(point, after=times - 1)
    with pytest.raises(InjectedFault):
        await bounded.abort_instance(pid)
    left = await bounded.document(pid)
    assert left is not None and left.get("abortedAt") and left.get("owesAborts")
    await beat(bounded)
    await assert_cohort_aborted(bounded, pid, first)


async def every_child_cancelled(engine: Engine, bounded: Engine, pid: str, first: list[str]
                                ) -> dict[str, Any]:
    """Every live child was cancelled once, every row says so, nothing is owed any more:
    the parent's stored document."""
    kids = await children(engine, pid)
    assert sorted(str(k["_id"]) for k in kids) == sorted(first)
    assert all(k.get("cancelledAt") for k in kids)
    p = await bounded.get_instance(pid)
    resolved_once(p)
    assert {r.outcome for r in p.subworkflows} == {"cancelled"}
    stored = await bounded.document(pid)
    assert stored is not None and not stored.get("owesCancels") and not stored.get("sweeps")
    return stored


async def test_a_graceful_cancellation_pages_its_rows_and_ends(engine: Engine) -> None:
    pid = await started(sparse_engine(engine), definition(window=WIDE))
    first = await live_children(engine, pid)
    bounded = sparse_engine(engine, chunks=BOUND)
    result = await bounded.cancel_instance(pid, reason="stop")
    assert result.instance.cancelledAt is not None  # every row settled: CANCELLED
    stored = await every_child_cancelled(engine, bounded, pid, first)
    counts = tallies.counts(tallies.find(stored["cohortRows"], "translate", None))
    assert (counts.total, counts.cancelled) == (ROWS, ROWS)


async def test_a_cancellation_that_detaches_ends_while_the_children_run(engine: Engine) -> None:
    pid = await started(sparse_engine(engine), definition(onCancel="detach"))
    first = await live_children(engine, pid)
    bounded = sparse_engine(engine, chunks=BOUND)
    result = await bounded.cancel_instance(pid)
    assert result.instance.cancelledAt is not None  # the detached rows are not waited for
    assert await live_children(engine, pid) == first  # and their children run on
    stored = await bounded.document(pid)
    assert stored is not None and stored["owedChunks"]["detached"] == len(first)
    counts = tallies.counts(tallies.find(stored["cohortRows"], "translate", None))
    assert (counts.cancelled, counts.active) == (ROWS - len(first), len(first))


async def test_a_cancellation_still_paging_does_not_end(engine: Engine) -> None:
    pid = await started(sparse_engine(engine), definition(onCancel="detach"))
    bounded = sparse_engine(engine, chunks=BOUND)
    bounded.faults.arm("mid-sweep", after=1)
    with pytest.raises(InjectedFault):
        await bounded.cancel_instance(pid)
    left = await bounded.document(pid)
    assert left is not None and left.get("cancellingAt") and not left.get("cancelledAt")
    assert left.get("sweeps") and left.get("owesAborts")
    await beat(bounded)
    done = await bounded.document(pid)
    assert done is not None and done.get("cancelledAt") and not done.get("sweeps")


async def test_a_quorum_stops_the_rest_of_its_cohort_a_page_at_a_time(engine: Engine) -> None:
    pid = await started(sparse_engine(engine), definition(completeWhen="$cohort.succeeded >= 3"))
    first = await live_children(engine, pid)
    bounded = sparse_engine(engine, chunks=BOUND)
    for child_id in first[:3]:
        await bounded.fire_action(child_id, "task", "finish")
    await bounded.driver.propagator.idle()
    await beat(bounded)
    p = await bounded.get_instance(pid)
    resolved_once(p)
    assert sum(1 for r in p.subworkflows if r.outcome == "succeeded") == 3
    assert {r.abortReason for r in p.subworkflows if r.outcome != "succeeded"} == {
        "cohort-complete"}
    assert p.currentStage == "next"
    assert not await live_children(engine, pid)
    complete = [e for e in p.history if e.get("_type") == "cohortComplete"]
    kids = {str(k["_id"]) for k in await children(engine, pid)}
    stopped = sum(1 for r in p.subworkflows if r.outcome != "succeeded" and r.child_id in kids)
    assert [(e["skipped"], e["stopped"]) for e in complete] == [(ROWS - 3 - stopped, stopped)]
    stored = await bounded.document(pid)
    assert stored is not None and not stored.get("sweeps") and not stored.get("owesAborts")
    counts = tallies.counts(tallies.find(stored["cohortRows"], "translate", None))
    assert (counts.total, counts.done, counts.aborted) == (ROWS, 3, ROWS - 3)


async def test_a_failure_budget_acts_on_its_cohort_a_page_at_a_time(engine: Engine) -> None:
    pid = await started(sparse_engine(engine), definition(
        failureBudget={"count": 1}, onBudgetExceeded="abort-rest"), child_def=worker())
    first = await live_children(engine, pid)
    bounded = sparse_engine(engine, chunks=BOUND)
    for child_id in first[:2]:  # the second failure exceeds the budget
        await bounded.fire_action(child_id, "task", "give-up")
    await bounded.driver.propagator.idle()
    await beat(bounded)
    p = await bounded.get_instance(pid)
    resolved_once(p)
    assert len([e for e in p.history if e.get("_type") == "cohortFailed"]) == 1
    assert not any(r.queued for r in p.subworkflows)
    assert not await live_children(engine, pid)
    stopped = [r for r in p.subworkflows if r.abortReason == "failure-budget-exceeded"]
    assert len(stopped) == ROWS - 2
    stored = await bounded.document(pid)
    assert stored is not None and not stored.get("sweeps") and not stored.get("owesAborts")
    counts = tallies.counts(tallies.find(stored["cohortRows"], "translate", None))
    assert (counts.total, counts.failed, counts.stopped) == (ROWS, 2, ROWS - 2)


async def test_a_closing_abort_cohort_pages_its_cohort(engine: Engine) -> None:
    pid = await started(sparse_engine(engine))
    first = await live_children(engine, pid)
    bounded = sparse_engine(engine, chunks=BOUND)
    result = await bounded.abort_cohort(pid, "translate", idempotency_key="k")
    assert (result.matched, result.applied, result.skipped) == (ROWS, ROWS, 0)
    assert not await live_children(engine, pid)
    p = await bounded.get_instance(pid)
    resolved_once(p)
    assert {r.abortReason for r in p.subworkflows} == {"cohort-aborted"}
    assert [e["by"] for e in p.history if e.get("_type") == "cohortClosed"] == ["abortCohort"]
    await assert_cohort_aborted(bounded, pid, first)
    again = await bounded.abort_cohort(pid, "translate", idempotency_key="k")
    assert (again.matched, again.applied) == (ROWS, 0)  # a replay applies nothing


async def test_a_closing_cancel_cohort_pages_its_cancel_requests(engine: Engine) -> None:
    pid = await started(sparse_engine(engine), definition(window=WIDE))
    first = await live_children(engine, pid)
    bounded = sparse_engine(engine, chunks=BOUND)
    result = await bounded.cancel_cohort(pid, "translate")
    assert (result.matched, result.applied) == (ROWS, ROWS)
    await every_child_cancelled(engine, bounded, pid, first)
