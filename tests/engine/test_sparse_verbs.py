"""Bulk cohort verbs with a filter and top-up spawns on a sparse parent, on the embedded
lake: rows load sparse from 64 on and a commit (or a selection's read) may take at most 3
chunks of the 7, so a selection, a batch or a spawn that walked every row would be refused
(``registry-too-large``) instead of passing.

docs/subworkflows.md#large-parents-without-their-rows-in-memory
"""

from __future__ import annotations

import dataclasses

import pytest

from kinflow.core.cohort import sparse
from kinflow.core.cohort.selection import CohortFilter
from kinflow.core.errors import InjectedFault
from kinflow.engine import Engine
from tests.engine.test_sparse_registry import (
    NAMES,
    ROWS,
    WINDOW,
    definition,
    finish_all,
    live_children,
    sparse_engine,
    started,
)

pytestmark = pytest.mark.lake

BOUND = 3


def keys(names: list[str]) -> str:
    return "[" + ", ".join(f'"{name}"' for name in names) + "]"


@pytest.fixture(autouse=True)
def few_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse, "KEPT_CHUNKS", 2)  # of 7: the kept state does not hold them


async def test_a_filtered_abort_cohort_pages_its_selection_and_batches(engine: Engine) -> None:
    pid = await started(sparse_engine(engine))
    other = sparse_engine(engine, chunks=BOUND)  # a process that kept nothing of the parent
    live = await live_children(other, pid)
    ended = await other.abort_cohort(pid, "translate", where=CohortFilter(status=("queued",)),
                                     idempotency_key="queued-off")
    assert (ended.matched, ended.applied, ended.skipped) == (ROWS - WINDOW, ROWS - WINDOW, 0)
    again = await other.abort_cohort(pid, "translate", where=CohortFilter(status=("queued",)),
                                     idempotency_key="queued-off")
    assert (again.matched, again.applied, again.skipped) == (ROWS - WINDOW, 0, ROWS - WINDOW)
    assert await live_children(other, pid) == live  # the live rows run on
    p = await other.get_instance(pid)
    assert [r.rowKey for r in p.subworkflows] == NAMES
    assert sum(1 for r in p.subworkflows if r.outcome == "aborted") == ROWS - WINDOW
    await finish_all(other, pid)


async def test_a_where_filter_redrive_and_fire_cohort_page_their_selection(
        engine: Engine) -> None:
    pid = await started(sparse_engine(engine))
    other = sparse_engine(engine, chunks=BOUND)
    first = (await live_children(other, pid))[0]
    await other.abort_instance(first)
    await other.driver.propagator.idle()
    result = await other.redrive_cohort(pid, "translate",
                                        where=CohortFilter(status=("aborted",)))
    assert (result.matched, result.applied) == (1, 1)
    late = NAMES[-40:]  # rows in the last two chunks, a GROQ where over every row
    fired = await other.fire_cohort(pid, "translate", "task", "finish",
                                    where=CohortFilter(where=f"rowKey in {keys(late)}"))
    assert (fired.matched, fired.applied) == (40, 0)  # queued: no live child to fire on
    fired = await other.fire_cohort(pid, "translate", "task", "finish",
                                    where=CohortFilter(status=("active",)))
    assert fired.applied == WINDOW  # (the aborted row's place went to the next row)
    await other.driver.propagator.idle()
    p = await other.get_instance(pid)
    assert sum(1 for r in p.subworkflows if r.outcome == "succeeded") == WINDOW
    assert any(r.attempt == 2 for r in p.subworkflows)  # the redriven row


async def test_a_top_up_spawn_reads_the_chunks_of_its_row_keys_only(engine: Engine) -> None:
    top_up = {"name": "top-up", "spawn": {"forEach": "['extra', 'more']",
                                          "definition": {"name": "c"}, "with": {"item": "$row"}}}
    made = definition()
    made["stages"][1]["activities"][0]["actions"].insert(1, top_up)
    pid = await started(sparse_engine(engine), made)
    other = sparse_engine(engine, chunks=BOUND)  # a process that kept nothing of the parent
    await other.fire_action(pid, "translate", "top-up")
    await other.fire_action(pid, "translate", "top-up")  # its rows wait: none added again
    p = await other.get_instance(pid)
    assert [r.rowKey for r in p.subworkflows] == [*NAMES, "extra", "more"]
    assert [r.action for r in p.subworkflows[-2:]] == ["top-up", "top-up"]
    await finish_all(other, pid)
    p = await other.get_instance(pid)
    assert all(r.outcome == "succeeded" for r in p.subworkflows)


async def test_a_tick_finds_a_missing_child_by_the_live_rows_chunks(engine: Engine) -> None:
    pid = await started(sparse_engine(engine), definition(window=70))  # live rows: 3 chunks
    other = sparse_engine(engine, chunks=BOUND)
    live = await live_children(other, pid)
    assert len(live) == 70
    gone = sorted(live)[-1]
    await other.lake.delete(gone)
    await other.tick(pid)
    p = await other.get_instance(pid)
    row = next(r for r in p.subworkflows if r.child_id == gone)
    assert row.resolved is not None and row.resolved.detail == "child-missing"
    assert len(await live_children(other, pid)) == 70  # its place went to the next row
    assert sum(1 for h in p.history if h.get("detail") == "child-missing") == 1
    await other.tick(pid)  # nothing else is missing
    p = await other.get_instance(pid)
    assert sum(1 for h in p.history if h.get("detail") == "child-missing") == 1


async def test_children_a_crash_left_uncreated_are_found_a_page_at_a_time(
        engine: Engine) -> None:
    first = Engine(engine.lake, clock=engine.clock, limits=dataclasses.replace(
        sparse_engine(engine, chunks=320).limits, spawn_txn=4))
    pid = await started(first)
    first.faults.arm("after-spawn-commit")  # a wider window's 40 starts: 36 wait
    with pytest.raises(InjectedFault):
        await first.update_cohort(pid, "translate", max_active=WINDOW + 40)
    stored = await first.document(pid)
    assert stored is not None and stored.get("materialising")
    assert len(await live_children(first, pid)) == WINDOW + 4
    other = sparse_engine(engine, chunks=BOUND)  # a process that kept nothing of the parent
    assert await other.maintenance.finish_materialising(pid) == 36
    assert len(await live_children(other, pid)) == WINDOW + 40
    p = await other.get_instance(pid)
    for doc in await other.lake.find({"parentInstance": pid}):
        assert p.subworkflows[doc["rowPlace"]].child_id == doc["_id"]
