"""The stored instance document (docs/engine.md#instances), parsed at the read boundary.

This module owns the *shape* of ``kinflow.instance`` documents and the few
derived facts every other module asks about (the open stage entry, terminal
state). It knows nothing about how state changes: planners mutate a copy of
an ``Instance`` and the shell writes only what changed (``patch.diff``, fenced
on the loaded ``_rev``).

Parsing is tolerant of unknown keys (``extra="allow"``: a newer writer's keys
survive a round trip through an older engine) and strict about everything the
engine interprets. A document whose ``minReaderModel`` is above this engine's
``MODEL_VERSION`` is refused rather than misread.

Python attribute names mirror the stored camelCase keys; the lake's
underscore keys (``_id``, ``_key`` ...) are aliased with a trailing
underscore.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from kinflow.core import readmodel
from kinflow.core.cohort.row_history import inline_history
from kinflow.core.definitions import parse_snapshot
from kinflow.core.errors import ModelVersionAhead, PersistedDocShape
from kinflow.core.owing import FIELD as OWING
from kinflow.core.owing import owing_of
from kinflow.core.parts import (  # noqa: F401  (re-exported: the stored shapes live here)
    ActorModel,
    EffectClaim,
    EffectOrigin,
    EffectRun,
    Part,
    PendingEffect,
)
from kinflow.define.models import WorkflowDefinition

INSTANCE_TYPE = "kinflow.instance"
MODEL_VERSION = 1
MIN_READER_MODEL = 1

ActivityStatus = Literal["active", "done", "skipped", "failed"]
TERMINAL_ACTIVITY = frozenset({"done", "skipped", "failed"})


class Ref(Part):
    """A stored reference: ``{id: "lake:<dataset>:<docId>", type}``."""

    id: str
    type: str | None = None


class ResolvedField(Part):
    key_: str = Field(alias="_key")
    type_: str = Field(alias="_type")  # the field kind
    name: str
    value: Any = None
    title: str | None = None
    resolvedAt: str | None = None
    fields: list[dict[str, Any]] | None = None
    of: list[dict[str, Any]] | None = None
    types: list[str] | None = None


class FilterEvaluation(Part):
    at: str
    truthy: bool
    unevaluable: bool | None = None
    detail: str | None = None


class ActivityEntry(Part):
    key_: str = Field(alias="_key")
    name: str
    status: ActivityStatus
    startedAt: str | None = None
    completedAt: str | None = None
    completedBy: str | None = None
    firedActions: list[str] = Field(default_factory=list)
    filterEvaluation: FilterEvaluation | None = None
    fields: list[ResolvedField] = Field(default_factory=list)


class StageEntry(Part):
    key_: str = Field(alias="_key")
    name: str
    enteredAt: str
    exitedAt: str | None = None
    fields: list[ResolvedField] = Field(default_factory=list)
    activities: list[ActivityEntry] = Field(default_factory=list)

    def activity(self, name: str) -> ActivityEntry | None:
        for entry in self.activities:
            if entry.name == name:
                return entry
        return None


class AbortPending(Part):
    at: str
    reason: str


class ResolvedRow(Part):
    at: str
    stage: str | None = None
    aborted: bool | None = None
    cancelled: bool | None = None  # the child ended its graceful cancellation (CANCELLED)
    detail: str | None = None


class ObservedChild(Part):
    """What propagation last stamped about a live child (kinflow: rows carry $subworkflows)."""

    status: Literal["active", "done", "aborted", "cancelled"]
    stage: str | None = None
    at: str
    cancelling: bool | None = None  # the live child is CANCELLING (core/cancel_instance.py)


class ChildResult(Part):
    """How an instance finished, written by its terminal commit for its parent's row
    (core/cohort/outcomes.py): the terminal stage's ``outcome`` and the declared outputs."""

    outcome: str
    outputs: dict[str, Any] | None = None
    outputsError: str | None = None


class SpawnSeed(Part):
    """What rebuilds a child that a large spawn registered but did not create yet."""

    version: int
    fields: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)


class SubworkflowEntry(Part):
    """One row of the workflow-scope registry plus what ``$subworkflows`` reads.

    Frozen: a parent's rows are shared between the process's cache of the
    parent and every plan made from it, so a plan changes a row only by
    replacing it (``rows.replace_row``), and the shell writes exactly the rows
    that are new objects (``rows.changed_rows``).
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    key_: str = Field(alias="_key")
    activity: str
    action: str
    definition: str
    stageEntry: str
    cohortStage: str
    rowKey: str
    ref: Ref
    spawnedAt: str
    abortPending: AbortPending | None = None
    resolved: ResolvedRow | None = None
    observed: ObservedChild | None = None
    seed: SpawnSeed | None = None  # set while the child may still need materialising
    queued: bool | None = None  # waiting in its cohort's window: no child document yet
    # how the child finished (core/cohort/outcomes.py): stamped with ``resolved``, in its commit
    outcome: str | None = None  # succeeded | failed | aborted; None while live
    outputs: dict[str, Any] | None = None  # the child's declared outputs
    outputsError: str | None = None  # why ``outputs`` is None although declared
    attempt: int | None = None  # None reads as 1 (redrive counts attempts)
    previousChildIds: list[str] | None = None  # None reads as [] (earlier attempts' children)
    # what redrive rebuilds the child from (core/cohort/redrive.py): the spawn's handoff, kept
    # when ``seed`` is not; and the bulk calls' derived keys applied to it (cohort/selection.py)
    handoff: SpawnSeed | None = None
    bulkKeys: list[ProcessedRequest] | None = None
    abortReason: str | None = None  # a code: why the engine aborted it (failure-budget-exceeded)
    # graceful cancellation (core/cancellation.py): the child is owed a cancel request
    # (kept once told: it says why); ``detached`` rows were let go by ``onCancel: detach``
    cancelPending: AbortPending | None = None
    detached: bool | None = None
    # admission (core/cohort/window.py): the row's place among queued rows and its window key
    priority: float | None = None  # None reads as 0
    concurrencyKey: str | None = None  # set when the spawn has ``concurrencyKey``
    # settlement: when the current attempt's child was created, when it times out, and when a
    # re-queued row may start again (None once it started or was skipped)
    startedAt: str | None = None
    deadlineAt: str | None = None
    retryAt: str | None = None

    @property
    def child_id(self) -> str:
        return self.ref.id.split(":", 2)[-1]

    @property
    def live(self) -> bool:
        return self.resolved is None


class BulkCall(Part):
    """A bulk cohort verb that has committed some of its batches (cohort/selection.py): what the
    heartbeat needs to finish it under the same key."""

    op: str
    key: str  # the caller's key, or the one the call drew
    keyed: bool = False  # the caller gave ``key``
    activity: str
    where: dict[str, Any] | None = None  # the CohortFilter (CohortFilter.to_json)
    startedAt: str
    actor: ActorModel | None = None
    # fireCohort's child action and params, abortCohort/cancelCohort's reason
    childActivity: str | None = None
    action: str | None = None
    params: dict[str, Any] | None = None
    reason: str | None = None


class CohortWindow(Part):
    """An operator's setting for one cohort (``updateCohort``), keyed by the visit that
    spawned it; without one the spawn block's ``maxActive`` applies (core/cohort/window.py)."""

    activity: str
    stageEntry: str
    maxActive: int | None = None
    failureBudget: dict[str, Any] | None = None  # {"count": N} | {"percent": P} (cohort/budget.py)
    budgetExceededAt: str | None = None  # when the budget acted: it acts once per cohort
    # a cancel or abort of the whole cohort closed it (core/cohort/bulk.py): no top-up
    closedAt: str | None = None
    closedBy: str | None = None  # abortCohort | cancelCohort
    # admission (docs/subworkflows.md#admission): operator overrides of the spawn's values
    maxActivePerKey: int | None = None
    startRate: dict[str, Any] | None = None  # {"count": N, "perSeconds": S}
    # recent starts as [at, how many] pairs, kept while inside the rate's window
    recentStarts: list[list[Any]] | None = None
    pausedAt: str | None = None  # paused: no queued row starts, no retry is admitted
    pausedReason: str | None = None
    # registration in batches: where the next batch's read resumes; None once every row is in
    registration: dict[str, Any] | None = None
    # settlement: the quorum held (``completeWhen``); rows not started were skipped
    completedAt: str | None = None


class ContextEntry(Part):
    key_: str = Field(alias="_key")
    type_: str = Field(alias="_type")
    name: str
    value: Any = None


class ProcessedRequest(Part):
    key_: str = Field(alias="_key")
    type_: str = Field(default="processedRequest", alias="_type")
    key: str
    op: str
    processedAt: str
    expiresAt: str
    fingerprint: str | None = None  # the call's arguments (ledger.fingerprint); absent on old rows


class Instance(Part):
    """A workflow instance: one run of a pinned definition."""

    id_: str = Field(alias="_id")
    type_: str = Field(default=INSTANCE_TYPE, alias="_type")
    rev_: str | None = Field(default=None, alias="_rev")
    createdAt_: str | None = Field(default=None, alias="_createdAt")
    updatedAt_: str | None = Field(default=None, alias="_updatedAt")
    modelVersion: int = MODEL_VERSION
    minReaderModel: int = MIN_READER_MODEL
    dataset: str
    definition: str
    pinnedVersion: int
    pinnedContentHash: str | None = None
    definitionSnapshot: str
    fields: list[ResolvedField] = Field(default_factory=list)
    context: list[ContextEntry] = Field(default_factory=list)
    ancestors: list[Ref] = Field(default_factory=list)
    currentStage: str
    stages: list[StageEntry] = Field(default_factory=list)
    subworkflows: list[SubworkflowEntry] = Field(default_factory=list)
    pendingEffects: list[PendingEffect] = Field(default_factory=list)
    effectHistory: list[EffectRun] = Field(default_factory=list)
    history: list[dict[str, Any]] = Field(default_factory=list)
    processedRequests: list[ProcessedRequest] = Field(default_factory=list)
    # where the registry lives (core/cohort/chunks.py): rows and their history entries are
    # documents of their own; the instance keeps how many there are
    rowCount: int | None = None  # registry rows stored beside the instance
    # the whole history's length, kept on a parent past ``Limits.sparse_rows`` rows, which
    # loads without the entries stored on its rows (core/cohort/sparse.py)
    historyCount: int | None = None
    rowPlace: int | None = None  # a spawned child's place in its parent's registry
    cohorts: list[CohortWindow] | None = None  # operators' cohort settings (updateCohort)
    cohortRows: list[dict[str, Any]] | None = None  # per-cohort counts (core/cohort/tallies.py)
    # a parent that is or may load sparse: the chunks holding rows owed an abort or a cancel
    # request, and whole-cohort condemnations still to page (core/cohort/sweep.py)
    owedChunks: dict[str, Any] | None = None
    sweeps: list[dict[str, Any]] | None = None
    startedAt: str
    lastChangedAt: str
    completedAt: str | None = None
    abortedAt: str | None = None
    result: ChildResult | None = None  # set by the commit that completes it (cohort/outcomes.py)
    nextEvaluationAt: str | None = None
    watch: list[str] = Field(default_factory=list)
    startedBy: ActorModel | None = None
    # kinflow's persisted repair hints (indexed; the heartbeat finds owed work by them)
    parentInstance: str | None = None  # the direct parent's document id, for spawned children
    propagateTo: str | None = None  # a parent whose row for this child is owed a stamp
    propagateToken: str | None = None  # which change that stamp carries (cleared by it)
    owesAborts: bool | None = None  # live rows are condemned and not drained yet
    materialising: bool | None = None  # a large spawn's children are still being created
    bulkCalls: list[BulkCall] | None = None  # bulk cohort verbs interrupted between batches
    # what plans derived from the registry, each memo checked against the rows it is
    # used with (cohort/registry.subworkflow_rows, cohort/observe.row_places); never stored.
    # A commit's copy starts with its source's memos, so a round on a 10,000-row
    # parent redoes the work only for the rows that changed since.
    _derived: dict[str, Any] = PrivateAttr(default_factory=dict)
    owesBulk: bool | None = None  # set while ``bulkCalls`` is not empty (the heartbeat's hint)
    effectsDueAt: str | None = None  # earliest pending effect to run or lease to take over
    # graceful cancellation (core/cancellation.py): CANCELLING from ``cancellingAt``
    # until ``cancelledAt`` (which also stamps ``completedAt``) or an abort
    cancellingAt: str | None = None
    cancelledAt: str | None = None
    cancelReason: str | None = None
    cancelDeadline: str | None = None  # past it the heartbeat's tick aborts the instance
    owesCancels: bool | None = None  # rows owe their child a cancel request not yet made
    # a cohort's rows are not all registered yet (core/cohort/batches.py): the next batch is owed
    owesRegistration: bool | None = None
    # the four flags above (materialising, owesBulk, owesAborts, owesCancels) folded
    # into the one indexed field the heartbeat reads (core/owing.py); derived on
    # every write by ``stored_json``, never set by hand
    owing: str | None = None

    # ---- derived facts ----

    @property
    def terminal_state(self) -> readmodel.Status:
        """``active``, ``cancelling``, ``completed``, ``aborted`` or ``cancelled`` (the read
        model's one vocabulary)."""
        return readmodel.status_of(self.abortedAt, self.completedAt, self.cancellingAt,
                                   self.cancelledAt)

    @property
    def cancelling(self) -> bool:
        """CANCELLING: cancellation asked, not finished (nor aborted)."""
        return self.cancellingAt is not None and self.completedAt is None

    @property
    def terminal(self) -> bool:
        return self.completedAt is not None

    @property
    def primed(self) -> bool:
        return bool(self.stages)

    def open_entry(self) -> StageEntry | None:
        """The current stage visit (the terminal stage's entry stays open on completion)."""
        for entry in reversed(self.stages):
            if entry.name == self.currentStage and entry.exitedAt is None:
                return entry
        return None

    def definition_model(self) -> WorkflowDefinition:
        """The pinned definition every evaluation of this instance uses."""
        return parse_snapshot(self.definitionSnapshot)

    @property
    def observable(self) -> tuple[str, str | None]:
        """What a parent's ``$subworkflows`` row reads: (status, stage)."""
        status = readmodel.ROW_STATUS[self.terminal_state]
        return status, self.currentStage if self.primed else None

    @property
    def parent_id(self) -> str | None:
        """The direct parent's document id (from the last ancestor)."""
        if self.parentInstance:
            return self.parentInstance
        ref = self.parent_ref
        return ref.id.split(":", 2)[-1] if ref is not None else None

    @property
    def parent_ref(self) -> Ref | None:
        return self.ancestors[-1] if self.ancestors else None

    def to_json(self) -> dict[str, Any]:
        """The whole instance; a sparse parent's (core/cohort/sparse.py) without its rows,
        which readers assemble from the chunks (``rowCount``) as for every parent."""
        if isinstance(self.subworkflows, list):
            return super().to_json()
        doc = self.model_dump(mode="json", by_alias=True, exclude_none=True,
                              exclude={"subworkflows"})
        return {**doc, "subworkflows": []}

    def stored_json(self) -> dict[str, Any]:
        """The instance document's own state: without the registry rows (stored
        beside it, core/cohort/chunks.py) and without the history, which only grows and is
        written by appending (``inline_history``)."""
        doc = self.model_dump(mode="json", by_alias=True, exclude_none=True,
                              exclude={"subworkflows", "history", "owing"})
        owed = owing_of(doc)
        if owed is not None:
            doc[OWING] = owed
        return doc

    def to_document(self) -> dict[str, Any]:
        """The stored document, without the lake's system fields (the lake stamps those):
        its own state and the history entries not stored on a registry row."""
        doc = self.stored_json()
        doc["history"] = inline_history(self.history)
        for key in ("_rev", "_createdAt", "_updatedAt"):
            doc.pop(key, None)
        return doc


def parse_instance(document: dict[str, Any]) -> Instance:
    """Parse a stored instance, refusing documents this engine cannot read safely."""
    floor = document.get("minReaderModel", 0)
    if isinstance(floor, int) and floor > MODEL_VERSION:
        raise ModelVersionAhead(
            f"instance {document.get('_id')!r} needs engine model {floor}; this is "
            f"{MODEL_VERSION}",
            instanceId=document.get("_id"), minReaderModel=floor, modelVersion=MODEL_VERSION,
        )
    try:
        return Instance.model_validate(document)
    except ValidationError as exc:
        raise PersistedDocShape(
            f"instance {document.get('_id')!r} does not parse",
            instanceId=document.get("_id"),
            issues=[{"path": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
                    for e in exc.errors()[:20]],
        ) from exc
