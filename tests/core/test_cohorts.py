"""Pure: which children should be alive (the shell's missing-child count), and
observations read from stored child documents."""

from __future__ import annotations

from typing import Any

from kinflow.core.cohort.observe import Observation, expected_live, live_rows
from kinflow.core.state import Instance


def parent(rows: dict[str, dict[str, Any]], *, materialising: bool = False) -> Instance:
    return Instance.model_validate({
        "_id": "p", "dataset": "production", "definition": "p", "pinnedVersion": 1,
        "definitionSnapshot": "{}", "currentStage": "review", "startedAt": "x",
        "lastChangedAt": "x", "materialising": materialising or None,
        "subworkflows": [{
            "_key": key, "activity": "a", "action": "fan", "definition": "c",
            "stageEntry": "e1", "cohortStage": "review", "rowKey": key,
            "ref": {"id": f"lake:production:{key}", "type": "kinflow.instance"},
            "spawnedAt": "x", **extra} for key, extra in rows.items()],
    })


ROWS = {
    "live": {},
    "resolved": {"resolved": {"at": "x"}},
    "seeded": {"seed": {"version": 1}},
    "finishing": {},
    "failing": {},
}


def test_expected_live_leaves_out_resolved_unmaterialised_and_finishing_children() -> None:
    seen = [Observation("finishing", "done"), Observation("failing", "aborted"),
            Observation("live", "active", "work")]
    assert expected_live(parent(ROWS, materialising=True), seen) == ["live"]
    assert expected_live(parent(ROWS), seen) == ["live", "seeded"]  # all created by now
    assert [r.child_id for r in live_rows(parent(ROWS, materialising=True))] == [
        "live", "finishing", "failing"]


def test_an_observation_reads_the_row_vocabulary() -> None:
    base = {"_id": "c", "currentStage": "work", "propagateToken": "t"}
    assert Observation.of(base) == Observation("c", "active", "work", None, "t")
    done = Observation.of({**base, "completedAt": "2026-01-01T00:00:00.000Z"})
    assert (done.status, done.completed_at) == ("done", "2026-01-01T00:00:00.000Z")
    aborted = {**base, "completedAt": "x", "abortedAt": "x"}
    assert Observation.of(aborted).status == "aborted"
