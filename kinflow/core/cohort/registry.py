"""Registry rows and cohorts as the parent sees them (pure; no I/O).

A parent knows its children through the registry rows stored on it
(docs/subworkflows.md#where-registry-rows-live). ``row_view`` is the one
reading of a stored row: the object ``$subworkflows`` binds for it, with the
row's status (resolved -> done/aborted, else what propagation last observed,
else active). The conditions bind ``subworkflow_rows`` and the API's
``registry_rows`` are built from the same views, so the two can never disagree.
``overlay`` refreshes a row with a child document newer than the parent's last
stamp (used by subscriptions, which see the child's commit before propagation
stamps the parent).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import compress
from operator import is_not
from typing import Any

from kinflow.core.cohort import outcomes
from kinflow.core.readmodel import RowStatus, cancelling, row_status
from kinflow.core.state import Instance, StageEntry, SubworkflowEntry, parse_instance

Doc = dict[str, Any]


def row_view(row: SubworkflowEntry, open_key: str | None) -> dict[str, Any]:
    """The ``$subworkflows`` object of one stored row; treat it as read-only.

    ``open_key`` is the key of the parent's open stage visit: a row spawned in
    it is ``current``. Planning keeps the views it built on the instance
    (``subworkflow_rows``); the API's readers keep theirs per row object in
    the shell (``kinflow.engine.registry_cache``).
    """
    status, stage = row_state(row)
    return {
        "_id": row.ref.id.split(":", 2)[-1],
        "rowKey": row.rowKey,
        "activity": row.activity,
        "action": row.action,
        "definition": row.definition,
        "current": row.stageEntry == open_key,
        "status": status,
        "stage": stage,
        "spawnedAt": row.spawnedAt,
        "cancelling": row_cancelling(row),
        **outcome_view(row),
    }


def row_cancelling(row: SubworkflowEntry) -> bool:
    """Whether the row's live child is CANCELLING (the row is still active)."""
    return row.resolved is None and row.observed is not None and bool(row.observed.cancelling)


def row_state(row: SubworkflowEntry) -> tuple[RowStatus, str | None]:
    """A row's status and stage: resolved -> done/aborted/cancelled, else what propagation last
    observed, else active (queued while waiting in its window)."""
    if row.resolved is not None:
        if row.resolved.cancelled:
            return "cancelled", row.resolved.stage
        return ("aborted" if row.resolved.aborted else "done"), row.resolved.stage
    if row.queued:
        return "queued", None
    if row.observed is not None:
        return row.observed.status, row.observed.stage
    return "active", None


def outcome_view(row: SubworkflowEntry) -> dict[str, Any]:
    """How the row's child finished (core/cohort/outcomes.py) and which attempt it is. A row
    resolved before outcomes were stamped reads ``aborted`` or ``succeeded``."""
    outcome = row.outcome
    if outcome is None and row.resolved is not None:
        outcome = (outcomes.CANCELLED if row.resolved.cancelled else
                   outcomes.ABORTED if row.resolved.aborted else outcomes.SUCCEEDED)
    return {"outcome": outcome, "outputs": row.outputs, "outputsError": row.outputsError,
            "attempt": row.attempt or 1, "previousChildIds": list(row.previousChildIds or [])}


def subworkflow_rows(instance: Instance, entry: StageEntry | None) -> list[dict[str, Any]]:
    """``$subworkflows``: one object per registry row, from what the rows carry.

    A plan renders it for every condition check, so the list is kept on the
    instance with the rows it was made from (``Instance._derived``): the next
    rendering finds the rows replaced or added since by identity, at C speed,
    and builds views for those only.
    """
    open_key = entry.key_ if entry is not None else None
    rows = instance.subworkflows
    kept = instance._derived.get("views")
    if kept is None or kept[0] != open_key:
        views = [row_view(row, open_key) for row in rows]
    else:
        _, seen, old = kept
        shared = min(len(seen), len(rows))
        views = old[:shared]
        for i in compress(range(shared), map(is_not, seen, rows)):
            views[i] = row_view(rows[i], open_key)
        views.extend(row_view(row, open_key) for row in rows[shared:])
    instance._derived["views"] = (open_key, list(rows), views)
    return list(views)  # the kept list is never handed out: callers may change theirs


@dataclass(frozen=True, slots=True)
class Row:
    """One registry row: the ``$subworkflows`` object plus the registry's bookkeeping."""

    parent_id: str
    row_key: str
    activity: str
    action: str
    definition: str
    current: bool
    status: str  # a readmodel.RowStatus: active | done | aborted | queued | cancelled
    stage: str | None
    spawned_at: str
    condemned: bool
    abort_reason: str | None
    resolved_at: str | None
    child_id: str
    resolved: bool
    stage_entry: str = ""  # the key of the stage visit that spawned the row
    outcome: str | None = None  # succeeded | failed | aborted once finished (outcomes.py)
    outputs: dict[str, Any] | None = None
    outputs_error: str | None = None
    attempt: int = 1
    previous_child_ids: tuple[str, ...] = ()
    cancelling: bool = False  # the live child is CANCELLING
    # settlement (core/cohort/deadlines.py, retry.py): the attempt's clock and a retry's time
    started_at: str | None = None
    deadline_at: str | None = None
    retry_at: str | None = None
    priority: float | None = None  # admission (core/cohort/admission.py)
    key: str | None = None  # the row's concurrencyKey


def registry_rows(parent: Doc) -> list[Row]:
    """Every row of ``parent``'s registry, in stored order (the shell memoises them per
    revision: ``kinflow.engine.registry_cache``)."""
    instance = parse_instance(parent)
    entry = instance.open_entry()
    open_key = entry.key_ if entry is not None else None
    return [api_row(instance.id_, row, open_key) for row in instance.subworkflows]


def api_row(parent_id: str, entry: SubworkflowEntry, open_key: str | None,
            view: dict[str, Any] | None = None) -> Row:
    """The API's ``Row`` of one stored row (``row_view`` plus the bookkeeping); ``view`` is
    the row's view when the caller has it already."""
    view = row_view(entry, open_key) if view is None else view
    return Row(
        parent_id=parent_id,
        row_key=view["rowKey"],
        activity=view["activity"],
        action=view["action"],
        definition=view["definition"],
        current=bool(view["current"]),
        status=view["status"],
        stage=view["stage"],
        spawned_at=view["spawnedAt"],
        condemned=entry.abortPending is not None and entry.resolved is None,
        abort_reason=entry.abortReason or (entry.abortPending.reason if entry.abortPending
                                           else None),
        resolved_at=entry.resolved.at if entry.resolved else None,
        child_id=view["_id"],
        resolved=entry.resolved is not None,
        stage_entry=entry.stageEntry,
        outcome=view["outcome"],
        outputs=view["outputs"],
        outputs_error=view["outputsError"],
        attempt=view["attempt"],
        previous_child_ids=tuple(view["previousChildIds"]),
        cancelling=bool(view["cancelling"]),
        started_at=entry.startedAt,
        deadline_at=entry.deadlineAt,
        retry_at=entry.retryAt,
        priority=entry.priority,
        key=entry.concurrencyKey,
    )  # fmt: skip


def overlay(row: Row, child: Doc | None) -> Row:
    """``row`` with the live status and stage of ``child`` (a resolved row is final)."""
    if row.resolved or child is None or row.status == "queued":
        return row
    finished = outcomes.Finished.of(child)
    if finished is None:
        return replace(row, status=row_status(child), stage=child.get("currentStage"),
                       cancelling=cancelling(child))
    return replace(row, status=row_status(child), stage=child.get("currentStage"),
                   outcome=finished.outcome, outputs=finished.outputs,
                   outputs_error=finished.outputs_error, cancelling=False)


def select(
    rows: list[Row],
    *,
    activity: str | None = None,
    action: str | None = None,
    current_only: bool | None = None,
    status: str | None = None,
) -> list[Row]:
    return [
        r for r in rows
        if (activity is None or r.activity == activity)
        and (action is None or r.action == action)
        and (not current_only or r.current)
        and (status is None or r.status == status)
    ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class CohortCounts:
    total: int
    active: int
    done: int
    aborted: int
    queued: int = 0  # rows waiting in the cohort's window (not settled)
    failed: int = 0  # outcome failed or aborted, not stopped by the budget (what it counts)
    cancelled: int = 0  # rows CANCELLED (by a cancellation)
    stopped: int = 0  # rows the failure budget skipped, aborted or cancelled (never failed)

    @property
    def settled(self) -> bool:
        return self.total > 0 and self.active == 0 and self.queued == 0


def count(rows: list[Row]) -> CohortCounts:
    """A cohort's counts from its rows in hand (``cohort_index.counts`` reads the same
    from a parent's summary without the rows)."""
    statuses = [r.status for r in rows]
    return CohortCounts(len(rows), statuses.count("active"), statuses.count("done"),
                        statuses.count("aborted"), queued=statuses.count("queued"),
                        failed=sum(1 for r in rows
                                   if outcomes.counts_as_failed(r.outcome, r.abort_reason)),
                        cancelled=statuses.count("cancelled"),
                        stopped=sum(1 for r in rows
                                    if outcomes.stopped_by_budget(r.outcome, r.abort_reason)),
                        )  # fmt: skip
