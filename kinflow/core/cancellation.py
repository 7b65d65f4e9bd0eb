"""Graceful cancellation's rules on one instance and its rows (pure; no I/O).

An instance is CANCELLING from ``cancellingAt`` (``core/cancel_instance.py`` starts it)
until it is CANCELLED (``cancelledAt``, with ``completedAt``) or aborted (an
abort wins). While it cancels:

* each of its live children gets its spawn's ``onCancel`` policy once:
  ``cancel`` (default) owes the child a cancel request (``cancelPending`` on
  the row; the shell makes it and the instance carries ``owesCancels`` until
  every such row reads its child cancelling or finished), ``abort`` condemns
  it like an abort does, ``detach`` lets it run (``detached``, the parent
  stops waiting for it). A queued row never starts: it is skipped CANCELLED
  (ABORTED under ``abort``);
* it becomes CANCELLED in the first commit that finds its cancel stage
  finished (none declared, or a terminal stage reached) **and** every row
  settled (resolved, or detached) (``conclude``, run by every commit);
* past ``cancelDeadline`` (``cancelTimeoutSeconds``, else
  ``Limits.cancel_timeout_seconds``) the heartbeat's tick aborts it
  (``timed_out``; the deadline is folded into ``nextEvaluationAt``).

``onExit: "cancel"`` uses ``request_row`` for the live rows of the cohorts a
stage exit leaves (``core/stages.py``); the parent does not wait for them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from kinflow.core.cohort import counts as cohort_counts
from kinflow.core.cohort import outcomes, sparse, tallies, window
from kinflow.core.cohort.chunks import REPLACED, replace_row
from kinflow.core.context import PlanContext, iso
from kinflow.core.history import record
from kinflow.core.state import AbortPending, Instance, SubworkflowEntry
from kinflow.define.models import SpawnBlock, WorkflowDefinition, find_action
from kinflow.timestamps import parse_iso

CANCEL = "cancel"
ABORT = "abort"
DETACH = "detach"
TIMEOUT = "cancel-timeout"
"""The abort reason of an instance whose cancellation outlived its timeout."""
PARENT_CANCELLED = "parent instance cancelled"


def spawn_of(definition: WorkflowDefinition, row: SubworkflowEntry) -> SpawnBlock | None:
    """The spawn block that created ``row``'s child."""
    activity = definition.activity(row.cohortStage, row.activity)
    action = find_action(activity, row.action) if activity is not None else None
    return action.spawn if action is not None else None


def on_cancel(definition: WorkflowDefinition, row: SubworkflowEntry) -> str:
    block = spawn_of(definition, row)
    return (block.onCancel if block is not None and block.onCancel else None) or CANCEL


def _untouched(row: SubworkflowEntry) -> bool:
    """A live row no policy acted on yet."""
    return (row.resolved is None and row.abortPending is None and row.cancelPending is None
            and not row.detached)


def request_row(instance: Instance, ctx: PlanContext, index: int, reason: str) -> None:
    """Owe row ``index``'s child a cancel request; a queued row is skipped CANCELLED."""
    row = instance.subworkflows[index]
    if not _untouched(row):
        return
    if row.queued:
        window.skip(instance, ctx, index, detail=window.SKIPPED, cancelled=True)
        return
    replace_row(instance, index, cancelPending=AbortPending(at=ctx.now_iso, reason=reason))


def apply_on_cancel(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext
                    ) -> None:
    """Give every live row of a cancelling instance its spawn's ``onCancel`` policy."""
    for index in range(len(instance.subworkflows)):
        on_cancel_row(instance, definition, ctx, index)


def on_cancel_row(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext,
                  index: int) -> None:
    """Give row ``index`` its spawn's ``onCancel`` policy, unless one acted on it."""
    row = instance.subworkflows[index]
    if not _untouched(row):
        return
    policy = on_cancel(definition, row)
    if policy == ABORT:
        if row.queued:
            window.skip(instance, ctx, index, detail=window.SKIPPED)
        else:
            replace_row(instance, index, abortPending=AbortPending(
                at=ctx.now_iso, reason=f'{PARENT_CANCELLED} (onCancel: "abort")'))
    elif policy == DETACH:
        if row.queued:
            window.skip(instance, ctx, index, detail=window.SKIPPED, cancelled=True)
        else:
            replace_row(instance, index, detached=True)
    else:
        request_row(instance, ctx, index, PARENT_CANCELLED)


def owed(instance: Instance) -> list[SubworkflowEntry]:
    """Rows whose child is owed a cancel request the shell has not seen land: pending,
    live, not condemned meanwhile, and not yet read as cancelling."""
    return [row for row in instance.subworkflows if owes(row)]


def owes(row: SubworkflowEntry) -> bool:
    """Whether the row's child is owed a cancel request (``owed``)."""
    return (row.cancelPending is not None and row.resolved is None
            and row.abortPending is None and not row.queued
            and not (row.observed is not None and row.observed.cancelling))


def settled(row: SubworkflowEntry) -> bool:
    """Whether a cancelling parent stops waiting for the row."""
    return row.resolved is not None or bool(row.detached)


DETACHED = "detached"
"""``owedChunks`` key: unresolved rows a cancellation detached (core/cohort/sweep.py)."""


def detached(row: SubworkflowEntry) -> int:
    return 1 if row.resolved is None and row.detached else 0


def all_settled(instance: Instance) -> bool:
    """Whether every row is settled; a parent paging its rows (core/cohort/sweep.py)
    answers from its counts: no sweep left, and its only unresolved rows detached."""
    if not (sparse.is_sparse(instance) and instance.owedChunks is not None):
        return all(settled(row) for row in instance.subworkflows)
    if instance.sweeps:
        return False
    unresolved = sum(tallies.unfinished(entry) for entry in cohort_counts.live_summary(instance))
    return unresolved == detached_now(instance)


def detached_now(instance: Instance) -> int:
    """Unresolved detached rows of a paging parent as this plan has them: the stored
    count corrected by the rows it replaced or appended (as ``counts.live_summary``)."""
    n = int((instance.owedChunks or {}).get(DETACHED) or 0)
    replaced = instance._derived.get(REPLACED)
    changes = replaced[1] if replaced is not None and replaced[0] == id(instance) else {}
    rows, base = instance.subworkflows, instance.rowCount or 0
    for place, old in changes.items():
        if place < base:
            n += detached(rows[place]) - detached(old)
    for place in range(base, len(rows)):
        n += detached(rows[place])
    return n


def stage_finished(instance: Instance, definition: WorkflowDefinition) -> bool:
    """No cancel stage (the visit was left), or the cancel stage led to a terminal stage."""
    if instance.open_entry() is None:
        return True
    stage = definition.stage(instance.currentStage)
    return stage is not None and stage.terminal


def conclude(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext) -> bool:
    """CANCELLING -> CANCELLED when the cancel stage finished and every row is settled."""
    if not instance.cancelling or not stage_finished(instance, definition):
        return False
    if not all_settled(instance):
        return False
    instance.cancelledAt = instance.completedAt = ctx.now_iso
    instance.result = outcomes.cancelled()
    instance.cancelDeadline = None
    record(instance, ctx, "cancelled", stage=instance.currentStage,
           reason=instance.cancelReason)
    return True


def deadline(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext) -> str:
    """When a cancellation starting now is aborted instead."""
    seconds = definition.cancelTimeoutSeconds or ctx.limits.cancel_timeout_seconds
    return iso(ctx.now + timedelta(seconds=seconds))


def due(instance: Instance) -> datetime | None:
    """The instant the heartbeat owes a cancelling instance a tick (its deadline)."""
    if not instance.cancelling or instance.cancelDeadline is None:
        return None
    return parse_iso(instance.cancelDeadline)


def timed_out(instance: Instance, ctx: PlanContext) -> bool:
    moment = due(instance)
    return moment is not None and moment <= ctx.now
