"""Pure: observations landing on registry rows (stamp once, child-missing, orphans)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kinflow.core.cohort.observe import Observation, apply_observations, condemned
from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.core.context import Actor, PlanContext
from kinflow.core.state import Instance
from kinflow.engine.ids import random_key, random_token

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def ctx() -> PlanContext:
    return PlanContext(now=NOW, actor=Actor.system(), dataset="production",
                       new_key=random_key, new_token=random_token)


def parent(*rows: dict[str, Any]) -> Instance:
    return Instance.model_validate({
        "_id": "p", "dataset": "production", "definition": "p", "pinnedVersion": 1,
        "definitionSnapshot": "{}", "currentStage": "review", "startedAt": "x",
        "lastChangedAt": "x",
        "stages": [{"_key": "e1", "name": "review", "enteredAt": "x", "activities": []}],
        "subworkflows": [{
            "_key": f"r{n}", "activity": "translate", "action": "fan-out", "definition": "c",
            "stageEntry": "e1", "cohortStage": "review", "rowKey": key,
            "ref": {"id": f"lake:production:{key}", "type": "kinflow.instance"},
            "spawnedAt": "x", **extra} for n, (key, extra) in enumerate(
                (r["key"], {k: v for k, v in r.items() if k != "key"}) for r in rows)],
    })


def test_a_terminal_child_resolves_its_row_once() -> None:
    p = parent({"key": "a"})
    seen = [Observation("a", "done", "done", "2026-01-01T11:00:00.000Z", "t1")]
    assert apply_observations(p, ctx(), seen) == [("a", "t1")]
    assert p.subworkflows[0].resolved is not None
    assert p.subworkflows[0].resolved.at == "2026-01-01T11:00:00.000Z"
    apply_observations(p, ctx(), [Observation("a", "aborted", "x")])
    assert p.subworkflows[0].resolved.aborted is None  # never changed again
    assert [h["_type"] for h in p.history] == ["subworkflowResolved"]


def test_a_live_child_updates_what_subworkflows_reads() -> None:
    p = parent({"key": "a"})
    apply_observations(p, ctx(), [Observation("a", "active", "approved")])
    row = subworkflow_rows(p, p.open_entry())[0]
    assert (row["status"], row["stage"], row["current"]) == ("active", "approved", True)
    assert p.history == []


def test_a_missing_child_resolves_as_aborted_child_missing() -> None:
    p = parent({"key": "a"}, {"key": "b", "abortPending": {"at": "x", "reason": "r"}})
    assert [r.rowKey for r in condemned(p)] == ["b"]
    apply_observations(p, ctx(), [Observation.missing("a"), Observation.missing("b")])
    for row in p.subworkflows:
        assert row.resolved is not None and row.resolved.aborted and row.resolved.stage is None
        assert row.resolved.detail == "child-missing"
    assert condemned(p) == []
    rows = subworkflow_rows(p, p.open_entry())
    assert {r["status"] for r in rows} == {"aborted"}


def test_an_orphan_is_recorded_once() -> None:
    p = parent({"key": "a"})
    for _ in range(3):
        apply_observations(p, ctx(), [Observation("stranger", "active", "work")])
    assert [h["_type"] for h in p.history] == ["subworkflowOrphaned"]
    assert p.subworkflows[0].observed is None
