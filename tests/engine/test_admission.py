"""Admission against the embedded lake: pause/resume (across a restart), priority and
keyed windows at spawn and on refill, the start rate driven by the heartbeat, and
``onBudgetExceeded: "pause"``."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.cohort import admission
from kinflow.core.errors import CohortNotFound
from kinflow.core.state import Instance
from kinflow.engine import Engine
from kinflow.storage import Lake
from kinflow.worker import Worker
from tests.engine.conftest import Clock
from tests.engine.invariants import assert_repaired
from tests.engine.test_budget import budgeted, start

pytestmark = pytest.mark.lake

NAMES = ["a", "b", "c", "d", "e"]
PRIORITY = "select($row == 'e' => 10, $row == 'c' => 5, 0)"
KEY = "select($row in ['a', 'b'] => 'x', 'y')"


def admitted(max_active: int | None = 2, **spawn: Any) -> dict[str, Any]:
    definition = budgeted(spawn.pop("failureBudget", None), max_active=max_active,
                          policy=spawn.pop("onBudgetExceeded", None), exit_on_failure=False)
    definition["stages"][1]["activities"][0]["actions"][0]["spawn"].update(spawn)
    return definition


def live(instance: Instance) -> list[str]:
    return [r.rowKey for r in instance.subworkflows if not r.queued and r.resolved is None]


def cohort(instance: Instance) -> tuple[str, str]:
    return "translate", instance.subworkflows[0].stageEntry


async def children(engine: Engine, parent_id: str) -> set[str]:
    found = await engine.lake.find({"_type": "kinflow.instance", "parentInstance": parent_id})
    return {d["_id"] for d in found}


async def finish(engine: Engine, instance: Instance, key: str) -> Instance:
    row = next(r for r in instance.subworkflows if r.rowKey == key)
    await engine.fire_action(row.child_id, "task", "finish", params={"words": 1})
    return await engine.get_instance(instance.id_)


async def test_pause_holds_starts_survives_a_restart_and_resume_starts_them(
        engine: Engine, lake: Lake, clock: Clock) -> None:
    p = await start(engine, admitted(2), NAMES)
    paused = await engine.pause_cohort(p.id_, "translate", reason="search is down",
                                       idempotency_key="pause-1")
    own = admission.setting(paused, cohort(paused))
    assert own is not None and own.pausedReason == "search is down"
    assert [h["_type"] for h in paused.history].count("cohortPaused") == 1
    after = await finish(engine, paused, "a")
    assert live(after) == ["b"]  # the finished child's place stays empty
    assert len(await children(engine, p.id_)) == 2
    restarted = Engine(lake, clock=clock)  # a new process over the same lake
    await restarted.ensure_ready()
    await Worker(restarted, grace_seconds=0).run_pass()
    await restarted.tick(p.id_)
    again = await restarted.pause_cohort(p.id_, "translate", reason="other")
    assert admission.setting(again, cohort(again)).pausedReason == "search is down"  # type: ignore[union-attr]
    assert live(again) == ["b"]
    resumed = await restarted.resume_cohort(p.id_, "translate", idempotency_key="resume-1")
    assert live(resumed) == ["b", "c"]
    own = admission.setting(resumed, cohort(resumed))
    assert own is not None and own.pausedAt is None and own.pausedReason is None
    types = [h["_type"] for h in resumed.history]
    assert types.count("cohortPaused") == 1 and types.count("cohortResumed") == 1
    replay = await restarted.resume_cohort(p.id_, "translate", idempotency_key="resume-1")
    assert [h["_type"] for h in replay.history].count("cohortResumed") == 1
    with pytest.raises(CohortNotFound):
        await restarted.pause_cohort(p.id_, "edit")
    await assert_repaired(restarted)


async def test_a_window_raised_while_paused_applies_on_resume(engine: Engine) -> None:
    p = await start(engine, admitted(1), NAMES)
    await engine.pause_cohort(p.id_, "translate")
    raised = await engine.update_cohort(p.id_, "translate", max_active=3)
    assert live(raised) == ["a"]
    assert live(await engine.resume_cohort(p.id_, "translate")) == ["a", "b", "c"]


async def test_priority_and_keys_choose_the_first_rows_and_the_refills(engine: Engine) -> None:
    p = await start(engine, admitted(3, priority=PRIORITY, concurrencyKey=KEY,
                                     maxActivePerKey=1), NAMES)
    assert live(p) == ["a", "e"]  # e (10, y) first; c (5, y) waits for its key; a (x)
    assert {r.rowKey: (r.priority, r.concurrencyKey) for r in p.subworkflows} == {
        "a": (0.0, "x"), "b": (0.0, "x"), "c": (5.0, "y"), "d": (0.0, "y"), "e": (10.0, "y")}
    assert len(await children(engine, p.id_)) == 2
    after = await finish(engine, p, "e")
    assert live(after) == ["a", "c"]  # c before d: higher priority
    after = await finish(engine, after, "a")
    assert live(after) == ["b", "c"]
    widened = await engine.update_cohort(p.id_, "translate", max_active_per_key=2)
    assert live(widened) == ["b", "c", "d"]
    await assert_repaired(engine)


async def test_the_start_rate_is_kept_and_the_heartbeat_starts_the_next(
        engine: Engine, clock: Clock) -> None:
    p = await start(engine, admitted(None, startRate={"count": 2, "perSeconds": 60}), NAMES)
    assert live(p) == ["a", "b"]
    clock.advance(seconds=30)
    await Worker(engine, grace_seconds=0).run_pass()
    assert live(await engine.get_instance(p.id_)) == ["a", "b"]
    clock.advance(seconds=30)  # the first starts leave the window: the parent is due
    await Worker(engine, grace_seconds=0).run_pass()
    later = await engine.get_instance(p.id_)
    assert live(later) == ["a", "b", "c", "d"]
    slowed = await engine.update_cohort(p.id_, "translate",
                                        start_rate={"count": 1, "perSeconds": 600})
    clock.advance(seconds=120)
    await Worker(engine, grace_seconds=0).run_pass()
    assert live(await engine.get_instance(slowed.id_)) == ["a", "b", "c", "d"]
    await assert_repaired(engine)


async def test_on_budget_exceeded_pause_pauses_and_a_resume_goes_on(engine: Engine) -> None:
    p = await start(engine, admitted(2, failureBudget={"count": 0}, onBudgetExceeded="pause"),
                    NAMES)
    first = next(r for r in p.subworkflows if r.rowKey == "a")
    await engine.fire_action(first.child_id, "task", "give-up")
    after = await engine.get_instance(p.id_)
    own = admission.setting(after, cohort(after))
    assert own is not None and own.pausedReason == "failure-budget-exceeded"
    types = [h["_type"] for h in after.history]
    assert "cohortFailed" not in types and types.count("cohortPaused") == 1
    assert live(after) == ["b"] and [r.rowKey for r in after.subworkflows if r.queued] == [
        "c", "d", "e"]
    entry = after.open_entry()
    assert entry is not None and entry.activity("translate").status != "failed"  # type: ignore[union-attr]
    resumed = await engine.resume_cohort(p.id_, "translate")
    assert live(resumed) == ["b", "c"]
    own = admission.setting(resumed, cohort(resumed))
    assert own is not None and own.pausedReason is None
    await assert_repaired(engine)
