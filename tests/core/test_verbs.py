"""Pure: each verb's refusals are typed, keep ``contract-violation`` for caller
mistakes and say why in ``details.reason``; a keyed call replays once."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kinflow.core import verbs
from kinflow.core.commit import StartInstance
from kinflow.core.errors import (
    ActionDisabled,
    ActionNotFound,
    ActivityNotFinished,
    ActivityNotFound,
    ContractViolation,
    EditModeInvalid,
    FieldNotFound,
    InstanceExists,
    ResetTargetInvalid,
    StageNotFound,
)
from kinflow.core.mutation import Mutation
from kinflow.core.operator_verbs import (
    AbortInstance,
    ResetActivity,
    SetStage,
    plan_abort,
    plan_reset_activity,
    plan_set_stage,
)
from kinflow.core.state import Instance
from tests.core.support import ctx, definition, deployed, history_types, start

RAW = definition("v", [
    {"name": "a", "activities": [{"name": "w", "actions": [{"name": "go", "status": "done"}]}],
     "transitions": [{"name": "to-b", "to": "b"}]},
    {"name": "b"},
], fields=[{"name": "title", "type": "string", "editable": True}])

Verb = Callable[[Instance], Mutation]
REFUSALS: list[tuple[str, Verb, type[ContractViolation], str]] = [
    ("fire", lambda m: verbs.plan_fire_action(m, verbs.FireAction("w", "nope"), ctx()),
     ActionNotFound, "action-not-in-stage"),
    ("edit-mode", lambda m: verbs.plan_edit_field(m, verbs.EditField("title", 1, "mix"), ctx()),
     EditModeInvalid, "edit-mode-invalid"),
    ("edit-field", lambda m: verbs.plan_edit_field(m, verbs.EditField("nope", 1), ctx()),
     FieldNotFound, "field-not-in-view"),
    ("set-stage", lambda m: plan_set_stage(m, SetStage("nope"), ctx()),
     StageNotFound, "stage-not-found"),
    ("reset-to", lambda m: plan_reset_activity(m, ResetActivity("w", "done"), ctx()),
     ResetTargetInvalid, "reset-target-invalid"),
    ("reset-which", lambda m: plan_reset_activity(m, ResetActivity("nope"), ctx()),
     ActivityNotFound, "activity-not-in-stage"),
    ("reset-running", lambda m: plan_reset_activity(m, ResetActivity("w", "skipped"),
                                                          ctx()),
     ActivityNotFinished, "activity-not-finished"),
    ("resume-other", lambda m: verbs.plan_resume(
        m, StartInstance(deployed({**RAW, "name": "other"}), None, m.id_), ctx()),
     InstanceExists, "instance-exists"),
]


@pytest.mark.parametrize(("verb", "kind", "reason"), [r[1:] for r in REFUSALS],
                         ids=[r[0] for r in REFUSALS])
def test_a_caller_mistake_is_typed_with_its_reason(verb: Verb, kind: type[ContractViolation],
                                                   reason: str) -> None:
    m = start(RAW)
    with pytest.raises(kind) as refused:
        verb(m)
    assert refused.value.code == "contract-violation"
    assert refused.value.details["reason"] == reason


def test_resuming_an_instance_aborted_before_it_was_primed_is_refused() -> None:
    created = verbs.plan_create(StartInstance(deployed(RAW), None, "instance.u"), ctx())
    aborted = plan_abort(created, AbortInstance("stop"), ctx()).instance
    with pytest.raises(InstanceExists) as refused:
        verbs.plan_resume(aborted, StartInstance(deployed(RAW), None, "instance.u"), ctx())
    assert refused.value.details["reason"] == "instance-aborted-unprimed"


@pytest.mark.parametrize("end", ["completed", "aborted"])
def test_firing_on_a_finished_instance_says_how_it_ended(end: str) -> None:
    m = start(RAW)
    if end == "aborted":
        m = plan_abort(m, AbortInstance(), ctx()).instance
    else:
        m = verbs.plan_fire_action(m, verbs.FireAction("w", "go"), ctx()).instance
        m = verbs.plan_hop(m, ctx()).instance
    assert m.terminal
    with pytest.raises(ActionDisabled) as refused:
        verbs.plan_fire_action(m, verbs.FireAction("w", "go"), ctx())
    assert refused.value.details["reason"] == f"instance-{end}"


def test_a_keyed_call_applies_once_and_replays() -> None:
    m = start(RAW)
    edit = verbs.EditField("title", "hello", idempotency_key="k1")
    first = verbs.plan_edit_field(m, edit, ctx())
    again = verbs.plan_edit_field(first.instance, edit, ctx())
    assert not first.replay and again.replay and not again.changed
    assert history_types(again.instance) == history_types(first.instance)
    assert again.instance.fields[0].value == "hello"
