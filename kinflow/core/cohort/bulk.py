"""``fireCohort``, ``abortCohort`` and ``cancelCohort``: one verb on each selected row (pure).

docs/subworkflows.md#redrive-and-bulk-operations. The selection, derived keys and counts
are ``core/cohort/selection.py``'s, shared with ``redriveCohort``; this module says what
each verb does to a row and plans the parent's commits around it:

* ``fireCohort`` fires an action on each matching live child. The children
  are separate instances, so each fire is the child's own commit, keyed by
  the derived key ``<key>:<rowKey>`` in the child's ledger (a second fire under
  it replays); the parent only marks, a batch at a time, the rows whose child
  took the call (``plan_marks``), so a replay skips them without asking the
  child. A child that refuses (its action disabled, its params wrong) is a
  per-row ``BulkRefusal``; a row without a live child (queued, finished,
  condemned) is skipped.
* ``abortCohort`` condemns each matching live row in the parent's batch
  commit (the existing abort drain carries it out, crash-safe through
  ``owesAborts``) and skips each matching queued row as ABORTED.
* ``cancelCohort`` does the same with a graceful cancel: each matching live
  row is owed a cancel request (``cancellation.request_row``: the cancel
  drain asks its child, crash-safe through ``owesCancels``) and queued rows
  are skipped as CANCELLED.

A cancel or abort with no filter also **closes** the cohort: its first batch
commit stamps ``closedAt`` on the cohort's setting and skips every queued row
at once; a later spawn that would add rows to it is refused with
``cohort-closed`` (``core/cohort/spawn.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kinflow.core.cohort import selection, sweep, tallies, window
from kinflow.core.cohort.chunks import replace_row
from kinflow.core.commit import Commit
from kinflow.core.context import PlanContext
from kinflow.core.errors import ActionDisabled, CohortNotFound
from kinflow.core.history import record
from kinflow.core.inputs import check_key, check_text, check_value
from kinflow.core.ledger import is_replay, remember
from kinflow.core.mutation import Mutation
from kinflow.core.state import (
    BulkCall,
    CohortWindow,
    Instance,
    SubworkflowEntry,
)
from kinflow.errors import InvalidInput, KinflowError

FIRE = "fireCohort"
ABORT = "abortCohort"
CANCEL = "cancelCohort"
OPS = (FIRE, ABORT, CANCEL)
CLOSING = frozenset({ABORT, CANCEL})
ABORT_REASON = "cohort-aborted"
"""``abortReason`` of the rows ``abortCohort`` skipped or condemned."""
CLOSED = "cohort-closed"
"""``resolved.detail`` of the queued rows a closing call skipped."""
_TERMINAL_REASONS = frozenset({"instance-completed", "instance-aborted"})


@dataclass(frozen=True, slots=True)
class CohortCall:
    """One bulk verb call: which cohort, which rows, under which key, and what to do."""

    op: str
    activity: str
    where: selection.CohortFilter | None
    key: str  # the caller's idempotency key, or one drawn for this call
    keyed: bool  # the caller gave ``key`` (it goes in the parent's ledger)
    child_activity: str | None = None  # fireCohort
    action: str | None = None  # fireCohort
    params: dict[str, Any] | None = None  # fireCohort
    reason: str | None = None  # abortCohort, cancelCohort

    @property
    def closes(self) -> bool:
        """A cancel or abort of the whole cohort closes it."""
        return self.op in CLOSING and self.where is None

    def args(self) -> dict[str, Any]:
        """What the parent's ledger fingerprints (a key reused otherwise is refused)."""
        where = self.where.to_json() if self.where is not None else None
        if self.op == FIRE:
            return {"activity": self.activity, "where": where,
                    "childActivity": self.child_activity, "action": self.action,
                    "params": self.params or None}
        return {"activity": self.activity, "where": where, "reason": self.reason}

    def call(self, ctx: PlanContext) -> BulkCall:
        return BulkCall(op=self.op, key=self.key, keyed=self.keyed, activity=self.activity,
                        where=self.args()["where"], startedAt=ctx.now_iso,
                        actor=ctx.actor.model(), childActivity=self.child_activity,
                        action=self.action, params=self.params, reason=self.reason)

    @classmethod
    def of_call(cls, call: BulkCall) -> CohortCall:
        """The call an interrupted verb recorded (the heartbeat finishes it)."""
        return cls(call.op, call.activity, selection.CohortFilter.from_json(call.where), call.key,
                   call.keyed, call.childActivity, call.action, call.params, call.reason)


def check(call: CohortCall, ctx: PlanContext) -> None:
    """Refuse inputs that can never apply, before anything is."""
    check_key(call.key, ctx.limits)
    check_text("reason", call.reason, ctx.limits)
    if call.op == FIRE:
        for name, value in (("childActivity", call.child_activity), ("action", call.action)):
            if not isinstance(value, str) or not value.strip():
                raise InvalidInput(f"{name} must be a non-empty string", field=name,
                                   reason="empty")
        if call.params is not None and not isinstance(call.params, dict):
            raise InvalidInput("params must be an object", field="params", reason="type")
        check_value("params", call.params, ctx.limits)


def plan_select(state: Instance, call: CohortCall, ctx: PlanContext) -> list[str]:
    """The row keys the call is about, refusing the whole call first: bad inputs or
    filter, ``cohort-not-found``, a key reused for another call.

    Rows already applied under this call's key are selected whatever the filter says
    now (a replay reports them as skipped)."""
    found, tree = _checked(state, call, ctx)
    return selection.select_call(state, found, call.where, tree, ctx, call.key, call.op)


def plan_select_page(state: Instance, call: CohortCall, ctx: PlanContext, chunks: list[int],
                     budget: Any) -> tuple[list[int], list[selection.Seen]]:
    """``plan_select`` on a sparse parent, a page of chunks at a time: the same refusals,
    then the cohort's chunks and the rows of ``chunks`` with whether each is selected
    (``budget``: the call's one GROQ budget, shared by its pages)."""
    found, tree = _checked(state, call, ctx)
    return selection.select_call_page(state, found, chunks, call.where, tree, ctx, call.key,
                                      call.op, budget)


def _checked(state: Instance, call: CohortCall, ctx: PlanContext
             ) -> tuple[selection.Cohort, Any]:
    check(call, ctx)
    tree = call.where.check(ctx.limits) if call.where is not None else None
    found = selection.cohort(state, call.activity)
    if call.keyed:
        is_replay(state, ctx, call.key, call.op, call.args())  # another call's key is refused
    return found, tree


def _bookkeeping(commit: Commit, call: CohortCall, ctx: PlanContext, *, last: bool) -> None:
    """The call's key in the parent's ledger; the call recorded while batches remain."""
    m = commit.m
    if call.keyed and not is_replay(m, ctx, call.key, call.op, call.args()):
        remember(m, ctx, call.key, call.op, call.args())
    if last:
        if selection.pending(m, call.op, call.key) is not None:
            selection.end_call(m, call.op, call.key)
    else:
        selection.begin_call(m, ctx, call.call(ctx))


# ---- fireCohort ----


@dataclass(frozen=True, slots=True)
class Target:
    """A row whose live child a ``fireCohort`` batch fires on."""

    row_key: str
    child_id: str


def fire_targets(state: Instance, call: CohortCall, keys: list[str], ctx: PlanContext,
                 places: dict[str, int] | None = None) -> tuple[list[Target], int]:
    """The children to fire on for ``keys``, and how many rows are skipped: marked under
    this call's key already, or without a live child (queued, finished, condemned).
    ``places``: each key's row as a paged selection found it (a sparse parent)."""
    found = selection.cohort(state, call.activity)
    latest = places if places is not None else selection.latest_rows(state, found)
    targets: list[Target] = []
    skipped = 0
    for key in keys:
        place = latest.get(key)
        row = state.subworkflows[place] if place is not None else None
        if row is None or selection.marked(row, ctx, selection.row_key(call.key, key), call.op) \
                or row.queued or row.resolved is not None or row.abortPending is not None:
            skipped += 1
            continue
        targets.append(Target(key, row.child_id))
    return targets, skipped


def not_eligible(error: KinflowError) -> bool:
    """A child's refusal that means the row had no live child after all (it finished
    before its parent's row said so): the row is skipped, not refused."""
    return isinstance(error, ActionDisabled) and error.details.get("reason") in \
        _TERMINAL_REASONS


def plan_open(state: Instance, call: CohortCall, ctx: PlanContext) -> Mutation:
    """Record the call on the parent before any child is fired, so a crash between the
    children's commits leaves it for the heartbeat (``owesBulk``)."""
    commit = Commit(state, ctx, engine=True)
    _bookkeeping(commit, call, ctx, last=False)
    return commit.finish()


def plan_marks(state: Instance, call: CohortCall, keys: list[str], ctx: PlanContext, *,
               last: bool, places: dict[str, int] | None = None) -> Mutation:
    """Mark the rows named ``keys`` as applied under the call's derived keys (their
    children took the fire, in this call or a replayed one), in one commit of the
    parent; the ``last`` batch forgets the call."""
    commit = Commit(state, ctx, engine=True)
    m = commit.m
    _bookkeeping(commit, call, ctx, last=last)
    found = selection.cohort(m, call.activity)
    latest = places if places is not None else selection.latest_rows(m, found)
    for key in keys:
        place = latest.get(key)
        if place is None:
            continue
        row = m.subworkflows[place]
        derived = selection.row_key(call.key, key)
        if not selection.marked(row, ctx, derived, call.op):
            replace_row(m, place, bulkKeys=selection.with_mark(row, ctx, derived, call.op))
    return commit.finish()


# ---- abortCohort and cancelCohort ----


@dataclass(slots=True)
class Batch:
    """A batch commit's result: its counts, and the row keys it applied (a closing
    first batch applies every queued row of the cohort, not only its own keys)."""

    result: selection.BulkResult
    applied: set[str]


def plan_end_batch(state: Instance, call: CohortCall, keys: list[str], ctx: PlanContext, *,
                   first: bool, last: bool, places: dict[str, int] | None = None
                   ) -> Mutation:
    """Abort or cancel the rows named ``keys`` in one commit of the parent;
    ``Mutation.result`` is a ``Batch``. ``places``: each key's row as a paged selection
    found it (a sparse parent).

    Live rows are condemned (abort) or asked to cancel; queued rows are skipped as
    ABORTED or CANCELLED; rows marked under this call's key, finished or already
    condemned are skipped. A closing call's ``first`` batch closes the cohort and
    skips all its queued rows."""
    commit = Commit(state, ctx)
    m = commit.m
    _bookkeeping(commit, call, ctx, last=last)
    found = selection.cohort(m, call.activity)
    latest = places if places is not None else selection.latest_rows(m, found)
    batch = Batch(selection.BulkResult(), set())
    own = set(keys)
    todo = list(keys)
    if call.closes and first:
        close(m, ctx, call, found)
        queued = [m.subworkflows[p].rowKey for p in latest.values() if m.subworkflows[p].queued]
        todo += [key for key in queued if key not in own]
    for key in todo:
        place = latest.get(key)
        row = m.subworkflows[place] if place is not None else None
        derived = selection.row_key(call.key, key)
        if place is None or row is None or selection.marked(row, ctx, derived, call.op) \
                or not endable(row, call.op):
            batch.result.skipped += 1 if key in own else 0
            continue
        _end_row(m, ctx, call, place)
        replace_row(m, place, bulkKeys=selection.with_mark(m.subworkflows[place], ctx, derived,
                                                      call.op))
        batch.result.applied += 1
        batch.applied.add(key)
    if batch.result.applied:
        commit.cascade_once()
    return commit.finish(result=batch)


def endable(row: SubworkflowEntry, op: str) -> bool:
    """A row an abort or cancel still acts on: live (or queued), not condemned, not let go
    by ``onCancel: detach``; for a cancel, not already asked to cancel (an abort of a
    cancelling child wins)."""
    return row.resolved is None and row.abortPending is None and not row.detached \
        and (op == ABORT or row.cancelPending is None)


def _end_row(m: Instance, ctx: PlanContext, call: CohortCall, place: int) -> None:
    row = m.subworkflows[place]
    reason = call.reason or f'{call.op} of activity "{row.activity}"'
    sweep.bulk_row(m, ctx, place, call.op, reason, ABORT_REASON)


def plan_close_paged(state: Instance, call: CohortCall, ctx: PlanContext) -> Mutation:
    """A closing call on a sparse parent that pages (core/cohort/sweep.py): one commit
    closes the cohort and records a sweep of it; the drain ends its rows a page of chunks
    per commit. ``Mutation.result`` is the call's ``BulkResult`` from the cohort's counts:
    ``matched`` its rows, ``applied`` those not finished, ``skipped`` the others (a replay
    of the same key applies nothing)."""
    check(call, ctx)
    commit = Commit(state, ctx)
    m = commit.m
    visit = window.latest_visit(m, call.activity)
    if visit is None:
        raise CohortNotFound(
            f"instance {m.id_!r} never spawned a cohort for activity {call.activity!r}",
            parentId=m.id_, activity=call.activity)
    entry = tallies.entry_of(m.cohortRows, call.activity, visit)
    total = tallies.total(entry)
    if call.keyed and is_replay(m, ctx, call.key, call.op, call.args()):
        return commit.finish(result=selection.BulkResult(matched=total, skipped=total))
    if call.keyed:
        remember(m, ctx, call.key, call.op, call.args())
    unfinished = tallies.unfinished(entry)
    close(m, ctx, call, selection.Cohort(call.activity, visit, ()))
    sweep.begin(m, ctx, sweep.BULK, visit=visit, activity=call.activity, policy=call.op,
                reason=call.reason or f'{call.op} of activity "{call.activity}"',
                detail=ABORT_REASON)
    return commit.finish(result=selection.BulkResult(
        matched=total, applied=unfinished, skipped=total - unfinished))


# ---- closing ----


def closed(instance: Instance, cohort: window.Cohort) -> CohortWindow | None:
    """The cohort's setting when a closing call closed it, else ``None``."""
    own = window.setting(instance, cohort)
    return own if own is not None and own.closedAt is not None else None


def close(m: Instance, ctx: PlanContext, call: CohortCall, found: selection.Cohort) -> None:
    """Stamp the cohort closed (once) and record it on the parent's history."""
    cohort = (found.activity, found.stage_entry)
    if closed(m, cohort) is not None:
        return
    own = window.setting(m, cohort)
    kept = [entry for entry in m.cohorts or []
            if (entry.activity, entry.stageEntry) != cohort]
    changes = {"closedAt": ctx.now_iso, "closedBy": call.op}
    updated = (own.model_copy(update=changes) if own is not None
               else CohortWindow(activity=cohort[0], stageEntry=cohort[1], **changes))
    m.cohorts = [*kept, updated]
    record(m, ctx, "cohortClosed", activity=cohort[0], stageEntry=cohort[1], by=call.op,
           reason=call.reason, actor=ctx.actor.to_json())


def plan_forget(state: Instance, call: CohortCall, ctx: PlanContext) -> Mutation:
    """Forget an interrupted call that can never finish."""
    commit = Commit(state, ctx, engine=True)
    selection.end_call(commit.m, call.op, call.key)
    return commit.finish()
