"""Fields, values and operations: the parts of a definition that touch an instance's fields.

The leaves of the stored definition tree (``kinflow.define.models`` holds the
tree itself: workflows, stages, activities, actions, spawns): field kinds and
declarations, the value expressions an op writes, and the ops. Same rules as
the rest of the tree: strict keys, frozen, camelCase on the wire.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FieldKind = Literal[
    "doc.ref",
    "doc.refs",
    "subject",
    "string",
    "text",
    "url",
    "number",
    "boolean",
    "date",
    "datetime",
    "actor",
    "assignee",
    "assignees",
    "object",
    "array",
]
REFERENCE_KINDS: frozenset[str] = frozenset({"doc.ref", "subject"})
LIST_KINDS: frozenset[str] = frozenset({"doc.refs", "array", "assignee", "assignees"})

Scope = Literal["workflow", "stage", "activity"]
ActivityStatus = Literal["active", "done", "skipped", "failed"]
ParamKind = Literal[
    "string", "number", "boolean", "url", "dateTime", "actor", "doc.ref", "doc.refs", "json"
]
Lifecycle = Literal["standalone", "child"]


class Stored(BaseModel):
    """Base of every stored node: strict keys, frozen, camelCase on the wire."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class FieldRef(Stored):
    scope: Scope
    field: str


class ChoiceOption(Stored):
    title: str
    value: Any


class ChoiceList(Stored):
    list: list[ChoiceOption]


class Bounds(Stored):
    min: float | None = None
    max: float | None = None


class FieldShape(Stored):
    """A sub-field of an object/array field, or an effect output."""

    name: str
    type: FieldKind
    title: str | None = None
    description: str | None = None
    options: ChoiceList | None = None
    validation: Bounds | None = None
    types: list[str] | None = None
    roles: list[str] | None = None
    fields: list[FieldShape] | None = None
    of: list[FieldShape] | None = None


class InputSource(Stored):
    type: Literal["input"]


class LiteralSource(Stored):
    type: Literal["literal"]
    value: Any


class QuerySource(Stored):
    type: Literal["query"]
    query: str


class FieldReadSource(Stored):
    type: Literal["fieldRead"]
    scope: Scope
    field: str
    path: str | None = None


FieldSource = Annotated[
    InputSource | LiteralSource | QuerySource | FieldReadSource, Field(discriminator="type")
]


class FieldEntry(FieldShape):
    """A declared field at workflow, stage or activity scope."""

    group: list[str] | None = None
    required: bool | None = None
    initialValue: FieldSource | None = None
    editable: bool | str | None = None


# ---- value expressions and ops ----


class LiteralValue(Stored):
    type: Literal["literal"]
    value: Any


class FieldReadValue(Stored):
    type: Literal["fieldRead"]
    scope: Scope
    field: str
    path: str | None = None


class ParamValue(Stored):
    type: Literal["param"]
    param: str


class ActorValue(Stored):
    type: Literal["actor"]


class NowValue(Stored):
    type: Literal["now"]


class SelfValue(Stored):
    type: Literal["self"]


class StageValue(Stored):
    type: Literal["stage"]


class ObjectValue(Stored):
    type: Literal["object"]
    fields: dict[str, ValueExpr]


ValueExpr = Annotated[
    LiteralValue
    | FieldReadValue
    | ParamValue
    | ActorValue
    | NowValue
    | SelfValue
    | StageValue
    | ObjectValue,
    Field(discriminator="type"),
]


class SetOp(Stored):
    type: Literal["field.set"]
    target: FieldRef
    value: ValueExpr


class SetIfMissingOp(Stored):
    type: Literal["field.setIfMissing"]
    target: FieldRef
    value: ValueExpr


class UnsetOp(Stored):
    type: Literal["field.unset"]
    target: FieldRef


class AppendOp(Stored):
    type: Literal["field.append"]
    target: FieldRef
    value: ValueExpr


class IncOp(Stored):
    type: Literal["field.inc"]
    target: FieldRef
    value: ValueExpr | None = None


class DecOp(Stored):
    type: Literal["field.dec"]
    target: FieldRef
    value: ValueExpr | None = None


class UpdateWhereOp(Stored):
    type: Literal["field.updateWhere"]
    target: FieldRef
    where: str
    value: ValueExpr


class RemoveWhereOp(Stored):
    type: Literal["field.removeWhere"]
    target: FieldRef
    where: str


class StatusSetOp(Stored):
    type: Literal["status.set"]
    activity: str
    status: ActivityStatus


Op = Annotated[
    SetOp
    | SetIfMissingOp
    | UnsetOp
    | AppendOp
    | IncOp
    | DecOp
    | UpdateWhereOp
    | RemoveWhereOp
    | StatusSetOp,
    Field(discriminator="type"),
]
FIELD_OP_TYPES: frozenset[str] = frozenset(
    {
        "field.set",
        "field.setIfMissing",
        "field.unset",
        "field.append",
        "field.inc",
        "field.dec",
        "field.updateWhere",
        "field.removeWhere",
    }
)


# ---- effects, params, requirements, spawn ----
