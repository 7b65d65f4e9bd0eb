"""Registry rows stored beside their parent: which rows a commit writes, and the one
ordered history rebuilt from the instance's entries and its rows' entries."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from kinflow.core import rows
from kinflow.core.state import Instance, ResolvedRow, SubworkflowEntry, inline_history


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


def test_a_commit_writes_only_the_rows_it_replaced_or_appended() -> None:
    instance = parent(4)
    base = list(instance.subworkflows)
    rows.replace_row(instance, 2, resolved=ResolvedRow(at="t2", stage="done"))
    instance.subworkflows.append(SubworkflowEntry.model_validate(row(4)))
    resolved = {"_key": "h1", "_type": "subworkflowResolved", "at": "t2",
                "instanceRef": {"id": "lake:production:c2"}, "status": "done"}
    note = {"_key": "h2", "_type": "actionFired", "at": "t2"}
    writes = rows.row_writes(instance, base, [note, resolved], history_start=10)
    assert [doc["_id"] for doc in writes.inserts] == ["c4"]
    assert writes.inserts[0]["seq"] == 4 and writes.inserts[0]["parent"] == "p"
    assert [child for child, _ in writes.updates] == ["c2"]
    update = writes.updates[0][1]
    assert update["$set"] == {"resolved": {"at": "t2", "stage": "done"}}
    assert update["$push"]["history"]["$each"] == [{**resolved, "n": 11}]
    assert base[2].resolved is None  # the loaded row is untouched
    assert inline_history([note, resolved]) == [note]


def test_history_merges_row_entries_back_at_their_places() -> None:
    inline = [{"_key": "a"}, {"_key": "b"}, {"_key": "c"}]
    bound = [{"_key": "y", "n": 3}, {"_key": "x", "n": 1}, {"_key": "z", "n": 5}]
    merged = rows.merge_history(inline, bound)
    assert [e["_key"] for e in merged] == ["a", "x", "b", "y", "c", "z"]
    assert all("n" not in e for e in merged)


def test_assemble_gives_readers_the_rows_in_order_and_the_whole_history() -> None:
    doc = {"_id": "p", "rowCount": 2, "history": [{"_key": "a"}]}
    stored = [
        {**row(1), "_id": "c1", "_type": rows.ROW_TYPE, "parent": "p", "seq": 1,
         "history": [{"_key": "s1", "n": 2}]},
        {**row(0), "_id": "c0", "_type": rows.ROW_TYPE, "parent": "p", "seq": 0,
         "history": [{"_key": "s0", "n": 1}]},
    ]
    assembled = rows.assemble(doc, stored)
    assert [r["rowKey"] for r in assembled["subworkflows"]] == ["r0", "r1"]
    assert "parent" not in assembled["subworkflows"][0]
    assert [e["_key"] for e in assembled["history"]] == ["a", "s0", "s1"]
    assert rows.row_from_document(stored[0]).rowKey == "r1"
