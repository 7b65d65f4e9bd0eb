"""Subworkflow scenarios: spawn, cohorts, propagation, stage exit, abort."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.core.errors import (
    DefinitionInvalid,
    InjectedFault,
    RequiredFieldNotProvided,
    SpawnContractsInvalid,
    SpawnDepthExceeded,
    SpawnRowIdentity,
)
from kinflow.core.state import Instance
from kinflow.engine import Actor, Engine
from kinflow.errors import KinflowError
from tests.engine.cohort_defs import SETTLED, child, items, parent, with_item
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake


def types(instance: Instance) -> list[str]:
    return [row["_type"] for row in instance.history]


def current_rows(instance: Instance) -> list[dict[str, Any]]:
    return [r for r in subworkflow_rows(instance, instance.open_entry()) if r["current"]]


async def into_review(engine: Engine, *names: str, definitions: list[dict[str, Any]] | None
                      = None) -> Instance:
    await engine.deploy(definitions or [parent(), child()])
    started = await engine.start_instance("p", fields=items(*names))
    return (await engine.fire_action(started.instance.id_, "go", "go")).instance


async def finish(engine: Engine, child_id: str) -> Instance:
    return (await engine.fire_action(child_id, "task", "finish")).instance


def gdr(doc_id: str) -> dict[str, str]:
    return {"id": f"lake:production:{doc_id}", "type": "kinflow.instance"}


# ---- deploy (2-4) ----


async def test_scenario_2_unresolved_child_and_unconsumable_field(engine: Engine) -> None:
    missing = parent(child_name="missing")
    with pytest.raises(SpawnContractsInvalid) as refused:
        await engine.deploy([missing])
    assert [i["reason"] for i in refused.value.details["issues"]] == ["unresolved-definition"]
    both = copy.deepcopy(missing)
    both["stages"][1]["activities"][0]["actions"].insert(1, {
        "name": "fan-out-2", "when": "true",
        "spawn": {"forEach": "[]", "definition": {"name": "c"}, "with": {"foo": "$row"}}})
    with pytest.raises(SpawnContractsInvalid) as refused:
        await engine.deploy([both, child()])
    assert sorted(i["reason"] for i in refused.value.details["issues"]) == [
        "unconsumable-field", "unresolved-definition"]
    assert await engine.lake.count({}) == 0


async def test_scenario_3_a_literal_child_field_is_not_consumable(engine: Engine) -> None:
    literal = child()
    literal["fields"][0]["initialValue"] = {"type": "literal", "value": "x"}
    with pytest.raises(SpawnContractsInvalid) as refused:
        await engine.deploy([parent(), literal])
    issue = refused.value.details["issues"][0]
    assert issue["reason"] == "unconsumable-field" and "not input-sourced" in issue["detail"]


async def test_scenario_4_spawn_cycles_are_refused(engine: Engine) -> None:
    a = parent(name="a", child_name="b")
    b = parent(name="b", child_name="a")
    for d in (a, b):
        d["lifecycle"] = "child"
        d["fields"].append({"name": "item", "type": "string", "initialValue": {"type": "input"}})
    with pytest.raises(DefinitionInvalid) as refused:
        await engine.deploy([a, b])
    assert any("cycle" in i["message"] for i in refused.value.details["issues"])
    assert await engine.lake.count({}) == 0


# ---- spawn and cohorts (12-20) ----


async def test_scenario_12_one_commit_creates_the_cohort(engine: Engine) -> None:
    p = await into_review(engine, "de", "fr", "es")
    rows = current_rows(p)
    assert [r["rowKey"] for r in rows] == ["de", "fr", "es"]
    assert all(r.cohortStage == "review" for r in p.subworkflows)
    spawned = [h for h in p.history if h["_type"] == "spawned"]
    assert len(spawned) == 3 and len({h["at"] for h in spawned}) == 1  # one commit
    for row, key in zip(p.subworkflows, ["de", "fr", "es"], strict=True):
        c = await engine.get_instance(row.child_id)
        assert c.ancestors[0].id == f"lake:production:{p.id_}" and c.primed
        assert c.fields[0].value == key and c.parentInstance == p.id_


async def test_scenario_13_a_failed_spawn_transaction_writes_nothing(engine: Engine) -> None:
    await engine.deploy([parent(), child()])
    started = await engine.start_instance("p", fields=items("a", "b"))
    admin = engine.lake.client.admin
    await admin.command({"configureFailPoint": "failCommand", "mode": {"times": 1},
                         "data": {"failCommands": ["insert"], "errorCode": 2}})
    try:
        with pytest.raises(Exception):  # noqa: B017 - the server's own error surfaces
            await engine.fire_action(started.instance.id_, "go", "go")
    finally:
        await admin.command({"configureFailPoint": "failCommand", "mode": "off"})
    left = await engine.get_instance(started.instance.id_)
    assert left.subworkflows == [] and left.currentStage == "review"
    assert await engine.lake.count({"parentInstance": started.instance.id_}) == 0


async def test_scenario_14_no_rows_means_the_gate_opens_at_once(engine: Engine) -> None:
    p = await into_review(engine)
    assert p.subworkflows == [] and p.currentStage == "next"


async def test_scenario_15_children_that_finish_at_once_are_stamped(engine: Engine) -> None:
    p = await into_review(engine, "a", "b", "c", definitions=[parent(), child(auto=True)])
    assert all(r.resolved is not None and r.resolved.stage == "done" for r in p.subworkflows)
    assert p.currentStage == "next"
    assert types(p).count("subworkflowResolved") == 3


@pytest.mark.parametrize("rows", ['[{"title": "x"}]', '["a", "a"]', '[1, "1"]'])
async def test_scenario_16_row_identity_errors_write_nothing(engine: Engine, rows: str) -> None:
    await engine.deploy([parent(rows), child()])
    started = await engine.start_instance("p")
    with pytest.raises(SpawnRowIdentity):
        await engine.fire_action(started.instance.id_, "go", "go")
    left = await engine.get_instance(started.instance.id_)
    assert left.currentStage == "review" and left.subworkflows == []
    assert await engine.lake.count({"parentInstance": started.instance.id_}) == 0


async def test_scenario_18_spawn_depth_limit(engine: Engine) -> None:
    await engine.deploy([parent(), child()])
    for depth, ok in ((5, True), (6, False)):
        chain = [gdr(f"root-{n}") for n in range(depth)]
        started = await engine.start_instance("p", fields=items("a"), ancestors=chain)
        if ok:
            moved = await engine.fire_action(started.instance.id_, "go", "go")
            assert len(moved.instance.subworkflows) == 1
        else:
            with pytest.raises(SpawnDepthExceeded) as refused:
                await engine.fire_action(started.instance.id_, "go", "go")
            assert refused.value.details["limit"] == 6
            left = await engine.get_instance(started.instance.id_)
            assert left.subworkflows == []


async def test_scenario_19_a_required_child_input_left_out(engine: Engine) -> None:
    no_with = parent()
    del no_with["stages"][1]["activities"][0]["actions"][0]["spawn"]["with"]
    with pytest.raises(SpawnContractsInvalid) as refused:
        await engine.deploy([no_with, child(required=True)])
    assert [i["reason"] for i in refused.value.details["issues"]] == ["missing-required-input"]
    empty = with_item(parent(), "$row.nope")  # handed, but empty when the spawn runs
    await engine.deploy([empty, child(required=True)])
    started = await engine.start_instance("p", fields=items("a"))
    with pytest.raises(RequiredFieldNotProvided):
        await engine.fire_action(started.instance.id_, "go", "go")
    assert await engine.lake.count({"parentInstance": started.instance.id_}) == 0


# ---- settling, propagation, orphans (21-25) ----


async def test_scenario_21_each_completion_stamps_and_the_last_moves(engine: Engine) -> None:
    p = await into_review(engine, "a", "b", "c")
    ids = [r.child_id for r in p.subworkflows]
    for n, cid in enumerate(ids[:2]):
        await finish(engine, cid)
        now = await engine.get_instance(p.id_)
        assert now.currentStage == "review"
        assert now.subworkflows[n].resolved.stage == "done"  # type: ignore[union-attr]
        assert types(now).count("subworkflowResolved") == n + 1
    await finish(engine, ids[2])
    assert (await engine.get_instance(p.id_)).currentStage == "next"


def middle() -> dict[str, Any]:
    """A child that spawns ``c`` children and completes when they settle."""
    return simple("m", [
        {"name": "fan", "activities": [{"name": "translate", "actions": [
            {"name": "fan-out", "when": "true", "effects": [{"name": "notify"}], "spawn": {
                "forEach": '["x", "y"]', "definition": {"name": "c"},
                "with": {"item": "$row"}, "onExit": "abort"}},
            {"name": "all-done", "when": SETTLED, "status": "done"}]}],
         "transitions": [{"name": "to-done", "to": "done"}]},
        {"name": "done"},
    ], lifecycle="child", fields=[{"name": "item", "type": "string",
                                   "initialValue": {"type": "input"}}])


async def test_scenario_22_completion_propagates_up_a_three_level_chain(engine: Engine) -> None:
    g = await into_review(engine, "one", definitions=[parent(child_name="m"), middle(), child()])
    m = await engine.get_instance(g.subworkflows[0].child_id)
    leaves = [r.child_id for r in m.subworkflows]
    assert len(leaves) == 2
    await finish(engine, leaves[0])
    await finish(engine, leaves[1])
    m = await engine.get_instance(m.id_)
    assert m.currentStage == "done"
    g = await engine.get_instance(g.id_)
    assert g.subworkflows[0].resolved.stage == "done"  # type: ignore[union-attr]
    assert g.currentStage == "next"


async def test_scenario_23_a_gate_on_a_child_stage_reacts_to_moves(engine: Engine) -> None:
    staged = simple("c", [
        {"name": "work", "activities": [{"name": "task", "actions": [
            {"name": "finish", "status": "done"}]}],
         "transitions": [{"name": "to-approved", "to": "approved"}]},
        {"name": "approved", "activities": [{"name": "task", "actions": [
            {"name": "finish", "status": "done"}]}],
         "transitions": [{"name": "to-done", "to": "done"}]},
        {"name": "done"},
    ], lifecycle="child", fields=[{"name": "item", "type": "string",
                                   "initialValue": {"type": "input"}}])
    gate = "count($subworkflows[current && stage == 'approved']) > 0"
    p = await into_review(engine, "a", definitions=[parent(settled=gate), staged])
    assert p.currentStage == "review"
    await finish(engine, p.subworkflows[0].child_id)
    p = await engine.get_instance(p.id_)
    assert p.subworkflows[0].resolved is None and p.currentStage == "next"


async def test_scenario_24_an_orphan_is_recorded_once(engine: Engine) -> None:
    p = await into_review(engine, "a")
    orphan = await engine.start_instance("c", ancestors=[gdr(p.id_)])
    await finish(engine, orphan.instance.id_)
    p = await engine.get_instance(p.id_)
    assert types(p).count("subworkflowOrphaned") == 1
    assert len(p.subworkflows) == 1 and p.subworkflows[0].resolved is None


async def test_scenario_25_a_terminal_parent_is_stamped_not_reopened(engine: Engine) -> None:
    p = await into_review(engine, "a")
    done = await engine.set_stage(p.id_, "elsewhere")
    assert done.instance.completedAt is not None
    await finish(engine, p.subworkflows[0].child_id)
    p = await engine.get_instance(p.id_)
    assert p.subworkflows[0].resolved is not None and p.currentStage == "elsewhere"
    assert types(p)[-1] == "subworkflowResolved"


# ---- stage exit, detach, abort-on-exit, re-entry (26-32) ----


async def test_scenario_26_detached_children_keep_running(engine: Engine) -> None:
    p = await into_review(engine, "a", "b")
    moved = (await engine.set_stage(p.id_, "next")).instance
    assert not any(r["current"] for r in subworkflow_rows(moved, moved.open_entry()))
    await finish(engine, p.subworkflows[0].child_id)
    p = await engine.get_instance(p.id_)
    assert p.subworkflows[0].resolved is not None and p.subworkflows[1].resolved is None


async def test_scenario_27_on_exit_abort_condemns_and_drains(engine: Engine) -> None:
    p = await into_review(engine, "a", "b", definitions=[parent(on_exit="abort"), child()])
    p = (await engine.set_stage(p.id_, "next")).instance
    for row in p.subworkflows:
        assert row.abortPending is not None and row.resolved.aborted  # type: ignore[union-attr]
        c = await engine.get_instance(row.child_id)
        reason = next(h for h in c.history if h["_type"] == "aborted")["reason"]
        assert c.abortedAt and 'stage "review" exited' in reason
    assert types(p).count("subworkflowResolved") == 2


async def loop_back(engine: Engine, p: Instance, *names: str) -> Instance:
    await engine.set_stage(p.id_, "next")
    await engine.edit_field(p.id_, "items", [{"name": n} for n in names])
    return (await engine.fire_action(p.id_, "edit", "back")).instance


async def test_scenario_28_reentry_adopts_live_rows_by_key(engine: Engine) -> None:
    p = await into_review(engine, "de", "fr")
    first = {r.rowKey: r.child_id for r in p.subworkflows}
    p = await loop_back(engine, p, "de", "es")
    rows = current_rows(p)
    assert sorted(r["rowKey"] for r in rows) == ["de", "es"]
    assert next(r for r in rows if r["rowKey"] == "de")["_id"] == first["de"]
    assert types(p).count("subworkflowAdopted") == 1
    fr = next(r for r in subworkflow_rows(p, p.open_entry()) if r["rowKey"] == "fr")
    assert fr["current"] is False and fr["status"] == "active"
    assert len(p.subworkflows) == 3


async def test_scenario_29_a_resolved_key_gets_a_new_child(engine: Engine) -> None:
    p = await into_review(engine, "de", "fr")
    await finish(engine, p.subworkflows[0].child_id)
    p = await loop_back(engine, await engine.get_instance(p.id_), "de")
    de = [r for r in p.subworkflows if r.rowKey == "de"]
    assert len(de) == 2 and de[0].resolved is not None and de[1].resolved is None
    assert de[0].child_id != de[1].child_id


async def test_scenario_30_abort_on_exit_loop_back_spawns_fresh(engine: Engine) -> None:
    p = await into_review(engine, "de", definitions=[parent(on_exit="abort"), child()])
    old = p.subworkflows[0].child_id
    p = await loop_back(engine, p, "de")
    assert [r.rowKey for r in p.subworkflows] == ["de", "de"]
    assert p.subworkflows[1].child_id != old and "subworkflowAdopted" not in types(p)


async def test_scenario_31_adoption_never_crosses_actions(engine: Engine) -> None:
    second = {"name": "fan-out-2", "when": "true", "spawn": {
        "forEach": "$fields.items[].name", "definition": {"name": "c"},
        "with": {"item": "$row"}}}
    p = await into_review(engine, "a", definitions=[parent(extra_actions=[second]), child()])
    by_action = {r.action: r.child_id for r in p.subworkflows}
    p = await loop_back(engine, p, "a")
    assert len(p.subworkflows) == 2 and types(p).count("subworkflowAdopted") == 2
    for row in p.subworkflows:
        assert row.child_id == by_action[row.action]
        assert row.stageEntry == p.open_entry().key_  # type: ignore[union-attr]


async def test_scenario_32_a_caller_fired_spawn_tops_up(engine: Engine) -> None:
    close = {"name": "close", "status": "done"}
    p = await into_review(engine, definitions=[
        parent(caller_fired=True, extra_actions=[close]), child()])
    await engine.edit_field(p.id_, "items", [{"name": "a"}])
    await engine.fire_action(p.id_, "translate", "fan-out")
    await engine.edit_field(p.id_, "items", [{"name": "a"}, {"name": "b"}])
    p = (await engine.fire_action(p.id_, "translate", "fan-out")).instance
    assert [r.rowKey for r in p.subworkflows] == ["a", "b"]


# ---- abort cascade and crash safety (33-38) ----


async def three_levels(engine: Engine) -> tuple[Instance, Instance]:
    r = await into_review(engine, "one", definitions=[parent(child_name="m"), middle(),
                                                      child()])
    return r, await engine.get_instance(r.subworkflows[0].child_id)


async def test_scenario_33_abort_cascades_through_every_level(engine: Engine) -> None:
    r, m = await three_levels(engine)
    result = await engine.abort_instance(r.id_)
    assert result.cascaded == 0
    assert len(m.pendingEffects) == 1
    everyone = [r.id_, m.id_, *(row.child_id for row in m.subworkflows)]
    for iid in everyone:
        got = await engine.get_instance(iid)
        assert got.abortedAt and got.completedAt == got.abortedAt
        assert all(row.resolved and row.resolved.aborted for row in got.subworkflows)
        assert got.pendingEffects == []
    m = await engine.get_instance(m.id_)
    assert [(run.name, run.status) for run in m.effectHistory] == [("notify", "cancelled")]


async def test_scenario_34_an_interrupted_abort_finishes_on_tick_or_retry(
        engine: Engine) -> None:
    r, m = await three_levels(engine)
    engine.faults.arm("before-drain")
    with pytest.raises(InjectedFault):
        await engine.abort_instance(r.id_)
    assert (await engine.get_instance(m.id_)).abortedAt is None
    await engine.tick(r.id_)
    assert (await engine.get_instance(m.id_)).abortedAt is not None
    again = await engine.abort_instance(r.id_)
    assert again.changed is False


async def test_scenario_35_a_crash_mid_drain(engine: Engine) -> None:
    from kinflow.core.operator_verbs import AbortInstance, plan_abort

    p = await into_review(engine, "a", "b", definitions=[parent(on_exit="abort"), child()])
    engine.faults.arm("before-drain")
    with pytest.raises(InjectedFault):
        await engine.abort_instance(p.id_)
    c1 = p.subworkflows[0].child_id
    await engine.transact.commit(c1, lambda s, c: plan_abort(s, AbortInstance("x"), c),
                                 verb="abortInstance", actor=Actor.system())  # a drain got this far
    await engine.tick(p.id_)
    p = await engine.get_instance(p.id_)
    assert all(row.resolved and row.resolved.aborted for row in p.subworkflows)
    assert types(p).count("subworkflowResolved") == 2
    first = await engine.get_instance(c1)
    assert types(first).count("aborted") == 1


async def test_scenario_36_a_deleted_child_resolves_as_child_missing(engine: Engine) -> None:
    p = await into_review(engine, "a", "b")
    await engine.lake.delete(p.subworkflows[0].child_id)
    await engine.tick(p.id_)
    await engine.tick(p.id_)
    p = await engine.get_instance(p.id_)
    row = p.subworkflows[0]
    assert row.resolved is not None and row.resolved.aborted and row.resolved.stage is None
    assert row.resolved.detail == "child-missing"
    missing = [h for h in p.history if h.get("detail") == "child-missing"]
    assert len(missing) == 1
    await finish(engine, p.subworkflows[1].child_id)
    assert (await engine.get_instance(p.id_)).currentStage == "next"  # no wedged gate


async def test_scenario_37_aborting_a_child_releases_the_gate(engine: Engine) -> None:
    p = await into_review(engine, "a", "b")
    await finish(engine, p.subworkflows[0].child_id)
    await engine.abort_instance(p.subworkflows[1].child_id)
    p = await engine.get_instance(p.id_)
    assert p.subworkflows[1].resolved.aborted  # type: ignore[union-attr]
    assert p.currentStage == "next" and p.abortedAt is None


@pytest.mark.parametrize("ticked", ["child", "parent"])
async def test_scenario_38_a_crash_before_propagation(engine: Engine, ticked: str) -> None:
    p = await into_review(engine, "a")
    cid = p.subworkflows[0].child_id
    engine.faults.arm("before-propagation")
    with pytest.raises(InjectedFault):
        await finish(engine, cid)
    assert (await engine.get_instance(p.id_)).subworkflows[0].resolved is None
    await engine.tick(cid if ticked == "child" else p.id_)
    p = await engine.get_instance(p.id_)
    # kinflow stamps from either side: the child's owed stamp is durable
    assert p.subworkflows[0].resolved is not None and p.currentStage == "next"


async def test_fan_out_limit_is_typed(engine: Engine) -> None:
    from kinflow.engine import Limits

    small = Engine(engine.lake, clock=engine.clock, limits=Limits(fan_out=2))
    await small.deploy([parent(), child()])
    started = await small.start_instance("p", fields=items("a", "b", "c"))
    with pytest.raises(KinflowError) as refused:
        await small.fire_action(started.instance.id_, "go", "go")
    assert refused.value.code == "fan-out-limit"


async def test_a_deleted_child_is_found_by_the_next_propagation_round(engine: Engine) -> None:
    p = await into_review(engine, "a", "b")
    await engine.lake.delete(p.subworkflows[0].child_id)
    await finish(engine, p.subworkflows[1].child_id)
    p = await engine.get_instance(p.id_)
    assert p.subworkflows[0].resolved.detail == "child-missing"  # type: ignore[union-attr]
    assert p.currentStage == "next"
