"""At least one typed refusal per verb, each leaving the stored instance untouched."""

from __future__ import annotations

import pytest

from kinflow.core.errors import (
    ActionDisabled,
    ActionParamsInvalid,
    ContractViolation,
    DefinitionInvalid,
    DefinitionNotFound,
    EditFieldDenied,
    EffectNotFound,
    FieldValueInvalid,
    InitialFieldsInvalid,
    InstanceNotFound,
    MissingEffectHandler,
    RequiredFieldNotProvided,
)
from kinflow.engine import Actor, Engine
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake
BOB = Actor.person("bob", "viewer")
ALICE = Actor.person("alice", "editor")

DEFINITION = simple("guarded", [
    {"name": "a",
     "activities": [
        {"name": "w", "actions": [
            {"name": "go", "status": "done", "roles": ["editor"]},
            {"name": "auto", "when": "false", "status": "skipped"},
            {"name": "rate", "params": [{"name": "score", "type": "number", "required": True}],
             "ops": [{"type": "field.set", "target": "score",
                      "value": {"type": "param", "param": "score"}}]},
            {"name": "ping", "effects": [{"name": "ping"}]}]},
        {"name": "later", "actions": [{"name": "finish", "status": "done"}]}],
     "transitions": [{"name": "t", "to": "b"}]},
    {"name": "b"},
], fields=[
    {"name": "title", "type": "string", "required": True, "initialValue": {"type": "input"}},
    {"name": "score", "type": "number", "editable": True},
    {"name": "locked", "type": "string"},
])


@pytest.fixture
async def iid(engine: Engine) -> str:
    await engine.deploy([DEFINITION])
    return (await engine.start_instance("guarded", fields={"title": "t"})).instance.id_


async def unchanged(engine: Engine, iid: str, before: dict) -> bool:
    return await engine.lake.get(iid) == before


async def test_deploy_refusal(engine: Engine) -> None:
    with pytest.raises(DefinitionInvalid):
        await engine.deploy([{"name": "x"}])
    assert await engine.lake.count({}) == 0


async def test_start_refusals(engine: Engine) -> None:
    with pytest.raises(DefinitionNotFound):
        await engine.start_instance("nope")
    await engine.deploy([DEFINITION])
    with pytest.raises(InitialFieldsInvalid) as bad:
        await engine.start_instance("guarded", fields={"title": 3, "ghost": 1, "score": 2})
    assert {i["reason"] for i in bad.value.details["issues"]} == {
        "wrong-kind", "undeclared", "not-input"}
    with pytest.raises(RequiredFieldNotProvided) as missing:
        await engine.start_instance("guarded")
    assert missing.value.details["fields"] == ["title"]
    assert await engine.lake.count({"_type": "kinflow.instance"}) == 0


async def test_fire_action_refusals(engine: Engine, iid: str) -> None:
    before = await engine.lake.get(iid)
    with pytest.raises(ActionDisabled) as role:
        await engine.fire_action(iid, "w", "go", actor=BOB)
    assert role.value.details["reason"] == "filter-failed"
    with pytest.raises(ActionDisabled) as cascade:
        await engine.fire_action(iid, "w", "auto", actor=ALICE)
    assert cascade.value.details["reason"] == "cascade-fired"
    with pytest.raises(ContractViolation):
        await engine.fire_action(iid, "w", "nope", actor=ALICE)
    with pytest.raises(ActionParamsInvalid) as params:
        await engine.fire_action(iid, "w", "rate", params={"score": "high", "x": 1})
    assert {i["param"] for i in params.value.details["issues"]} == {"score", "x"}
    with pytest.raises(InstanceNotFound):
        await engine.fire_action("instance.missing", "w", "go")
    assert await unchanged(engine, iid, before)
    await engine.fire_action(iid, "w", "go", actor=ALICE)
    with pytest.raises(ActionDisabled) as inactive:
        await engine.fire_action(iid, "w", "go", actor=ALICE)
    assert inactive.value.details["reason"] == "activity-not-active"


async def test_available_actions_agree_with_the_gate(engine: Engine, iid: str) -> None:
    verdicts = {(v.activity, v.action): v for v in
                await engine.available_actions(iid, actor=BOB)}
    assert verdicts[("w", "go")].reason == "filter-failed"
    assert verdicts[("w", "auto")].reason == "cascade-fired"
    assert verdicts[("w", "rate")].enabled
    assert verdicts[("w", "rate")].params == [
        {"type": "number", "name": "score", "required": True}]


async def test_edit_field_refusals(engine: Engine, iid: str) -> None:
    before = await engine.lake.get(iid)
    with pytest.raises(EditFieldDenied) as denied:
        await engine.edit_field(iid, "locked", "x")
    assert denied.value.details["reason"] == "not-editable"
    with pytest.raises(FieldValueInvalid):
        await engine.edit_field(iid, "score", "not a number")
    with pytest.raises(ContractViolation):
        await engine.edit_field(iid, "ghost", 1)
    assert await unchanged(engine, iid, before)
    edited = await engine.edit_field(iid, "score", 4)
    assert edited.changed and edited.instance.fields[1].value == 4


async def test_effect_refusals(engine: Engine, iid: str) -> None:
    with pytest.raises(EffectNotFound):
        await engine.complete_effect(iid, "no-such-key", "done")
    fired = await engine.fire_action(iid, "w", "ping")
    key = fired.instance.pendingEffects[0].key_
    with pytest.raises(ContractViolation):
        await engine.complete_effect(iid, key, "cancelled")
    with pytest.raises(MissingEffectHandler):
        await engine.drain_effects(iid, missing_handler="fail")
    skipped = await engine.drain_effects(iid)
    assert skipped.skipped == 1
    await engine.claim_effect(iid, key, actor=ALICE)
    with pytest.raises(ContractViolation):
        await engine.claim_effect(iid, key, actor=BOB)
    assert await engine.maintenance.sweep_stale_claims(iid) == 0


async def test_admin_refusals(engine: Engine, iid: str) -> None:
    before = await engine.lake.get(iid)
    with pytest.raises(ContractViolation):
        await engine.set_stage(iid, "nowhere")
    with pytest.raises(ContractViolation):
        await engine.reset_activity(iid, "w", to="skipped")  # still active
    with pytest.raises(ContractViolation):
        await engine.reset_activity(iid, "w", to="done")
    with pytest.raises(InstanceNotFound):
        await engine.tick("instance.missing")
    with pytest.raises(InstanceNotFound):
        await engine.abort_instance("instance.missing")
    with pytest.raises(InstanceNotFound):
        await engine.maintenance.sweep_stale_claims("instance.missing")
    assert await unchanged(engine, iid, before)


async def test_admin_verbs_apply(engine: Engine, iid: str) -> None:
    await engine.fire_action(iid, "w", "go", actor=ALICE)
    reset = await engine.reset_activity(iid, "w", to="active")
    assert reset.instance.open_entry().activity("w").status == "active"
    moved = await engine.set_stage(iid, "b", reason="manual", idempotency_key="s1")
    assert moved.instance.currentStage == "b" and moved.cascaded == 1
    assert moved.instance.completedAt is not None
    assert moved.instance.history[-2]["transition"] == "setStage:a->b"
    again = await engine.set_stage(iid, "b", reason="manual", idempotency_key="s1")
    assert not again.changed


async def test_abort_cancels_effects_and_closes_in_place(engine: Engine, iid: str) -> None:
    await engine.fire_action(iid, "w", "ping")
    aborted = await engine.abort_instance(iid, reason="stop", actor=ALICE)
    instance = aborted.instance
    assert aborted.changed and aborted.cascaded == 0
    assert instance.abortedAt == instance.completedAt is not None
    assert instance.currentStage == "a" and instance.stages[-1].exitedAt is not None
    assert instance.pendingEffects == []
    assert instance.effectHistory[0].status == "cancelled"
    assert instance.history[-1]["_type"] == "aborted"
    repeat = await engine.abort_instance(iid)
    assert not repeat.changed
    with pytest.raises(ActionDisabled) as refused:
        await engine.fire_action(iid, "later", "finish")
    assert refused.value.details["reason"] == "instance-aborted"
    with pytest.raises(EditFieldDenied) as closed:
        await engine.edit_field(iid, "score", 1)
    assert closed.value.details["reason"] == "instance-aborted"
