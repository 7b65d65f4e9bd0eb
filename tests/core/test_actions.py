"""Pure: firing one action — its order (record, ops, effects, spawn) and the caller's gate.

``actions.fire`` is called directly for the order and the spawn hand-off;
``verbs.plan_fire_action`` for what a caller meets first: an enabled action,
one fired by its ``when`` only, a role the caller lacks, and params.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kinflow.core import verbs
from kinflow.core.actions import fire, no_spawner
from kinflow.core.cohort.spawn import ChildSeed
from kinflow.core.context import Actor
from kinflow.core.errors import ActionDisabled, ActionParamsInvalid, EngineBug
from kinflow.core.state import Instance
from kinflow.define.models import Action, WorkflowDefinition, find_action
from tests.core.spawning import child, knowing, parent
from tests.core.support import ALICE, ctx, definition, history_types, start

BOB = Actor.person("bob", "viewer")


def review() -> dict[str, Any]:
    """Stage ``a``: ``w.send`` sets ``note`` from a param, then mails it; ``w.auto`` fires
    by its ``when``; ``w.sign`` needs the editor role; ``w.close`` finishes ``w``."""
    return definition("act", [
        {"name": "a", "fields": [{"name": "note", "type": "string"},
                                 {"name": "count", "type": "number",
                                  "initialValue": {"type": "literal", "value": 0}}],
         "activities": [{"name": "w", "actions": [
             {"name": "send",
              "params": [{"name": "text", "type": "string", "required": True}],
              "ops": [{"type": "field.set", "target": {"scope": "stage", "field": "note"},
                       "value": {"type": "param", "param": "text"}},
                      {"type": "field.inc", "target": {"scope": "stage", "field": "count"}}],
              "effects": [{"name": "mail", "bindings": {"body": "$fields.note",
                                                        "asked": "$params.text"}}]},
             {"name": "auto", "when": "$fields.count > 5"},
             {"name": "sign", "roles": ["editor"]},
             {"name": "close", "status": "done"}]}],
         "transitions": [{"name": "t", "to": "b", "when": "false"}]},
        {"name": "b"},
    ])  # fmt: skip


def action_of(instance: Instance, stage: str, activity: str, name: str
              ) -> tuple[WorkflowDefinition, Action]:
    """The instance's definition and one action of it."""
    model = instance.definition_model()
    found = model.activity(stage, activity)
    action = find_action(found, name) if found is not None else None
    assert action is not None
    return model, action


def fire_send(instance: Instance, *, triggered: bool = False) -> bool:
    model, action = action_of(instance, "a", "w", "send")
    return fire(instance, model, ctx(actor=ALICE), "w", action, {"text": "hello"},
                triggered=triggered, spawner=no_spawner)


def field_value(instance: Instance, name: str) -> Any:
    entry = instance.open_entry()
    assert entry is not None
    return next(f.value for f in entry.fields if f.name == name)


def test_fire_records_then_runs_ops_then_queues_effects_on_the_new_state() -> None:
    instance = start(review())
    before = len(instance.history)
    assert fire_send(instance) is True
    types = history_types(instance)[before:]
    assert types[0] == "actionFired" and types[-1] == "effectQueued"
    assert field_value(instance, "note") == "hello" and field_value(instance, "count") == 1
    [pending] = instance.pendingEffects
    # the binding read $fields after the ops, and saw the caller's params
    assert pending.params == {"body": "hello", "asked": "hello"}
    assert pending.origin.name == "send" and pending.origin.activity == "w"


def test_a_fired_action_records_who_fired_it_and_whether_the_cascade_did() -> None:
    by_caller, by_cascade = start(review()), start(review())
    fire_send(by_caller)
    fire_send(by_cascade, triggered=True)
    caller_row = next(r for r in by_caller.history if r["_type"] == "actionFired")
    cascade_row = next(r for r in by_cascade.history if r["_type"] == "actionFired")
    assert caller_row["actor"]["id"] == "alice" and caller_row["action"] == "send"
    assert "triggered" not in caller_row or caller_row["triggered"] is None
    assert cascade_row["triggered"] is True


def test_a_spawn_is_handed_to_the_spawner_after_the_ops_and_its_answer_returned() -> None:
    fanning = start(parent(), c=knowing(child()))
    model, action = action_of(fanning, "review", "translate", "fan")
    seen: list[list[str]] = []

    def declining(instance: Instance, plan: Callable[[], list[ChildSeed]]) -> bool:
        seen.append(history_types(instance))
        return False

    assert fire(fanning, model, knowing(child()), "translate", action, None,
                spawner=declining) is False
    assert seen and seen[0][-1] == "actionFired"  # recorded before the spawn was offered
    assert fanning.subworkflows == []  # a declining spawner never planned the children


def test_a_spawn_where_no_spawner_was_given_is_a_kinflow_bug() -> None:
    instance = start(parent(), c=knowing(child()))
    model, action = action_of(instance, "review", "translate", "fan")
    with pytest.raises(EngineBug) as refused:
        fire(instance, model, knowing(child()), "translate", action, spawner=no_spawner)
    assert refused.value.code == "internal-error"


def test_an_enabled_action_fired_by_a_caller_applies_and_finishes_its_activity() -> None:
    fired = verbs.plan_fire_action(start(review()), verbs.FireAction("w", "close"),
                                   ctx(actor=ALICE))
    entry = fired.instance.open_entry()
    assert entry is not None and fired.changed
    state = entry.activity("w")
    assert state is not None and state.status == "done"
    assert "actionFired" in history_types(fired.instance)


def test_an_action_with_a_when_is_not_the_callers_to_fire() -> None:
    with pytest.raises(ActionDisabled) as refused:
        verbs.plan_fire_action(start(review()), verbs.FireAction("w", "auto"), ctx(actor=ALICE))
    assert refused.value.details["reason"] == "cascade-fired"


def test_a_caller_without_the_actions_role_is_refused_and_one_with_it_fires() -> None:
    instance = start(review())
    with pytest.raises(ActionDisabled) as refused:
        verbs.plan_fire_action(instance, verbs.FireAction("w", "sign"), ctx(actor=BOB))
    assert refused.value.details["reason"] == "filter-failed"
    signed = verbs.plan_fire_action(instance, verbs.FireAction("w", "sign"), ctx(actor=ALICE))
    assert history_types(signed.instance).count("actionFired") == 1


def test_params_are_checked_before_anything_is_applied() -> None:
    instance = start(review())
    with pytest.raises(ActionParamsInvalid):
        verbs.plan_fire_action(instance, verbs.FireAction("w", "send", {"text": 3}),
                               ctx(actor=ALICE))
    assert "actionFired" not in history_types(instance) and not instance.pendingEffects
    sent = verbs.plan_fire_action(instance, verbs.FireAction("w", "send", {"text": "hi"}),
                                  ctx(actor=ALICE))
    assert field_value(sent.instance, "note") == "hi"
    assert sent.instance.pendingEffects[0].params["asked"] == "hi"
