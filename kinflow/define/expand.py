"""Authoring shorthand -> stored form.

This module owns the desugaring rules (docs/engine.md#definitions) and nothing else:
it works on plain JSON (dicts and lists), never raises, and leaves anything it
does not understand in place so that the strict parse and the validator can
report it with a path. The expansion is idempotent: expanding a stored
definition returns it unchanged, which is what lets a fetched definition
document re-deploy as ``unchanged``.

Rules:

* action ``status`` -> a ``status.set`` op on the firing activity, appended
  after the authored ops;
* caller-fired action ``roles`` -> folded into ``filter`` as a role check over
  ``$actor.roles`` (widened by ``roleAliases``); a cascade-fired action keeps
  ``roles`` as its execute pin;
* transition without ``when`` -> ``$allActivitiesDone``;
* ``status.set`` without ``activity`` -> the firing activity;
* field references (bare name or ``{field}``) -> ``{scope, field}`` resolved
  lexically: activity, then stage, then workflow;
* field ``editable: [roles]`` -> a role predicate; ``group: "x"`` -> ``["x"]``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

DEFAULT_TRANSITION_WHEN = "$allActivitiesDone"
ENVELOPE_KEYS = frozenset({"version", "contentHash", "modelVersion", "minReaderModel", "tag"})


def strip_envelope(document: dict[str, Any]) -> dict[str, Any]:
    """Drop the stored-document envelope so a fetched definition re-deploys, and the
    ``$schema`` an authored file names for editors (a string: any other value stays, and
    the strict parse refuses it as the unknown key it is)."""
    return {k: v for k, v in document.items()
            if not k.startswith("_") and k not in ENVELOPE_KEYS
            and not (k == "$schema" and isinstance(v, str))}


def expand_definition(authored: Any) -> Any:
    """Return the stored form of one authored definition (a new object)."""
    if not isinstance(authored, dict):
        return authored
    workflow = strip_envelope(copy.deepcopy(authored))
    aliases = workflow.get("roleAliases") if isinstance(workflow.get("roleAliases"), dict) else {}
    workflow_fields = _names(workflow.get("fields"))
    _expand_fields(workflow.get("fields"))
    for stage in _dicts(workflow.get("stages")):
        stage_fields = _names(stage.get("fields"))
        _expand_fields(stage.get("fields"))
        _listify(stage, "groups", keep_objects=True)
        for transition in _dicts(stage.get("transitions")):
            if "when" not in transition or transition.get("when") is None:
                transition["when"] = DEFAULT_TRANSITION_WHEN
        for activity in _dicts(stage.get("activities")):
            _listify(activity, "group")
            _expand_fields(activity.get("fields"))
            scopes = Lexical(_names(activity.get("fields")), stage_fields, workflow_fields)
            for action in _dicts(activity.get("actions")):
                _expand_action(action, str(activity.get("name", "")), scopes, aliases or {})
    return workflow


class Lexical:
    """The field names visible from one activity, narrowest scope first."""

    def __init__(self, activity: set[str], stage: set[str], workflow: set[str]) -> None:
        self.layers = (("activity", activity), ("stage", stage), ("workflow", workflow))

    def resolve(self, ref: Any) -> Any:
        if isinstance(ref, str):
            ref = {"field": ref}
        if not isinstance(ref, dict) or "scope" in ref or not isinstance(ref.get("field"), str):
            return ref
        for scope, names in self.layers:
            if ref["field"] in names:
                return {"scope": scope, **ref}
        return {"scope": "workflow", **ref}


def _expand_action(
    action: dict[str, Any], activity: str, scopes: Lexical, aliases: dict[str, Any]
) -> None:
    _listify(action, "group")
    ops = action.get("ops")
    if isinstance(ops, list):
        for op in ops:
            _expand_op(op, activity, scopes)
    status = action.pop("status", None)
    if status is not None:
        ops = ops if isinstance(ops, list) else []
        ops.append({"type": "status.set", "activity": activity, "status": status})
        action["ops"] = ops
    roles = action.get("roles")
    if action.get("when") is None and isinstance(roles, list) and roles:
        action.pop("roles")
        check = role_predicate([str(r) for r in roles], aliases)
        authored = action.get("filter")
        action["filter"] = f"({authored}) && {check}" if isinstance(authored, str) else check


def _expand_op(op: Any, activity: str, scopes: Lexical) -> None:
    if not isinstance(op, dict):
        return
    if op.get("type") == "status.set" and "activity" not in op:
        op["activity"] = activity
    if "target" in op:
        op["target"] = scopes.resolve(op["target"])
    if "value" in op:
        op["value"] = _expand_value(op["value"], scopes)


def _expand_value(value: Any, scopes: Lexical) -> Any:
    if not isinstance(value, dict):
        return value
    if value.get("type") == "fieldRead" and "scope" not in value:
        resolved = scopes.resolve({"field": value.get("field")})
        return {**value, "scope": resolved.get("scope", "workflow")}
    if value.get("type") == "object" and isinstance(value.get("fields"), dict):
        inner = {k: _expand_value(v, scopes) for k, v in value["fields"].items()}
        return {**value, "fields": inner}
    return value


def _expand_fields(fields: Any) -> None:
    for entry in _dicts(fields):
        _listify(entry, "group")
        editable = entry.get("editable")
        if isinstance(editable, list) and all(isinstance(r, str) for r in editable):
            entry["editable"] = role_predicate(editable, {})
        source = entry.get("initialValue")
        if isinstance(source, dict) and source.get("type") == "fieldRead" and "scope" not in source:
            entry["initialValue"] = {**source, "scope": "workflow"}


def role_predicate(roles: list[str], aliases: dict[str, Any]) -> str:
    """GROQ that holds when ``$actor`` has one of ``roles`` (or a role aliased to one)."""
    accepted: list[str] = []
    star = aliases.get("*")
    universal: list[Any] = star if isinstance(star, list) else []
    for role in roles:
        found = aliases.get(role)
        extra: list[Any] = found if isinstance(found, list) else []
        for candidate in [role, *extra, *universal]:
            if isinstance(candidate, str) and candidate not in accepted:
                accepted.append(candidate)
    return f"count($actor.roles[@ in {json.dumps(accepted)}]) > 0"


def _listify(node: dict[str, Any], key: str, keep_objects: bool = False) -> None:
    value = node.get(key)
    if isinstance(value, str) and not keep_objects:
        node[key] = [value]


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _names(fields: Any) -> set[str]:
    return {str(entry.get("name")) for entry in _dicts(fields)}
