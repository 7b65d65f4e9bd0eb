"""Property: any sequence of verbs keeps the instance document's invariants."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from kinflow.core import verbs
from kinflow.core.context import Actor, PlanContext
from kinflow.core.operator_verbs import (
    AbortInstance,
    ResetActivity,
    SetStage,
    plan_abort,
    plan_reset_activity,
    plan_set_stage,
)
from kinflow.engine.ids import random_token
from kinflow.errors import KinflowError
from tests.engine.definitions import simple
from tests.unit.test_engine_core import deployed

LOOP = simple("loop", [
    {"name": "draft", "activities": [{"name": "write", "actions": [
        {"name": "submit", "status": "done"},
        {"name": "note", "ops": [{"type": "field.inc", "target": "edits"}]}]}],
     "transitions": [{"name": "to-review", "to": "review"}]},
    {"name": "review", "activities": [
        {"name": "auto", "actions": [{"name": "stamp", "when": "true",
                                      "ops": [{"type": "field.inc", "target": "visits"}]},
                                     {"name": "close", "when": "$fields.visits > 0",
                                      "status": "done"}]},
        {"name": "decide", "actions": [{"name": "approve", "status": "done"},
                                       {"name": "reject", "status": "failed"}]}],
     "transitions": [{"name": "back", "to": "draft", "when": "$anyActivityFailed"},
                     {"name": "publish", "to": "done"}]},
    {"name": "done"},
], fields=[{"name": "edits", "type": "number", "initialValue": {"type": "literal", "value": 0}},
           {"name": "visits", "type": "number", "initialValue": {"type": "literal",
                                                                 "value": 0}}])

STEPS = st.lists(st.sampled_from([
    ("fire", "write", "submit"), ("fire", "write", "note"), ("fire", "decide", "approve"),
    ("fire", "decide", "reject"), ("tick",), ("abort",), ("reset", "decide"),
    ("stage", "draft"), ("stage", "review"),
]), max_size=25)


@settings(max_examples=60, deadline=None)
@given(STEPS)
def test_invariants_hold_for_any_verb_sequence(steps: list[tuple[str, ...]]) -> None:
    counter = itertools.count()
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def ctx() -> PlanContext:
        nonlocal now
        now += timedelta(seconds=1)
        return PlanContext(now=now, actor=Actor.person("p"), dataset="production",
                           new_key=lambda: f"k{next(counter)}", new_token=random_token)

    state = verbs.plan_start(verbs.StartInstance(deployed(LOOP), None, "instance.p"),
                             ctx()).instance
    for step in steps:
        try:
            if step[0] == "fire":
                plan = verbs.plan_fire_action(state, verbs.FireAction(step[1], step[2]), ctx())
            elif step[0] == "tick":
                plan = verbs.plan_hop(state, ctx())
            elif step[0] == "abort":
                plan = plan_abort(state, AbortInstance("stop"), ctx())
            elif step[0] == "reset":
                plan = plan_reset_activity(state, ResetActivity(step[1]), ctx())
            else:
                plan = plan_set_stage(state, SetStage(step[1]), ctx())
        except KinflowError:
            continue  # a refusal leaves the state as it was
        assert plan.moves <= 1
        state = plan.instance
        while not state.terminal:  # drive the cascade as the runner does
            hop = verbs.plan_hop(state, ctx())
            state = hop.instance
            if not hop.moves:
                break
        open_entries = [s for s in state.stages if s.exitedAt is None]
        if state.abortedAt:
            assert open_entries == [] and state.completedAt == state.abortedAt
        else:
            assert len(open_entries) == 1 and open_entries[0].name == state.currentStage
            assert state.completedAt is None or state.currentStage == "done"
        keys = [row["_key"] for row in state.history]
        assert len(keys) == len(set(keys))
        for visit in state.stages:
            for activity in visit.activities:
                assert len(activity.firedActions) == len(set(activity.firedActions))
        review_visits = sum(1 for s in state.stages if s.name == "review")
        assert {f.name: f.value for f in state.fields}["visits"] == review_visits
