"""The stored definition tree, as pydantic models.

This module owns the *stored* shape of a workflow definition (docs/engine.md#definitions;
there are no guards): every key the
engine interprets, nothing else. Parsing is strict: an unknown key anywhere is
an error, so a typo in a definition is refused at deploy instead of being
silently ignored. The authoring shorthand is not accepted here; ``expand``
turns the authoring form into this shape first.

Models are read-only data: the engine never mutates a parsed definition.
Dumping with ``to_json`` gives the canonical JSON that is hashed, stored and
pinned into instances.

The field, value and op models live in ``kinflow.define.field_models``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from kinflow.define.field_models import (
    FIELD_OP_TYPES,
    LIST_KINDS,
    REFERENCE_KINDS,
    ActivityStatus,
    ActorValue,
    AppendOp,
    Bounds,
    ChoiceList,
    ChoiceOption,
    DecOp,
    FieldEntry,
    FieldKind,
    FieldReadSource,
    FieldReadValue,
    FieldRef,
    FieldShape,
    FieldSource,
    IncOp,
    InputSource,
    Lifecycle,
    LiteralSource,
    LiteralValue,
    NowValue,
    ObjectValue,
    Op,
    ParamKind,
    ParamValue,
    QuerySource,
    RemoveWhereOp,
    Scope,
    SelfValue,
    SetIfMissingOp,
    SetOp,
    StageValue,
    StatusSetOp,
    Stored,
    UnsetOp,
    UpdateWhereOp,
    ValueExpr,
)

__all__ = [
    "FIELD_OP_TYPES",
    "LIST_KINDS",
    "REFERENCE_KINDS",
    "Action",
    "ActionParam",
    "Activity",
    "ActivityStatus",
    "ActorValue",
    "AppendOp",
    "Bounds",
    "ChoiceList",
    "ChoiceOption",
    "DecOp",
    "DefinitionRef",
    "Effect",
    "FailureBudget",
    "FieldEntry",
    "FieldKind",
    "FieldReadSource",
    "FieldReadValue",
    "FieldRef",
    "FieldShape",
    "FieldSource",
    "FieldTarget",
    "Group",
    "IncOp",
    "InputSource",
    "Lifecycle",
    "LiteralSource",
    "LiteralValue",
    "NowValue",
    "ObjectValue",
    "Op",
    "ParamKind",
    "ParamValue",
    "QuerySource",
    "RemoveWhereOp",
    "Requirement",
    "Scope",
    "SelfValue",
    "SetIfMissingOp",
    "SetOp",
    "SpawnBlock",
    "Stage",
    "StageValue",
    "StatusSetOp",
    "Stored",
    "Transition",
    "UnsetOp",
    "UpdateWhereOp",
    "UrlTarget",
    "ValueExpr",
    "WorkflowDefinition",
    "find_action",
]


#: the largest number a GraphQL ``Int`` carries: a stored setting above it breaks every read
GRAPHQL_INT_MAX = 2**31 - 1


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


class FailureBudget(Stored):
    """``spawn.failureBudget``: exactly one of ``count`` or ``percent`` (core/cohort/budget.py)."""

    count: Annotated[int, Field(strict=True, ge=0, le=GRAPHQL_INT_MAX)] | None = None
    percent: Annotated[float, Field(gt=0, le=100)] | None = None


class StartRate(Stored):
    """``spawn.startRate``: at most ``count`` starts in any ``perSeconds`` window."""

    count: Annotated[int, Field(strict=True, ge=1, le=GRAPHQL_INT_MAX)]
    perSeconds: Annotated[float, Field(gt=0, le=86_400 * 365)]


class RetryPolicy(Stored):
    """``spawn.retry``: automatic re-queueing of a row whose attempt failed or timed out."""

    attempts: Annotated[int, Field(strict=True, ge=1, le=1000)]
    backoffSeconds: Annotated[float, Field(ge=0, le=86_400 * 365)] = 0
    factor: Annotated[float, Field(ge=1, le=100)] = 1
    maxBackoffSeconds: Annotated[float, Field(ge=0, le=86_400 * 365)] | None = None
    on: list[Literal["failed", "timed-out"]] | None = None


class SpawnBlock(Stored):
    forEach: str
    definition: DefinitionRef
    with_: dict[str, str] | None = Field(default=None, alias="with")
    context: dict[str, str] | None = None
    onExit: Literal["detach", "abort", "cancel"] | None = None
    # what a cancellation of the parent does to the child (core/cancellation.py)
    onCancel: Literal["cancel", "abort", "detach"] | None = None
    # the window: at most this many children of the cohort live at once (core/cohort/window.py)
    maxActive: Annotated[int, Field(strict=True, ge=1, le=GRAPHQL_INT_MAX)] | None = None
    # the failure budget and what exceeding it does (core/cohort/budget.py)
    failureBudget: FailureBudget | None = None
    onBudgetExceeded: Literal["abort-rest", "cancel-rest", "continue", "pause"] | None = None
    # admission (docs/subworkflows.md#admission): order, keyed windows and a start rate
    priority: str | None = None
    concurrencyKey: str | None = None
    maxActivePerKey: Annotated[int, Field(strict=True, ge=1, le=GRAPHQL_INT_MAX)] | None = None
    startRate: StartRate | None = None
    # settlement (docs/subworkflows.md#settlement): deadlines, retries, quorum
    childTimeoutSeconds: Annotated[float, Field(gt=0, le=86_400 * 365)] | None = None
    onTimeout: Literal["abort", "cancel"] | None = None
    retry: RetryPolicy | None = None
    completeWhen: str | None = None
    onComplete: Literal["abort", "cancel", "continue"] | None = None
    # incrementally kept figures over the finished rows (define/cohort_keys.py)
    aggregate: dict[str, str] | None = None


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
    # a terminal stage's outcome as its parent's row reads it (docs/subworkflows.md)
    outcome: Literal["succeeded", "failed"] | None = None

    @property
    def terminal(self) -> bool:
        """A stage with no outgoing transitions ends the instance."""
        return not self.transitions


class Retention(Stored):
    """How long a finished family of this root definition is kept (``kinflow.core.retention``)."""

    days: Annotated[int, Field(strict=True, ge=1, le=36_500)]


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
    retention: Retention | None = None
    # workflow-scope fields copied onto the parent's row when the child finishes
    outputs: list[str] | None = None
    # graceful cancellation (core/cancel_instance.py): the stage a cancelled instance cleans up
    # in, and how long it may take before it is aborted instead
    cancelStage: str | None = None
    cancelTimeoutSeconds: Annotated[int, Field(strict=True, ge=1)] | None = None

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
