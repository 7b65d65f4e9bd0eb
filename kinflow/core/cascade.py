"""The cascade: state-triggered changes applied to a fixed point.

This module owns convergence, in h11's pattern: an event (a fired action, an
edit, a completed effect) changes the state; then the rules below run until
nothing changes. All of it is pure and works on the in-memory instance of
one commit.

Rules, in the order they apply within one *hop*:

1. A terminal instance never moves.
2. **Triggers to a fixpoint.** Pass over the current stage's activities and
   their cascade-fired actions in declaration order, firing each action whose
   activity is ``active``, which has not fired in this visit
   (``firedActions``), whose ``roles`` pin the cascading identity fulfils,
   and whose ``filter`` and ``when`` are *satisfied*. Once an activity turns
   terminal its remaining actions wait. Repeat passes until one fires
   nothing; each action fires at most once per visit, so this ends.
3. **Transition selection.** Scan the stage's transitions in order; the first
   *satisfied* ``when`` wins; an *unevaluable* one halts the scan (the
   instance waits rather than fall through); *unsatisfied* continues.
4. At most **one** stage move per hop; the new stage's triggers run in the
   next hop (the shell commits each hop; a child settling inside its
   parent's spawn runs its hops in ``commit.settle``).

A fired action's children go to the ``Spawner`` the hop was given; when it
declines (a child settling inside its parent's spawn), the hop stops at once
with ``waited`` set and its caller drops it.

Gates are caller-free: they render without ``$actor``/``$params``, so a
cascade resolves the same whoever drives it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from kinflow.core.actions import Spawner, fire, no_spawner
from kinflow.core.conditions import Outcome, Renderer, next_flip, reads_now
from kinflow.core.context import Actor, PlanContext
from kinflow.core.stages import move
from kinflow.core.state import Instance
from kinflow.define import sites
from kinflow.define.models import Action, Transition, WorkflowDefinition


@dataclass(slots=True)
class Hop:
    """What one hop did."""

    fired: list[tuple[str, str]] = field(default_factory=list)
    transition: Transition | None = None
    halted_on: str | None = None  # the transition whose `when` was unevaluable
    waited: bool = False  # a spawn had to wait: the hop stopped there, half done

    @property
    def moved(self) -> bool:
        return self.transition is not None

    @property
    def changed(self) -> bool:
        return bool(self.fired) or self.moved


def fulfils(actor: Actor, required: list[str], definition: WorkflowDefinition) -> bool:
    """Whether ``actor`` holds one of ``required`` (directly or through ``roleAliases``)."""
    aliases = definition.roleAliases or {}
    held = set(actor.roles)
    universal = set(aliases.get("*", []))
    return any(role in held or held & (set(aliases.get(role, [])) | universal)
               for role in required)


def _armed(
    instance: Instance, definition: WorkflowDefinition, ctx: PlanContext, activity: str,
    action: Action,
) -> bool:
    entry = instance.open_entry()
    state = entry.activity(activity) if entry else None
    if state is None or state.status != "active" or action.name in state.firedActions:
        return False
    if action.roles is not None and not fulfils(ctx.actor, action.roles, definition):
        return False
    renderer = Renderer(instance, definition, ctx)
    if not renderer.check(action.filter, sites.TRIGGER_FILTER, activity).satisfied:
        return False
    return renderer.check(action.when, sites.TRIGGER_WHEN, activity).satisfied


def run_triggers(
    instance: Instance, definition: WorkflowDefinition, ctx: PlanContext, spawner: Spawner,
    result: Hop,
) -> None:
    """Fire cascade-fired actions of the current stage until a pass fires nothing
    (or a spawn has to wait); ``result.fired`` lists them."""
    stage = definition.stage(instance.currentStage)
    if stage is None or instance.terminal:
        return
    while True:
        fired_this_pass = False
        for activity in stage.activities or []:
            for action in activity.actions or []:
                if not action.cascade_fired:
                    continue
                entry = instance.open_entry()
                state = entry.activity(activity.name) if entry else None
                if state is None or state.status != "active":
                    break
                if not _armed(instance, definition, ctx, activity.name, action):
                    continue
                state.firedActions.append(action.name)
                result.fired.append((activity.name, action.name))
                if not fire(instance, definition, ctx, activity.name, action, {},
                            triggered=True, spawner=spawner):
                    result.waited = True
                    return
                fired_this_pass = True
        if not fired_this_pass:
            return


def pick_transition(
    instance: Instance, definition: WorkflowDefinition, ctx: PlanContext
) -> tuple[Transition | None, str | None]:
    """The first satisfied transition, or ``(None, name)`` when an unevaluable one halts."""
    stage = definition.stage(instance.currentStage)
    if stage is None or instance.terminal:
        return None, None
    renderer = Renderer(instance, definition, ctx)
    for transition in stage.transitions or []:
        verdict = renderer.check(transition.when, sites.TRANSITION_WHEN)
        if verdict.outcome is Outcome.SATISFIED:
            return transition, None
        if verdict.outcome is Outcome.UNEVALUABLE:
            return None, transition.name
    return None, None


def hop(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext,
        spawner: Spawner = no_spawner) -> Hop:
    """One cascade hop: triggers to a fixpoint, then at most one stage move."""
    result = Hop()
    if instance.terminal or (instance.cancelling and instance.open_entry() is None):
        return result  # a cancellation without a cancel stage left its stage: nothing runs
    run_triggers(instance, definition, ctx, spawner, result)
    if result.waited:
        return result
    transition, halted = pick_transition(instance, definition, ctx)
    result.halted_on = halted
    if transition is not None:
        target = definition.stage(transition.to)
        if target is not None:
            move(instance, definition, target, ctx, transition=transition.name)
            result.transition = transition
    return result


def next_evaluation_at(
    instance: Instance, definition: WorkflowDefinition, ctx: PlanContext
) -> datetime | None:
    """The earliest instant a time-reading gate of the current stage could flip."""
    if instance.terminal:
        return None
    stage = definition.stage(instance.currentStage)
    entry = instance.open_entry()
    if stage is None or entry is None:
        return None
    renderer = Renderer(instance, definition, ctx)
    candidates: list[datetime] = []

    def consider(text: str | None, site: sites.Site, activity: str | None = None) -> None:
        if text is None or not reads_now(text):
            return
        flip = next_flip(text, renderer.variables(site, activity, text=text), ctx.now)
        if flip is not None:
            candidates.append(flip)

    for transition in stage.transitions or []:
        consider(transition.when, sites.TRANSITION_WHEN)
    for activity in stage.activities or []:
        state = entry.activity(activity.name)
        if state is None or state.status != "active":
            continue
        for action in activity.actions or []:
            if action.cascade_fired and action.name not in state.firedActions:
                consider(action.when, sites.TRIGGER_WHEN, activity.name)
                consider(action.filter, sites.TRIGGER_FILTER, activity.name)
    return min(candidates) if candidates else None
