"""Per-attempt deadlines of a cohort's children (``spawn.childTimeoutSeconds``; pure).

docs/subworkflows.md#settlement. Each attempt of a row has its own clock:

* ``startedAt`` is stamped by the commit that creates the attempt's child (a
  spawn, a window fill, a redrive's or a retry's start), ``deadlineAt`` is
  ``startedAt + childTimeoutSeconds`` (``stamp_started``, over the rows the
  commit changed);
* every commit of the parent condemns the live rows whose ``deadlineAt`` has
  passed (``expire``): under ``onTimeout: "abort"`` (default) the row is
  ``abortPending`` and the usual drain aborts the child (crash-safe through
  ``owesAborts``); under ``"cancel"`` the child is owed a graceful cancel
  request (``owesCancels``). Either way ``abortReason`` is ``timed-out`` and
  the parent's history records ``childTimedOut`` once;
* the commit that stamps such a row's end turns the outcome the child reports
  (``aborted``, or ``cancelled``) into ``timed-out`` (``conclude``): the row's
  status stays ``aborted`` (``cancelled``), and the outcome is a failing one;
  a child that reached its own end before the abort keeps its own outcome;
* the parent's ``nextEvaluationAt`` includes the earliest live deadline and the
  earliest pending ``retryAt`` (``due``), so the heartbeat's due index finds
  the parent within one heartbeat of either, with no scan. On a sparse parent both
  ``expire`` and ``due`` read only the chunks holding live or retrying rows
  (``settling_rows``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta

from kinflow.core import cancellation
from kinflow.core.cohort import places, sparse, tallies
from kinflow.core.cohort.chunks import CHUNK, replace_row
from kinflow.core.context import PlanContext, iso, parse_iso
from kinflow.core.history import record
from kinflow.core.state import AbortPending, Instance, SubworkflowEntry
from kinflow.define.models import SpawnBlock, WorkflowDefinition, find_action

TIMED_OUT = "timed-out"
"""The row outcome of an attempt past its deadline, and the ``abortReason`` it carries."""
ABORT = "abort"
CANCEL = "cancel"


def block(definition: WorkflowDefinition, row: SubworkflowEntry) -> SpawnBlock | None:
    """The spawn block that made ``row``."""
    found = definition.activity(row.cohortStage, row.activity)
    named = find_action(found, row.action) if found is not None else None
    return named.spawn if named is not None else None


def settles(definition: WorkflowDefinition) -> bool:
    """Whether any spawn of ``definition`` has a deadline, a retry or a quorum (without
    one, no settlement pass needs to look at rows)."""
    return any(action.spawn is not None and (
        action.spawn.childTimeoutSeconds is not None or action.spawn.retry is not None
        or action.spawn.completeWhen is not None)
        for stage in definition.stages for activity in stage.activities or []
        for action in activity.actions or [])


def _new_child(before: SubworkflowEntry | None, row: SubworkflowEntry) -> bool:
    """Whether ``row`` got its current attempt's child since ``before`` was stored."""
    if row.queued or row.observed is None:
        return False
    return before is None or bool(before.queued) or before.child_id != row.child_id


def stamp_started(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext,
                  base: list[SubworkflowEntry], places: Iterable[int]) -> None:
    """``startedAt`` (and ``deadlineAt``) on the changed rows whose child this commit
    created; a started row no longer waits for a retry (``retryAt`` cleared)."""
    rows = instance.subworkflows
    for place in places:
        row = rows[place]
        if row.startedAt is not None or not _new_child(
                base[place] if place < len(base) else None, row):
            continue
        spawn = block(definition, row)
        timeout = spawn.childTimeoutSeconds if spawn is not None else None
        deadline = iso(ctx.now + timedelta(seconds=timeout)) if timeout else None
        replace_row(instance, place, startedAt=ctx.now_iso, deadlineAt=deadline, retryAt=None)


def expired(row: SubworkflowEntry, now: datetime) -> bool:
    """A live attempt past its deadline, not condemned or asked to cancel yet."""
    return (row.deadlineAt is not None and row.resolved is None and not row.queued
            and row.abortPending is None and row.cancelPending is None
            and parse_iso(row.deadlineAt) <= now)


def expire(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext) -> int:
    """Condemn (or ask to cancel) every live row past its deadline; how many."""
    if instance.terminal:
        return 0
    n = 0
    for place, row in settling_rows(instance):
        if not expired(row, ctx.now):
            continue
        spawn = block(definition, row)
        policy = (spawn.onTimeout if spawn is not None else None) or ABORT
        reason = (f'the child of row "{row.rowKey}" outlived its deadline '
                  f"({row.deadlineAt}, onTimeout: {policy})")
        if policy == CANCEL:
            cancellation.request_row(instance, ctx, place, reason)
            replace_row(instance, place, abortReason=TIMED_OUT)
        else:
            replace_row(instance, place, abortReason=TIMED_OUT,
                        abortPending=AbortPending(at=ctx.now_iso, reason=reason))
        record(instance, ctx, "childTimedOut", activity=row.activity,
               instanceRef=row.ref.to_json(), rowKey=row.rowKey, attempt=row.attempt or 1,
               startedAt=row.startedAt, deadlineAt=row.deadlineAt, onTimeout=policy)
        n += 1
    return n


def conclude(instance: Instance, places: Iterable[int]) -> None:
    """The rows among ``places`` that ended because they timed out read ``timed-out``."""
    rows = instance.subworkflows
    for place in places:
        row = rows[place]
        if (row.resolved is not None and row.abortReason == TIMED_OUT
                and row.outcome in ("aborted", "cancelled")):  # = outcomes.ABORTED/CANCELLED
            replace_row(instance, place, outcome=TIMED_OUT)


def due(instance: Instance, now: datetime) -> datetime | None:
    """When the parent next owes a settlement look: the earliest deadline of a live
    attempt still to come, or the earliest ``retryAt`` still to come (one already past
    waits for room in its window, which a finishing child's commit makes; a paused
    cohort's retries wait for its resume)."""
    soonest: str | None = None
    stamp = iso(now)
    paused = {(e.activity, e.stageEntry) for e in instance.cohorts or [] if e.pausedAt}
    for _, row in settling_rows(instance):
        if row.resolved is not None:
            continue
        if row.queued:  # a paused cohort starts nothing: its retries are not due
            at = row.retryAt if (row.activity, row.stageEntry) not in paused else None
        elif row.abortPending is None and row.cancelPending is None:
            at = row.deadlineAt
        else:
            continue
        if at is not None and (soonest is None or at < soonest):
            soonest = at if at > stamp else soonest
    return parse_iso(soonest) if soonest is not None else None


def settling_rows(instance: Instance) -> Iterator[tuple[int, SubworkflowEntry]]:
    """``(place, row)`` of every row that may have a deadline or a ``retryAt``: every row of
    a dense registry; on a sparse one the chunks the summary says hold a live row or a
    row waiting for a retry, and the chunks this commit holds (its changed rows), so a
    million-row cohort reads the chunks of its live rows, not its registry."""
    rows = instance.subworkflows
    if not isinstance(rows, sparse.SparseRows):
        yield from enumerate(rows)
        return
    chunks = set(rows.held)
    for entry in instance.cohortRows or []:
        for name, runs in (entry.get("chunks") or {}).items():
            status = tallies.split(name)[0]
            if status in _FINISHED or (status == "queued"
                                       and not tallies.marked(name, tallies.RETRY_MARK)):
                continue
            chunks.update(places.expand(runs))
    chunks = {c for c in chunks if c < rows.chunk_count()}
    rows.need(chunks)
    for chunk in sorted(chunks):
        yield from enumerate(list(rows.held[chunk]), chunk * CHUNK)


_FINISHED = frozenset({"done", "aborted", "cancelled"})
