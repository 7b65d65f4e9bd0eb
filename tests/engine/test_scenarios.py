"""The engine's scenarios without subworkflows, against the embedded lake."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kinflow.core.errors import (
    CascadeLimit,
    ContractViolation,
    DefinitionInvalid,
    EffectNotFound,
)
from kinflow.core.state import Instance
from kinflow.engine import Actor, Engine
from kinflow.engine.ids import random_key, random_token
from kinflow.errors import ConcurrentModification
from tests.engine.conftest import Clock
from tests.engine.definitions import ARTICLE_REVIEW, TRANSLATE_ARTICLE, counter, simple

pytestmark = pytest.mark.lake
ALICE = Actor.person("alice", "editor")


def types(instance: Instance) -> list[str]:
    return [row["_type"] for row in instance.history]


def two_stage(when: str = "$allActivitiesDone", **extra: Any) -> dict[str, Any]:
    return simple("two", [
        {"name": "a", "activities": [{"name": "work", "actions": [
            {"name": "finish", "status": "done"}]}],
         "transitions": [{"name": "next", "to": "b", "when": when}]},
        {"name": "b"},
    ], **extra)


async def test_scenario_1_batch_is_created_children_first(engine: Engine) -> None:
    result = await engine.deploy([ARTICLE_REVIEW, TRANSLATE_ARTICLE])
    assert [(d.name, d.version, d.status) for d in result.definitions] == [
        ("translate-article", 1, "created"), ("article-review", 1, "created")]
    stored = await engine.lake.get("definition.article-review.v1")
    assert stored is not None and stored["_type"] == "kinflow.definition"
    assert stored["contentHash"] and stored["version"] == 1


async def test_scenario_5_versions_by_content_and_instances_keep_their_snapshot(
    engine: Engine,
) -> None:
    await engine.deploy([two_stage()])
    early = await engine.start_instance("two")
    again = await engine.deploy([two_stage()])
    assert [(d.version, d.status) for d in again.definitions] == [(1, "unchanged")]
    changed = two_stage()
    changed["stages"][0]["activities"][0]["actions"].append({"name": "skip", "status": "skipped"})
    bumped = await engine.deploy([changed])
    assert [(d.version, d.status) for d in bumped.definitions] == [(2, "created")]
    late = await engine.start_instance("two")
    assert early.instance.pinnedVersion == 1 and late.instance.pinnedVersion == 2
    # v1 has no `skip` action: the early instance evaluates against its own snapshot
    with pytest.raises(ContractViolation):
        await engine.fire_action(early.instance.id_, "work", "skip")
    done = await engine.fire_action(late.instance.id_, "work", "skip")
    assert done.instance.currentStage == "b"


async def test_scenario_6_site_violations_are_refused_and_nothing_is_written(
    engine: Engine,
) -> None:
    bad = copy.deepcopy(ARTICLE_REVIEW)
    bad["stages"][1]["activities"][0]["actions"][0]["spawn"]["forEach"] = "$row"
    bad["stages"][0]["transitions"][0]["when"] = "$actor.id == 'x'"
    with pytest.raises(DefinitionInvalid) as refused:
        await engine.deploy([bad, TRANSLATE_ARTICLE])
    messages = [i["message"] for i in refused.value.details["issues"]]
    assert any("reads $row" in m for m in messages)
    assert any("reads $actor" in m for m in messages)
    assert await engine.lake.count({}) == 0


async def test_five_problems_in_one_definition_one_error_nothing_written(
    engine: Engine,
) -> None:
    bad = simple("Bad Name", [
        {"name": "a", "activities": [{"name": "x", "actions": [
            {"name": "go", "when": "$params.p", "status": "done"},
            {"name": "syntax", "filter": "a ==", "status": "done"}]}],
         "transitions": [{"name": "t", "to": "ghost"}]},
        {"name": "a"},
        {"name": "lonely"},
    ], initial="nope")
    with pytest.raises(DefinitionInvalid) as refused:
        await engine.deploy([bad, TRANSLATE_ARTICLE])
    issues = refused.value.details["issues"]
    assert len({i["message"] for i in issues}) >= 5
    assert {i["definition"] for i in issues} == {"Bad Name"}
    assert await engine.lake.count({}) == 0


async def test_scenario_7_first_satisfied_transition_wins(engine: Engine) -> None:
    definition = simple("fork", [
        {"name": "a", "activities": [{"name": "w", "actions": [
            {"name": "go", "status": "done"}]}],
         "transitions": [{"name": "left", "to": "l", "when": "true"},
                         {"name": "right", "to": "r", "when": "true"}]},
        {"name": "l"}, {"name": "r"},
    ])
    await engine.deploy([definition])
    started = await engine.start_instance("fork")
    instance = started.instance
    assert instance.currentStage == "l"
    assert types(instance) == ["stageEntered", "stageExited", "transitionFired", "stageEntered"]
    assert instance.history[2]["transition"] == "left"


async def test_scenario_8_unevaluable_transition_halts_selection(engine: Engine) -> None:
    definition = simple("halt", [
        {"name": "a", "activities": [{"name": "w", "actions": [
            {"name": "go", "status": "done"}]}],
         "transitions": [{"name": "first", "to": "l", "when": "$fields.n > 3"},
                         {"name": "second", "to": "r", "when": "true"}]},
        {"name": "l"}, {"name": "r"},
    ], fields=[{"name": "n", "type": "number"}])
    await engine.deploy([definition])
    started = await engine.start_instance("halt")
    assert started.instance.currentStage == "a"
    ticked = await engine.tick(started.instance.id_)
    assert ticked.instance.currentStage == "a" and not ticked.changed


async def test_scenario_9_ping_pong_hits_the_cascade_limit(engine: Engine) -> None:
    definition = simple("ping", [
        {"name": "a", "transitions": [{"name": "to-b", "to": "b", "when": "true"}]},
        {"name": "b", "transitions": [{"name": "to-a", "to": "a", "when": "true"}]},
    ])
    await engine.deploy([definition])
    with pytest.raises(CascadeLimit) as refused:
        await engine.start_instance("ping", instance_id="instance.ping")
    assert refused.value.details["limit"] == 100
    stored = await engine.get_instance("instance.ping")
    moves = types(stored).count("transitionFired")
    assert moves == 100
    assert stored.currentStage == ("a" if moves % 2 == 0 else "b")
    assert refused.value.details["stage"] == stored.currentStage


async def test_scenario_10_trigger_fires_once_per_visit(engine: Engine) -> None:
    definition = simple("once", [
        {"name": "a", "fields": [{"name": "hits", "type": "number"}],
         "activities": [
            {"name": "auto", "actions": [
                {"name": "count", "when": "true",
                 "ops": [{"type": "field.inc", "target": {"scope": "workflow",
                                                          "field": "total"}}]},
                {"name": "close", "status": "done"}]},
            {"name": "manual", "actions": [{"name": "leave", "status": "done"}]}],
         "transitions": [{"name": "out", "to": "b", "when": "$allActivitiesDone"}]},
        {"name": "b", "activities": [{"name": "back", "actions": [
            {"name": "again", "status": "done"}]}],
         "transitions": [{"name": "return", "to": "a"}]},
    ], fields=[{"name": "total", "type": "number", "initialValue": {"type": "literal",
                                                                    "value": 0}}])
    await engine.deploy([definition])
    iid = (await engine.start_instance("once")).instance.id_
    for _ in range(3):
        await engine.tick(iid)
    instance = await engine.get_instance(iid)
    assert instance.fields[0].value == 1
    assert instance.open_entry().activity("auto").firedActions == ["count"]
    await engine.fire_action(iid, "auto", "close")
    await engine.fire_action(iid, "manual", "leave")
    back = await engine.fire_action(iid, "back", "again")
    assert back.instance.currentStage == "a"
    assert back.instance.fields[0].value == 2
    assert back.instance.open_entry().activity("auto").firedActions == ["count"]


async def test_scenario_11_unevaluable_activity_filter_keeps_it_active(engine: Engine) -> None:
    definition = simple("filtered", [
        {"name": "a", "activities": [
            {"name": "maybe", "filter": "$fields.n > 2", "actions": [
                {"name": "go", "status": "done"}]},
            {"name": "never", "filter": "false", "actions": [
                {"name": "go", "status": "done"}]}],
         "transitions": [{"name": "t", "to": "b"}]},
        {"name": "b"},
    ], fields=[{"name": "n", "type": "number"}])
    await engine.deploy([definition])
    instance = (await engine.start_instance("filtered")).instance
    entry = instance.open_entry()
    maybe, never = entry.activity("maybe"), entry.activity("never")
    assert maybe.status == "active" and maybe.filterEvaluation.unevaluable is True
    assert never.status == "skipped" and never.startedAt is None


async def test_scenario_39_idempotent_replay_and_cross_verb_key(engine: Engine) -> None:
    definition = counter("keyed")
    await engine.deploy([definition])
    iid = (await engine.start_instance("keyed")).instance.id_
    first = await engine.fire_action(iid, "w", "bump", idempotency_key="k")
    assert first.changed
    replay = await engine.fire_action(iid, "w", "bump", idempotency_key="k")
    assert not replay.changed
    assert types(replay.instance).count("actionFired") == 1
    assert replay.instance.fields[0].value == 1
    with pytest.raises(ContractViolation) as refused:
        await engine.edit_field(iid, "n", 5, idempotency_key="k")
    assert refused.value.details["usedFor"] == "fireAction"
    with pytest.raises(ContractViolation):
        await engine.fire_action(iid, "w", "bump", idempotency_key="")


async def test_scenario_40_start_resumes_by_instance_id(engine: Engine, clock: Clock) -> None:
    from kinflow.core.context import PlanContext
    from kinflow.core.verbs import StartInstance, plan_create

    await engine.deploy([two_stage(), TRANSLATE_ARTICLE])
    document = await engine.get_definition("two")
    # a start that crashed right after its create: the document exists, unprimed
    crashed = plan_create(StartInstance(document, instance_id="instance.x"),
                          PlanContext(now=clock(), actor=ALICE, dataset=engine.dataset,
                                      new_key=random_key, new_token=random_token))
    await engine.lake.create(crashed.to_document())
    resumed = await engine.start_instance("two", instance_id="instance.x")
    assert resumed.instance.primed and resumed.instance.currentStage == "a"
    assert await engine.lake.count({"_type": "kinflow.instance"}) == 1
    again = await engine.start_instance("two", instance_id="instance.x")
    assert not again.changed and len(again.instance.stages) == 1
    with pytest.raises(ContractViolation):
        await engine.start_instance("translate-article", instance_id="instance.x",
                                    fields={"locale": "de"})


async def test_scenario_41_concurrent_fires_on_different_activities_both_land(
    engine: Engine,
) -> None:
    definition = simple("pair", [
        {"name": "a", "activities": [
            {"name": "left", "actions": [{"name": "go", "status": "done"}]},
            {"name": "right", "actions": [{"name": "go", "status": "done"}]}],
         "transitions": [{"name": "t", "to": "b"}]},
        {"name": "b"},
    ])
    await engine.deploy([definition])
    iid = (await engine.start_instance("pair")).instance.id_
    await asyncio.gather(engine.fire_action(iid, "left", "go"),
                         engine.fire_action(iid, "right", "go"))
    final = await engine.get_instance(iid)
    assert final.currentStage == "b"
    assert types(final).count("actionFired") == 2


async def test_scenario_41_a_writer_winning_every_attempt_gives_a_typed_error(
    engine: Engine,
) -> None:
    await engine.deploy([two_stage()])
    iid = (await engine.start_instance("two")).instance.id_
    before = await engine.lake.get(iid)
    await engine.lake.client.admin.command(
        "configureFailPoint", "failCommand", mode="alwaysOn",
        data={"failCommands": ["update"], "errorCode": 112,
              "errorLabels": ["TransientTransactionError"]},
    )
    try:
        with pytest.raises(ConcurrentModification) as refused:
            await engine.fire_action(iid, "work", "finish")
    finally:
        await engine.lake.client.admin.command("configureFailPoint", "failCommand", mode="off")
    assert refused.value.code == "concurrent-modification"
    assert refused.value.details["verb"] == "fireAction"
    assert await engine.lake.get(iid) == before


async def test_scenario_42_expired_claim_is_taken_over_and_completion_is_first_writer_wins(
    engine: Engine, clock: Clock,
) -> None:
    definition = simple("fx", [
        {"name": "a", "activities": [{"name": "w", "actions": [
            {"name": "send", "status": "done", "effects": [
                {"name": "notify", "bindings": {"who": "$actor.id"}, "input": {"channel": "x"},
                 "outputs": [{"name": "messageId", "type": "string"}]}]}]}],
         "transitions": [{"name": "t", "to": "b", "when": "$effectStatus.notify == 'done'"}]},
        {"name": "b"},
    ])
    await engine.deploy([definition])
    iid = (await engine.start_instance("fx")).instance.id_
    fired = await engine.fire_action(iid, "w", "send", actor=ALICE)
    pending = fired.instance.pendingEffects[0]
    assert pending.params == {"who": "alice", "channel": "x"}
    old_token = await engine.claim_effect(iid, pending.key_, actor=Actor.system("drainer-1"))
    clock.advance(seconds=301)
    calls: list[str] = []

    async def notify(call: Any) -> dict[str, Any]:
        calls.append(call.claim_token)
        return {"messageId": "m-1"}

    engine.register_handler("notify", notify)
    report = await engine.drain_effects(iid, actor=Actor.system("drainer-2"))
    assert (report.drained, report.failed, report.lost) == (1, 0, 0)
    assert calls and calls[0] != old_token
    final = await engine.get_instance(iid)
    released = [r for r in final.history if r["_type"] == "effectClaimReleased"]
    assert len(released) == 1 and released[0]["via"] == "drain-takeover"
    assert released[0]["claim"]["claimToken"] == old_token
    assert final.currentStage == "b"
    assert final.effectHistory[0].outputs == {"messageId": "m-1"}
    with pytest.raises(EffectNotFound) as refused:
        await engine.complete_effect(iid, pending.key_, "done")
    assert refused.value.details["settled"]["status"] == "done"
