"""The JSON Schema of an authored definition, generated from the models deploy parses with.

Editors validate and complete definition files against it. The strict
pydantic models (``kinflow.define.models``) are the real validators, so the
schema starts from theirs and then widens it by the authoring shorthand that
``kinflow.define.expand`` accepts before parsing (an action's ``status``, a
bare field name as an op target, a transition without ``when`` ...), adds a
description to every key, and accepts a file's three shapes: one definition,
a list of them, or ``{"$schema": ..., "definitions": [...]}``. What only
deploy can judge (names that resolve, GROQ, the spawn contracts) stays with
deploy. The generated text is committed as ``definition.schema.json`` next to
this module; ``python -m kinflow.define.schema --write`` refreshes it, and a
test keeps the two equal.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from kinflow.define.schema_text import DEF_DESCRIPTIONS, KEY_DESCRIPTIONS

SCHEMA_FILE = Path(__file__).with_name("definition.schema.json")
DIALECT = "https://json-schema.org/draft/2020-12/schema"
OP_DEFS = ("SetOp", "SetIfMissingOp", "UnsetOp", "AppendOp", "IncOp", "DecOp",
           "UpdateWhereOp", "RemoveWhereOp")


def definition_schema() -> dict[str, Any]:
    """The schema as a JSON-ready dict (keys in a stable order)."""
    from kinflow.define.models import WorkflowDefinition

    generated = WorkflowDefinition.model_json_schema(by_alias=True)
    defs: dict[str, Any] = generated.pop("$defs")
    defs["WorkflowDefinition"] = generated
    for name, node in defs.items():
        defs[name] = _tidy(node)
        defs[name].pop("title", None)
    _authoring_forms(defs)
    _describe(defs)
    return {
        "$schema": DIALECT,
        "title": "kinflow workflow definition",
        "description": "One definition, a list of definitions, or a batch object "
                       "{\"$schema\", \"definitions\"}: what `kinflow deploy` reads.",
        "anyOf": [
            {"$ref": "#/$defs/WorkflowDefinition"},
            {"type": "array", "items": {"$ref": "#/$defs/WorkflowDefinition"}},
            {"$ref": "#/$defs/DefinitionBatch"},
        ],
        "$defs": dict(sorted(defs.items())),
    }


def schema_text() -> str:
    return json.dumps(definition_schema(), indent=2, ensure_ascii=False) + "\n"


def _tidy(node: Any) -> Any:
    """Drop pydantic's generated titles and null defaults; an optional key is just absent."""
    if isinstance(node, list):
        return [_tidy(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _tidy(v) for k, v in node.items() if k != "default" or v is not None}
    options = out.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        rest = [o for o in options if o != {"type": "null"}]
        del out["anyOf"]
        if len(rest) == 1:
            out.update(rest[0])
        else:
            out["anyOf"] = rest
    if isinstance(out.get("properties"), dict):
        for prop in out["properties"].values():
            if isinstance(prop, dict):
                prop.pop("title", None)
    return out


def _authoring_forms(defs: dict[str, Any]) -> None:
    """Widen the stored shape by the shorthand ``expand`` turns into it."""
    names = {"type": "string"}
    string_or_list = {"anyOf": [names, {"type": "array", "items": names}]}
    defs["AuthoredFieldRef"] = {
        "anyOf": [
            {"type": "string"},
            {"type": "object", "additionalProperties": False, "required": ["field"],
             "properties": copy.deepcopy(defs["FieldRef"]["properties"])},
        ],
    }
    for name in OP_DEFS:
        defs[name]["properties"]["target"] = {"$ref": "#/$defs/AuthoredFieldRef"}
    _optional(defs["StatusSetOp"], "activity")
    _optional(defs["Transition"], "when")
    _optional(defs["FieldReadValue"], "scope")
    _optional(defs["FieldReadSource"], "scope")
    defs["Action"]["properties"]["status"] = {
        "enum": ["active", "done", "skipped", "failed"], "type": "string"}
    for owner in ("Action", "Activity", "FieldEntry"):
        defs[owner]["properties"]["group"] = copy.deepcopy(string_or_list)
    defs["FieldEntry"]["properties"]["editable"] = {
        "anyOf": [{"type": "boolean"}, {"type": "string"}, {"type": "array", "items": names}]}
    defs["FailureBudget"]["oneOf"] = [{"required": ["count"]}, {"required": ["percent"]}]
    defs["WorkflowDefinition"]["properties"] = {
        "$schema": {"type": "string"}, **defs["WorkflowDefinition"]["properties"]}
    defs["DefinitionBatch"] = {
        "type": "object", "additionalProperties": False, "required": ["definitions"],
        "properties": {
            "$schema": {"type": "string"},
            "definitions": {"type": "array", "items": {"$ref": "#/$defs/WorkflowDefinition"}},
        },
    }


def _optional(node: dict[str, Any], key: str) -> None:
    node["required"] = [k for k in node.get("required", []) if k != key]


def _describe(defs: dict[str, Any]) -> None:
    for name, node in defs.items():
        node.pop("description", None)
        if name in DEF_DESCRIPTIONS:
            node["description"] = DEF_DESCRIPTIONS[name]
        for key, prop in (node.get("properties") or {}).items():
            text = KEY_DESCRIPTIONS.get((name, key)) or KEY_DESCRIPTIONS.get(("*", key))
            if text and isinstance(prop, dict):
                prop["description"] = text


def main(argv: list[str]) -> int:
    """``--write`` refreshes the committed file; otherwise the schema goes to stdout."""
    text = schema_text()
    if argv[1:] == ["--write"]:
        SCHEMA_FILE.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
