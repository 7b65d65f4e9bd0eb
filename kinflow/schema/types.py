"""The GraphQL object types of the API (docs/api.md): thin views over stored documents.

Each view keeps the raw lake document (``strawberry.Private``) and computes
its fields on demand, so a query pays only for what it selects. Related
instances (parent, ancestors, children, a row's child) go through the
request's DataLoaders.

The leaf records and enums live in ``kinflow.schema.instance_parts``, the
definition types in ``kinflow.schema.definition_types``; both are importable
from here too.
"""

from __future__ import annotations

from typing import Any

import strawberry

from kinflow.core import readmodel
from kinflow.core.cohort.registry import Row, select
from kinflow.core.state import Instance, parse_instance
from kinflow.engine.registry_cache import registry_rows
from kinflow.gdr import document_id, format_gdr
from kinflow.schema.cohort_page import RowsPage
from kinflow.schema.context import KInfo
from kinflow.schema.definition_types import DeployedDefinition, DeployResult, WorkflowDefinition
from kinflow.schema.instance_parts import (
    ActionVerdict,
    ActivityState,
    ChildStatus,
    EditMode,
    EffectOutcome,
    HistoryEntry,
    InstanceFilter,
    InstanceStatus,
    PageInfo,
    PendingEffect,
    StageVisit,
    instance_status,
)
from kinflow.schema.loaders import Doc, parent_id
from kinflow.schema.scalars import JSON, DateTime, jsonable

__all__ = [
    "ActionVerdict",
    "ActivityState",
    "ChildStatus",
    "DeployResult",
    "DeployedDefinition",
    "EditMode",
    "EffectOutcome",
    "HistoryEntry",
    "InstanceFilter",
    "InstanceStatus",
    "PageInfo",
    "PendingEffect",
    "StageVisit",
    "Subworkflow",
    "WorkflowDefinition",
    "WorkflowInstance",
    "instance_status",
]


@strawberry.type(
    description="One row of the parent's registry, as conditions see it in $subworkflows."
)
class Subworkflow:
    row: strawberry.Private[Row]

    @strawberry.field
    def row_key(self) -> str:
        return self.row.row_key

    @strawberry.field
    def activity(self) -> str:
        return self.row.activity

    @strawberry.field
    def action(self) -> str:
        return self.row.action

    @strawberry.field
    def definition(self) -> str:
        return self.row.definition

    @strawberry.field
    def current(self) -> bool:
        return self.row.current

    @strawberry.field
    def status(self) -> ChildStatus:
        return ChildStatus(self.row.status)

    @strawberry.field
    def stage(self) -> str | None:
        return self.row.stage

    @strawberry.field
    def spawned_at(self) -> DateTime:
        return DateTime(self.row.spawned_at)

    @strawberry.field(
        description="An abort is owed and not yet carried out (abortPending set, row not resolved)."
    )
    def condemned(self) -> bool:
        return self.row.condemned

    @strawberry.field(description="Why an abort was owed; kept after the abort as the audit.")
    def abort_reason(self) -> str | None:
        return self.row.abort_reason

    @strawberry.field
    def resolved_at(self) -> DateTime | None:
        return DateTime(self.row.resolved_at) if self.row.resolved_at else None

    @strawberry.field
    def child_id(self) -> strawberry.ID:
        return strawberry.ID(self.row.child_id)

    @strawberry.field(description="Null when the child document is gone.")
    async def child(self, info: KInfo) -> WorkflowInstance | None:
        doc = await info.context.loaders.instance(self.row.child_id)
        return WorkflowInstance(doc=doc) if doc is not None else None

    @strawberry.field(
        description="succeeded | failed | aborted | cancelled; null while live or queued."
    )
    def outcome(self) -> str | None:
        return self.row.outcome

    @strawberry.field(description="The child's declared outputs, copied when it finished.")
    def outputs(self) -> JSON | None:
        return jsonable(self.row.outputs) if self.row.outputs is not None else None

    @strawberry.field(description="Why outputs is null although declared: output-too-large.")
    def outputs_error(self) -> str | None:
        return self.row.outputs_error

    @strawberry.field(description="1 for the first child of the row.")
    def attempt(self) -> int:
        return self.row.attempt

    @strawberry.field(description="The children of this row's earlier attempts, oldest first.")
    def previous_child_ids(self) -> list[strawberry.ID]:
        return [strawberry.ID(i) for i in self.row.previous_child_ids]

    @strawberry.field(description="The child is cancelling (its row stays ACTIVE meanwhile).")
    def cancelling(self) -> bool:
        return self.row.cancelling

    @strawberry.field(description="When the current attempt's child was created; null while "
                      "queued (docs/subworkflows.md#settlement).")
    def started_at(self) -> DateTime | None:
        return DateTime(self.row.started_at) if self.row.started_at else None

    @strawberry.field(description="startedAt + spawn.childTimeoutSeconds: a child still live "
                      "then is timed out; null without a timeout.")
    def deadline_at(self) -> DateTime | None:
        return DateTime(self.row.deadline_at) if self.row.deadline_at else None

    @strawberry.field(description="A queued row waiting for an automatic retry may start from "
                      "then; null once started or skipped.")
    def retry_at(self) -> DateTime | None:
        return DateTime(self.row.retry_at) if self.row.retry_at else None

    @strawberry.field(description="The row's priority (spawn.priority): queued rows start "
                      "highest first; null when the spawn declares none.")
    def priority(self) -> float | None:
        return self.row.priority

    @strawberry.field(description="The row's concurrencyKey (spawn.concurrencyKey).")
    def key(self) -> str | None:
        return self.row.key


@strawberry.type(description="A page of a cohort's rows, in registry (forEach) order.")
class SubworkflowConnection:
    nodes: list[Subworkflow]
    page_info: PageInfo
    found: strawberry.Private[RowsPage]

    @strawberry.field(description="Rows of the cohort the filter selects (every page).")
    async def total_count(self) -> int:
        return await self.found.total_count()

    @classmethod
    def of(cls, found: RowsPage) -> SubworkflowConnection:
        return cls(nodes=[Subworkflow(row=r) for r in found.rows], found=found,
                   page_info=PageInfo(has_next_page=found.has_next,
                                      end_cursor=found.end_cursor))


@strawberry.type(description="Why, by whom and since when a family is kept (holdFamily).")
class RetentionHold:
    reason: str
    by: str
    at: DateTime

    @classmethod
    def of(cls, stored: Any) -> RetentionHold | None:
        if not isinstance(stored, dict):
            return None
        return cls(reason=str(stored.get("reason", "")), by=str(stored.get("by", "")),
                   at=DateTime(str(stored.get("at", ""))))


@strawberry.type
class WorkflowInstance:
    doc: strawberry.Private[Doc | None]
    # the committed state a mutation answers with (``of_state``): ``doc`` is made from it
    # on the first field that reads more than the id, the status or the stage
    state: strawberry.Private[Instance | None] = None

    @classmethod
    def of_state(cls, state: Instance) -> WorkflowInstance:
        return cls(doc=None, state=state)

    @property
    def document(self) -> Doc:
        if self.doc is None:
            assert self.state is not None
            self.doc = self.state.to_json()
        return self.doc

    @strawberry.field
    def id(self) -> strawberry.ID:
        if self.state is not None:
            return strawberry.ID(self.state.id_)
        return strawberry.ID(self.document["_id"])

    @strawberry.field
    def gdr(self) -> str:
        return format_gdr(self.document.get("dataset") or "production", self.document["_id"])

    @strawberry.field
    def definition(self) -> str:
        return str(self.document.get("definition"))

    @strawberry.field
    def version(self) -> int:
        return int(self.document.get("pinnedVersion") or 0)

    @strawberry.field
    def status(self) -> InstanceStatus:
        if self.state is not None:  # the stamps the read model reads (readmodel.status_of)
            return InstanceStatus(self.state.terminal_state)
        return instance_status(self.document)

    @strawberry.field
    def current_stage(self) -> str:
        if self.state is not None:
            return self.state.currentStage
        return str(self.document.get("currentStage"))

    @strawberry.field(
        description="Effective values: name -> value (workflow, then stage, then activity scope)."
    )
    def fields(self) -> JSON:
        return jsonable(readmodel.effective_fields(self.document))

    @strawberry.field(description="Of the current stage visit.")
    def activities(self) -> list[ActivityState]:
        return [
            ActivityState(
                name=a["name"], status=a["status"], started_at=a.get("startedAt"),
                completed_at=a.get("completedAt"), fired_actions=list(a.get("firedActions") or []),
            )
            for a in readmodel.activities(self.document)
        ]  # fmt: skip

    @strawberry.field(description="Every visit, oldest first.")
    def stages(self) -> list[StageVisit]:
        return [
            StageVisit(key=s["_key"], name=s["name"], entered_at=s["enteredAt"],
                       exited_at=s.get("exitedAt"))
            for s in self.document.get("stages") or []
        ]  # fmt: skip

    async def assembled(self, info: KInfo) -> Doc:
        """This instance with its registry rows and whole history (read only when asked)."""
        engine = await info.context.services.engine_over(self.document.get("dataset"))
        return await engine.assemble(self.document)

    @strawberry.field
    async def subworkflows(
        self,
        info: KInfo,
        activity: str | None = None,
        current_only: bool | None = None,
        status: ChildStatus | None = None,
    ) -> list[Subworkflow]:
        doc = await self.assembled(info)
        rows = select(registry_rows(doc), activity=activity, current_only=current_only,
                      status=status.value if status else None)  # fmt: skip
        return [Subworkflow(row=r) for r in rows]

    @strawberry.field
    async def parent(self, info: KInfo) -> WorkflowInstance | None:
        pid = parent_id(self.document)
        if pid is None:
            return None
        doc = await info.context.loaders.instance(pid)
        return WorkflowInstance(doc=doc) if doc is not None else None

    @strawberry.field(description="Root first.")
    async def ancestors(self, info: KInfo) -> list[WorkflowInstance]:
        ids = [document_id(gdr) for gdr in readmodel.ancestor_gdrs(self.document)]
        docs = await info.context.loaders.documents.load_many(ids)
        return [WorkflowInstance(doc=d) for d in docs if d is not None]

    @strawberry.field
    async def children(
        self, info: KInfo, status: ChildStatus | None = None
    ) -> list[WorkflowInstance]:
        docs = await info.context.loaders.children.load(self.document["_id"])
        return [
            WorkflowInstance(doc=d) for d in docs
            if status is None or readmodel.row_status(d) == status.value
        ]  # fmt: skip

    @strawberry.field
    async def available_actions(self, info: KInfo) -> list[ActionVerdict]:
        engine = await info.context.services.engine_over(self.document.get("dataset"))
        instance = parse_instance(await engine.assemble(self.document))
        verdicts = await engine.available_actions_for(instance, actor=info.context.actor)
        return [
            ActionVerdict(activity=v.activity, action=v.action, enabled=v.enabled,
                          reason=v.reason, params=jsonable(v.params))
            for v in verdicts
        ]  # fmt: skip

    @strawberry.field
    def pending_effects(self) -> list[PendingEffect]:
        return [
            PendingEffect(key=e["_key"], name=e["name"], params=jsonable(e.get("params") or {}),
                          queued_at=e["queuedAt"], claimed=e.get("claim") is not None)
            for e in self.document.get("pendingEffects") or []
        ]  # fmt: skip

    @strawberry.field
    async def history(self, info: KInfo, last: int | None = 50) -> list[HistoryEntry]:
        rows = list((await self.assembled(info)).get("history") or [])
        if last is not None:
            rows = rows[-last:] if last > 0 else []
        return [
            HistoryEntry(type=str(h.get("_type")), at=h.get("at") or "",
                         data=jsonable({k: v for k, v in h.items()
                                        if k not in ("_key", "_type", "at")}))
            for h in rows
        ]  # fmt: skip

    @strawberry.field
    def started_at(self) -> DateTime:
        return DateTime(self.document.get("startedAt") or "")

    @strawberry.field
    def completed_at(self) -> DateTime | None:
        return self.document.get("completedAt")

    @strawberry.field
    def aborted_at(self) -> DateTime | None:
        return self.document.get("abortedAt")

    @strawberry.field(description="When cancelInstance was asked (CANCELLING since).")
    def cancelling_at(self) -> DateTime | None:
        return self.document.get("cancellingAt")

    @strawberry.field(description="When the graceful cancellation ended (CANCELLED).")
    def cancelled_at(self) -> DateTime | None:
        return self.document.get("cancelledAt")

    @strawberry.field(description="The reason given to cancelInstance.")
    def cancel_reason(self) -> str | None:
        reason = self.document.get("cancelReason")
        return reason if isinstance(reason, str) else None

    @strawberry.field(description=(
        "On a family's root: the hold that keeps the family from retention and purges "
        "(holdFamily), or null."))
    def retention_hold(self) -> RetentionHold | None:
        return RetentionHold.of(self.document.get("retentionHold"))

    @strawberry.field
    def last_changed_at(self) -> DateTime:
        return DateTime(self.document.get("lastChangedAt") or self.document.get("_updatedAt") or "")

    @strawberry.field
    def revision(self) -> str:
        return str(self.document.get("_rev"))

    @strawberry.field
    def next_evaluation_at(self) -> DateTime | None:
        return self.document.get("nextEvaluationAt")
