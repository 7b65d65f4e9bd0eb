"""A sparse registry (core/cohort/sparse.py): rows of chunks not held are asked for, never
guessed; the chunks a commit names before planning come from the summary; pure."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.cohort import chunks, sparse, tallies
from kinflow.core.context import NeedsChunks
from kinflow.core.state import SubworkflowEntry

AT = "2026-11-30T00:00:00.000Z"
CHUNK = chunks.CHUNK


def row(i: int, queued: bool = False, child: str | None = None) -> SubworkflowEntry:
    return SubworkflowEntry.model_validate({
        "_key": f"k{i}", "activity": "translate", "action": "fan", "definition": "c",
        "stageEntry": "v1", "cohortStage": "review", "rowKey": f"r{i:05d}",
        "ref": {"id": f"lake:d:{child or f'c-{i}'}"}, "spawnedAt": AT,
        **({"queued": True} if queued else {})})


def registry(count: int, held: list[int]) -> sparse.SparseRows:
    rows = sparse.SparseRows(count)
    for chunk in held:
        top = min(count, (chunk + 1) * CHUNK)
        rows.add(chunk, [row(i) for i in range(chunk * CHUNK, top)], [])
    return rows


def test_a_row_of_a_chunk_not_held_is_asked_for() -> None:
    rows = registry(10 * CHUNK + 5, [0, 10])
    assert len(rows) == 10 * CHUNK + 5 and rows[3].rowKey == "r00003"
    assert rows[-1].rowKey == f"r{10 * CHUNK + 4:05d}"
    with pytest.raises(NeedsChunks) as asked:
        rows[5 * CHUNK]
    assert asked.value.chunks == {5}
    with pytest.raises(NeedsChunks) as asked:
        rows[CHUNK - 2:3 * CHUNK]
    assert asked.value.chunks == {1, 2}
    with pytest.raises(NeedsChunks) as asked:
        list(rows)  # a walk of every row asks for every chunk it lacks
    assert asked.value.chunks == set(range(1, 10))
    assert [r.rowKey for r in rows[CHUNK - 2:CHUNK]] == ["r00030", "r00031"]


def test_appending_needs_the_last_chunk_unless_it_opens_one() -> None:
    rows = registry(2 * CHUNK, [0])
    rows.append(row(2 * CHUNK))  # opens chunk 2
    assert len(rows) == 2 * CHUNK + 1 and rows[2 * CHUNK].rowKey == f"r{2 * CHUNK:05d}"
    partial = registry(2 * CHUNK + 1, [0])
    with pytest.raises(NeedsChunks) as asked:
        partial.append(row(2 * CHUNK + 1))
    assert asked.value.chunks == {2}


def test_changed_places_are_the_replaced_and_appended_rows_of_held_chunks() -> None:
    base = registry(3 * CHUNK, [0, 2])
    rows = base.copy()
    rows[CHUNK * 2 + 3] = row(999)
    rows.append(row(3 * CHUNK))
    assert chunks.changed_places(base, rows) == [2 * CHUNK + 3, 3 * CHUNK]  # type: ignore


def test_writes_keep_a_chunks_history_and_place_new_entries_in_the_whole_history() -> None:
    base = registry(2 * CHUNK, [1])
    kept_entry = {"_type": "spawned", "instanceRef": {"id": f"lake:d:c-{CHUNK}"}, "n": 7}
    base.bound[1] = [kept_entry]
    rows = base.copy()
    rows[CHUNK + 1] = row(CHUNK + 1).model_copy(update={"queued": None})
    new = [{"_type": "stageEntered", "stage": "x"},
           {"_type": "subworkflowStarted", "instanceRef": {"id": f"lake:d:c-{CHUNK + 1}"}}]
    written = chunks._sparse_writes("p", base, rows, new, 500)
    assert [doc["chunk"] for doc in written.chunks] == [1]
    assert written.chunks[0]["history"] == [kept_entry, {**new[1], "n": 501}]
    assert len(written.chunks[0]["rows"]) == CHUNK


def summary_of(rows: list[SubworkflowEntry]) -> list[dict[str, Any]]:
    return tallies.summarise(rows)


def test_a_commit_names_the_last_chunk_the_observed_rows_and_the_first_queued_ones() -> None:
    from kinflow.core.state import Instance

    everything = [row(i, queued=i >= 3 * CHUNK + 4) for i in range(40 * CHUNK)]
    instance = Instance.model_construct(rowCount=len(everything),
                                        cohortRows=summary_of(everything))
    cohort = ("translate", "v1")
    # a window of 10 with 4 live rows (its first 3 chunks finished...): room 6
    wanted = sparse.wanted(instance, [5, 2 * CHUNK], {cohort: 3 * CHUNK + 4 + 6})
    assert wanted == {39, 0, 2, 3, 4}
    assert instance.cohortRows
    assert sparse.queued_chunks(instance.cohortRows[0], 2, skip={3}) == [4, 5]


def test_a_registration_batch_compares_its_keys_with_the_held_rows_only() -> None:
    from kinflow.core.state import Instance

    rows = registry(4 * CHUNK, [3])
    instance = Instance.model_construct(subworkflows=rows, cohortRows=summary_of(
        [row(i) for i in range(4 * CHUNK)]))
    assert [p for p, _ in sparse.identity_rows(instance, "translate", "v1", True)] == list(
        range(3 * CHUNK, 4 * CHUNK))
    with pytest.raises(NeedsChunks):  # a spawn that is not a batch compares every row
        list(sparse.identity_rows(instance, "translate", "v1", False))


def test_the_kept_state_holds_a_few_chunks() -> None:
    rows = registry(40 * CHUNK, list(range(40)))
    rows.trimmed([5, 6, *range(40)])
    assert len(rows.held) == sparse.KEPT_CHUNKS and {39, 5, 6} <= set(rows.held)


def test_per_key_counts_are_kept_with_the_summary_and_follow_a_rewrite() -> None:
    def keyed(i: int, key: str, state: str) -> SubworkflowEntry:
        base = row(i, queued=state == "queued").model_copy(update={"concurrencyKey": key})
        if state == "done":
            from kinflow.core.state import ResolvedRow

            return base.model_copy(update={"resolved": ResolvedRow(at=AT), "outcome": "succeeded"})
        return base

    before = [keyed(i, "ab"[i % 2], "queued" if i >= 40 else "live") for i in range(70)]
    summary = tallies.summarise(before)
    assert tallies.keys_of(summary[0]) == {"a": [20, 15], "b": [20, 15]}
    after = list(before)
    after[1] = keyed(1, "b", "done")  # chunk 0
    after[40] = keyed(40, "a", "live")  # chunk 1: started
    after.append(keyed(70, "c", "queued"))  # chunk 2
    updated = tallies.updated(summary, before, after, [0, 1, 2])
    assert updated == tallies.summarise(after)
    assert tallies.keys_of(updated[0]) == {"a": [21, 14], "b": [19, 15], "c": [0, 1]}
    older = [{**summary[0], "tallies": 3}]
    older[0].pop("keys")
    assert tallies.keys_of(older[0]) is None  # written before: unknown, read the rows
    assert "keys" not in tallies.chunk_summary(before, 0)[0]
