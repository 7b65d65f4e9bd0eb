"""Quorum completion of a cohort (``spawn.completeWhen``; pure, no I/O).

docs/subworkflows.md#settlement. ``completeWhen`` is a GROQ condition over
``$cohort`` (the cohort's counts), evaluated in every commit that changes the
counts of a cohort not complete yet (``evaluate``), on the counts as that
commit leaves them. The first commit in which it holds completes the cohort
(``complete``), all in that commit:

* rows not started (queued, waiting for a retry) are skipped: ABORTED,
  outcome ``aborted``, ``abortReason: "cohort-complete"``; they never get a
  child and the failure budget does not count them;
* live children follow ``onComplete``: ``abort`` (default) condemns them with
  the same reason (the drain aborts them, crash-safe through ``owesAborts``),
  ``cancel`` owes each a graceful cancel request (``owesCancels``),
  ``continue`` lets them finish;
* the cohort's setting records ``completedAt`` (``$cohort.complete``,
  ``Cohort.complete``) and its registration stops (``registration`` cleared);
* the parent's history records ``cohortComplete`` once.

On a sparse parent that pages (core/cohort/sweep.py) the commit records a sweep
of the cohort instead of walking its rows, and the drain stops them a page of
chunks per commit (``sweep.quorum_row``, the same rule); the cohort starts no
queued row meanwhile.

A complete cohort takes no redrive (``redrive-not-allowed``, reason
``cohort-complete``) and no retry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kinflow import groq
from kinflow.core.cohort import admission, counts, outcomes, sweep, tallies
from kinflow.core.cohort.deadlines import block
from kinflow.core.cohort.window import setting
from kinflow.core.conditions import Renderer, evaluate_expression
from kinflow.core.context import PlanContext
from kinflow.core.history import record
from kinflow.core.state import Instance, SubworkflowEntry
from kinflow.define import sites
from kinflow.define.models import WorkflowDefinition

REASON = outcomes.COMPLETE_STOPPED
ABORT = "abort"
CANCEL = "cancel"
CONTINUE = "continue"
Cohort = tuple[str, str]


def holds(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext,
          text: str, activity: str, cohort: dict[str, Any]) -> bool:
    """Whether ``completeWhen`` is true (an error or a non-boolean is not)."""
    # the registry's variables only where the text reads them: ``$subworkflows`` walks rows
    variables = Renderer(instance, definition, ctx).variables(sites.COMPLETE_WHEN, activity,
                                                              text=text)
    variables["cohort"] = cohort
    try:
        return evaluate_expression(text, variables, ctx.now) is True
    except groq.GroqError:
        return False


def evaluate(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext,
             places: list[int]) -> int:
    """Complete every cohort among the changed rows ``places`` whose ``completeWhen``
    now holds for the first time; how many completed."""
    if instance.terminal or not places:
        return 0
    rows = instance.subworkflows
    changed: dict[Cohort, SubworkflowEntry] = {}
    for place in places:
        row = rows[place]
        changed.setdefault((row.activity, row.stageEntry), row)
    done = 0
    for cohort, row in changed.items():
        spawn = block(definition, row)
        own = setting(instance, cohort)
        if spawn is None or spawn.completeWhen is None or (
                own is not None and own.completedAt is not None):
            continue
        # the counts as this commit leaves them (the summary corrected by the rows replaced)
        value = counts.cohort_object(instance, cohort[0], cohort[1], definition)
        if not holds(instance, definition, ctx, spawn.completeWhen, cohort[0], value):
            continue
        entry = tallies.entry_of(counts.live_summary(instance), *cohort)
        complete(instance, ctx, cohort, spawn.onComplete or ABORT, entry)
        done += 1
    return done


def _places(instance: Instance, cohort: Cohort, entry: dict[str, Any] | None) -> Iterable[int]:
    rows = instance.subworkflows
    lo = int(entry["first"]) if entry else 0
    hi = min(int(entry["last"]) + 1 if entry else len(rows), len(rows))
    span = rows[lo:hi]  # (on a sparse registry: every chunk of the span at once)
    return (i for i, row in enumerate(span, lo) if (row.activity, row.stageEntry) == cohort)


def complete(instance: Instance, ctx: PlanContext, cohort: Cohort, policy: str,
             entry: dict[str, Any] | None) -> None:
    """Skip the rows not started, treat live children per ``policy``, mark, record."""
    reason = (f'the cohort of activity "{cohort[0]}" is complete (completeWhen held; '
              f"onComplete: {policy})")
    skipped = stopped = 0
    if sweep.pages(instance):  # a page of chunks per commit (core/cohort/sweep.py)
        sweep.begin(instance, ctx, sweep.QUORUM, visit=cohort[1], activity=cohort[0],
                    policy=policy, reason=reason)
        for name, n in (entry or {}).get("counts", {}).items():  # as the counts say now
            status = tallies.split(name)[0]
            if status == "queued":
                skipped += int(n)
            elif status not in sweep.FINISHED and policy != CONTINUE:
                stopped += int(n)
    else:
        for index in _places(instance, cohort, entry):
            done = sweep.quorum_row(instance, ctx, index, policy, reason)
            skipped += done == "skipped"
            stopped += done == "stopped"
    admission.update_setting(instance, cohort, completedAt=ctx.now_iso, registration=None)
    record(instance, ctx, "cohortComplete", activity=cohort[0], stageEntry=cohort[1],
           onComplete=policy, skipped=skipped, stopped=stopped)


def is_complete(instance: Instance, cohort: Cohort) -> bool:
    own = setting(instance, cohort)
    return own is not None and own.completedAt is not None
