"""Pure: the one commit planner (spawned children settled in the parent's plan,
the bounded settle loop, the move limit, materialising)."""

from __future__ import annotations

import pytest

from kinflow.core import verbs
from kinflow.core.actions import no_spawner
from kinflow.core.commit import check_moves, plan_materialise, settle
from kinflow.core.context import Limits
from kinflow.core.create import StartInstance, plan_create
from kinflow.core.errors import CascadeLimit, EngineBug
from kinflow.timestamps import iso
from tests.core.spawning import child, knowing, parent
from tests.core.support import NOW, ctx, definition, deployed, start

FAN = verbs.FireAction("translate", "fan")


def test_a_spawn_creates_its_children_settled_in_one_plan() -> None:
    p = start(parent('["x", "y", "z"]'))
    mutation = verbs.plan_fire_action(p, FAN, knowing(child()))
    assert [d["currentStage"] for d in mutation.creates] == ["work"] * 3
    assert {d["parentInstance"] for d in mutation.creates} == {p.id_}
    assert all(d["stages"] for d in mutation.creates)  # primed
    assert mutation.settle == [] and not mutation.instance.materialising
    rows = mutation.instance.subworkflows
    assert [r.child_id for r in rows] == [d["_id"] for d in mutation.creates]
    assert {(r.observed.status, r.observed.stage) for r in rows if r.observed} == {
        ("active", "work")}

    done = verbs.plan_fire_action(p, FAN, knowing(child(finishes=True)))
    assert {d["currentStage"] for d in done.creates} == {"done"}
    assert all(r.resolved is not None for r in done.instance.subworkflows)


def test_a_child_that_would_spawn_is_created_primed_and_left_to_the_shell() -> None:
    p = start(parent())
    # no grandchild definition and no lake rows are given: a child's spawn must not ask
    mutation = verbs.plan_fire_action(p, FAN, knowing(child(spawns=True)))
    assert mutation.settle == [d["_id"] for d in mutation.creates] and len(mutation.settle) == 2
    for document in mutation.creates:
        assert [h["_type"] for h in document["history"]] == ["stageEntered"]
        assert document["nextEvaluationAt"] == iso(NOW)  # the heartbeat finishes it
        assert "subworkflows" not in document or document["subworkflows"] == []
    rows = mutation.instance.subworkflows
    assert {(r.observed.status, r.observed.stage) for r in rows if r.observed} == {
        ("active", "work")}


def test_past_spawn_txn_the_rows_keep_seeds_that_rebuild_the_same_children() -> None:
    p = start(parent())
    c = knowing(child(), limits=Limits(spawn_txn=1))
    mutation = verbs.plan_fire_action(p, FAN, c)
    assert mutation.instance.materialising
    rows = mutation.instance.subworkflows
    assert all(r.seed is not None for r in rows)
    rebuilt = plan_materialise(mutation.instance, list(enumerate(rows)), knowing(child()))
    assert [(d["_id"], d["fields"][0]["value"], d["rowPlace"]) for d in rebuilt] == [
        (d["_id"], d["fields"][0]["value"], d["rowPlace"]) for d in mutation.creates]


PING_PONG = definition("pp", [
    {"name": "a", "transitions": [{"name": "to-b", "to": "b"}]},
    {"name": "b", "transitions": [{"name": "to-a", "to": "a"}]},
])


def test_settle_stops_at_its_budget_and_says_a_hop_is_owed() -> None:
    m = start(PING_PONG)
    settled = settle(m, m.definition_model(), ctx(), no_spawner, budget=3)
    assert (settled.moves, settled.owed, settled.waited) == (3, True, False)
    quiet = start(definition("q", [{"name": "a", "activities": [
        {"name": "w", "actions": [{"name": "go", "status": "done"}]}],
        "transitions": [{"name": "on", "to": "b"}]}, {"name": "b"}]))
    assert settle(quiet, quiet.definition_model(), ctx(), no_spawner, budget=3).moves == 0


def test_check_moves_refuses_a_ping_pong_at_the_limit() -> None:
    m = start(PING_PONG)
    check_moves(99, Limits(cascade_moves=100), m)
    with pytest.raises(CascadeLimit) as refused:
        check_moves(100, Limits(cascade_moves=100), m)
    assert refused.value.details["limit"] == 100
    assert refused.value.details["instanceId"] == m.id_


def test_plan_create_takes_its_id_from_the_shell() -> None:
    with pytest.raises(EngineBug) as refused:
        plan_create(StartInstance(deployed(PING_PONG)), ctx())
    assert refused.value.code == "internal-error"
