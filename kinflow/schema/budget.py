"""``Cohort.budget``: a cohort's failure budget as GraphQL shows it (core/cohort/budget.py).

The budget itself is the operator's setting for the visit that spawned the
cohort (``updateCohort``), else what the parent's pinned definition declares;
``used``, ``stopped`` and ``exceeded`` come from the cohort's counts (``failed``
rows against ``total``), so an indexed cohort that never reads its rows answers too.
"""

from __future__ import annotations

from typing import Any

import strawberry

from kinflow.core.cohort import budget as failure_budget
from kinflow.core.cohort.registry import CohortCounts, Row
from kinflow.core.definitions import parse_snapshot

Doc = dict[str, Any]


@strawberry.type(description="A cohort's failure budget: exceeded when more than count "
                 "rows, or more than percent % of its rows, failed or were aborted.")
class FailureBudget:
    count: int | None
    percent: float | None
    used: int = strawberry.field(description="Rows whose latest attempt failed or aborted, "
                                 "not counting the rows the budget itself stopped.")
    exceeded: bool
    stopped: int = strawberry.field(description="Rows the budget skipped, aborted or (under "
                                    "cancel-rest) cancelled once it was exceeded (abortReason "
                                    "failure-budget-exceeded); they count in Cohort.aborted "
                                    "or Cohort.cancelled, never in used.")


def budget_of(parent: Doc, activity: str, last: Row | None) -> failure_budget.Budget | None:
    """The budget of the cohort ``last`` belongs to (else the parent's latest visit)."""
    entries = parent.get("stages") or []
    visit = last.stage_entry if last is not None else (
        entries[-1].get("_key") if entries else None)
    own = next((s.get("failureBudget") for s in parent.get("cohorts") or []
                if (s.get("activity"), s.get("stageEntry")) == (activity, visit)), None)
    stage = next((e.get("name") for e in entries if e.get("_key") == visit), None)
    snapshot = parent.get("definitionSnapshot")
    if not isinstance(stage, str) or not isinstance(snapshot, str):
        return None
    action = last.action if last is not None else None
    budget, _ = failure_budget.effective(own if isinstance(own, dict) else None,
                                         parse_snapshot(snapshot), stage, activity, action)
    return budget


def cohort_budget(parent: Doc | None, activity: str, last: Row | None,
                  counts: CohortCounts) -> FailureBudget | None:
    budget = budget_of(parent, activity, last) if parent is not None else None
    if budget is None:
        return None
    return FailureBudget(count=budget.count, percent=budget.percent, used=counts.failed,
                         exceeded=budget.exceeded(counts.failed, counts.total),
                         stopped=counts.stopped)
