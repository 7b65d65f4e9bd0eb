"""The stored definition tree, as pydantic models.

This module owns the *stored* shape of a workflow definition (engine-model
§2.2-2.10 minus guards and the LATER features of SCOPE.md): every key the
engine interprets, nothing else. Parsing is strict: an unknown key anywhere is
an error, so a typo in a definition is refused at deploy instead of being
silently ignored. The authoring shorthand is not accepted here; ``expand``
turns the authoring form into this shape first.

Models are read-only data: the engine never mutates a parsed definition.
Dumping with ``to_json`` gives the canonical JSON that is hashed, stored and
pinned into instances.
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


# ---- value expressions and ops (§2.8) ----


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


class Effect(Stored):
    name: str
    title: str | None = None
    description: str | None = None
    bindings: dict[str, str] | None = None
    input: dict[str, Any] | None = None
    outputs: list[FieldShape] | None = None


class ActionParam(Stored):
    type: ParamKind
    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None
    options: ChoiceList | None = None
    validation: Bounds | None = None


class Requirement(Stored):
    type: Literal["groq"]
    name: str
    title: str | None = None
    description: str | None = None
    query: str


class DefinitionRef(Stored):
    name: str
    version: int | Literal["latest"] | None = None


class SpawnBlock(Stored):
    forEach: str
    definition: DefinitionRef
    with_: dict[str, str] | None = Field(default=None, alias="with")
    context: dict[str, str] | None = None
    onExit: Literal["detach", "abort"] | None = None


# ---- the tree ----


class Group(Stored):
    name: str
    title: str | None = None
    description: str | None = None
    kind: Literal["core", "details"] | None = None


class UrlTarget(Stored):
    type: Literal["url"]
    url: str


class FieldTarget(Stored):
    type: Literal["field"]
    field: FieldRef


class Action(Stored):
    name: str
    semantics: list[str] | None = None
    title: str | None = None
    description: str | None = None
    group: list[str] | None = None
    when: str | None = None
    filter: str | None = None
    params: list[ActionParam] | None = None
    ops: list[Op] | None = None
    effects: list[Effect] | None = None
    spawn: SpawnBlock | None = None
    roles: list[str] | None = None

    @property
    def cascade_fired(self) -> bool:
        """An action with ``when`` is fired by the engine, never by a caller."""
        return self.when is not None


class Activity(Stored):
    name: str
    semantics: list[str] | None = None
    title: str | None = None
    description: str | None = None
    groups: list[Group] | None = None
    group: list[str] | None = None
    target: Annotated[UrlTarget | FieldTarget, Field(discriminator="type")] | None = None
    filter: str | None = None
    requirements: list[Requirement] | None = None
    actions: list[Action] | None = None
    fields: list[FieldEntry] | None = None


class Transition(Stored):
    name: str
    title: str | None = None
    description: str | None = None
    to: str
    when: str


class Stage(Stored):
    name: str
    semantics: list[str] | None = None
    title: str | None = None
    description: str | None = None
    groups: list[Group] | None = None
    activities: list[Activity] | None = None
    transitions: list[Transition] | None = None
    fields: list[FieldEntry] | None = None
    editable: dict[str, bool | str] | None = None

    @property
    def terminal(self) -> bool:
        """A stage with no outgoing transitions ends the instance."""
        return not self.transitions


class WorkflowDefinition(Stored):
    name: str
    title: str
    description: str | None = None
    semantics: list[str] | None = None
    groups: list[Group] | None = None
    lifecycle: Lifecycle | None = None
    initialStage: str
    fields: list[FieldEntry] | None = None
    stages: list[Stage]
    predicates: dict[str, str] | None = None
    roleAliases: dict[str, list[str]] | None = None

    def stage(self, name: str) -> Stage | None:
        for stage in self.stages:
            if stage.name == name:
                return stage
        return None

    def activity(self, stage: str, name: str) -> Activity | None:
        found = self.stage(stage)
        for activity in (found.activities or []) if found else []:
            if activity.name == name:
                return activity
        return None


def find_action(activity: Activity, name: str) -> Action | None:
    for action in activity.actions or []:
        if action.name == name:
            return action
    return None
