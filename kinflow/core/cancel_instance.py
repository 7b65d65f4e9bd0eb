"""The ``cancelInstance`` verb: start a graceful cancellation (pure; no I/O).

The commit puts the instance in CANCELLING: it records why and when, gives
every live child its spawn's ``onCancel`` policy (``core/cancellation.py``),
leaves the current stage without its cohorts' ``onExit`` rules and enters
the definition's ``cancelStage`` if it declares one, whose activities,
effects and caller actions then run as usual; then one cascade hop. The same
commit may already end it (no cancel stage and nothing to wait for).

The shell (``Driver.drain_cancels``) then asks the children to cancel, each
through this same planner, recursively. A finished instance is refused
(``action-disabled``, ``details.reason`` ``instance-<status>``, as firing an
action on it is); cancelling one that is already CANCELLING changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from kinflow.core import cancellation
from kinflow.core.cohort import sweep
from kinflow.core.commit import Commit
from kinflow.core.context import PlanContext
from kinflow.core.errors import ActionDisabled
from kinflow.core.history import record
from kinflow.core.inputs import check_text
from kinflow.core.ledger import remember
from kinflow.core.mutation import Mutation
from kinflow.core.stages import move
from kinflow.core.state import Instance

VERB = "cancelInstance"


@dataclass(slots=True)
class CancelInstance:
    reason: str | None = None
    idempotency_key: str | None = None


def plan_cancel(state: Instance, verb: CancelInstance, ctx: PlanContext) -> Mutation:
    """The commit that starts cancelling ``state`` (or its replay, or a no-op)."""
    args = {"reason": verb.reason}
    commit, replay = Commit.keyed(state, ctx, verb.idempotency_key, VERB, args,
                                  lambda: check_text("reason", verb.reason, ctx.limits))
    if replay is not None:
        return replay
    m = commit.m
    if m.terminal:
        reason = f"instance-{m.terminal_state}"
        raise ActionDisabled(f"instance {m.id_!r} is {m.terminal_state}: nothing to cancel",
                             instanceId=m.id_, action=VERB, reason=reason)
    remember(m, ctx, verb.idempotency_key, VERB, args)
    if m.cancelling:
        return commit.finish()  # already cancelling: the first request stands
    begin(commit, verb.reason)
    commit.cascade_once()
    return commit.finish()


def begin(commit: Commit, reason: str | None) -> None:
    """CANCELLING: policies applied to the children, the stage left, the cancel stage
    entered if declared."""
    m, definition, ctx = commit.m, commit.definition, commit.ctx
    m.cancellingAt = ctx.now_iso
    m.cancelReason = reason
    m.cancelDeadline = cancellation.deadline(m, definition, ctx)
    record(m, ctx, "cancelRequested", stage=m.currentStage, reason=reason,
           actor=ctx.actor.to_json())
    if sweep.pages(m):  # a sparse parent: a page of chunks per commit (core/cohort/sweep.py)
        sweep.begin(m, ctx, sweep.CANCEL)
    else:
        cancellation.apply_on_cancel(m, definition, ctx)
    target = definition.stage(definition.cancelStage) if definition.cancelStage else None
    if target is None:
        entry = m.open_entry()
        if entry is not None:
            entry.exitedAt = ctx.now_iso
        return
    if m.currentStage == target.name:
        return  # already cleaning up: the visit goes on
    move(m, definition, target, ctx, transition=f"cancel:{m.currentStage}->{target.name}",
         via="cancel", reason=reason, on_exit=False)
    commit.moves += 1
