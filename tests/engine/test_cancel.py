"""Graceful cancellation on the lake: cancelInstance, onCancel, onExit: cancel, the
cancel stage's cleanup, the timeout, abort winning, crash repair and cancel-rest."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kinflow.core.cohort import tallies
from kinflow.core.errors import ActionDisabled, ContractViolation, InjectedFault
from kinflow.define.loading import load_definitions
from kinflow.engine import EffectCall, Engine
from kinflow.plugins import import_module
from kinflow.worker import Worker
from tests.engine.cancel_defs import exits, family, leaf, spawner
from tests.engine.conftest import Clock
from tests.engine.invariants import all_instances, assert_repaired

pytestmark = pytest.mark.lake
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def record_cleanups(engine: Engine, *names: str) -> Counter[tuple[str, str]]:
    """Register a handler for each cleanup effect; the counter says who ran what."""
    calls: Counter[tuple[str, str]] = Counter()
    for name in names:
        def release(call: EffectCall, name: str = name) -> dict[str, Any]:
            calls[(name, call.instance_id)] += 1
            return {}
        engine.register_handler(name, release)
    return calls


async def heartbeat(engine: Engine) -> None:
    engine.faults.disarm()
    report = await Worker(engine, grace_seconds=0).run_pass()
    assert not report.failed, report.failed


def members(instances: dict[str, Any], definition: str) -> list[Any]:
    return sorted((i for i in instances.values() if i.definition == definition),
                  key=lambda i: i.id_)


async def test_a_family_cancelled_at_the_root_cleans_up_bottom_up(engine: Engine) -> None:
    await engine.deploy(family())
    root = (await engine.start_instance("cx-root")).instance.id_
    cancelled = await engine.cancel_instance(root, reason="event called off")
    assert cancelled.instance.terminal_state == "cancelling"
    assert cancelled.instance.currentStage == "cleanup"
    instances = await all_instances(engine)
    assert len(instances) == 7
    assert {i.terminal_state for i in instances.values()} == {"cancelling"}
    assert {i.currentStage for i in instances.values()} == {"cleanup"}
    # every row reads its child cancelling, and stays active
    for parent in [instances[root], *members(instances, "cx-mid")]:
        assert [(r.resolved, r.observed and r.observed.cancelling)
                for r in parent.subworkflows] == [(None, True), (None, True)]
    calls = record_cleanups(engine, "release-cx-root", "release-cx-mid", "release-cx-leaf")
    leaves = members(instances, "cx-leaf")
    for instance in [instances[root], *members(instances, "cx-mid"), *leaves[:-1]]:
        await engine.drain_effects(instance.id_)
    waiting = await all_instances(engine)
    # the last grandchild still cleans up: it, its mid and the root wait; the rest are done
    still = {root, leaves[-1].id_, leaves[-1].parentInstance}
    assert {iid: i.terminal_state for iid, i in waiting.items()} == {
        iid: "cancelling" if iid in still else "cancelled" for iid in waiting}
    await engine.drain_effects(leaves[-1].id_)
    done = await all_instances(engine)
    assert {i.terminal_state for i in done.values()} == {"cancelled"}
    assert all(i.currentStage == "released" and i.result and i.result.outcome == "cancelled"
               for i in done.values())
    assert len(calls) == 7 and set(calls.values()) == {1}  # each cleanup exactly once
    last_leaf = done[leaves[-1].id_]
    assert done[root].cancelledAt is not None and last_leaf.cancelledAt is not None
    assert done[root].cancelledAt >= last_leaf.cancelledAt
    assert all(r.outcome == "cancelled" and r.resolved and r.resolved.cancelled
               for i in done.values() for r in i.subworkflows)
    kinds = [e["_type"] for e in done[root].history]
    assert kinds.index("cancelRequested") < kinds.index("cancelled")
    await heartbeat(engine)
    await assert_repaired(engine)


async def test_a_cleanup_that_never_ends_is_aborted_at_the_timeout(
        engine: Engine, clock: Clock) -> None:
    await engine.deploy([leaf(timeout=60), spawner("cx-top", "cx-leaf", ["x"], cleanup=False)])
    top = (await engine.start_instance("cx-top")).instance.id_
    started = await engine.cancel_instance(top)
    assert started.instance.terminal_state == "cancelling"
    child_id = started.instance.subworkflows[0].child_id
    child = await engine.get_instance(child_id)
    assert child.terminal_state == "cancelling" and child.nextEvaluationAt is not None
    assert child.nextEvaluationAt.startswith("2026-01-01T12:01:00")
    await heartbeat(engine)  # nothing is due yet
    assert (await engine.get_instance(top)).terminal_state == "cancelling"
    clock.advance(seconds=61)
    await heartbeat(engine)
    aborted = await engine.get_instance(child_id)
    assert aborted.terminal_state == "aborted"
    assert [e.get("reason") for e in aborted.history if e["_type"] == "aborted"] == [
        "cancel-timeout"]
    parent = await engine.get_instance(top)
    assert parent.terminal_state == "cancelled"
    assert [r.outcome for r in parent.subworkflows] == ["aborted"]
    await assert_repaired(engine)


async def test_an_abort_during_cancellation_wins(engine: Engine) -> None:
    await engine.deploy(family())
    root = (await engine.start_instance("cx-root")).instance.id_
    await engine.cancel_instance(root)
    calls = record_cleanups(engine, "release-cx-root", "release-cx-mid", "release-cx-leaf")
    aborted = await engine.abort_instance(root, reason="operator gave up waiting")
    assert aborted.instance.terminal_state == "aborted"
    instances = await all_instances(engine)
    assert {i.terminal_state for i in instances.values()} == {"aborted"}
    assert all(not i.pendingEffects for i in instances.values())  # cleanups cancelled
    await heartbeat(engine)
    assert not calls
    assert all(r.outcome == "aborted" for i in instances.values() for r in i.subworkflows)
    await assert_repaired(engine)


async def test_on_exit_cancel_abort_and_detach_side_by_side(engine: Engine) -> None:
    await engine.deploy([leaf(), exits()])
    parent = (await engine.start_instance("cx-exits")).instance.id_
    moved = await engine.fire_action(parent, "manage", "leave")
    assert moved.instance.currentStage == "after"  # it does not wait for the cancel
    rows = {r.rowKey: r for r in moved.instance.subworkflows}
    assert rows["abort"].outcome == "aborted"
    assert rows["cancel"].resolved is None and rows["cancel"].observed
    assert rows["cancel"].observed.cancelling
    assert rows["detach"].resolved is None and rows["detach"].cancelPending is None
    children = {key: await engine.get_instance(r.child_id) for key, r in rows.items()}
    assert children["abort"].terminal_state == "aborted"
    assert children["cancel"].terminal_state == "cancelling"
    assert children["cancel"].currentStage == "cleanup"
    assert children["detach"].terminal_state == "active"
    calls = record_cleanups(engine, "release-cx-leaf")
    await engine.drain_effects(children["cancel"].id_)
    assert list(calls.values()) == [1]
    after = {r.rowKey: r for r in (await engine.get_instance(parent)).subworkflows}
    assert after["cancel"].outcome == "cancelled" and after["detach"].resolved is None
    await engine.fire_action(children["detach"].id_, "task", "finish")
    final = {r.rowKey: r.outcome for r in (await engine.get_instance(parent)).subworkflows}
    assert final == {"abort": "aborted", "cancel": "cancelled", "detach": "succeeded"}
    await assert_repaired(engine)


async def test_on_cancel_detach_leaves_the_child_running(engine: Engine) -> None:
    await engine.deploy([leaf(), spawner("cx-loose", "cx-leaf", ["x", "y"], cleanup=False,
                                         on_cancel="detach")])
    parent = (await engine.start_instance("cx-loose")).instance.id_
    cancelled = await engine.cancel_instance(parent)
    assert cancelled.instance.terminal_state == "cancelled"  # nothing to wait for
    assert all(r.detached and r.resolved is None for r in cancelled.instance.subworkflows)
    first = cancelled.instance.subworkflows[0].child_id
    child = await engine.get_instance(first)
    assert child.terminal_state == "active" and child.currentStage == "work"
    finished = await engine.fire_action(first, "task", "finish")
    assert finished.instance.terminal_state == "completed"
    rows = (await engine.get_instance(parent)).subworkflows
    assert [r.outcome for r in rows] == ["succeeded", None]
    await assert_repaired(engine)


@pytest.mark.parametrize("point", ["before-cancel-children", "before-cancel-stamp"])
async def test_a_crash_inside_a_cancellation_is_repaired_by_one_pass(
        engine: Engine, point: str) -> None:
    await engine.deploy([leaf(cleanup=False),
                         spawner("cx-mid", "cx-leaf", ["x", "y"], cleanup=False,
                                 lifecycle="child"),
                         spawner("cx-root", "cx-mid", ["m1", "m2"], cleanup=False)])
    root = (await engine.start_instance("cx-root")).instance.id_
    engine.faults.arm(point)
    with pytest.raises(InjectedFault):
        await engine.cancel_instance(root)
    left = await all_instances(engine)
    assert left[root].terminal_state == "cancelling" and left[root].owesCancels
    if point == "before-cancel-stamp":  # a leaf is CANCELLED, its mid's row unstamped
        told = [i for i in members(left, "cx-leaf") if i.terminal_state == "cancelled"]
        assert told and all(i.propagateTo for i in told)
    await heartbeat(engine)
    instances = await assert_repaired(engine)
    assert {i.terminal_state for i in instances.values()} == {"cancelled"}


async def test_cancel_rest_cancels_the_live_rows_when_the_budget_is_exceeded(
        engine: Engine) -> None:
    await engine.deploy([leaf(), spawner("cx-budget", "cx-leaf", ["x", "y", "z"],
                                         cleanup=False, budget={"count": 0},
                                         policy="cancel-rest")])
    parent = (await engine.start_instance("cx-budget")).instance.id_
    rows = (await engine.get_instance(parent)).subworkflows
    await engine.fire_action(rows[0].child_id, "task", "give-up")
    acted = await engine.get_instance(parent)
    by_key = {r.rowKey: r for r in acted.subworkflows}
    assert by_key["x"].outcome == "failed"
    for key in ("y", "z"):
        assert by_key[key].resolved is None and by_key[key].observed
        assert by_key[key].observed.cancelling
        assert by_key[key].abortReason == "failure-budget-exceeded"
    assert [e["onBudgetExceeded"] for e in acted.history if e["_type"] == "cohortFailed"] == [
        "cancel-rest"]
    calls = record_cleanups(engine, "release-cx-leaf")
    for key in ("y", "z"):
        await engine.drain_effects(by_key[key].child_id)
    final = {r.rowKey: r.outcome for r in (await engine.get_instance(parent)).subworkflows}
    assert final == {"x": "failed", "y": "cancelled", "z": "cancelled"}
    assert len(calls) == 2
    summary = (await engine.get_instance(parent)).cohortRows or []
    counts = tallies.counts(summary[0])  # the budget's cancels are not failures
    assert (counts.failed, counts.cancelled, counts.stopped) == (1, 2, 2)
    await assert_repaired(engine)


async def test_cancelling_a_finished_instance_is_refused_and_keys_replay(
        engine: Engine) -> None:
    await engine.deploy([leaf()])
    done = (await engine.start_instance("cx-leaf")).instance.id_
    await engine.fire_action(done, "task", "finish")
    with pytest.raises(ActionDisabled) as refused:
        await engine.cancel_instance(done)
    assert refused.value.code == "action-disabled"
    assert refused.value.details["reason"] == "instance-completed"
    live = (await engine.start_instance("cx-leaf")).instance.id_
    first = await engine.cancel_instance(live, reason="r", idempotency_key="k-1")
    again = await engine.cancel_instance(live, reason="r", idempotency_key="k-1")
    assert first.instance.cancellingAt == again.instance.cancellingAt and not again.changed
    with pytest.raises(ContractViolation) as reused:
        await engine.cancel_instance(live, reason="other", idempotency_key="k-1")
    assert reused.value.details["reason"] == "idempotency-key-reused"
    twice = await engine.cancel_instance(live)  # already cancelling: nothing changes
    assert twice.instance.cancellingAt == first.instance.cancellingAt
    assert [e["_type"] for e in twice.instance.history].count("cancelRequested") == 1


async def test_the_seat_booking_example_releases_every_held_seat(engine: Engine) -> None:
    await engine.deploy(load_definitions(EXAMPLES / "definitions" / "seat-booking.json"))
    booking = (await engine.start_instance(
        "event-booking", fields={"seats": [{"seat": s} for s in ("A1", "A2", "A3")]})).instance
    holds = {r.rowKey: r.child_id for r in booking.subworkflows}
    await engine.fire_action(holds["A1"], "hold", "confirm")  # A1 is already confirmed
    cancelled = await engine.cancel_instance(booking.id_, reason="the event was called off")
    assert cancelled.instance.terminal_state == "cancelling"
    rows = {r.rowKey: r for r in cancelled.instance.subworkflows}
    assert rows["A1"].outcome == "succeeded"
    assert all(rows[s].observed and rows[s].observed.cancelling for s in ("A2", "A3"))
    assert (await engine.get_instance(holds["A2"])).currentStage == "releasing"
    handlers = import_module(str(EXAMPLES / "handlers.py"))
    handlers.register(engine)
    released = handlers.RELEASED
    await heartbeat(engine)  # the worker runs the release-seat effects
    done = await engine.get_instance(booking.id_)
    assert done.terminal_state == "cancelled" and done.cancelReason == "the event was called off"
    assert {r.rowKey: r.outcome for r in done.subworkflows} == {
        "A1": "succeeded", "A2": "cancelled", "A3": "cancelled"}
    assert sorted(released) == ["A2", "A3"]
    await assert_repaired(engine)
