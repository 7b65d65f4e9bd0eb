"""Effects: external work queued inside a commit, claimed, run, completed.

This module owns the pending-effect rows and their lifecycle on the
instance: queueing (bindings evaluated after the action's ops, static
``input`` merged over them), claiming with a lease and a fresh
``claimToken`` (taking over an expired claim leaves an
``effectClaimReleased`` row), completing (first writer wins: the pending row
must still exist; outputs must be in the declared allowlist), cancelling on
abort, and sweeping expired claims. Running handlers is the shell's job
(``engine.drain``); nothing here does I/O.

Delivery is at-least-once: a handler can run twice for one key (a claim
that expired mid-run is taken over), so handlers dedupe on ``effectKey``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from kinflow.core.conditions import Renderer
from kinflow.core.context import PlanContext
from kinflow.core.errors import (
    EffectClaimed,
    EffectNotFound,
    EffectOutcomeInvalid,
    EffectOutputsInvalid,
)
from kinflow.core.history import record
from kinflow.core.state import (
    EffectClaim,
    EffectRun,
    Instance,
    PendingEffect,
)
from kinflow.define import sites
from kinflow.define.models import Action, Effect, WorkflowDefinition
from kinflow.define.values import kind_problem
from kinflow.timestamps import iso, parse_iso


def queue_effects(
    instance: Instance,
    definition: WorkflowDefinition,
    ctx: PlanContext,
    activity: str,
    action: Action,
    params: dict[str, Any],
) -> list[PendingEffect]:
    """Queue every effect of ``action``; bindings see the state after its ops."""
    queued: list[PendingEffect] = []
    if not action.effects:
        return queued
    renderer = Renderer(instance, definition, ctx)
    site = sites.BINDINGS_CASCADE if action.cascade_fired else sites.BINDINGS_CALLER
    entry = instance.open_entry()
    for effect in action.effects:
        bound = {
            key: renderer.value(text, site, activity, actor=ctx.actor, params=params)
            for key, text in (effect.bindings or {}).items()
        }
        pending = PendingEffect.model_validate({
            "_key": ctx.new_key(),
            "name": effect.name,
            "params": {**bound, **(effect.input or {})},
            "origin": {"kind": "action", "name": action.name, "activity": activity},
            "actor": ctx.actor.to_json(),
            "queuedAt": ctx.now_iso,
            "stageEntryKey": entry.key_ if entry else None,
        })
        instance.pendingEffects.append(pending)
        record(instance, ctx, "effectQueued", effectKey=pending.key_, effect=effect.name,
               origin=pending.origin.to_json())
        queued.append(pending)
    return queued


def find_pending(instance: Instance, key: str) -> PendingEffect | None:
    for pending in instance.pendingEffects:
        if pending.key_ == key:
            return pending
    return None


def claim_expired(pending: PendingEffect, now: datetime) -> bool:
    """The one claim-expiry rule: no claim, no lease, or a lease ended by ``now``."""
    claim = pending.claim
    if claim is None or claim.leaseExpiresAt is None:
        return True
    return parse_iso(claim.leaseExpiresAt) <= now


def claimable(instance: Instance, ctx: PlanContext) -> list[PendingEffect]:
    """Pending effects nobody holds a live claim on, oldest first."""
    return [p for p in instance.pendingEffects if claim_expired(p, ctx.now)]


def next_claimable(instance: Instance, now: datetime, attempted: set[str]
                   ) -> PendingEffect | None:
    """The drain's next effect: the oldest not tried yet that nobody holds at ``now``."""
    for pending in instance.pendingEffects:
        if pending.key_ not in attempted and claim_expired(pending, now):
            return pending
    return None


def claim(instance: Instance, ctx: PlanContext, key: str, lease_seconds: float) -> EffectClaim:
    """Claim ``key`` for ``ctx.actor``; an expired claim is taken over and recorded."""
    pending = find_pending(instance, key)
    if pending is None:
        raise EffectNotFound(f"no pending effect {key!r}", effectKey=key)
    if not claim_expired(pending, ctx.now):
        raise EffectClaimed(f"effect {key!r} is claimed by someone else", effectKey=key,
                            reason="effect-claimed")
    if pending.claim is not None:
        record(instance, ctx, "effectClaimReleased", effectKey=key, effect=pending.name,
               claim=pending.claim.to_json(), via="drain-takeover", actor=ctx.actor.to_json())
    pending.claim = EffectClaim(
        claimedAt=ctx.now_iso, claimedBy=ctx.actor.model(),
        leaseExpiresAt=iso(ctx.now + timedelta(seconds=lease_seconds)),
        claimToken=ctx.new_token(),
    )
    return pending.claim


def sweep_claims(instance: Instance, ctx: PlanContext) -> int:
    """Release every expired claim; returns how many were released."""
    released = 0
    for pending in instance.pendingEffects:
        if pending.claim is not None and claim_expired(pending, ctx.now):
            record(instance, ctx, "effectClaimReleased", effectKey=pending.key_,
                   effect=pending.name, claim=pending.claim.to_json(), via="sweep",
                   actor=ctx.actor.to_json())
            pending.claim = None
            released += 1
    return released


def declared_effect(definition: WorkflowDefinition, name: str) -> Effect | None:
    for stage in definition.stages:
        for activity in stage.activities or []:
            for action in activity.actions or []:
                for effect in action.effects or []:
                    if effect.name == name:
                        return effect
    return None


def settled_run(instance: Instance, key: str) -> EffectRun | None:
    for run in instance.effectHistory:
        if run.key_ == key:
            return run
    return None


def complete(
    instance: Instance,
    definition: WorkflowDefinition,
    ctx: PlanContext,
    key: str,
    status: str,
    outputs: dict[str, Any] | None,
    error: str | None,
    detail: str | None = None,
    duration_ms: int | None = None,
) -> EffectRun:
    """Settle a pending effect as ``done`` or ``failed``; first writer wins."""
    if status not in ("done", "failed"):
        raise EffectOutcomeInvalid(
            f"an effect completes as 'done' or 'failed', not {status!r}", status=status,
            reason="effect-outcome-invalid",
        )
    pending = find_pending(instance, key)
    if pending is None:
        run = settled_run(instance, key)
        settled = {"status": run.status, "at": run.ranAt} if run else None
        raise EffectNotFound(
            f"no pending effect {key!r}" + (f" (already {run.status})" if run else ""),
            effectKey=key, settled=settled,
        )
    if status == "failed" and outputs:
        raise EffectOutputsInvalid("a failed effect carries no outputs", effectKey=key)
    _check_outputs(definition, pending.name, outputs or {}, key)
    run = EffectRun.model_validate({
        "_key": key, "name": pending.name, "params": pending.params,
        "origin": pending.origin.to_json(),
        "actor": pending.actor.to_json() if pending.actor else None,
        "stageEntryKey": pending.stageEntryKey, "ranAt": ctx.now_iso,
        "durationMs": duration_ms, "status": status, "detail": detail,
        "error": {"message": error} if error else None,
        "outputs": outputs if status == "done" else None,
    })
    instance.pendingEffects.remove(pending)
    instance.effectHistory.append(run)
    record(instance, ctx, "effectCompleted", effectKey=key, effect=pending.name, status=status,
           outputs=outputs or None, detail=detail, actor=ctx.actor.to_json())
    return run


def _check_outputs(
    definition: WorkflowDefinition, name: str, outputs: dict[str, Any], key: str
) -> None:
    effect = declared_effect(definition, name)
    allowed = {shape.name: shape for shape in (effect.outputs or [])} if effect else {}
    issues: list[dict[str, str]] = []
    for out_key, value in outputs.items():
        shape = allowed.get(out_key)
        if shape is None:
            issues.append({"output": out_key, "reason": "not declared in the effect's outputs"})
            continue
        problem = kind_problem(shape, value)
        if problem:
            issues.append({"output": out_key, "reason": problem})
    if issues:
        raise EffectOutputsInvalid(f"effect {name!r}: outputs do not fit", effectKey=key,
                                   issues=issues)


def cancel_all(instance: Instance, ctx: PlanContext) -> None:
    """Abort: every pending effect becomes a ``cancelled`` run."""
    for pending in list(instance.pendingEffects):
        instance.effectHistory.append(EffectRun.model_validate({
            "_key": pending.key_, "name": pending.name, "params": pending.params,
            "origin": pending.origin.to_json(),
            "actor": pending.actor.to_json() if pending.actor else None,
            "stageEntryKey": pending.stageEntryKey, "ranAt": ctx.now_iso,
            "status": "cancelled", "detail": "aborted before dispatch",
        }))
        record(instance, ctx, "effectCompleted", effectKey=pending.key_, effect=pending.name,
               status="cancelled", detail="aborted before dispatch", actor=ctx.actor.to_json())
    instance.pendingEffects.clear()



def effects_due_at(instance: Instance) -> str | None:
    """When a worker should next look at this instance's effects (queued, or a lease ends)."""
    moments = [
        (p.claim.leaseExpiresAt or p.queuedAt) if p.claim is not None else p.queuedAt
        for p in instance.pendingEffects
    ]
    return min(moments) if moments else None
