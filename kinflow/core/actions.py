"""Firing one action: the event every behaviour hangs off.

This module owns the order of an action's effects on the instance, for
caller-fired and cascade-fired actions alike: append ``actionFired``, run
the ops in order, queue the effects (their bindings see the state after the
ops), then spawn. Whether an action *may* fire is decided elsewhere (the
caller gate in ``verbs``, the trigger rules in ``cascade``).

Spawning comes last, so ``with`` bindings see the state after the ops. What
the children become is not decided here: ``fire`` hands the spawn's plan to
the ``Spawner`` it was given: the commit planner's creates and registers
settled children; a child settling inside its parent's spawn gets one that
declines, and its hop stops there (``cascade.Hop.waited``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kinflow.core.cohort.spawn import ChildSeed, plan_spawn
from kinflow.core.context import PlanContext
from kinflow.core.effects import queue_effects
from kinflow.core.errors import EngineBug
from kinflow.core.history import record
from kinflow.core.ops import OpSource, apply_ops
from kinflow.core.state import Instance
from kinflow.define.models import Action, WorkflowDefinition


class Spawner(Protocol):
    """Takes a fired action's spawn: ``plan()`` yields its children as seeds.

    Returns whether it took them. A spawner that takes them calls ``plan()``
    (which adopts rediscovered rows and may ask for lake reads) and registers
    each child; one that declines (the spawn waits for the shell) leaves
    ``plan`` uncalled, so nothing is read or registered, and returns False.
    """

    def __call__(self, instance: Instance, plan: Callable[[], list[ChildSeed]]) -> bool: ...


def no_spawner(instance: Instance, plan: Callable[[], list[ChildSeed]]) -> bool:
    """The spawner of a hop that was given none: a spawn there is a kinflow bug."""
    raise EngineBug(f"instance {instance.id_!r} fired a spawn where no spawner was given",
                    instanceId=instance.id_)


def fire(
    instance: Instance,
    definition: WorkflowDefinition,
    ctx: PlanContext,
    activity: str,
    action: Action,
    params: dict[str, Any] | None = None,
    *,
    triggered: bool = False,
    spawner: Spawner,
) -> bool:
    """Apply ``action`` of ``activity`` to the in-memory instance.

    False when its spawn had to wait: the caller stops (the plan is dropped).
    """
    params = params or {}
    record(instance, ctx, "actionFired", stage=instance.currentStage, activity=activity,
           action=action.name, actor=ctx.actor.to_json(), driverKind=ctx.actor.kind,
           triggered=True if triggered else None)
    source = OpSource(activity=activity, action=action.name, params=params,
                      caller_fired=not triggered)
    apply_ops(list(action.ops or []), instance, definition, ctx, source)
    queue_effects(instance, definition, ctx, activity, action, params)
    if action.spawn is None:
        return True
    return spawner(instance, lambda: plan_spawn(instance, definition, ctx, activity, action))
