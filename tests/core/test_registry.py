"""Registry rows: one reading of a stored row feeds both ``$subworkflows`` and the API."""

from __future__ import annotations

from typing import Any

from kinflow.core.cohort import registry
from kinflow.core.state import Instance

OPEN = "e2"


def parent(*rows: dict[str, Any]) -> dict[str, Any]:
    """A stored parent document whose open visit is ``e2``; rows spawned in e1 or e2."""
    return Instance.model_validate({
        "_id": "p", "_rev": "r1", "dataset": "production", "definition": "p",
        "pinnedVersion": 1, "definitionSnapshot": "{}", "currentStage": "review",
        "startedAt": "x", "lastChangedAt": "x",
        "stages": [{"_key": "e1", "name": "draft", "enteredAt": "x", "exitedAt": "y",
                    "activities": []},
                   {"_key": OPEN, "name": "review", "enteredAt": "y", "activities": []}],
        "subworkflows": [{
            "_key": f"k{n}", "activity": "translate", "action": "fan-out", "definition": "c",
            "stageEntry": row.pop("entry", OPEN), "cohortStage": "review",
            "rowKey": row["rowKey"], "ref": {"id": f"lake:production:c{n}"},
            "spawnedAt": "x", **{k: v for k, v in row.items() if k != "rowKey"},
        } for n, row in enumerate(rows)],
    }).to_json()  # fmt: skip


ROWS = (
    {"rowKey": "fresh"},
    {"rowKey": "seen", "observed": {"status": "active", "stage": "s2", "at": "z"}},
    {"rowKey": "done", "resolved": {"at": "z", "stage": "end"}},
    {"rowKey": "gone", "resolved": {"at": "z", "aborted": True}, "entry": "e1"},
    {"rowKey": "doomed", "abortPending": {"reason": "cancel", "at": "z"}},
)


def test_row_view_reads_resolved_then_observed_then_active() -> None:
    doc = parent(*[dict(r) for r in ROWS])
    instance = Instance.model_validate(doc)
    views = registry.subworkflow_rows(instance, instance.open_entry())
    assert [(v["rowKey"], v["status"], v["stage"], v["current"]) for v in views] == [
        ("fresh", "active", None, True), ("seen", "active", "s2", True),
        ("done", "done", "end", True), ("gone", "aborted", None, False),
        ("doomed", "active", None, True)]  # fmt: skip
    assert views[0]["_id"] == "c0"
    assert views == [registry.row_view(r, OPEN) for r in instance.subworkflows]


def test_api_rows_are_the_same_views_plus_bookkeeping() -> None:
    doc = parent(*[dict(r) for r in ROWS])
    rows = registry.registry_rows(doc)
    instance = Instance.model_validate(doc)
    views = registry.subworkflow_rows(instance, instance.open_entry())
    assert [(r.row_key, r.status, r.stage, r.current) for r in rows] == [
        (v["rowKey"], v["status"], v["stage"], v["current"]) for v in views]
    assert [r.condemned for r in rows] == [False, False, False, False, True]
    assert rows[4].abort_reason == "cancel" and rows[2].resolved and rows[2].resolved_at == "z"


def test_overlay_select_and_count() -> None:
    rows = registry.registry_rows(parent(*[dict(r) for r in ROWS]))
    live = registry.overlay(rows[0], {"_id": "c0", "completedAt": "t", "currentStage": "end",
                                      "stages": [{}]})  # fmt: skip
    assert (live.status, live.stage) == ("done", "end")
    assert registry.overlay(rows[2], {"_id": "c2", "abortedAt": "t"}) is rows[2]  # final
    assert [r.row_key for r in registry.select(rows, current_only=True, status="active")] == [
        "fresh", "seen", "doomed"]
    counts = registry.count(rows)
    assert (counts.total, counts.active, counts.done, counts.aborted) == (5, 3, 1, 1)
    assert not counts.settled and registry.count(rows[2:4]).settled
