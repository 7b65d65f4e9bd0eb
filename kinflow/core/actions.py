"""Firing one action: the event every behaviour hangs off (§2.5).

This module owns the order of an action's effects on the instance, for
caller-fired and cascade-fired actions alike: append ``actionFired``, run
the ops in order, queue the effects (their bindings see the state after the
ops), then spawn. Whether an action *may* fire is decided elsewhere (the
caller gate in ``verbs``, the trigger rules in ``cascade``).

Spawning (``kinflow.core.spawn``) comes last, so ``with`` bindings see the
state after the ops.
"""

from __future__ import annotations

from typing import Any

from kinflow.core.context import PlanContext
from kinflow.core.effects import queue_effects
from kinflow.core.history import record
from kinflow.core.ops import OpSource, apply_ops
from kinflow.core.state import Instance
from kinflow.define.models import Action, WorkflowDefinition


def fire(
    instance: Instance,
    definition: WorkflowDefinition,
    ctx: PlanContext,
    activity: str,
    action: Action,
    params: dict[str, Any] | None = None,
    *,
    triggered: bool = False,
) -> None:
    """Apply ``action`` of ``activity`` to the in-memory instance."""
    params = params or {}
    record(instance, ctx, "actionFired", stage=instance.currentStage, activity=activity,
           action=action.name, actor=ctx.actor.to_json(), driverKind=ctx.actor.kind,
           triggered=True if triggered else None)
    source = OpSource(activity=activity, action=action.name, params=params,
                      caller_fired=not triggered)
    apply_ops(list(action.ops or []), instance, definition, ctx, source)
    queue_effects(instance, definition, ctx, activity, action, params)
    if action.spawn is not None:
        from kinflow.core.spawn import spawn

        spawn(instance, definition, ctx, activity, action)
