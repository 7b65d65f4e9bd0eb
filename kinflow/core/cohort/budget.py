"""A cohort's failure budget (``spawn.failureBudget``; pure, no I/O).

Failed rows are those whose latest attempt (the row itself) has outcome
``failed`` or ``aborted``, except the rows the budget itself skipped or
aborted (``abortReason`` ``failure-budget-exceeded``): those are its effect,
and count only as aborted. A cohort's budget is exceeded when they are
strictly more than ``count``, or than ``percent`` % of the cohort's rows
(queued included). The budget is the operator's setting for the cohort
(``updateCohort``, stored on ``Instance.cohorts`` beside ``maxActive``),
else what the spawn block declares.

``enforce`` runs in every commit of a parent (``Commit.cascade_once`` before
its hop, ``Commit.finish`` before the windows fill), so the commit that
stamps the crossing row also acts, once per cohort (``budgetExceededAt``):

* queued rows are skipped: ABORTED, outcome ``aborted``, ``abortReason``
  ``failure-budget-exceeded``;
* live children are condemned under ``abort-rest`` (the drain aborts them,
  crash-safe: the condemnation is in this commit, ``owesAborts`` tells the
  heartbeat), asked to cancel gracefully under ``cancel-rest`` (their rows owe a
  cancel request, ``owesCancels``: core/cancellation.py) and left running under
  ``continue``;
* the spawning activity turns ``failed`` while its visit is open, so the
  hop that follows sees ``$anyActivityFailed``;
* the parent's history records ``cohortFailed``.

Under ``onBudgetExceeded: "pause"`` none of that happens: the cohort is paused
(``pausedReason`` ``failure-budget-exceeded``, history ``cohortPaused``), its
queued rows wait and its live children run on.

``reopen_on_redrive`` is the redrive's hook: it clears the mark, and the
activity the budget failed returns to ``active`` while its visit is open.

A sparse parent that pages (core/cohort/sweep.py) decides from its counts
(``_enforce_paged``) and acts by a sweep of the cohort: the drain skips and
stops its rows a page of chunks per commit (``sweep.budget_row``, the same rule).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kinflow.core.cohort import admission, counts, outcomes, sparse, sweep, tallies
from kinflow.core.context import PlanContext
from kinflow.core.history import record
from kinflow.core.ops import set_activity_status
from kinflow.core.state import (
    Instance,
    SubworkflowEntry,
)
from kinflow.define.budget import shape_problem
from kinflow.define.models import FailureBudget, SpawnBlock, WorkflowDefinition, find_action
from kinflow.errors import InvalidInput

Cohort = tuple[str, str]  # (activity, stage entry key), as core/cohort/window.py

REASON = outcomes.BUDGET_STOPPED
"""``abortReason`` of the rows the budget skipped or condemned."""
ABORT_REST = "abort-rest"
CANCEL_REST = "cancel-rest"
CONTINUE = "continue"
PAUSE = "pause"  # the cohort is paused instead (core/cohort/admission.py)


@dataclass(frozen=True, slots=True)
class Budget:
    """One budget: exactly one of ``count`` and ``percent`` is set."""

    count: int | None = None
    percent: float | None = None

    def exceeded(self, used: int, total: int) -> bool:
        """Strictly more failed rows than allowed."""
        if self.count is not None:
            return used > self.count
        assert self.percent is not None
        return used * 100 > self.percent * total

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count} if self.count is not None else {"percent": self.percent}

    @classmethod
    def of_model(cls, model: FailureBudget) -> Budget:
        return cls(model.count, model.percent)

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> Budget:
        """A budget stored by ``updateCohort`` (already checked by ``parse``)."""
        return cls.of_model(FailureBudget.model_validate(stored))


def parse(value: Any) -> Budget:
    """An operator's budget (``updateCohort(failureBudget)``); ``invalid-input`` if bad."""
    problem: str | None
    try:
        model = FailureBudget.model_validate(value) if isinstance(value, dict) else None
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                            for e in exc.errors())
        model = None
    else:
        problem = ('failureBudget must be an object: {"count": N} or {"percent": P}'
                   if model is None else shape_problem(model))
    if model is None or problem is not None:
        raise InvalidInput(f"failureBudget is invalid: {problem}", field="failureBudget",
                           value=value, reason="shape")
    return Budget.of_model(model)


# ---- what a cohort's budget is ----


def _spawn(definition: WorkflowDefinition, stage: str, activity: str,
           action: str | None) -> SpawnBlock | None:
    """The spawn block that declares the cohort's budget (the row's action's, else the
    first spawning action of the activity that declares one), else the action's own."""
    found = definition.activity(stage, activity)
    if found is None:
        return None
    named = find_action(found, action) if action is not None else None
    if named is not None and named.spawn is not None and named.spawn.failureBudget is not None:
        return named.spawn
    for candidate in found.actions or []:
        if candidate.spawn is not None and candidate.spawn.failureBudget is not None:
            return candidate.spawn
    return named.spawn if named is not None else None


def declared(definition: WorkflowDefinition, stage: str, activity: str,
             action: str | None = None) -> tuple[Budget | None, str]:
    """The budget the definition declares for a cohort and its ``onBudgetExceeded``."""
    block = _spawn(definition, stage, activity, action)
    if block is None:
        return None, ABORT_REST
    budget = Budget.of_model(block.failureBudget) if block.failureBudget is not None else None
    return budget, block.onBudgetExceeded or ABORT_REST


setting = admission.setting  # the cohort's stored setting: one reading for every rule


def effective(own: dict[str, Any] | None, definition: WorkflowDefinition, stage: str,
              activity: str, action: str | None) -> tuple[Budget | None, str]:
    """The operator's budget (``own``, stored) if set, else the declared one."""
    budget, policy = declared(definition, stage, activity, action)
    if own:
        budget = Budget.from_json(own)
    return budget, policy


def used(rows: Iterable[SubworkflowEntry]) -> int:
    """Failed rows: the latest attempt's outcome is ``failed`` or ``aborted``, and the
    budget did not stop the row itself (``outcomes.counts_as_failed``)."""
    return sum(1 for row in rows if outcomes.counts_as_failed(_outcome(row), row.abortReason))


def _outcome(row: SubworkflowEntry) -> str | None:
    if row.outcome is not None or row.resolved is None:
        return row.outcome
    return outcomes.ABORTED if row.resolved.aborted else outcomes.SUCCEEDED


def _may_have_budget(instance: Instance, definition: WorkflowDefinition) -> bool:
    if any(entry.failureBudget for entry in instance.cohorts or []):
        return True
    return any(action.spawn is not None and action.spawn.failureBudget is not None
               for stage in definition.stages for activity in stage.activities or []
               for action in activity.actions or [])


# ---- acting ----


def enforce(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext) -> bool:
    """Act on every cohort whose budget is exceeded and has not acted; whether any did."""
    if not instance.subworkflows or not _may_have_budget(instance, definition):
        return False
    if sparse.is_sparse(instance) and not _sparse_exceeded(instance, definition):
        return False  # no cohort over its budget, by the counts: no row is read
    if sweep.pages(instance):  # acting is a sweep of the cohort (core/cohort/sweep.py)
        return _enforce_paged(instance, definition, ctx)
    members: dict[Cohort, list[int]] = {}
    for index, row in enumerate(instance.subworkflows):
        members.setdefault((row.activity, row.stageEntry), []).append(index)
    acted = False
    for cohort, places in members.items():
        own = setting(instance, cohort)
        if own is not None and own.budgetExceededAt is not None:
            continue
        first = instance.subworkflows[places[0]]
        budget, policy = effective(own.failureBudget if own else None, definition,
                                   first.cohortStage, first.activity, first.action)
        if budget is None:
            continue
        rows = [instance.subworkflows[i] for i in places]
        failed = used(rows)
        if not budget.exceeded(failed, len(rows)) or not _actionable(instance, cohort, rows):
            continue
        if policy == PAUSE:  # nothing is skipped or failed: the operator resumes
            admission.update_setting(instance, cohort, budgetExceededAt=ctx.now_iso)
            admission.pause(instance, ctx, cohort, admission.BUDGET_REASON)
            continue
        act(instance, ctx, cohort, places, policy)
        record(instance, ctx, "cohortFailed", activity=cohort[0], stageEntry=cohort[1],
               budget=budget.to_json(), failed=failed, total=len(rows),
               onBudgetExceeded=policy)
        acted = True
    return acted


def _enforce_paged(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext
                   ) -> bool:
    """``enforce`` on a sparse parent that pages, by its counts: a cohort over its budget
    acts by a sweep. Not while a sweep still condemns it, nor while its visit is left and
    owed aborts or cancel requests remain (their rows are no budget's doing)."""
    acted = False
    owed = sweep.owes(instance, sweep.ABORTS) or sweep.owes(instance, sweep.CANCELS)
    for cohort, entry, budget, policy in _over_budget(instance, definition):
        if sparse.swept(instance, cohort):
            continue
        failed, total = tallies.failed(entry), tallies.total(entry)
        unresolved = tallies.unfinished(entry)
        if not _open_visit(instance, cohort) and (owed or not unresolved):
            continue
        if policy == PAUSE:
            admission.update_setting(instance, cohort, budgetExceededAt=ctx.now_iso)
            admission.pause(instance, ctx, cohort, admission.BUDGET_REASON)
            continue
        act(instance, ctx, cohort, [], policy)
        record(instance, ctx, "cohortFailed", activity=cohort[0], stageEntry=cohort[1],
               budget=budget.to_json(), failed=failed, total=total, onBudgetExceeded=policy)
        acted = True
    return acted


def _over_budget(instance: Instance, definition: WorkflowDefinition
                 ) -> Iterator[tuple[tuple[str, str], dict[str, Any], Budget, str]]:
    """The cohorts of a sparse registry whose budget (not acted on yet) is exceeded by the
    failed rows their summary counts (``tallies.failed`` is ``used``), with that budget."""
    for entry in counts.live_summary(instance):
        cohort = tallies.cohort_of(entry)
        own = setting(instance, cohort)
        stage = admission.stage_of(instance, cohort[1])
        if stage is None or (own is not None and own.budgetExceededAt is not None):
            continue
        budget, policy = effective(own.failureBudget if own else None, definition, stage,
                                   cohort[0], None)
        if budget is not None and budget.exceeded(tallies.failed(entry), tallies.total(entry)):
            yield cohort, entry, budget, policy


def _sparse_exceeded(instance: Instance, definition: WorkflowDefinition) -> bool:
    """Whether a cohort of a sparse registry may have to act on its budget."""
    return any(True for _ in _over_budget(instance, definition))


def _actionable(instance: Instance, cohort: Cohort, rows: list[SubworkflowEntry]) -> bool:
    """Whether exceeding means anything: the spawning visit is open, or a row is still
    neither finished nor condemned (a parent that left with ``onExit: abort`` or was
    aborted already condemned all, and those aborts are no budget's doing)."""
    if _open_visit(instance, cohort):
        return True
    return any(row.resolved is None and row.abortPending is None and row.cancelPending is None
               for row in rows)


def _open_visit(instance: Instance, cohort: Cohort) -> bool:
    entry = instance.open_entry()
    return entry is not None and entry.key_ == cohort[1] and not instance.terminal


def act(instance: Instance, ctx: PlanContext, cohort: Cohort, places: list[int],
        policy: str) -> None:
    """Skip queued rows, condemn live ones (``abort-rest``), fail the activity, mark; on a
    paging sparse parent (``places`` empty) the rows are a sweep's, a page per commit."""
    if sweep.pages(instance):
        sweep.begin(instance, ctx, sweep.BUDGET, visit=cohort[1], activity=cohort[0],
                    policy=policy)
    for index in places:
        sweep.budget_row(instance, ctx, index, policy)
    if _open_visit(instance, cohort):
        entry = instance.open_entry()
        state = entry.activity(cohort[0]) if entry is not None else None
        if state is not None and state.status != "failed":
            set_activity_status(instance, ctx, cohort[0], "failed")
    admission.update_setting(instance, cohort, budgetExceededAt=ctx.now_iso)


def set_budget(instance: Instance, cohort: Cohort, budget: Budget) -> bool:
    """Store an operator's budget for ``cohort`` (``updateCohort``); whether it changed.
    A budget already exceeded then acts in the same commit (``enforce``)."""
    own = setting(instance, cohort)
    if own is not None and own.failureBudget == budget.to_json():
        return False
    admission.update_setting(instance, cohort, failureBudget=budget.to_json())
    return True


def reopen_on_redrive(instance: Instance, ctx: PlanContext, cohort: Cohort) -> bool:
    """Undo the budget's verdict when rows of ``cohort`` are redriven: the mark is cleared
    (a budget exceeded again acts again) and, while the spawning visit is open, the
    activity the budget failed returns to ``active``. Whether the activity reopened."""
    own = setting(instance, cohort)
    if own is None or own.budgetExceededAt is None:
        return False
    admission.update_setting(instance, cohort, budgetExceededAt=None)
    if not _open_visit(instance, cohort):
        return False
    entry = instance.open_entry()
    state = entry.activity(cohort[0]) if entry is not None else None
    if state is None or state.status != "failed":
        return False
    return set_activity_status(instance, ctx, cohort[0], "active")
