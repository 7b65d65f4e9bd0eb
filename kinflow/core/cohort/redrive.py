"""``redriveCohort``: a new attempt for each failed, aborted or cancelled row (pure).

docs/subworkflows.md#redrive-and-bulk-operations. A redriven row keeps its identity (``rowKey``,
its place in the registry) and gets a new child: id ``<first child id>-a<n>``
(``spawn.attempt_id``, deterministic, attempt 1 keeps the spawn's id), built
from the row's original handoff (``seed`` of a queued or large spawn's row,
else ``handoff``, both written at spawn). The row goes back to ``queued``
with that handoff as its seed, ``attempt`` + 1, the old child id appended to
``previousChildIds`` (a row skipped while queued never had a child: it keeps
its id and attempt), ``resolved``/``outcome``/``outputs`` cleared, and the
same commit's window fill (``Commit.fill_windows``) starts it, or leaves it
queued while its cohort's window is full: redriven rows wait their turn in
registry order like any queued row.

Allowed only while the parent is live and its open stage visit is the one
that spawned the cohort (``redrive-not-allowed``). Succeeded and live rows are
skipped. The shell (``engine/bulk.py``) selects rows once (``plan_select``)
and applies them in batches (``plan_batch``), each row under the derived key
``<key>:<rowKey>`` remembered on the row, so a retried call never redrives a
row twice.

A row whose next attempt id already holds a document (one written around the
engine: callers cannot take the shape) is refused ``child-id-taken`` in the
call's refusals, and the other rows go on; the batch reads those ids in its
own transaction, so the check cannot race a writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kinflow.core.cohort import budget, quorum, selection
from kinflow.core.cohort.registry import outcome_view
from kinflow.core.cohort.retry import HANDOFF_MISSING, next_id, requeue
from kinflow.core.commit import Commit
from kinflow.core.context import NeedsDocuments, PlanContext
from kinflow.core.errors import ChildIdTaken, RedriveNotAllowed
from kinflow.core.history import record
from kinflow.core.inputs import check_key
from kinflow.core.ledger import is_replay, remember
from kinflow.core.mutation import Mutation
from kinflow.core.state import BulkCall, Instance, SubworkflowEntry

OP = "redriveCohort"
REDRIVABLE = frozenset({"failed", "aborted", "cancelled", "timed-out"})
__all__ = ["HANDOFF_MISSING", "next_id"]  # shared with retries (core/cohort/retry.py)


@dataclass(frozen=True, slots=True)
class Redrive:
    """One ``redriveCohort`` call: the cohort, the filter and the call's key."""

    activity: str
    where: selection.CohortFilter | None
    key: str  # the caller's idempotency key, or one drawn for this call
    keyed: bool  # the caller gave ``key`` (it goes in the parent's ledger)

    def args(self) -> dict[str, Any]:
        where = self.where.to_json() if self.where is not None else None
        return {"activity": self.activity, "where": where}

    def call(self, ctx: PlanContext) -> BulkCall:
        return BulkCall(op=OP, key=self.key, keyed=self.keyed, activity=self.activity,
                        where=self.args()["where"], startedAt=ctx.now_iso,
                        actor=ctx.actor.model())

    @classmethod
    def of_call(cls, call: BulkCall) -> Redrive:
        """The call an interrupted ``redriveCohort`` recorded (the heartbeat finishes it)."""
        return cls(call.activity, selection.CohortFilter.from_json(call.where), call.key,
                   call.keyed)


def eligible(row: SubworkflowEntry) -> bool:
    """A row whose child finished failed, aborted or cancelled."""
    return row.resolved is not None and outcome_view(row)["outcome"] in REDRIVABLE


def refusal(instance: Instance, found: selection.Cohort) -> RedriveNotAllowed | None:
    """Why the cohort cannot be redriven now, if it cannot."""
    if instance.terminal:
        return RedriveNotAllowed(
            f"instance {instance.id_!r} is {instance.terminal_state}: only a live parent "
            "redrives", parentId=instance.id_, activity=found.activity,
            reason="parent-finished")
    if quorum.is_complete(instance, (found.activity, found.stage_entry)):
        return RedriveNotAllowed(
            f"the cohort of {found.activity!r} is complete (completeWhen held): it takes no "
            "redrive", parentId=instance.id_, activity=found.activity,
            reason="cohort-complete")
    entry = instance.open_entry()
    if entry is None or entry.key_ != found.stage_entry:
        return RedriveNotAllowed(
            f"instance {instance.id_!r} left the stage visit that spawned "
            f"{found.activity!r}", parentId=instance.id_, activity=found.activity,
            reason="stage-left", stage=instance.currentStage)
    return None


def plan_select(state: Instance, verb: Redrive, ctx: PlanContext) -> list[str]:
    """The row keys the call is about, refusing the whole call first: a bad key or
    filter, ``cohort-not-found``, ``redrive-not-allowed``, a key reused otherwise.

    Rows already redriven under this call's key are selected whatever the filter says
    now (a replay reports them as skipped)."""
    found, tree = _checked(state, verb, ctx)
    return selection.select_call(state, found, verb.where, tree, ctx, verb.key, OP)


def plan_select_page(state: Instance, verb: Redrive, ctx: PlanContext, chunks: list[int],
                     budget: Any) -> tuple[list[int], list[selection.Seen]]:
    """``plan_select`` on a sparse parent, a page of chunks at a time: the same refusals,
    then the cohort's chunks and the rows of ``chunks`` with whether each is selected
    (``budget``: the call's one GROQ budget, shared by its pages)."""
    found, tree = _checked(state, verb, ctx)
    return selection.select_call_page(state, found, chunks, verb.where, tree, ctx, verb.key, OP,
                                      budget)


def _checked(state: Instance, verb: Redrive, ctx: PlanContext
             ) -> tuple[selection.Cohort, Any]:
    check_key(verb.key, ctx.limits)
    tree = verb.where.check(ctx.limits) if verb.where is not None else None
    found = selection.cohort(state, verb.activity)
    refused = refusal(state, found)
    if refused is not None:
        raise refused
    if verb.keyed:
        is_replay(state, ctx, verb.key, OP, verb.args())  # another call's key is refused
    return found, tree


def plan_batch(state: Instance, verb: Redrive, keys: list[str], ctx: PlanContext, *,
               last: bool = True, places: dict[str, int] | None = None) -> Mutation:
    """Redrive the rows named ``keys`` that are still eligible, in one commit of the
    parent; ``Mutation.result`` is this batch's ``BulkResult`` (``matched`` 0).
    ``places``: each key's row as a paged selection found it (a sparse parent).

    Every batch but the ``last`` records the call on the parent (``bulkCalls``, the
    heartbeat's ``owesBulk``); the last one forgets it."""
    found = selection.cohort(state, verb.activity)
    refused = refusal(state, found)
    latest = places if places is not None else selection.latest_rows(state, found)
    # asked before the commit copies the parent: a plan that needs the read starts over
    taken = set() if refused is not None else occupied(ctx, [
        next_id(state.subworkflows[latest[key]]) for key in keys
        if key in latest and eligible(state.subworkflows[latest[key]])])
    commit = Commit(state, ctx)
    m = commit.m
    if verb.keyed and not is_replay(m, ctx, verb.key, OP, verb.args()):
        remember(m, ctx, verb.key, OP, verb.args())
    if last:
        if selection.pending(m, OP, verb.key) is not None:
            selection.end_call(m, OP, verb.key)
    else:
        selection.begin_call(m, ctx, verb.call(ctx))
    result = selection.BulkResult()
    for key in keys:
        place = latest.get(key)
        row = m.subworkflows[place] if place is not None else None
        derived = selection.row_key(verb.key, key)
        if place is None or row is None or selection.marked(row, ctx, derived, OP) \
                or not eligible(row):
            result.skipped += 1
            continue
        if refused is not None:  # the parent moved on since the call began
            result.refusals.append(selection.BulkRefusal(row.child_id, key, refused.code,
                                                    refused.message))
            continue
        if next_id(row) in taken:
            result.refusals.append(selection.BulkRefusal(
                row.child_id, key, ChildIdTaken.code,
                f"a document the engine did not write holds {next_id(row)!r}, the id of "
                "the row's next attempt"))
            continue
        problem = redrive_row(m, ctx, place, derived)
        if problem is not None:
            result.refusals.append(problem)
        else:
            result.applied += 1
    if result.applied:
        budget.reopen_on_redrive(m, ctx, (found.activity, found.stage_entry))
        commit.cascade_once()  # starts what the window allows, then one hop
    return commit.finish(result=result)


def plan_forget(state: Instance, verb: Redrive, ctx: PlanContext) -> Mutation:
    """Forget an interrupted call that can never finish (its parent moved on)."""
    commit = Commit(state, ctx, engine=True)
    selection.end_call(commit.m, OP, verb.key)
    return commit.finish()


def occupied(ctx: PlanContext, ids: list[str]) -> set[str]:
    """Which of ``ids`` hold a document, read in the commit's transaction."""
    uris = {child: ctx.gdr(child) for child in ids}
    unknown = [uri for uri in uris.values() if uri not in ctx.documents and uri not in ctx.absent]
    if unknown:
        raise NeedsDocuments(unknown)
    return {child for child, uri in uris.items() if ctx.documents.get(uri) is not None}


def redrive_row(m: Instance, ctx: PlanContext, place: int, derived: str
                ) -> selection.BulkRefusal | None:
    """Turn row ``place`` into its next attempt, queued with its handoff as the seed."""
    row = m.subworkflows[place]
    queued = requeue(m, ctx, place, bulkKeys=selection.with_mark(row, ctx, derived, OP))
    if isinstance(queued, selection.BulkRefusal):
        return queued
    ref, attempt, previous = queued
    record(m, ctx, "subworkflowRedriven", activity=row.activity, instanceRef=ref.to_json(),
           rowKey=row.rowKey, attempt=attempt,
           previousChildId=previous[-1] if previous else None,
           idempotencyKey=derived, actor=ctx.actor.to_json())
    return None
