"""Registry rows stored beside their parent: which rows a commit writes, and the one
ordered history rebuilt from the instance's entries and its rows' entries."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from kinflow.core.cohort import chunks
from kinflow.core.cohort.row_history import inline_history
from kinflow.core.state import Instance, ResolvedRow, SubworkflowEntry


def row(n: int, **extra: Any) -> dict[str, Any]:
    return {"_key": f"k{n}", "activity": "a", "action": "go", "definition": "c",
            "stageEntry": "e1", "cohortStage": "s", "rowKey": f"r{n}",
            "ref": {"id": f"lake:production:c{n}"}, "spawnedAt": "t", **extra}


def parent(count: int) -> Instance:
    return Instance.model_validate({
        "_id": "p", "dataset": "production", "definition": "p", "pinnedVersion": 1,
        "definitionSnapshot": "{}", "currentStage": "s", "startedAt": "t",
        "lastChangedAt": "t", "subworkflows": [row(n) for n in range(count)],
        "rowCount": count})


def test_rows_are_frozen_so_a_plan_cannot_edit_the_shared_copy() -> None:
    instance = parent(1)
    with pytest.raises(ValidationError):
        instance.subworkflows[0].rowKey = "other"


def test_a_commit_writes_only_the_chunks_holding_rows_it_replaced_or_appended() -> None:
    instance = parent(chunks.CHUNK * 3)
    base = list(instance.subworkflows)
    chunks.replace_row(instance, chunks.CHUNK + 2, resolved=ResolvedRow(at="t2", stage="done"))
    added = SubworkflowEntry.model_validate(row(chunks.CHUNK * 3))
    instance.subworkflows.append(added)
    spawned = {"_key": "h0", "_type": "spawned", "at": "t",
               "instanceRef": {"id": f"lake:production:c{chunks.CHUNK + 2}"}}
    resolved = {"_key": "h1", "_type": "subworkflowResolved", "at": "t2",
                "instanceRef": {"id": f"lake:production:c{chunks.CHUNK + 2}"}, "status": "done"}
    note = {"_key": "h2", "_type": "actionFired", "at": "t2"}
    instance.history = [spawned, note, resolved]
    writes = chunks.row_writes(instance, base, [note, resolved], history_start=1)
    assert [doc["_id"] for doc in writes.chunks] == ["p.1", "p.3"]
    middle, last = writes.chunks
    assert middle["parent"] == "p" and middle["chunk"] == 1 and len(middle["rows"]) == chunks.CHUNK
    assert middle["rows"][2]["resolved"] == {"at": "t2", "stage": "done"}
    assert middle["history"] == [{**spawned, "n": 0}, {**resolved, "n": 2}]
    assert [r["rowKey"] for r in last["rows"]] == [f"r{chunks.CHUNK * 3}"]
    assert base[chunks.CHUNK + 2].resolved is None  # the loaded row is untouched
    assert inline_history([note, resolved]) == [note]
    unchanged = chunks.row_writes(instance, list(instance.subworkflows), [], history_start=3)
    assert not unchanged


def test_history_merges_row_entries_back_at_their_places() -> None:
    inline = [{"_key": "a"}, {"_key": "b"}, {"_key": "c"}]
    bound = [{"_key": "y", "n": 3}, {"_key": "x", "n": 1}, {"_key": "z", "n": 5}]
    merged = chunks.merge_history(inline, bound)
    assert [e["_key"] for e in merged] == ["a", "x", "b", "y", "c", "z"]
    assert all("n" not in e for e in merged)


def test_assemble_gives_readers_the_rows_in_order_and_the_whole_history() -> None:
    doc = {"_id": "p", "rowCount": 2, "history": [{"_key": "a"}]}
    stored = [
        {"_id": "p.1", "_type": chunks.CHUNK_TYPE, "parent": "p", "chunk": 1,
         "rows": [row(1)], "history": [{"_key": "s1", "n": 2}]},
        {"_id": "p.0", "_type": chunks.CHUNK_TYPE, "parent": "p", "chunk": 0,
         "rows": [row(0)], "history": [{"_key": "s0", "n": 1}]},
    ]
    assembled = chunks.assemble(doc, stored)
    assert [r["rowKey"] for r in assembled["subworkflows"]] == ["r0", "r1"]
    assert [e["_key"] for e in assembled["history"]] == ["a", "s0", "s1"]
