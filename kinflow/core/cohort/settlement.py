"""The settlement pass every commit of a parent runs (pure; docs/subworkflows.md#settlement).

Over the registry rows the commit changed (by identity against the stored
rows, ``chunks.changed_places``), in this order:

1. ``deadlines.stamp_started``: rows whose attempt's child this commit created
   get ``startedAt`` and ``deadlineAt``;
2. ``deadlines.conclude``: rows that ended because their deadline passed read
   ``timed-out``;
3. ``retry.retry_finished``: finished attempts the spawn's ``retry`` covers are
   re-queued with ``retryAt``; ``retry.clear_finished`` clears ``retryAt`` on a
   row skipped while it waited;
4. ``deadlines.expire``: live rows past their deadline are condemned (or asked
   to cancel);
5. ``quorum.evaluate``: cohorts whose counts changed and whose ``completeWhen``
   now holds complete.

``Commit`` runs it before the failure budget looks at the rows (so a row with a
retry left is never counted failed) and again after its windows filled (so
children started by the fill get their deadline). A definition without a
deadline, a retry or a quorum costs one look at its spawn blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from kinflow.core.cohort import deadlines, quorum, retry
from kinflow.core.cohort.chunks import changed_places
from kinflow.core.context import PlanContext
from kinflow.core.state import Instance, SubworkflowEntry
from kinflow.define.models import WorkflowDefinition


@dataclass(frozen=True, slots=True)
class Settled:
    """What one pass did."""

    retried: int = 0
    timed_out: int = 0
    completed: int = 0


def apply(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext,
          base: list[SubworkflowEntry]) -> Settled:
    """Run the pass on ``instance`` (the commit's copy), ``base`` being its stored rows."""
    if not instance.subworkflows or not deadlines.settles(definition):
        return Settled()
    places = changed_places(base, instance.subworkflows)
    deadlines.stamp_started(instance, definition, ctx, base, places)
    deadlines.conclude(instance, places)
    retried = retry.retry_finished(instance, definition, ctx, places)
    retry.clear_finished(instance, places)
    timed_out = deadlines.expire(instance, definition, ctx)
    completed = quorum.evaluate(instance, definition, ctx,
                                changed_places(base, instance.subworkflows))
    return Settled(retried, timed_out, completed)
