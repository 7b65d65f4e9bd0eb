"""Caller gates: the first failing reason, in the documented order, and params checks."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.errors import ActionParamsInvalid
from kinflow.core.gates import available_actions, check_params, declared_field
from tests.core.support import ALICE, ctx, definition, start


def gated() -> dict[str, Any]:
    return definition("gated", [
        {"name": "a", "fields": [{"name": "ok", "type": "boolean",
                                  "initialValue": {"type": "literal", "value": False}}],
         "activities": [
             {"name": "w", "requirements": [{"type": "groq", "name": "ready",
                                             "query": "$fields.ok == true"}],
              "actions": [{"name": "go"}]},
             {"name": "v", "actions": [
                 {"name": "open", "params": [{"name": "n", "type": "number", "required": True}]},
                 {"name": "picky", "filter": "$fields.ok == true"},
                 {"name": "auto", "when": "false"},
                 {"name": "close", "status": "done"}]}],
         "transitions": [{"name": "t", "to": "end", "when": "false"}]},
        {"name": "end"},
    ])  # fmt: skip


def verdicts(instance: Any) -> dict[str, tuple[bool, str | None]]:
    found = available_actions(instance, instance.definition_model(), ctx(), ALICE)
    return {f"{v.activity}.{v.action}": (v.enabled, v.reason) for v in found}


def test_each_action_reports_its_first_failing_gate() -> None:
    assert verdicts(start(gated())) == {
        "w.go": (False, "requirements-unmet"),
        "v.open": (True, None),
        "v.picky": (False, "filter-failed"),
        "v.auto": (False, "cascade-fired"),
        "v.close": (True, None),
    }


def test_terminal_reasons_come_first_aborted_before_completed() -> None:
    instance = start(gated())
    instance.completedAt = "2026-01-01T12:00:00.000Z"
    assert {r for _, r in verdicts(instance).values()} == {"instance-completed"}
    instance.abortedAt = instance.completedAt
    assert {r for _, r in verdicts(instance).values()} == {"instance-aborted"}


def test_a_finished_activity_is_not_active() -> None:
    instance = start(gated())
    entry = instance.open_entry()
    assert entry is not None
    activity = entry.activity("v")
    assert activity is not None
    activity.status = "done"
    assert verdicts(instance)["v.open"] == (False, "activity-not-active")


def test_params_every_problem_at_once() -> None:
    activity = start(gated()).definition_model().activity("a", "v")
    assert activity is not None and activity.actions
    action = activity.actions[0]
    assert check_params(action, "v", {"n": 3}) == {"n": 3}
    with pytest.raises(ActionParamsInvalid) as refused:
        check_params(action, "v", {"extra": 1})
    assert sorted(i["reason"] for i in refused.value.details["issues"]) == [
        "missing", "undeclared"]
    with pytest.raises(ActionParamsInvalid) as wrong:
        check_params(action, "v", {"n": "three"})
    assert wrong.value.details["issues"] == [{"param": "n", "reason": "expected number"}]
    with pytest.raises(ActionParamsInvalid):
        check_params(action, "v", ["not", "an", "object"])


def test_declared_field_by_scope() -> None:
    model = start(gated()).definition_model()
    assert declared_field(model, "a", "stage", "ok", None) is not None
    assert declared_field(model, "a", "workflow", "ok", None) is None
    assert declared_field(model, "a", "activity", "ok", "v") is None
