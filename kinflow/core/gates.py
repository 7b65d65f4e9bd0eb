"""May this caller fire this action, or edit this field, right now?

This module owns the caller-facing gates and their structured reasons, in
the order the first failing one is reported: instance terminal (``instance-aborted`` before
``instance-completed``), ``stage-terminal``, ``cascade-fired``,
``activity-not-active``, ``requirements-unmet``, ``filter-failed``. Roles
pin who may *drive a cascade* (``cascade.fulfils``); they are not a caller
gate, so no verdict says ``role-not-held``. ``fire_action`` raises the first failure;
``available_actions`` reports one verdict per action using the same code,
so the read model and the verb can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kinflow.core import readmodel
from kinflow.core.conditions import Renderer
from kinflow.core.context import Actor, PlanContext
from kinflow.core.errors import ActionParamsInvalid
from kinflow.core.state import Instance
from kinflow.define import sites
from kinflow.define.models import Action, ActionParam, Activity, FieldEntry, WorkflowDefinition
from kinflow.define.values import is_reference


@dataclass(frozen=True, slots=True)
class Verdict:
    activity: str
    action: str
    enabled: bool
    reason: str | None = None
    params: list[dict[str, Any]] | None = None
    detail: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"activity": self.activity, "action": self.action, "enabled": self.enabled,
                "reason": self.reason, "params": self.params}


def instance_reason(instance: Instance, definition: WorkflowDefinition) -> str | None:
    status = instance.terminal_state
    if status == readmodel.CANCELLING and instance.open_entry() is None:
        return "instance-cancelling"  # cancelling without a cancel stage: nothing to fire
    if status not in (readmodel.ACTIVE, readmodel.CANCELLING):
        return f"instance-{status}"  # instance-completed, instance-aborted, -cancelled
    stage = definition.stage(instance.currentStage)
    if stage is None or stage.terminal:
        return "stage-terminal"
    return None


def action_verdict(
    instance: Instance,
    definition: WorkflowDefinition,
    ctx: PlanContext,
    activity: Activity,
    action: Action,
    actor: Actor,
    renderer: Renderer | None = None,
) -> Verdict:
    """Whether ``actor`` may fire ``action`` now, with the first failing reason."""
    params = [p.to_json() for p in action.params or []] or None

    def refused(reason: str, **detail: Any) -> Verdict:
        return Verdict(activity.name, action.name, False, reason, params, detail or None)

    reason = instance_reason(instance, definition)
    if reason:
        return refused(reason)
    if action.cascade_fired:
        return refused("cascade-fired")
    entry = instance.open_entry()
    state = entry.activity(activity.name) if entry else None
    if state is None or state.status != "active":
        return refused("activity-not-active", status=state.status if state else None)
    renderer = renderer or Renderer(instance, definition, ctx)
    unmet = [
        r.name for r in activity.requirements or []
        if not renderer.check(r.query, sites.REQUIREMENT, activity.name, actor=actor).satisfied
    ]
    if unmet:
        return refused("requirements-unmet", requirements=unmet)
    if action.filter is not None and not renderer.check(
        action.filter, sites.ACTION_FILTER, activity.name, actor=actor
    ).satisfied:
        return refused("filter-failed")
    return Verdict(activity.name, action.name, True, None, params)


def available_actions(
    instance: Instance, definition: WorkflowDefinition, ctx: PlanContext, actor: Actor
) -> list[Verdict]:
    stage = definition.stage(instance.currentStage)
    renderer = Renderer(instance, definition, ctx)
    activities = (stage.activities or []) if stage is not None else []
    return [
        action_verdict(instance, definition, ctx, activity, action, actor, renderer)
        for activity in activities
        for action in activity.actions or []
    ]


_PARAM_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "url": lambda v: isinstance(v, str),
    "dateTime": lambda v: isinstance(v, str) and "T" in v,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "actor": lambda v: isinstance(v, dict) and isinstance(v.get("id"), str),
    "doc.ref": lambda v: is_reference(v) or isinstance(v, str),
    "doc.refs": lambda v: isinstance(v, list) and all(is_reference(i) or isinstance(i, str)
                                                      for i in v),
    "json": lambda v: True,
}


def check_params(action: Action, activity: str, params: Any) -> dict[str, Any]:
    """Validate caller params against the declared ones; every problem at once."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ActionParamsInvalid("params must be an object", activity=activity,
                                  action=action.name, issues=[{"param": "", "reason": "type"}])
    declared: dict[str, ActionParam] = {p.name: p for p in action.params or []}
    issues: list[dict[str, str]] = []
    for name in params:
        if name not in declared:
            issues.append({"param": name, "reason": "undeclared"})
    for name, spec in declared.items():
        value = params.get(name)
        if value is None:
            if spec.required:
                issues.append({"param": name, "reason": "missing"})
            continue
        if not _PARAM_CHECKS[spec.type](value):
            issues.append({"param": name, "reason": f"expected {spec.type}"})
        elif spec.options is not None and value not in [o.value for o in spec.options.list]:
            issues.append({"param": name, "reason": "not one of the options"})
    if issues:
        raise ActionParamsInvalid(
            f"params of {activity}.{action.name} are invalid", activity=activity,
            action=action.name, issues=issues,
        )
    return params


def declared_field(
    definition: WorkflowDefinition, stage: str, scope: str, name: str, activity: str | None
) -> FieldEntry | None:
    if scope == "workflow":
        pool = definition.fields
    elif scope == "stage":
        found = definition.stage(stage)
        pool = found.fields if found else None
    else:
        act = definition.activity(stage, activity) if activity else None
        pool = act.fields if act else None
    for entry in pool or []:
        if entry.name == name:
            return entry
    return None
