"""Operators' verbs: ``abortInstance``, ``setStage``, ``resetActivity``, ``updateCohort``,
``pauseCohort``, ``resumeCohort``.

Each planner is ``(state, verb, context) -> Mutation`` like the caller verbs
(``verbs.py``), through the same ``Commit``; these step outside a
definition's own flow (closing an instance in place, moving it to a stage,
reopening an activity, changing a cohort's window, failure budget or admission,
pausing and resuming it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kinflow.core import effects as fx
from kinflow.core.cohort import admission, sweep, window
from kinflow.core.cohort import budget as failure_budget
from kinflow.core.commit import Commit
from kinflow.core.context import PlanContext
from kinflow.core.errors import (
    ActivityNotFinished,
    ActivityNotFound,
    CohortNotFound,
    ResetTargetInvalid,
    StageNotFound,
)
from kinflow.core.history import record
from kinflow.core.inputs import check_key, check_text
from kinflow.core.ledger import is_replay, remember
from kinflow.core.mutation import Mutation
from kinflow.core.ops import set_activity_status
from kinflow.core.stages import move
from kinflow.core.state import TERMINAL_ACTIVITY, Instance
from kinflow.define.models import WorkflowDefinition
from kinflow.errors import InvalidInput


@dataclass(slots=True)
class AbortInstance:
    reason: str | None = None
    idempotency_key: str | None = None


def plan_abort(state: Instance, verb: AbortInstance, ctx: PlanContext) -> Mutation:
    """Close the instance in place: condemn live rows, cancel effects.

    Never refused for size: it writes a few hundred bytes, and a cascade that
    condemned this instance must be able to finish (sizes.py).
    """
    check_key(verb.idempotency_key, ctx.limits)
    check_text("reason", verb.reason, ctx.limits)
    args = {"reason": verb.reason}
    commit = Commit(state, ctx)
    commit.size_limit = None
    m = commit.m
    if is_replay(m, ctx, verb.idempotency_key, "abortInstance", args) or m.terminal:
        return commit.finish(replay=True)
    remember(m, ctx, verb.idempotency_key, "abortInstance", args)
    close_aborted(m, ctx, verb.reason)
    return commit.finish()


def close_aborted(m: Instance, ctx: PlanContext, reason: str | None) -> None:
    """Abort ``m`` in place: leave its visit, condemn its live rows (not those a
    cancellation detached), cancel its effects. A cancellation in progress ends here
    too: an abort wins."""
    entry = m.open_entry()
    if entry is not None:
        entry.exitedAt = ctx.now_iso
    if sweep.pages(m):  # a page of chunks per commit (core/cohort/sweep.py)
        sweep.begin(m, ctx, sweep.ABORT, reason=sweep.PARENT_ABORTED)
    else:
        for index in range(len(m.subworkflows)):
            sweep.abort_row(m, index, sweep.PARENT_ABORTED, ctx.now_iso)
    fx.cancel_all(m, ctx)
    record(m, ctx, "aborted", stage=m.currentStage, reason=reason,
           actor=ctx.actor.to_json())
    m.completedAt = m.abortedAt = ctx.now_iso


def plan_sweep_page(state: Instance, ctx: PlanContext, at_most: int) -> Mutation:
    """Condemn the next page of a sparse parent's first sweep (core/cohort/sweep.py); the
    result is the chunks it paged. An engine commit, never refused for size."""
    commit = Commit(state, ctx, engine=True)
    commit.size_limit = None
    paged = sweep.page(commit.m, commit.definition, ctx, at_most)
    return commit.finish(result=paged)


@dataclass(slots=True)
class SetStage:
    stage: str
    reason: str | None = None
    idempotency_key: str | None = None


def plan_set_stage(state: Instance, verb: SetStage, ctx: PlanContext) -> Mutation:
    args = {"stage": verb.stage, "reason": verb.reason}
    commit, replay = Commit.keyed(state, ctx, verb.idempotency_key, "setStage", args,
                                  lambda: check_text("reason", verb.reason, ctx.limits))
    if replay is not None:
        return replay
    m, definition = commit.m, commit.definition
    target = definition.stage(verb.stage)
    if target is None:
        raise StageNotFound(f"no stage {verb.stage!r} in {definition.name}",
                            stage=verb.stage, reason="stage-not-found")
    if m.terminal or m.currentStage == verb.stage:
        return commit.finish()
    remember(m, ctx, verb.idempotency_key, "setStage", args)
    move(m, definition, target, ctx, transition=f"setStage:{m.currentStage}->{verb.stage}",
         via="setStage", reason=verb.reason)
    commit.moves += 1
    return commit.finish()


@dataclass(slots=True)
class ResetActivity:
    activity: str
    to: str = "active"
    idempotency_key: str | None = None


def plan_reset_activity(state: Instance, verb: ResetActivity, ctx: PlanContext) -> Mutation:
    args = {"activity": verb.activity, "to": verb.to}
    commit, replay = Commit.keyed(state, ctx, verb.idempotency_key, "resetActivity", args)
    if replay is not None:
        return replay
    m = commit.m
    if verb.to not in ("active", "skipped"):
        raise ResetTargetInvalid("an activity resets to 'active' or 'skipped'", to=verb.to,
                                 reason="reset-target-invalid")
    if m.terminal:
        return commit.finish()
    entry = m.open_entry()
    found = entry.activity(verb.activity) if entry else None
    if found is None:
        raise ActivityNotFound(f"activity {verb.activity!r} is not in the current stage",
                               activity=verb.activity, reason="activity-not-in-stage")
    if found.status == verb.to:
        return commit.finish()
    if found.status not in TERMINAL_ACTIVITY:
        raise ActivityNotFinished(
            f"activity {verb.activity!r} is {found.status}; only a finished activity resets",
            activity=verb.activity, status=found.status, reason="activity-not-finished",
        )
    remember(m, ctx, verb.idempotency_key, "resetActivity", args)
    set_activity_status(m, ctx, verb.activity, verb.to)
    commit.cascade_once()
    return commit.finish()


# ---- cohort control ----


def cohort_visit(m: Instance, activity: str) -> str:
    """The stage entry key of the activity's latest spawning visit; ``cohort-not-found``."""
    visit = window.latest_visit(m, activity)
    if visit is None:
        raise CohortNotFound(
            f"instance {m.id_!r} never spawned a cohort for activity {activity!r}",
            parentId=m.id_, activity=activity)
    return visit


def _keyed(m: Instance, definition: WorkflowDefinition, cohort: tuple[str, str]) -> bool:
    stage = admission.stage_of(m, cohort[1])
    block = admission.spawn_block(definition, stage, cohort[0]) if stage is not None else None
    return block is not None and block.concurrencyKey is not None


@dataclass(slots=True)
class PauseCohort:
    activity: str
    reason: str | None = None
    idempotency_key: str | None = None


@dataclass(slots=True)
class ResumeCohort:
    activity: str
    idempotency_key: str | None = None


def plan_pause_cohort(state: Instance, verb: PauseCohort, ctx: PlanContext) -> Mutation:
    """Pause the activity's latest cohort: no queued row starts, no retry is admitted,
    live children run on. Pausing a paused cohort changes nothing."""
    args = {"activity": verb.activity, "reason": verb.reason}
    commit, replay = Commit.keyed(state, ctx, verb.idempotency_key, "pauseCohort", args,
                                  lambda: check_text("reason", verb.reason, ctx.limits))
    if replay is not None:
        return replay
    m = commit.m
    visit = cohort_visit(m, verb.activity)
    remember(m, ctx, verb.idempotency_key, "pauseCohort", args)
    admission.pause(m, ctx, (verb.activity, visit), verb.reason)
    return commit.finish()


def plan_resume_cohort(state: Instance, verb: ResumeCohort, ctx: PlanContext) -> Mutation:
    """Resume the activity's latest cohort: this commit starts what its window, keys and
    rate admit now. Resuming a running cohort changes nothing."""
    args = {"activity": verb.activity}
    commit, replay = Commit.keyed(state, ctx, verb.idempotency_key, "resumeCohort", args)
    if replay is not None:
        return replay
    m = commit.m
    visit = cohort_visit(m, verb.activity)
    remember(m, ctx, verb.idempotency_key, "resumeCohort", args)
    admission.resume(m, ctx, (verb.activity, visit))
    return commit.finish()


@dataclass(slots=True)
class UpdateCohort:
    activity: str
    max_active: int | None = None  # None leaves the window as it is
    failure_budget: Any = None  # None leaves the budget as it is (core/cohort/budget.py)
    # None leaves them as they are (core/cohort/admission.py)
    max_active_per_key: int | None = None
    start_rate: Any = None


def plan_update_cohort(state: Instance, verb: UpdateCohort, ctx: PlanContext) -> Mutation:
    """Set an operator's window or failure budget on the activity's latest spawning visit.

    Raising the window starts queued rows in this very commit (``Commit.finish``
    fills windows); lowering it starts nothing and lets running children finish.
    A budget that is already exceeded acts in this commit, and its hop sees the
    activity failed. ``maxActivePerKey`` and ``startRate`` apply in this commit's
    fill too (a paused cohort's, once it resumes).
    """
    budget = (failure_budget.parse(verb.failure_budget) if verb.failure_budget is not None
              else None)
    for name, value in (("maxActive", verb.max_active),
                        ("maxActivePerKey", verb.max_active_per_key)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise InvalidInput(f"{name} must be an integer of at least 1", field=name,
                               value=value, reason="range")
    rate = admission.parse_rate(verb.start_rate) if verb.start_rate is not None else None
    commit = Commit(state, ctx)
    m = commit.m
    visit = cohort_visit(m, verb.activity)
    cohort = (verb.activity, visit)
    if verb.max_active_per_key is not None and not _keyed(m, commit.definition, cohort):
        raise InvalidInput("maxActivePerKey needs a cohort whose spawn declares "
                           "concurrencyKey", field="maxActivePerKey",
                           value=verb.max_active_per_key, reason="no-concurrency-key")
    own = admission.setting(m, cohort)
    admitted = {key: value for key, value in (("maxActivePerKey", verb.max_active_per_key),
                                             ("startRate", rate))
                if value is not None and (own is None or getattr(own, key) != value)}
    if admitted:  # the commit's fill applies them (a paused cohort: on resume)
        admission.update_setting(m, cohort, **admitted)
        record(m, ctx, "cohortUpdated", activity=verb.activity, stageEntry=visit,
               **admitted, actor=ctx.actor.to_json())
    if verb.max_active is not None:
        current = window.setting(m, (verb.activity, visit))
        if current is None or current.maxActive != verb.max_active:
            window.set_max_active(m, (verb.activity, visit), verb.max_active)
            record(m, ctx, "cohortUpdated", activity=verb.activity, stageEntry=visit,
                   maxActive=verb.max_active, actor=ctx.actor.to_json())
    if budget is not None and failure_budget.set_budget(m, (verb.activity, visit), budget):
        record(m, ctx, "cohortUpdated", activity=verb.activity, stageEntry=visit,
               failureBudget=budget.to_json(), actor=ctx.actor.to_json())
        if failure_budget.enforce(m, commit.definition, ctx):
            commit.cascade_once()
    return commit.finish()
