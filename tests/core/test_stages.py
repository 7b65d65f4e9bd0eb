"""Stage visits: priming, one move, activity filters, terminal stages, onExit condemnation."""

from __future__ import annotations

from typing import Any

from kinflow.core.stages import move
from kinflow.core.state import SubworkflowEntry
from kinflow.timestamps import iso
from tests.core.support import NOW, ctx, definition, history_types, start


def staged() -> dict[str, Any]:
    return definition("staged", [
        {"name": "a", "fields": [{"name": "note", "type": "string",
                                  "initialValue": {"type": "literal", "value": "hi"}}],
         "activities": [{"name": "kept", "filter": "true"},
                        {"name": "dropped", "filter": "false"},
                        {"name": "unsure", "filter": "$fields.nothing > 1"},
                        {"name": "cohort", "actions": [{"name": "fan", "spawn": {
                            "definition": {"name": "child"}, "forEach": "[]",
                            "onExit": "abort"}}]}],
         "transitions": [{"name": "t", "to": "b", "when": "false"}]},
        {"name": "b"},
    ])  # fmt: skip


def test_prime_opens_the_first_visit_with_filtered_activities() -> None:
    instance = start(staged())
    entry = instance.open_entry()
    assert entry is not None and entry.name == "a" and entry.enteredAt == iso(NOW)
    status = {a.name: a.status for a in entry.activities}
    assert status == {"kept": "active", "dropped": "skipped", "unsure": "active",
                      "cohort": "active"}  # fmt: skip
    unsure = entry.activity("unsure")
    assert unsure is not None and unsure.filterEvaluation is not None
    assert unsure.filterEvaluation.unevaluable
    assert [f.value for f in entry.fields] == ["hi"]


def test_move_closes_the_visit_records_it_and_condemns_live_children() -> None:
    instance = start(staged())
    entry = instance.open_entry()
    assert entry is not None
    instance.subworkflows.append(SubworkflowEntry.model_validate({
        "_key": "row1", "activity": "cohort", "action": "fan", "definition": "child",
        "stageEntry": entry.key_, "cohortStage": "a", "rowKey": "x", "spawnedAt": "t",
        "ref": {"id": "lake:production:kid", "type": "kinflow.instance"}}))
    model = instance.definition_model()
    later = ctx()
    before = len(instance.history)
    target = model.stage("b")
    assert target is not None
    move(instance, model, target, later, transition="t")
    assert entry.exitedAt == iso(NOW) and instance.currentStage == "b"
    assert history_types(instance)[before:] == ["stageExited", "transitionFired",
                                                "stageEntered"]
    assert instance.completedAt == iso(NOW)  # a terminal stage completes the instance
    pending = instance.subworkflows[0].abortPending
    assert pending is not None and '"a" exited' in pending.reason
