"""Stage visits: priming, entering, exiting.

This module owns what happens at a stage boundary and nothing else: building
a new visit (stage fields, then one activity entry per activity with its
``filter`` evaluated exactly once), closing the open visit, the three history
rows of a move (``stageExited``, ``transitionFired``, ``stageEntered``, in
that order), completing the instance on a terminal stage, and condemning the
live cohorts of ``onExit: "abort"`` spawn actions bound to the exited visit.

It decides nothing about *whether* to move: the cascade and the admin verbs
do, then call ``move``.
"""

from __future__ import annotations

from kinflow.core.cohort import counts, outcomes, sparse, sweep
from kinflow.core.conditions import Outcome, Renderer
from kinflow.core.context import PlanContext
from kinflow.core.fields import materialise
from kinflow.core.history import record
from kinflow.core.state import (
    ActivityEntry,
    FilterEvaluation,
    Instance,
    StageEntry,
)
from kinflow.define import sites
from kinflow.define.models import Stage, WorkflowDefinition


def _query_params(instance: Instance, ctx: PlanContext) -> dict[str, object]:
    return {"self": ctx.gdr(instance.id_), "stage": instance.currentStage, "now": ctx.now_iso}


def open_visit(instance: Instance, definition: WorkflowDefinition, stage: Stage,
               ctx: PlanContext) -> StageEntry:
    """Append a new visit of ``stage`` and make it current."""
    visible = {f.name: f.value for f in instance.fields}
    instance.currentStage = stage.name
    entry = StageEntry.model_validate({
        "_key": ctx.new_key(), "name": stage.name, "enteredAt": ctx.now_iso,
        "fields": [], "activities": [],
    })
    instance.stages.append(entry)
    entry.fields = materialise(stage.fields or [], ctx, visible=visible,
                               query_params=_query_params(instance, ctx))
    visible.update({f.name: f.value for f in entry.fields})
    renderer = Renderer(instance, definition, ctx)
    for activity in stage.activities or []:
        built = ActivityEntry.model_validate({
            "_key": ctx.new_key(), "name": activity.name, "status": "active",
            "startedAt": ctx.now_iso,
        })
        if activity.filter is not None:
            verdict = renderer.check(activity.filter, sites.ACTIVITY_FILTER, activity.name)
            unevaluable = verdict.outcome is Outcome.UNEVALUABLE
            built.filterEvaluation = FilterEvaluation(
                at=ctx.now_iso, truthy=verdict.satisfied,
                unevaluable=True if unevaluable else None, detail=verdict.detail,
            )
            if verdict.outcome is Outcome.UNSATISFIED:
                built.status = "skipped"
                built.startedAt = None
        if built.status == "active":
            built.fields = materialise(activity.fields or [], ctx, visible=visible,
                                       query_params=_query_params(instance, ctx))
        entry.activities.append(built)
    if stage.terminal and instance.cancellingAt is None:  # a cancelling one ends later
        instance.completedAt = ctx.now_iso
        instance.result = outcomes.finish(instance, definition, stage,
                                          ctx.limits.row_output_bytes)
    return entry


def prime(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext) -> None:
    """Build the first visit of a freshly created instance."""
    stage = definition.stage(instance.currentStage)
    if stage is None:  # the definition was validated at deploy; a foreign writer broke it
        raise ValueError(f"initial stage {instance.currentStage!r} is not declared")
    open_visit(instance, definition, stage, ctx)


def move(
    instance: Instance,
    definition: WorkflowDefinition,
    target: Stage,
    ctx: PlanContext,
    *,
    transition: str,
    via: str = "transition",
    reason: str | None = None,
    on_exit: bool = True,
) -> None:
    """Leave the open visit and enter ``target`` (one stage move). ``on_exit=False``
    leaves the cohorts' ``onExit`` rules out (a cancellation applies ``onCancel``)."""
    source = instance.currentStage
    exited = instance.open_entry()
    actor = ctx.actor.to_json()
    if exited is not None:
        exited.exitedAt = ctx.now_iso
        if on_exit:
            condemn_on_exit(instance, definition, exited, ctx)
    common = {"transition": transition, "via": via, "reason": reason, "actor": actor}
    record(instance, ctx, "stageExited", stage=source, toStage=target.name, **common)
    record(instance, ctx, "transitionFired", fromStage=source, toStage=target.name, **common)
    record(instance, ctx, "stageEntered", stage=target.name, fromStage=source, **common)
    open_visit(instance, definition, target, ctx)


def condemn_on_exit(
    instance: Instance, definition: WorkflowDefinition, exited: StageEntry, ctx: PlanContext
) -> None:
    """Owe an abort to every live child of an ``onExit: abort`` spawn bound to ``exited``,
    and a cancel request to those of an ``onExit: cancel`` spawn (not waited for)."""
    rules = sweep.exit_rules(definition, exited.name)
    if not rules or (sparse.is_sparse(instance) and not _unfinished(instance, exited.key_)):
        return  # (a sparse registry is walked only when the summary counts a row to condemn)
    if sweep.pages(instance):  # a page of chunks per commit (core/cohort/sweep.py)
        sweep.begin(instance, ctx, sweep.EXIT, stage=exited.name, visit=exited.key_)
        return
    for index in range(len(instance.subworkflows)):
        sweep.exit_row(instance, ctx, index, rules, exited.name, exited.key_)


def _unfinished(instance: Instance, visit: str) -> bool:
    """Whether a cohort spawned in ``visit`` has a row not finished, by its counts."""
    return any(int(n) and not name.startswith(("done:", "aborted:", "cancelled:"))
               for entry in counts.live_summary(instance) if entry.get("stageEntry") == visit
               for name, n in entry.get("counts", {}).items())
