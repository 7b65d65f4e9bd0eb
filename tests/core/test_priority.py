"""Priority admission on a sparse registry (core/cohort/priority.py): the summary keeps each
priority level's waiting rows and chunks, a commit reads the highest levels' chunks, and a
held row waits for a row before it in start order that is not held; pure."""

from __future__ import annotations

from typing import Any

from kinflow.core.cohort import priority, sparse, tallies
from kinflow.core.state import Instance, SubworkflowEntry

AT = "2026-11-30T00:00:00.000Z"
CHUNK = tallies.CHUNK


def row(i: int, level: float | None, queued: bool = True) -> SubworkflowEntry:
    return SubworkflowEntry.model_validate({
        "_key": f"k{i}", "activity": "translate", "action": "fan", "definition": "c",
        "stageEntry": "v1", "cohortStage": "review", "rowKey": f"r{i:05d}",
        "ref": {"id": f"lake:d:c-{i}"}, "spawnedAt": AT,
        **({"queued": True} if queued else {}),
        **({"priority": level} if level is not None else {})})


def gold(i: int) -> float:
    return 5.0 if i % 40 == 7 else 0.0  # one gold row in most chunks, scattered


def cohort(count: int = 10 * CHUNK) -> list[SubworkflowEntry]:
    return [row(i, gold(i)) for i in range(count)]


def entry_of(rows: list[SubworkflowEntry]) -> dict[str, Any]:
    return tallies.summarise(rows)[0]


def test_the_summary_keeps_each_levels_waiting_rows_and_chunks() -> None:
    entry = entry_of(cohort())
    gold_chunks = sorted({i // CHUNK for i in range(10 * CHUNK) if gold(i)})
    assert gold_chunks == [0, 1, 2, 3, 5, 6, 7, 8]
    assert entry[tallies.PRIORITIES]["5.0"] == [8, [[0, 3], [5, 8]]]  # (as runs)
    assert entry[tallies.PRIORITIES]["0.0"] == [10 * CHUNK - 8, [[0, 9]]]
    assert priority.levels(entry) == [(5.0, 8, [[0, 3], [5, 8]]),
                                      (0.0, 10 * CHUNK - 8, [[0, 9]])]
    assert "priorities" not in tallies.chunk_summary(cohort(), 0)[0]
    unprioritised = tallies.summarise([row(i, None) for i in range(CHUNK)])[0]
    assert tallies.PRIORITIES not in unprioritised and priority.levels(unprioritised) is None


def test_the_levels_follow_a_rewrite_of_a_chunk() -> None:
    before = cohort()
    after = list(before)
    for i in range(CHUNK, 2 * CHUNK):  # chunk 1's rows start (its gold row among them)
        after[i] = after[i].model_copy(update={"queued": None})
    after[2 * CHUNK] = after[2 * CHUNK].model_copy(update={"priority": -0.0})
    updated = tallies.updated(tallies.summarise(before), before, after, [1, 2])
    levels = updated[0][tallies.PRIORITIES]
    assert levels["5.0"] == [7, [0, [2, 3], [5, 8]]]
    assert levels["0.0"] == [10 * CHUNK - 8 - (CHUNK - 1), [0, [2, 9]]]  # -0.0 reads 0.0
    assert updated == tallies.summarise(after)
    done = [r.model_copy(update={"queued": None}) for r in after]
    assert tallies.updated(updated, after, done, range(10))[0][tallies.PRIORITIES] == {}


def test_a_commit_reads_the_highest_levels_chunks_for_its_room() -> None:
    entry = entry_of(cohort())
    gold_chunks = [0, 1, 2, 3, 5, 6, 7, 8]
    # one gold row per chunk: three rows of room read three gold chunks
    assert priority.chunks_for(entry, 3, 10) == gold_chunks[:3]
    assert priority.chunks_for(entry, 3, 2) == gold_chunks[:2]  # at most two
    held = set(gold_chunks[:2])  # held chunks count but are not read again
    assert priority.chunks_for(entry, 3, 10, held) == gold_chunks[2:3]
    # past the gold rows the next level's chunks follow, 31.x rows each (chunks 0-3 are
    # read already: chunk 4 is the next)
    assert priority.chunks_for(entry, 8 + 100, 20) == gold_chunks
    assert priority.chunks_for(entry, 8 + 130, 20) == [*gold_chunks, 4]


def test_a_held_row_waits_for_a_row_before_it_that_is_not_held() -> None:
    entry = entry_of(cohort())
    gold_chunks = [0, 1, 2, 3, 5, 6, 7, 8]
    front = priority.frontier(entry, {0})
    assert front == priority.Frontier(5.0, gold_chunks[1])  # chunk 0's gold row is held
    assert front.blocks(0.0, 3)  # an ordinary row waits for every gold one
    assert front.blocks(5.0, (gold_chunks[1] + 1) * CHUNK)  # a gold row after it waits
    assert not front.blocks(5.0, 7)  # the gold row before it does not
    assert not front.blocks(9.0, 9 * CHUNK)  # nor a row above every level
    assert priority.frontier(entry, set(range(10))) is None  # every waiting row held
    ordinary = priority.frontier(entry, set(gold_chunks))
    assert ordinary == priority.Frontier(0.0, 4)  # the gold chunks held: the first other


def test_a_sparse_commit_names_the_gold_chunks_within_half_its_bound() -> None:
    rows = cohort()
    fields: dict[str, Any] = {"rowCount": len(rows), "cohortRows": tallies.summarise(rows),
                              "subworkflows": sparse.SparseRows(len(rows))}
    instance = Instance.model_construct(**fields)
    gold_chunks = [0, 1, 2, 3, 5, 6, 7, 8]
    caps: dict[tuple[str, str], int | None] = {("translate", "v1"): 4}
    assert sparse.wanted(instance, [], caps, 320) == {9, *gold_chunks[:4]}
    assert sparse.wanted(instance, [], caps, 5) == {9, *gold_chunks[:2]}  # half the bound
    assert sparse.wanted(instance, [0, 40, 80], caps, 4) == {9, 0, 1, 2}  # no room left
    assert priority.pre_read(3) == 1 and priority.read_budget(5, 3) == 0


def test_a_priority_per_row_stops_being_kept_past_the_level_cap() -> None:
    rows = [row(i, float(i)) for i in range(tallies.MAX_LEVELS + 1)]
    entry = entry_of(rows)
    assert entry[tallies.PRIORITIES] is None and priority.levels(entry) is None
    few = entry_of(rows[:tallies.MAX_LEVELS])
    assert len(few[tallies.PRIORITIES]) == tallies.MAX_LEVELS
    grown = tallies.updated([few], rows[:tallies.MAX_LEVELS], rows, [2])[0]  # one more value
    assert grown[tallies.PRIORITIES] is None
    done = [r.model_copy(update={"queued": None}) for r in rows]
    assert tallies.updated([grown], rows, done, [0, 1, 2])[0][tallies.PRIORITIES] is None
