"""The commit that registers a cohort's next batch of rows (pure; no I/O).

A spawn of a windowed lake cohort registers its first batch and leaves a
checkpoint (core/cohort/batches.py). Each later batch is this commit on the
parent: it reads the batch the checkpoint names (``PlanContext.row_batch``),
registers its rows queued (with their seeds, as the window's queued rows
always are), moves the checkpoint past the batch (or clears it after the
last) and, like every commit of the parent, fills the window, so the new
rows start as soon as there is room. The parent's commit is fenced by its
``_rev``: two processes registering the same cohort conflict, one re-plans
from the other's checkpoint, and a row key is never registered twice.

Registration stops (the checkpoint is cleared, no more rows) when the cohort
completed (``completedAt``, a quorum), was closed (``abortCohort`` /
``cancelCohort``), its stage visit ended or the parent finished.
"""

from __future__ import annotations

from kinflow.core.cohort import batches, spawn
from kinflow.core.commit import Commit
from kinflow.core.conditions import Renderer
from kinflow.core.context import PlanContext
from kinflow.core.errors import SpawnDefinitionUnresolved
from kinflow.core.mutation import Mutation
from kinflow.core.state import CohortWindow, Instance
from kinflow.define.models import Action, WorkflowDefinition, find_action


def plan_register(state: Instance, ctx: PlanContext) -> Mutation:
    """Register the next batch of the parent's first registering cohort."""
    commit = Commit(state, ctx, engine=True)
    m = commit.m
    for own in batches.registering(m):
        action = _action(m, commit.definition, own)
        if action is None or not _open(m, own):
            batches.set_registration(m, (own.activity, own.stageEntry), None)
            continue
        register_batch(m, commit.definition, ctx, own, action)
        break
    m.owesRegistration = True if batches.registering(m) else None
    if not m.terminal:
        # the parent's gates are evaluated here, as a tick would evaluate them right after:
        # the batch's rows may have started and finished (children that finish at once),
        # and when a cohort's registration ended its gates (``$cohort.settled``) may hold
        # with no other commit to come (every row may have finished already). A tick of
        # its own would conflict with the next batch's commit.
        commit.cascade_once()
    return commit.finish()


def _open(m: Instance, own: CohortWindow) -> bool:
    """Whether the cohort still takes rows."""
    entry = m.open_entry()
    return (not m.terminal and entry is not None and entry.key_ == own.stageEntry
            and own.completedAt is None and own.closedAt is None)


def _action(m: Instance, definition: WorkflowDefinition, own: CohortWindow) -> Action | None:
    point = own.registration or {}
    entry = next((e for e in m.stages if e.key_ == own.stageEntry), None)
    found = definition.activity(entry.name, own.activity) if entry is not None else None
    action = find_action(found, str(point.get("action"))) if found is not None else None
    return action if action is not None and action.spawn is not None else None


def register_batch(m: Instance, definition: WorkflowDefinition, ctx: PlanContext,
                   own: CohortWindow, action: Action) -> int:
    """Register one batch of ``own``'s cohort; returns how many rows it added."""
    block = action.spawn
    assert block is not None and own.registration is not None
    point = dict(own.registration)
    cohort = (own.activity, own.stageEntry)
    batch = ctx.row_batch(batches.request_of(point, block.forEach, ctx))
    rows = spawn.keyed_rows(batch.rows)
    entry = m.open_entry()
    assert entry is not None
    cap = spawn.window_of(m, definition, entry.key_, entry.name, own.activity, action.name)
    spawn.check_size(int(point.get("rows", 0)) + len(rows), cap, ctx, own.activity,
                     action.name)
    version = point.get("version")
    child_doc = ctx.definition(block.definition.name,
                               int(version) if isinstance(version, int) else None)
    if child_doc is None:
        raise SpawnDefinitionUnresolved(
            f"child definition {block.definition.name!r} is not deployed",
            definition=block.definition.name, version=version)
    seeds = spawn.fresh_seeds(m, Renderer(m, definition, ctx), ctx, own.activity,
                              action.name, block, child_doc, rows, batches.actor_of(point),
                              batch=True)
    for seed in seeds:
        spawn.register_queued(m, ctx, seed)
    if batch.done:
        batches.set_registration(m, cohort, None)
    else:
        batches.set_registration(m, cohort, {**point, "after": batch.last, "scale": batch.scale,
                                             "rows": int(point.get("rows", 0)) + len(rows)})
    return len(seeds)
