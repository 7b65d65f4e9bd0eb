"""Security findings at the engine: keyed calls fingerprinted, inputs and instances
bounded (aborts still work), engine ids reserved, the heartbeat's scans never starved."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import bson
import pytest

from kinflow.core import sizes
from kinflow.core.context import Limits
from kinflow.core.errors import (
    ContractViolation,
    InputTooLarge,
    InstanceTooLarge,
    ReservedId,
    ReservedType,
)
from kinflow.core.ledger import fingerprint
from kinflow.core.owned import check_content_write, check_instance_id
from kinflow.engine import Engine
from kinflow.storage.database import side_name
from kinflow.timestamps import iso
from kinflow.worker import LEASE_TYPE, Worker
from tests.engine.cohort_defs import child, items, parent
from tests.engine.conftest import Clock
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake

PINGABLE = simple("pingable", [
    {"name": "a", "activities": [{"name": "w", "actions": [
        {"name": "ping", "params": [{"name": "n", "type": "number"},
                                    {"name": "m", "type": "json"}]},
        {"name": "finish", "status": "done"}]}],
     "transitions": [{"name": "t", "to": "b"}]},
    {"name": "b"},
], fields=[{"name": "note", "type": "string", "editable": True},
           {"name": "title", "type": "string", "initialValue": {"type": "input"}}])


def pingable_child() -> dict[str, Any]:
    """``c`` with a ``ping`` action that changes nothing (the attack's verb)."""
    definition = child()
    definition["stages"][0]["activities"][0]["actions"].append({"name": "ping"})
    return definition


async def stored(engine: Engine, iid: str) -> dict[str, Any]:
    document = await engine.lake.get(iid)
    assert document is not None
    return document


# ---- finding 4: a key names one call, not one verb ----


async def test_a_key_reused_for_another_action_is_refused(engine: Engine) -> None:
    await engine.deploy([PINGABLE])
    iid = (await engine.start_instance("pingable")).instance.id_
    first = await engine.fire_action(iid, "w", "ping", idempotency_key="K1")
    assert first.changed
    retried = await engine.fire_action(iid, "w", "ping", idempotency_key="K1")
    assert not retried.changed  # the same call replays
    before = await stored(engine, iid)
    with pytest.raises(ContractViolation) as other_action:
        await engine.fire_action(iid, "w", "finish", idempotency_key="K1")
    assert other_action.value.details["reason"] == "idempotency-key-reused"
    with pytest.raises(ContractViolation) as other_params:
        await engine.fire_action(iid, "w", "ping", params={"n": 2}, idempotency_key="K1")
    assert other_params.value.details["reason"] == "idempotency-key-reused"
    with pytest.raises(ContractViolation) as other_verb:
        await engine.edit_field(iid, "note", "x", idempotency_key="K1")
    assert other_verb.value.details == {"idempotencyKey": "K1", "usedFor": "fireAction",
                                        "op": "editField", "reason": "idempotency-key-reused"}
    assert await stored(engine, iid) == before
    finished = await engine.fire_action(iid, "w", "finish", idempotency_key="K2")
    assert finished.instance.currentStage == "b"


async def test_an_identical_retry_replays_whatever_the_key_order(engine: Engine) -> None:
    await engine.deploy([PINGABLE])
    iid = (await engine.start_instance("pingable")).instance.id_
    assert (await engine.edit_field(iid, "note", "x", idempotency_key="E")).changed
    assert not (await engine.edit_field(iid, "note", "x", idempotency_key="E")).changed
    with pytest.raises(ContractViolation) as other_value:
        await engine.edit_field(iid, "note", "y", idempotency_key="E")
    assert other_value.value.details["reason"] == "idempotency-key-reused"
    params = {"n": 1, "m": {"b": 2, "a": 1}}
    await engine.fire_action(iid, "w", "ping", params=params, idempotency_key="P")
    reordered = {"m": {"a": 1, "b": 2}, "n": 1}
    again = await engine.fire_action(iid, "w", "ping", params=reordered, idempotency_key="P")
    assert not again.changed


def test_the_fingerprint_is_canonical() -> None:
    a = fingerprint("fireAction", {"activity": "w", "params": {"b": [1, {"y": 2, "x": 1}],
                                                                "a": "é"}})
    b = fingerprint("fireAction", {"params": {"a": "é", "b": [1, {"x": 1, "y": 2}]},
                                   "activity": "w", "action": None})
    assert a == b  # key order and absent-vs-None do not matter
    assert a != fingerprint("editField", {"activity": "w", "params": {"a": "é",
                                                                      "b": [1, {"x": 1, "y": 2}]}})
    assert a != fingerprint("fireAction", {"activity": "w", "params": {"a": "e"}})
    assert fingerprint("fireAction", {"params": {"x": "\ud800"}}).startswith("sha256:")


async def test_ledger_rows_without_a_fingerprint_replay_on_the_verb(engine: Engine) -> None:
    await engine.deploy([PINGABLE])
    iid = (await engine.start_instance("pingable")).instance.id_
    await engine.fire_action(iid, "w", "ping", idempotency_key="old")
    # a row written before fingerprints existed
    await engine.lake.update(iid, {"$unset": {"processedRequests.0.fingerprint": ""}})
    replayed = await engine.fire_action(iid, "w", "finish", idempotency_key="old")
    assert not replayed.changed and replayed.instance.currentStage == "a"
    with pytest.raises(ContractViolation):
        await engine.edit_field(iid, "note", "x", idempotency_key="old")


# ---- finding 5: inputs and instances bounded ----


async def test_oversized_inputs_are_refused_before_anything_is_written(engine: Engine) -> None:
    await engine.deploy([PINGABLE])
    iid = (await engine.start_instance("pingable")).instance.id_
    before = await stored(engine, iid)
    limits = engine.limits
    attempts = [
        ("idempotencyKey", engine.fire_action(iid, "w", "ping",
                                              idempotency_key="k" * 5_500_000)),
        ("params", engine.fire_action(iid, "w", "ping",
                                      params={"n": 1, "m": "x" * limits.value_bytes})),
        ("value", engine.edit_field(iid, "note", "é" * limits.value_bytes)),
        ("reason", engine.abort_instance(iid, reason="r" * (limits.reason_bytes + 1))),
        ("reason", engine.set_stage(iid, "b", reason="r" * (limits.reason_bytes + 1))),
        ("idempotencyKey", engine.reset_activity(iid, "w", idempotency_key="k" * 300)),
    ]
    for argument, attempt in attempts:
        with pytest.raises(InputTooLarge) as refused:
            await attempt
        details = refused.value.details
        assert details["argument"] == argument and details["size"] > details["limit"]
    assert await stored(engine, iid) == before
    with pytest.raises(InputTooLarge) as start:
        await engine.start_instance("pingable", fields={"title": "t" * limits.value_bytes})
    assert start.value.details["argument"] == "fields.title"
    assert await engine.lake.count({"_type": "kinflow.instance"}) == 1
    exactly = "k" * limits.key_bytes  # the limit itself is allowed
    assert (await engine.fire_action(iid, "w", "ping", idempotency_key=exactly)).changed


async def test_a_growing_child_is_refused_and_its_parents_abort_still_cascades(
        engine: Engine) -> None:
    """The brick scenario, scaled down: keys pile up in a child until the guard refuses;
    the parent's abort then reaches the child, and nothing is left owed."""
    small = Engine(engine.lake, clock=engine.clock,
                   limits=Limits(key_bytes=20_000, instance_bytes=120_000))
    await small.deploy([pingable_child(), parent()])
    pid = (await small.start_instance("p", fields=items("a", "b"))).instance.id_
    await small.fire_action(pid, "go", "go")
    kid = (await small.get_instance(pid)).subworkflows[0].child_id
    refused = None
    for n in range(20):
        try:
            await small.fire_action(kid, "task", "ping", idempotency_key=f"{n}" * 19_000)
        except InstanceTooLarge as exc:
            refused = exc
            break
    assert refused is not None, "the guard never refused the growing child"
    assert refused.details["limit"] == 120_000 and refused.details["size"] > 120_000
    assert len(bson.encode(await stored(small, kid))) <= 120_000
    aborted = await small.abort_instance(pid, reason="cancel")
    assert aborted.instance.abortedAt is not None and aborted.instance.owesAborts is None
    assert all(row.resolved is not None and row.resolved.aborted
               for row in aborted.instance.subworkflows)
    for row in aborted.instance.subworkflows:
        kid_doc = await stored(small, row.child_id)
        assert kid_doc["abortedAt"] and not kid_doc.get("owesAborts")
    assert await small.lake.count({"owesAborts": True}) == 0
    assert await small.lake.count({"propagateTo": pid}) == 0
    report = await Worker(small, grace_seconds=0).run_pass()
    assert report.failed == []


async def test_an_instance_already_over_the_limit_can_still_be_aborted(engine: Engine) -> None:
    """A document that grew before the guard existed: verbs are refused, abort is not."""
    await engine.deploy([PINGABLE])
    iid = (await engine.start_instance("pingable")).instance.id_
    await engine.lake.update(iid, {"$set": {"legacyPadding": "x" * 200_000}})
    small = Engine(engine.lake, clock=engine.clock, limits=Limits(instance_bytes=100_000))
    before = await stored(small, iid)
    with pytest.raises(InstanceTooLarge):
        await small.fire_action(iid, "w", "ping")
    with pytest.raises(InstanceTooLarge):
        await small.edit_field(iid, "note", "x")
    assert await stored(small, iid) == before
    aborted = await small.abort_instance(iid, reason="too big")
    assert aborted.changed and aborted.instance.abortedAt is not None


# ---- finding 6: engine-owned ids ----


@pytest.mark.parametrize("doc_id", ["lease.tick.instance.01J", "definition.article.v2",
                                    "instance.01JABC", "instance.cdeadbeef", "lease.x"])
def test_engine_ids_are_reserved_whatever_the_type(doc_id: str) -> None:
    for doc_type in (None, "article", "kinflow.lease"):
        with pytest.raises(ReservedId) as refused:
            check_content_write(doc_id, doc_type)
        assert refused.value.code == "reserved-id"


def test_engine_types_are_reserved_and_content_passes() -> None:
    check_content_write("article-1", "article", stored_type="article")
    check_content_write("leases.tick", "article")  # not the engine's prefix
    with pytest.raises(ReservedType):
        check_content_write("x", "kinflow.instance")
    with pytest.raises(ReservedType):
        check_content_write("x", "article", stored_type="kinflow.definition")
    assert check_instance_id("instance.mine") == "instance.mine"
    assert check_instance_id("order-7") == "order-7"
    for squat in ("definition.p.v2", "lease.tick.instance.x"):
        with pytest.raises(ReservedId):
            check_instance_id(squat)


# ---- the heartbeat's scans are never starved ----


def _timed(name: str, gate: str) -> dict[str, Any]:
    return simple(name, [
        {"name": "wait", "transitions": [{"name": "later", "to": "over",
                                          "when": f"dateTime($now) > dateTime('{gate}')"}]},
        {"name": "over"},
    ])


async def test_a_due_instance_behind_sixty_held_leases_is_still_ticked(
        engine: Engine, clock: Clock) -> None:
    await engine.deploy([_timed("early", "2026-01-01T12:10:00Z"),
                         _timed("late", "2026-01-01T12:20:00Z")])
    blocked = [(await engine.start_instance("early")).instance.id_ for _ in range(60)]
    target = (await engine.start_instance("late")).instance.id_
    clock.advance(hours=1)
    until = iso(clock() + timedelta(hours=1))
    leases = side_name(engine.dataset, "engine")
    await engine.lake.ensure_dataset(leases)
    for n, iid in enumerate(blocked):
        if n % 10 == 0:  # a document of another type at a lease id: taken over
            await engine.lake.create({"_id": f"lease.tick.{iid}", "_type": "article"},
                                     dataset=leases)
        else:  # a live lease another worker holds
            await engine.lake.create({"_id": f"lease.tick.{iid}", "_type": LEASE_TYPE,
                                      "holder": "elsewhere", "expiresAt": until},
                                     dataset=leases)
    due = await engine.maintenance.due_instances(limit=50)
    assert target not in due  # the first page is all blocked
    report = await Worker(engine, worker_id="w", grace_seconds=0, batch=50).run_pass()
    squatted = blocked[::10]  # taken over: a squat is not a lease anyone holds
    assert sorted(report.of("tick")) == sorted([*squatted, target])
    assert report.skipped == 54
    assert (await engine.get_instance(target)).currentStage == "over"
    assert await engine.lake.count({"_type": "article"}, dataset=leases) == 0  # released


EFFECTFUL = simple("effectful", [
    {"name": "a", "activities": [{"name": "w", "actions": [
        {"name": "big", "effects": [{"name": "big"}]},
        {"name": "loud", "effects": [{"name": "loud"}]},
        {"name": "stray", "effects": [{"name": "stray", "outputs": [
            {"name": "weight", "type": "number"}]}]},
        {"name": "finish", "status": "done"}]}],
     "transitions": [{"name": "t", "to": "b"}]},
    {"name": "b"},
])


async def test_an_effect_handlers_oversized_result_fails_the_effect_instead_of_sticking(
        engine: Engine) -> None:
    """Handler results are engine input: bounded by failing the effect, never refused."""
    limits = engine.limits

    def big(call: Any) -> dict[str, Any]:
        return {"blob": "x" * limits.value_bytes}

    def loud(call: Any) -> None:
        raise RuntimeError("!" * (limits.reason_bytes * 4))

    engine.register_handler("big", big)
    engine.register_handler("loud", loud)
    await engine.deploy([EFFECTFUL])
    iid = (await engine.start_instance("effectful")).instance.id_
    await engine.fire_action(iid, "w", "big")
    await engine.fire_action(iid, "w", "loud")
    report = await engine.drain_effects(iid)
    assert (report.drained, report.failed) == (0, 2)
    instance = await engine.get_instance(iid)
    assert instance.pendingEffects == [] and instance.effectsDueAt is None
    runs = {run.name: run for run in instance.effectHistory}
    assert runs["big"].status == "failed" and runs["big"].outputs is None
    assert "KINFLOW_MAX_VALUE_BYTES" in str(runs["big"].error)
    assert runs["loud"].status == "failed"
    assert len(str(runs["loud"].error)) < limits.reason_bytes + 200


async def test_a_handlers_undeclared_outputs_fail_the_effect_instead_of_sticking(
        engine: Engine) -> None:
    """Outputs the definition does not declare (or of the wrong kind) fail the effect once:
    refused, it stayed claimed and came due again after every lease, for ever."""
    engine.register_handler("stray", lambda call: {"carrier": "bench", "weight": "heavy"})
    await engine.deploy([EFFECTFUL])
    iid = (await engine.start_instance("effectful")).instance.id_
    await engine.fire_action(iid, "w", "stray")
    report = await engine.drain_effects(iid)
    assert (report.drained, report.failed) == (0, 1)
    instance = await engine.get_instance(iid)
    assert instance.pendingEffects == [] and instance.effectsDueAt is None
    [run] = instance.effectHistory
    assert run.status == "failed" and run.outputs is None
    assert "carrier: not declared" in str(run.error) and "weight:" in str(run.error)
    assert (await engine.drain_effects(iid)).failed == 0  # nothing left to run


async def test_a_caller_verb_keeps_room_for_its_live_cohort_to_resolve(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Growth is refused early enough that aborting a 100-child cohort still fits:
    each live row will add its abort mark, resolved stamp and history row."""
    monkeypatch.setattr(sizes, "ENGINE_CEILING", 230_000)
    small = Engine(engine.lake, clock=engine.clock, limits=Limits(instance_bytes=200_000))
    noted = parent()
    noted["fields"].append({"name": "note", "type": "string", "editable": True})
    await small.deploy([child(), noted])
    pid = (await small.start_instance("p", fields=items(*[f"r{n}" for n in range(100)])
                                      )).instance.id_
    await small.fire_action(pid, "go", "go")
    refused = None
    for n in range(30):
        try:
            await small.edit_field(pid, "note", str(n) * 10_000)
        except InstanceTooLarge as exc:
            refused = exc
            break
    assert refused is not None
    assert refused.details["reserved"] == sizes.RESOLUTION_BYTES * 100
    assert refused.details["size"] <= 200_000  # refused for the reserve, under the limit
    aborted = await small.abort_instance(pid, reason="cancel")
    assert aborted.instance.owesAborts is None
    assert all(row.resolved is not None for row in aborted.instance.subworkflows)
    assert len(bson.encode(await stored(small, pid))) <= 230_000
    assert await small.lake.count({"owesAborts": True}) == 0
