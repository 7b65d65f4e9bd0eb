"""Whole-cohort condemnations of a sparse parent a page at a time, and the index of the
chunks holding owed rows (core/cohort/sweep.py); pure."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from kinflow.core.cohort import chunks, places, sparse, sweep, tallies
from kinflow.core.context import NeedsChunks
from kinflow.core.state import AbortPending, Instance, SubworkflowEntry

AT = "2026-11-30T00:00:00.000Z"
CHUNK = chunks.CHUNK
CTX = cast(Any, SimpleNamespace(now_iso=AT))
NO_DEFINITION = cast(Any, None)  # an abort's page never reads the definition


def row(i: int, **more: Any) -> SubworkflowEntry:
    return SubworkflowEntry.model_validate({
        "_key": f"k{i}", "activity": "translate", "action": "fan", "definition": "c",
        "stageEntry": "v1", "cohortStage": "review", "rowKey": f"r{i:05d}",
        "ref": {"id": f"lake:d:c-{i}"}, "spawnedAt": AT, **more})


def finished(i: int) -> SubworkflowEntry:
    return row(i, resolved={"at": AT}, outcome="succeeded")


def parent(count: int, held: list[int], *, done_below: int = 0) -> Instance:
    """A sparse parent of ``count`` rows (those below ``done_below`` finished) holding
    chunks ``held``, its summary made from every row, no row owed."""
    every = [finished(i) if i < done_below else row(i) for i in range(count)]
    rows = sparse.SparseRows(count)
    for chunk in held:
        rows.add(chunk, every[chunk * CHUNK:(chunk + 1) * CHUNK], [])
    return Instance.model_validate({
        "_id": "p", "dataset": "production", "definition": "p", "pinnedVersion": 1,
        "definitionSnapshot": "{}", "currentStage": "review", "startedAt": AT,
        "lastChangedAt": AT, "rowCount": count, "cohortRows": tallies.summarise(every),
        "owedChunks": {"aborts": [], "cancels": []}, "subworkflows": [],
    }).model_copy(update={"subworkflows": rows})


def test_a_sweep_pages_the_chunks_holding_unfinished_rows_from_its_cursor() -> None:
    p = parent(10 * CHUNK, [], done_below=3 * CHUNK)  # chunks 0-2 finished
    sweep.begin(p, CTX, sweep.ABORT, reason=sweep.PARENT_ABORTED)
    assert sparse.swept(p, ("translate", "v1")) and not sparse.swept(p, ("translate", "v2"))
    with pytest.raises(NeedsChunks) as asked:
        sweep.page(p, NO_DEFINITION, CTX, 4)
    assert asked.value.chunks == {3, 4, 5, 6}  # never a finished chunk, never more
    rows = sparse.rows_of(p)
    for chunk in asked.value.chunks:
        rows.add(chunk, [row(i) for i in range(chunk * CHUNK, (chunk + 1) * CHUNK)], [])
    assert sweep.page(p, NO_DEFINITION, CTX, 4) == [3, 4, 5, 6]
    assert all(r.abortPending is not None for c in (3, 4, 5, 6) for r in rows.held[c])
    assert p.sweeps is not None and p.sweeps[0]["next"] == 7
    for chunk in (7, 8, 9):
        rows.add(chunk, [row(i) for i in range(chunk * CHUNK, (chunk + 1) * CHUNK)], [])
    assert sweep.page(p, NO_DEFINITION, CTX, 4) == [7, 8, 9]
    assert p.sweeps is None  # its last page: the sweep is over


def test_a_sweep_leaves_rows_registered_after_it_began() -> None:
    p = parent(2 * CHUNK, [0, 1])
    sweep.begin(p, CTX, sweep.ABORT)
    sparse.rows_of(p).append(row(2 * CHUNK))
    assert sweep.page(p, NO_DEFINITION, CTX, 8) == [0, 1]
    assert sparse.rows_of(p)[2 * CHUNK].abortPending is None


def test_the_owed_index_follows_the_chunks_a_commit_rewrote() -> None:
    p = parent(10 * CHUNK, [2, 7])
    base = sparse.rows_of(p).copy()
    chunks.replace_row(p, 2 * CHUNK + 1, abortPending=AbortPending(at=AT, reason="r"))
    chunks.replace_row(p, 7 * CHUNK, detached=True)
    sweep.keep_owed(p, base, [2, 7], threshold=64)
    assert p.owedChunks == {"aborts": [2], "cancels": [], "detached": 1}
    assert sweep.owed_pages(p, sweep.ABORTS, 8) == [2] and sweep.owes(p, sweep.ABORTS)
    base = sparse.rows_of(p).copy()
    chunks.replace_row(p, 2 * CHUNK + 1, resolved={"at": AT, "aborted": True})
    chunks.replace_row(p, 7 * CHUNK, resolved={"at": AT})
    sweep.keep_owed(p, base, [2, 7], threshold=64)
    assert p.owedChunks == {"aborts": [], "cancels": []} and not sweep.owes(p, sweep.ABORTS)


def test_a_dense_parent_at_the_threshold_keeps_the_index_whole() -> None:
    rows = [row(i, abortPending={"at": AT, "reason": "r"}) if i in (5, 70) else row(i)
            for i in range(3 * CHUNK)]
    p = Instance.model_validate({
        "_id": "p", "dataset": "production", "definition": "p", "pinnedVersion": 1,
        "definitionSnapshot": "{}", "currentStage": "review", "startedAt": AT,
        "lastChangedAt": AT})
    p.subworkflows = rows
    sweep.keep_owed(p, rows, [0], threshold=len(rows) + 1)
    assert p.owedChunks is None  # a small parent keeps none
    sweep.keep_owed(p, rows, [0], threshold=len(rows))
    assert p.owedChunks == {"aborts": [0, 2], "cancels": []}
    assert list(places.expand(p.owedChunks["aborts"])) == [0, 2]
