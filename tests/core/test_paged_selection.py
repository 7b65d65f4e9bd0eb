"""A bulk verb's selection on a sparse parent, a page of chunks at a time
(core/cohort/selection.py): every row of the cohort in a page with whether it is selected,
a row key counted once by its latest row across pages, batches of a few chunks; pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kinflow.core.cohort import selection, sparse, tallies
from kinflow.core.cohort.selection import CohortFilter
from kinflow.core.context import Limits, NeedsChunks
from kinflow.core.state import Instance, SubworkflowEntry

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
AT = "2026-01-01T00:00:00.000Z"
CHUNK = sparse.CHUNK


def row(i: int, key: str, visit: str = "v1", queued: bool = True) -> SubworkflowEntry:
    return SubworkflowEntry.model_validate({
        "_key": f"k{i}", "activity": "translate", "action": "fan", "definition": "c",
        "stageEntry": visit, "cohortStage": "review", "rowKey": key,
        "ref": {"id": f"lake:d:c-{i}"}, "spawnedAt": AT,
        **({"queued": True} if queued else {})})


def parent(rows: list[SubworkflowEntry], held: list[int]) -> Instance:
    registry = sparse.SparseRows(len(rows))
    for chunk in held:
        registry.add(chunk, rows[chunk * CHUNK:(chunk + 1) * CHUNK], [])
    fields: dict[str, Any] = {"rowCount": len(rows), "cohortRows": tallies.summarise(rows),
                              "subworkflows": registry, "stages": [], "currentStage": "review"}
    return Instance.model_construct(**fields)


def registry() -> list[SubworkflowEntry]:
    """Four chunks of visit v1 with a row of visit v0 in chunk 1; row key r5 respawned in
    chunk 3 (its latest row), running there."""
    rows = [row(i, f"r{i}") for i in range(4 * CHUNK)]
    rows[CHUNK + 1] = row(CHUNK + 1, "old", visit="v0")
    rows[3 * CHUNK + 2] = row(3 * CHUNK + 2, "r5", queued=False)
    return rows


def test_a_sparse_cohort_is_found_without_its_rows_and_paged_by_its_chunks() -> None:
    instance = parent(registry(), [])
    found = selection.Cohort("translate", "v1", ())
    assert selection.cohort_chunks(instance, found) == [0, 1, 2, 3]
    assert selection.cohort_chunks(instance, selection.Cohort("translate", "v0", ())) == [1]
    with pytest.raises(NeedsChunks) as asked:  # a page reads only its chunks
        selection.select_page(instance, found, [2], None, None, NOW)
    assert asked.value.chunks == {2}


def test_pages_merge_into_one_selection_by_each_keys_latest_row() -> None:
    instance = parent(registry(), [0, 1, 2, 3])
    found = selection.Cohort("translate", "v1", ())
    queued = CohortFilter(status=("queued",))
    tree = queued.check(Limits())
    pages = [selection.select_page(instance, found, chunks, queued, tree, NOW)
             for chunks in ([0, 1], [2, 3])]
    assert ("old", CHUNK + 1, True) not in pages[0]  # another visit's row is not the cohort's
    assert ("r5", 5, True) in pages[0] and ("r5", 3 * CHUNK + 2, False) in pages[1]
    keys, places = selection.merged(pages)
    assert "r5" not in keys  # its latest row is running: not queued
    assert len(keys) == 4 * CHUNK - 3 and keys[:3] == ["r0", "r1", "r2"]
    assert places["r0"] == 0 and places[f"r{3 * CHUNK + 3}"] == 3 * CHUNK + 3
    everything = [selection.select_page(instance, found, [c], None, None, NOW)
                  for c in (3, 0, 1, 2)]  # pages in any order
    keys, places = selection.merged(everything)
    assert keys[5] == "r6" and keys[-1] == f"r{4 * CHUNK - 1}" and places["r5"] == 3 * CHUNK + 2
    assert keys.index("r5") == len(keys) - CHUNK + 2  # at its latest place


def test_batches_hold_a_few_rows_and_chunks_each() -> None:
    places = {f"k{i}": i * 10 for i in range(13)}  # rows 0, 10, ... 120: chunks 0-3
    keys = list(places)
    assert selection.chunk_batches(keys, places, 100, 1) == [
        ["k0", "k1", "k2", "k3"], ["k4", "k5", "k6"], ["k7", "k8", "k9"], ["k10", "k11", "k12"]]
    assert selection.chunk_batches(keys, places, 5, 2) == [
        ["k0", "k1", "k2", "k3", "k4"], ["k5", "k6", "k7", "k8", "k9"], ["k10", "k11", "k12"]]
    assert selection.chunk_batches([], {}, 5, 2) == []
