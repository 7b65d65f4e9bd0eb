"""Creating an instance: the unprimed document a start or a spawned child begins as.

A start's ``fields`` are checked against the definition's inputs (every bad
value at once, then every missing required field); a child's come from its
spawn's ``with``, and a refusal then names that handoff rather than a
caller's input. The instance pins the definition it was created from as a
snapshot and reads it all its life. Priming (entering the first stage's
activities) is the commit's, not this module's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kinflow.core.context import PlanContext
from kinflow.core.definitions import parse_snapshot
from kinflow.core.errors import EngineBug, InitialFieldsInvalid, RequiredFieldNotProvided
from kinflow.core.fields import checked_value, materialise
from kinflow.core.history import record
from kinflow.core.inputs import check_values
from kinflow.core.state import INSTANCE_TYPE, ContextEntry, Instance
from kinflow.define.models import WorkflowDefinition
from kinflow.errors import KinflowError


@dataclass(slots=True)
class StartInstance:
    definition: dict[str, Any]  # the stored definition document (with version, contentHash)
    fields: dict[str, Any] | None = None
    instance_id: str | None = None  # required by ``plan_create``: the shell draws it
    context: dict[str, Any] | None = None
    ancestors: list[dict[str, Any]] | None = None
    # a child's start: the spawn that hands it ``fields`` (parent, stage, activity, action,
    # child), so a refusal names the handoff rather than a caller's input
    handoff: dict[str, str] | None = None


def check_initial_fields(definition: WorkflowDefinition, fields: Any, dataset: str,
                         handoff: dict[str, str] | None = None) -> dict[str, Any]:
    """Caller inputs: every bad row at once, then every missing required field.

    With ``handoff`` the values come from a spawn's ``with``: the refusals say so.
    """
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        raise InitialFieldsInvalid("fields must be an object {name: value}",
                                   issues=[{"field": "", "reason": "type"}])
    declared = {entry.name: entry for entry in definition.fields or []}
    issues: list[dict[str, str]] = []
    values: dict[str, Any] = {}
    for name, value in fields.items():
        entry = declared.get(name)
        if entry is None:
            issues.append({"field": name, "reason": "undeclared"})
        elif entry.initialValue is None or entry.initialValue.type != "input":
            issues.append({"field": name, "reason": "not-input"})
        else:
            try:
                values[name] = checked_value(entry, value, dataset)
            except KinflowError as exc:  # FieldValueInvalid, GDR problems
                issues.append({"field": name, "reason": "wrong-kind",
                               "detail": getattr(exc, "message", str(exc))})
    if issues:
        if handoff is not None:
            raise InitialFieldsInvalid(f"{_handoff_label(handoff)} hands invalid input(s)",
                                       issues=issues, source="handoff", **handoff)
        raise InitialFieldsInvalid("initial fields are invalid", issues=issues, source="input")
    missing = [
        e.name for e in definition.fields or []
        if e.required and values.get(e.name) in (None, [])
    ]
    if missing and handoff is not None:
        raise RequiredFieldNotProvided(
            f"{_handoff_label(handoff)} leaves required input(s) of {handoff['child']} "
            f"empty: {', '.join(missing)}", fields=missing, source="handoff", **handoff
        )
    if missing:
        raise RequiredFieldNotProvided(
            f"required field(s) not provided: {', '.join(missing)} (inputs of "
            f"{definition.name} the start must pass in fields)",
            fields=missing, source="input", definition=definition.name,
        )
    return values


def _handoff_label(handoff: dict[str, str]) -> str:
    return (f"the spawn of {handoff['parent']} (stage {handoff['stage']}, action "
            f"{handoff['action']}) to {handoff['child']}")


def plan_create(verb: StartInstance, ctx: PlanContext) -> Instance:
    """The unprimed instance document a start creates (commit 1 of the reference)."""
    check_values("fields", verb.fields, ctx.limits)
    check_values("context", verb.context, ctx.limits)
    document = verb.definition
    snapshot = json.dumps(document, separators=(",", ":"))
    # the runtime view (definitions.runtime_definition) the instance reads all its
    # life, parsed once per snapshot text: a cohort's children share it
    definition = parse_snapshot(snapshot)
    inputs = check_initial_fields(definition, verb.fields, ctx.dataset, verb.handoff)
    instance_id = verb.instance_id
    if instance_id is None:  # the shell draws ids (kinflow.engine.ids): the core has no entropy
        raise EngineBug("plan_create needs an instance id", definition=definition.name)
    instance = Instance.model_validate({
        "_id": instance_id,
        "_type": INSTANCE_TYPE,
        "dataset": ctx.dataset,
        "definition": definition.name,
        "pinnedVersion": document.get("version", 1),
        "pinnedContentHash": document.get("contentHash"),
        "definitionSnapshot": snapshot,
        "currentStage": definition.initialStage,
        "ancestors": verb.ancestors or [],
        "startedAt": ctx.now_iso,
        "lastChangedAt": ctx.now_iso,
        "startedBy": ctx.actor.to_json(),
    })
    instance.fields = materialise(
        definition.fields or [], ctx, visible={}, inputs=inputs,
        query_params={"self": ctx.gdr(instance_id), "now": ctx.now_iso},
    )
    instance.context = [_context_entry(name, value, ctx)
                        for name, value in (verb.context or {}).items()]
    record(instance, ctx, "stageEntered", stage=definition.initialStage,
           actor=ctx.actor.to_json())
    return instance


def _context_entry(name: str, value: Any, ctx: PlanContext) -> ContextEntry:
    kind: str
    stored: Any
    if isinstance(value, bool):
        kind, stored = "context.boolean", value
    elif isinstance(value, int | float):
        kind, stored = "context.number", value
    elif isinstance(value, str):
        kind, stored = "context.string", value
    elif isinstance(value, dict) and "id" in value:
        kind, stored = "context.ref", value
    else:
        kind, stored = "context.json", json.dumps(value)
    return ContextEntry.model_validate({"_key": ctx.new_key(), "_type": kind, "name": name,
                                        "value": stored})
