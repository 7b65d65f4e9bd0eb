"""Automatic retries of a cohort's rows (``spawn.retry``; pure, no I/O).

docs/subworkflows.md#settlement. The commit that stamps the end of a row's
attempt also decides whether it is retried (``requeue``): when the outcome is
listed in ``retry.on`` (default ``failed`` and ``timed-out``) and ``attempt``
is below ``retry.attempts``, the row is re-queued at once exactly as a redrive
re-queues it (``redrive.requeue``: ``attempt`` + 1, the next child id
``<first id>-a<n>``, the old id in ``previousChildIds``) and carries
``retryAt`` = the attempt's end + ``backoff``. From ``retryAt`` on the window
may start it (its eligibility is the window's), and the parent is due then
(``deadlines.due``), so the heartbeat fills it. While it waits the row is
``queued`` (counted as ``retrying``), so the failure budget, which counts only
finished rows, counts a row only once no retry remains.

Never retried: an abort (by a person, the budget, the quorum, the parent's
abort or stage exit; ``aborted`` is not an outcome ``retry.on`` may list), a
row of a parent no longer live or no longer in the visit that spawned the
cohort, a detached row, and the rows of a cohort that is closed, complete or
whose budget acted. A redrive resets nothing: it continues the attempts.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from kinflow.core.cohort import selection, spawn
from kinflow.core.cohort.chunks import replace_row
from kinflow.core.cohort.deadlines import TIMED_OUT, block
from kinflow.core.cohort.window import setting
from kinflow.core.context import PlanContext, iso, parse_iso
from kinflow.core.history import record
from kinflow.core.state import INSTANCE_TYPE, Instance, Ref, SubworkflowEntry
from kinflow.define.models import RetryPolicy, WorkflowDefinition

DEFAULT_ON = ("failed", TIMED_OUT)
HANDOFF_MISSING = "redrive-handoff-missing"
"""Per-row refusal: a row spawned before handoffs were kept cannot be rebuilt."""


# ---- the next attempt: shared with redrive (core/cohort/redrive.py) ----


def next_id(row: SubworkflowEntry) -> str:
    """The child id of ``row``'s next attempt (a row skipped while queued keeps its own)."""
    if row.observed is None:
        return row.child_id
    first = (row.previousChildIds or [row.child_id])[0]
    return spawn.attempt_id(first, (row.attempt or 1) + 1)


def requeue(m: Instance, ctx: PlanContext, place: int, **extra: Any
            ) -> tuple[Ref, int, list[str]] | selection.BulkRefusal:
    """Row ``place`` as its next attempt, queued with its handoff as the seed (a redrive,
    and a retry, which passes ``retryAt`` in ``extra``); its new
    ref, attempt and earlier child ids, or why it cannot be rebuilt."""
    row = m.subworkflows[place]
    handoff = row.seed or row.handoff
    if handoff is None:
        return selection.BulkRefusal(row.child_id, row.rowKey, HANDOFF_MISSING,
                                "the row was spawned before handoffs were kept; "
                                "its child cannot be rebuilt")
    if ctx.definition(row.definition, handoff.version) is None:
        return selection.BulkRefusal(row.child_id, row.rowKey, "spawn-definition-unresolved",
                                f"{row.definition} v{handoff.version} is not deployed")
    if row.observed is None:  # skipped while queued: its child never existed, so the
        # row simply waits again under the same id and attempt
        previous, attempt, ref = list(row.previousChildIds or []), row.attempt or 1, row.ref
    else:
        previous = [*(row.previousChildIds or []), row.child_id]
        attempt = (row.attempt or 1) + 1
        ref = Ref(id=ctx.gdr(next_id(row)), type=INSTANCE_TYPE)
    replace_row(m, place, ref=ref, queued=True, seed=handoff, handoff=None, resolved=None,
                observed=None, outcome=None, outputs=None, outputsError=None,
                abortPending=None, abortReason=None, cancelPending=None, detached=None,
                attempt=attempt if attempt > 1 else None,
                previousChildIds=previous or None, startedAt=None, deadlineAt=None,
                **extra)
    return ref, attempt, previous


# ---- retries ----


def backoff(policy: RetryPolicy, attempt: int) -> float:
    """Seconds to wait after attempt ``attempt`` (1-based) ended:
    ``min(backoffSeconds * factor ** (attempt - 1), maxBackoffSeconds)``."""
    delay = float(policy.backoffSeconds) * float(policy.factor) ** max(0, attempt - 1)
    if policy.maxBackoffSeconds is not None:
        delay = min(delay, float(policy.maxBackoffSeconds))
    return delay


def retries(policy: RetryPolicy | None, row: SubworkflowEntry) -> bool:
    """Whether the policy retries ``row``'s finished attempt (by its outcome and count)."""
    if policy is None or row.resolved is None or row.detached:
        return False
    on = policy.on if policy.on is not None else DEFAULT_ON
    return row.outcome in on and (row.attempt or 1) < policy.attempts


def _cohort_open(instance: Instance, row: SubworkflowEntry) -> bool:
    """The parent is live, in the visit that spawned the row, and the cohort neither
    closed, complete nor stopped by its budget."""
    if instance.terminal or instance.cancelling:
        return False
    entry = instance.open_entry()
    if entry is None or entry.key_ != row.stageEntry:
        return False
    own = setting(instance, (row.activity, row.stageEntry))
    return own is None or (own.closedAt is None and own.completedAt is None
                           and own.budgetExceededAt is None)


def retry_at(row: SubworkflowEntry, policy: RetryPolicy, now: datetime) -> datetime:
    """When the retry may start: the attempt's end (else now) plus the backoff."""
    ended = now
    if row.resolved is not None:
        try:
            ended = min(parse_iso(row.resolved.at), now)
        except ValueError:
            ended = now
    return ended + timedelta(seconds=backoff(policy, row.attempt or 1))


def retry_finished(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext,
                   places: Iterable[int]) -> int:
    """Re-queue the rows among ``places`` whose finished attempt is to be retried;
    how many were. Each records ``subworkflowRetrying`` in the parent's history."""
    n = 0
    for place in places:
        row = instance.subworkflows[place]
        if row.resolved is None:
            continue
        spawn = block(definition, row)
        policy = spawn.retry if spawn is not None else None
        if not retries(policy, row) or not _cohort_open(instance, row):
            continue
        assert policy is not None
        at = iso(retry_at(row, policy, ctx.now))
        queued = requeue(instance, ctx, place, retryAt=at)
        if isinstance(queued, selection.BulkRefusal):
            continue  # cannot be rebuilt (no handoff, version gone): it stays finished
        ref, attempt, previous = queued
        record(instance, ctx, "subworkflowRetrying", activity=row.activity,
               instanceRef=ref.to_json(), rowKey=row.rowKey, attempt=attempt,
               previousChildId=previous[-1] if previous else None, outcome=row.outcome,
               retryAt=at)
        n += 1
    return n


def clear_finished(instance: Instance, places: Iterable[int]) -> None:
    """A row skipped while waiting for its retry no longer waits (``retryAt`` null)."""
    for place in places:
        row = instance.subworkflows[place]
        if row.retryAt is not None and row.resolved is not None:
            replace_row(instance, place, retryAt=None)
