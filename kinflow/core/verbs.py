"""Verb planners: ``(state, context, verb) -> Mutation``, one per verb.

This module owns what each verb does to an instance: its event, and the
typed refusals of a call that cannot apply. The shape every commit shares
(the copy, the idempotency ledger, one cascade hop, the derived hints) is
``commit.Commit``'s; caller inputs are bounded (``inputs``) before a planner
reads anything.

Further hops are separate commits that the shell drives with ``plan_hop``
until one moves nothing. Nothing here does I/O; what a plan needs from the
lake arrives in the ``PlanContext``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kinflow.core import cancellation
from kinflow.core import effects as fx
from kinflow.core.actions import fire
from kinflow.core.cohort.observe import Observation, apply_observations
from kinflow.core.commit import Commit, live_count
from kinflow.core.conditions import Renderer
from kinflow.core.context import PlanContext
from kinflow.core.create import StartInstance, plan_create
from kinflow.core.errors import (
    ActionDisabled,
    ActionNotFound,
    EditFieldDenied,
    EditModeInvalid,
    FieldNotFound,
    InstanceExists,
)
from kinflow.core.fields import find_field
from kinflow.core.gates import action_verdict, check_params, declared_field
from kinflow.core.inputs import check_text, check_value
from kinflow.core.ledger import remember
from kinflow.core.mutation import Mutation
from kinflow.core.operator_verbs import close_aborted
from kinflow.core.ops import OpSource, apply_op
from kinflow.core.stages import prime
from kinflow.core.state import Instance
from kinflow.define import sites
from kinflow.define.models import (
    AppendOp,
    FieldRef,
    LiteralValue,
    SetOp,
    UnsetOp,
    find_action,
)

__all__ = [
    "CompleteEffect", "EditField", "FireAction", "StartInstance", "plan_claim_effect",
    "plan_complete_effect", "plan_create", "plan_edit_field", "plan_fire_action", "plan_hop",
    "plan_observe", "plan_start", "plan_sweep",
]


# ---- start ----


def plan_start(verb: StartInstance, ctx: PlanContext) -> Mutation:
    """Create, prime and run the first hop, as one insert."""
    created = plan_create(verb, ctx)
    commit = Commit(created, ctx)
    prime(commit.m, commit.definition, ctx)
    commit.cascade_once()
    return commit.finish(insert=True)


def plan_resume(state: Instance, verb: StartInstance, ctx: PlanContext) -> Mutation:
    """Resume a start whose instance exists: prime if needed, then one hop."""
    name = verb.definition.get("name")
    version = verb.definition.get("version")
    if state.definition != name or (version is not None and state.pinnedVersion != version):
        raise InstanceExists(
            f"instance {state.id_!r} already exists for {state.definition} "
            f"v{state.pinnedVersion}", instanceId=state.id_, definition=state.definition,
            version=state.pinnedVersion, reason="instance-exists",
        )
    commit = Commit(state, ctx)
    if not commit.m.primed:
        if commit.m.abortedAt:
            raise InstanceExists(f"instance {state.id_!r} was aborted before it was primed",
                                 instanceId=state.id_, reason="instance-aborted-unprimed")
        prime(commit.m, commit.definition, ctx)
    commit.cascade_once()
    return commit.finish()


# ---- cascade hops ----


def plan_hop(state: Instance, ctx: PlanContext,
             observations: list[Observation] | None = None) -> Mutation:
    """One cascade hop (``tick`` and every hop after a verb's own commit).

    What the shell observed about children is stamped on their rows first, so
    the hop's gates see it. An instance left unprimed by a crash between create
    and prime is primed first (kinflow's crash repair; the reference only primes
    on a resumed start).
    """
    commit = Commit(state, ctx, engine=True)
    clears = apply_observations(commit.m, ctx, observations or [])
    if cancellation.timed_out(commit.m, ctx):  # the cancellation outlived its timeout
        close_aborted(commit.m, ctx, cancellation.TIMEOUT)
        return commit.finish(clears=clears)
    if not commit.m.primed and not commit.m.abortedAt:
        prime(commit.m, commit.definition, ctx)
    if commit.m.primed:
        commit.cascade_once()
    return commit.finish(clears=clears)


def plan_observe(state: Instance, ctx: PlanContext,
                 observations: list[Observation]) -> Mutation:
    """Stamp rows from observations only (the drain's stamp; no hop).

    A row it resolves on a live instance may open a gate (``abortCohort`` with a
    filter condemns rows without leaving the stage), so the hop is then owed:
    ``nextEvaluationAt`` is now, and the next hop or the heartbeat runs it."""
    commit = Commit(state, ctx, engine=True)
    live = live_count(commit.m)
    clears = apply_observations(commit.m, ctx, observations)
    mutation = commit.finish(clears=clears)
    m = mutation.instance
    if not m.terminal and live_count(m) < live:
        m.nextEvaluationAt = ctx.now_iso
    return mutation


# ---- fire_action ----


@dataclass(slots=True)
class FireAction:
    activity: str
    action: str
    params: dict[str, Any] | None = None
    idempotency_key: str | None = None


def plan_fire_action(state: Instance, verb: FireAction, ctx: PlanContext) -> Mutation:
    args = {"activity": verb.activity, "action": verb.action, "params": verb.params or None}
    commit, replay = Commit.keyed(state, ctx, verb.idempotency_key, "fireAction", args,
                                  lambda: check_value("params", verb.params, ctx.limits))
    if replay is not None:
        return replay
    m, definition = commit.m, commit.definition
    activity = definition.activity(m.currentStage, verb.activity)
    action = find_action(activity, verb.action) if activity else None
    if activity is None or action is None:
        if m.terminal:
            reason = f"instance-{m.terminal_state}"
            raise ActionDisabled(f"{verb.activity}.{verb.action}: {reason}",
                                 activity=verb.activity, action=verb.action, reason=reason)
        raise ActionNotFound(
            f"stage {m.currentStage!r} has no action {verb.activity}.{verb.action}",
            stage=m.currentStage, activity=verb.activity, action=verb.action,
            reason="action-not-in-stage",
        )
    verdict = action_verdict(m, definition, ctx, activity, action, ctx.actor)
    if not verdict.enabled:
        raise ActionDisabled(
            f"{verb.activity}.{verb.action} is disabled: {verdict.reason}",
            activity=verb.activity, action=verb.action, reason=verdict.reason,
            **(verdict.detail or {}),
        )
    params = check_params(action, activity.name, verb.params)
    remember(m, ctx, verb.idempotency_key, "fireAction", args)
    fire(m, definition, ctx, activity.name, action, params, spawner=commit.spawner)
    commit.cascade_once()
    return commit.finish()


# ---- edit_field ----


@dataclass(slots=True)
class EditField:
    field: str
    value: Any = None
    mode: str = "set"
    scope: str | None = None
    activity: str | None = None
    idempotency_key: str | None = None


def plan_edit_field(state: Instance, verb: EditField, ctx: PlanContext) -> Mutation:
    args = {"field": verb.field, "value": verb.value, "mode": verb.mode, "scope": verb.scope,
            "activity": verb.activity}
    commit, replay = Commit.keyed(state, ctx, verb.idempotency_key, "editField", args,
                                  lambda: check_value("value", verb.value, ctx.limits))
    if replay is not None:
        return replay
    m, definition = commit.m, commit.definition
    if verb.mode not in ("set", "append", "unset"):
        raise EditModeInvalid(f"unknown edit mode {verb.mode!r}", mode=verb.mode,
                              reason="edit-mode-invalid")
    scope = _edit_scope(m, verb)
    if scope is None:
        raise FieldNotFound(f"no field {verb.field!r} in view", field=verb.field,
                            reason="field-not-in-view")
    entry = declared_field(definition, m.currentStage, scope, verb.field, verb.activity)

    def deny(reason: str) -> EditFieldDenied:
        return EditFieldDenied(f"{verb.field}: {reason}", field=verb.field, scope=scope,
                               reason=reason)

    if entry is None or entry.editable in (None, False):
        raise deny("not-editable")
    if m.abortedAt:
        raise deny("instance-aborted")
    if m.completedAt:
        raise deny("instance-completed")
    if scope == "activity":
        open_entry = m.open_entry()
        act = open_entry.activity(verb.activity or "") if open_entry else None
        if act is None or act.status != "active":
            raise deny("edit-window-closed")
    renderer = Renderer(m, definition, ctx)
    predicates = [entry.editable] if isinstance(entry.editable, str) else []
    stage = definition.stage(m.currentStage)
    override = (stage.editable or {}).get(verb.field) if stage else None
    if isinstance(override, str):
        predicates.append(override)
    for text in predicates:
        if not renderer.check(text, sites.FIELD_EDITABLE, verb.activity,
                              actor=ctx.actor).satisfied:
            raise deny("editor-not-permitted")
    remember(m, ctx, verb.idempotency_key, "editField", args)
    target = FieldRef(scope=scope, field=verb.field)
    op: Any
    if verb.mode == "set":
        op = SetOp(type="field.set", target=target, value=LiteralValue(type="literal",
                                                                        value=verb.value))
    elif verb.mode == "append":
        op = AppendOp(type="field.append", target=target,
                      value=LiteralValue(type="literal", value=verb.value))
    else:
        op = UnsetOp(type="field.unset", target=target)
    apply_op(op, m, definition, ctx, OpSource(activity=verb.activity, edit=True))
    commit.cascade_once()
    return commit.finish()


def _edit_scope(m: Instance, verb: EditField) -> str | None:
    if verb.scope is not None:
        return verb.scope if find_field(m, verb.scope, verb.field, verb.activity) else None
    for scope in ("activity", "stage", "workflow"):
        if scope == "activity" and verb.activity is None:
            continue
        if find_field(m, scope, verb.field, verb.activity) is not None:
            return scope
    return None


# ---- effects ----


@dataclass(slots=True)
class CompleteEffect:
    effect_key: str
    status: str
    outputs: dict[str, Any] | None = None
    error: str | None = None
    detail: str | None = None
    duration_ms: int | None = None
    idempotency_key: str | None = None


def plan_complete_effect(state: Instance, verb: CompleteEffect, ctx: PlanContext) -> Mutation:
    def check() -> None:
        check_value("outputs", verb.outputs, ctx.limits)
        check_text("error", verb.error, ctx.limits)
        check_text("detail", verb.detail, ctx.limits)

    # the duration is a measurement, not part of what the call asks for
    args = {"effectKey": verb.effect_key, "status": verb.status, "outputs": verb.outputs,
            "error": verb.error, "detail": verb.detail}
    commit, replay = Commit.keyed(state, ctx, verb.idempotency_key, "completeEffect", args,
                                  check)
    if replay is not None:
        return replay
    m = commit.m
    remember(m, ctx, verb.idempotency_key, "completeEffect", args)
    run = fx.complete(m, commit.definition, ctx, verb.effect_key, verb.status, verb.outputs,
                      verb.error, verb.detail, verb.duration_ms)
    commit.cascade_once()
    return commit.finish(result=run)


def plan_claim_effect(state: Instance, effect_key: str, lease_seconds: float,
                      ctx: PlanContext) -> Mutation:
    commit = Commit(state, ctx, engine=True)
    claimed = fx.claim(commit.m, ctx, effect_key, lease_seconds)
    return commit.finish(result=claimed)


def plan_sweep(state: Instance, ctx: PlanContext) -> Mutation:
    commit = Commit(state, ctx, engine=True)
    released = fx.sweep_claims(commit.m, ctx)
    return commit.finish(result=released)
