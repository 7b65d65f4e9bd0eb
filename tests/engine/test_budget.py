"""The failure budget (``spawn.failureBudget``, ``onBudgetExceeded``, ``updateCohort``)
against the embedded lake (docs/subworkflows.md#the-failure-budget)."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.core.errors import DefinitionInvalid, InjectedFault
from kinflow.core.state import Instance
from kinflow.engine import Engine
from kinflow.errors import InvalidInput
from kinflow.worker import Worker
from tests.engine.cohort_defs import WAITING, items, parent
from tests.engine.invariants import assert_repaired
from tests.engine.outcome_defs import worker

pytestmark = pytest.mark.lake


def budgeted(budget: dict[str, Any] | None, *, policy: str | None = None,
             max_active: int | None = None, exit_on_failure: bool = True) -> dict[str, Any]:
    """``p`` whose spawn declares ``budget``; ``exit_on_failure``: review's first
    transition leaves for ``failed`` on ``$anyActivityFailed``."""
    definition = parent(settled=WAITING)
    review = definition["stages"][1]
    spawn = review["activities"][0]["actions"][0]["spawn"]
    if budget is not None:
        spawn["failureBudget"] = budget
    if policy is not None:
        spawn["onBudgetExceeded"] = policy
    if max_active is not None:
        spawn["maxActive"] = max_active
    if exit_on_failure:
        review["transitions"].insert(0, {"name": "to-failed", "to": "failed",
                                         "when": "$anyActivityFailed"})
        definition["stages"].append({"name": "failed"})
    return definition


NAMES = [f"n{i}" for i in range(6)]


async def start(engine: Engine, definition: dict[str, Any], names: list[str] = NAMES
                ) -> Instance:
    await engine.deploy([definition, worker()])
    begun = await engine.start_instance("p", fields=items(*names))
    return (await engine.fire_action(begun.instance.id_, "go", "go")).instance


async def child_ids(engine: Engine, parent_id: str) -> dict[str, str]:
    instance = await engine.get_instance(parent_id)
    return {r.rowKey: r.child_id for r in instance.subworkflows}


def views(instance: Instance) -> dict[str, dict[str, Any]]:
    return {r["rowKey"]: r for r in subworkflow_rows(instance, instance.open_entry())}


def cohort_failed(instance: Instance) -> list[dict[str, Any]]:
    return [h for h in instance.history if h.get("_type") == "cohortFailed"]


def activity_status(instance: Instance, stage: str = "review") -> str:
    entry = next(e for e in reversed(instance.stages) if e.name == stage)
    found = entry.activity("translate")
    assert found is not None
    return found.status


async def fail(engine: Engine, child_id: str) -> None:
    await engine.fire_action(child_id, "task", "give-up")


async def test_count_budget_tolerates_n_failures_and_acts_on_the_next(engine: Engine) -> None:
    p = await start(engine, budgeted({"count": 2}, max_active=4))
    ids = await child_ids(engine, p.id_)
    await fail(engine, ids["n0"])
    await fail(engine, ids["n1"])
    held = await engine.get_instance(p.id_)
    assert held.currentStage == "review" and activity_status(held) == "active"
    assert cohort_failed(held) == []
    assert [views(held)[n]["status"] for n in NAMES] == (
        ["done", "done", "active", "active", "active", "active"])  # the window refilled

    await fail(engine, ids["n2"])  # the third failure: strictly more than 2
    after = await engine.get_instance(p.id_)
    assert activity_status(after) == "failed"
    assert after.currentStage == "failed"  # the $anyActivityFailed transition fired
    rows = {r.rowKey: r for r in after.subworkflows}
    assert [rows[n].outcome for n in NAMES[:3]] == ["failed"] * 3
    for name in ("n3", "n4", "n5"):  # live under abort-rest: condemned and drained
        assert rows[name].outcome == "aborted" and rows[name].abortReason == (
            "failure-budget-exceeded")
    children = {d["_id"]: d for d in await engine.lake.find(
        {"_type": "kinflow.instance", "parentInstance": p.id_})}
    assert all(children[ids[n]].get("abortedAt") for n in ("n3", "n4", "n5"))
    entries = cohort_failed(after)
    assert len(entries) == 1
    assert entries[0]["activity"] == "translate" and entries[0]["budget"] == {"count": 2}
    assert entries[0]["failed"] == 3 and entries[0]["onBudgetExceeded"] == "abort-rest"
    await assert_repaired(engine)


async def test_queued_rows_are_skipped_and_history_records_it_once(engine: Engine) -> None:
    p = await start(engine, budgeted({"count": 0}, max_active=2, exit_on_failure=False))
    ids = await child_ids(engine, p.id_)
    await fail(engine, ids["n0"])
    after = await engine.get_instance(p.id_)
    rows = {r.rowKey: r for r in after.subworkflows}
    for name in NAMES[2:]:
        assert rows[name].resolved is not None and rows[name].resolved.aborted
        assert rows[name].outcome == "aborted"
        assert rows[name].abortReason == "failure-budget-exceeded"
        assert not rows[name].queued
    children = await engine.lake.find({"_type": "kinflow.instance", "parentInstance": p.id_})
    assert sorted(c["_id"] for c in children) == sorted([ids["n0"], ids["n1"]])  # none started
    assert views(after)["n5"]["status"] == "aborted"
    assert after.currentStage == "review" and activity_status(after) == "failed"
    # later finishes and the heartbeat never record it again
    await engine.tick(p.id_)
    await Worker(engine, grace_seconds=0).run_pass()
    assert len(cohort_failed(await engine.get_instance(p.id_))) == 1
    await assert_repaired(engine)


async def test_continue_lets_live_children_finish(engine: Engine) -> None:
    p = await start(engine, budgeted({"count": 0}, policy="continue", max_active=3,
                                     exit_on_failure=False))
    ids = await child_ids(engine, p.id_)
    await fail(engine, ids["n0"])
    after = await engine.get_instance(p.id_)
    rows = {r.rowKey: r for r in after.subworkflows}
    assert rows["n1"].resolved is None and rows["n1"].abortPending is None
    assert rows["n2"].resolved is None and rows["n2"].abortPending is None
    assert all(rows[n].abortReason == "failure-budget-exceeded" for n in NAMES[3:])
    assert activity_status(after) == "failed"
    await engine.fire_action(ids["n1"], "task", "finish", params={"words": 3})
    await fail(engine, ids["n2"])
    done = await engine.get_instance(p.id_)
    rows = {r.rowKey: r for r in done.subworkflows}
    assert rows["n1"].outcome == "succeeded" and rows["n2"].outcome == "failed"
    assert len(cohort_failed(done)) == 1
    await assert_repaired(engine)


async def test_percent_budget_counts_queued_rows_in_the_total(engine: Engine) -> None:
    names = [f"r{i}" for i in range(10)]  # 20 % of 10 rows: 2 failures fine, 3 act
    p = await start(engine, budgeted({"percent": 20}, max_active=5), names)
    ids = await child_ids(engine, p.id_)
    await fail(engine, ids["r0"])
    await fail(engine, ids["r1"])
    held = await engine.get_instance(p.id_)
    assert activity_status(held) == "active" and cohort_failed(held) == []
    await fail(engine, ids["r2"])
    after = await engine.get_instance(p.id_)
    assert after.currentStage == "failed"
    assert cohort_failed(after)[0]["budget"] == {"percent": 20.0}
    assert cohort_failed(after)[0]["total"] == 10
    assert all(r.resolved is not None for r in after.subworkflows)
    await assert_repaired(engine)


async def test_without_a_budget_nothing_acts(engine: Engine) -> None:
    p = await start(engine, budgeted(None, max_active=2))
    ids = await child_ids(engine, p.id_)
    await fail(engine, ids["n0"])
    await fail(engine, ids["n1"])
    after = await engine.get_instance(p.id_)
    assert activity_status(after) == "active" and cohort_failed(after) == []
    assert sum(1 for r in after.subworkflows if r.queued) == 2


async def test_update_cohort_lowers_and_raises_the_budget(engine: Engine) -> None:
    p = await start(engine, budgeted({"count": 5}, max_active=3))
    ids = await child_ids(engine, p.id_)
    await fail(engine, ids["n0"])
    raised = await engine.update_cohort(p.id_, "translate", failure_budget={"count": 3})
    assert activity_status(raised) == "active"  # 1 failure within 3
    assert raised.cohorts is not None and raised.cohorts[0].failureBudget == {"count": 3}
    lowered = await engine.update_cohort(p.id_, "translate", failure_budget={"count": 0})
    assert lowered.currentStage == "failed"  # already exceeded: it acts at once
    assert activity_status(lowered) == "failed" and len(cohort_failed(lowered)) == 1
    assert all(r.resolved is not None for r in lowered.subworkflows)
    with pytest.raises(InvalidInput) as bad:
        await engine.update_cohort(p.id_, "translate",
                                   failure_budget={"count": 1, "percent": 5})
    assert bad.value.code == "invalid-input"
    for shape in ({"count": -1}, {"percent": 0}, {"percent": 101}, {"ratio": 1}, 3):
        with pytest.raises(InvalidInput):
            await engine.update_cohort(p.id_, "translate", failure_budget=shape)


async def test_a_crash_between_the_crossing_stamp_and_the_aborts_is_repaired(
        engine: Engine) -> None:
    p = await start(engine, budgeted({"count": 0}, max_active=3, exit_on_failure=False))
    ids = await child_ids(engine, p.id_)
    engine.faults.arm("before-drain")
    with pytest.raises(InjectedFault):
        await fail(engine, ids["n0"])
    left = await engine.get_instance(p.id_)
    rows = {r.rowKey: r for r in left.subworkflows}
    assert activity_status(left) == "failed" and len(cohort_failed(left)) == 1
    assert rows["n1"].abortPending is not None and rows["n1"].resolved is None
    assert left.owesAborts
    engine.faults.disarm()
    report = await Worker(engine, grace_seconds=0).run_pass()
    assert not report.failed, report.failed
    repaired = await engine.get_instance(p.id_)
    assert all(r.resolved is not None for r in repaired.subworkflows)
    assert {r.rowKey: r.outcome for r in repaired.subworkflows} == {
        "n0": "failed", **{n: "aborted" for n in NAMES[1:]}}
    assert len(cohort_failed(repaired)) == 1
    await assert_repaired(engine)


async def test_deploy_refuses_bad_budgets_in_one_definition_invalid(engine: Engine) -> None:
    bad = budgeted({"count": 1, "percent": 5}, policy="cancel-rest")
    spawn = bad["stages"][1]["activities"][0]["actions"][0]["spawn"]
    with pytest.raises(DefinitionInvalid) as refused:
        await engine.deploy([bad, worker()])
    text = str(refused.value.details)
    assert "exactly one" in text
    for budget, policy in (({"count": -1}, None), ({"percent": 0}, None),
                           ({"percent": 120}, None), ({"count": 1.5}, None),
                           ({"ratio": 3}, None), ({"count": 1}, "give-up"),
                           (None, "continue")):
        spawn.pop("onBudgetExceeded", None)
        spawn.pop("failureBudget", None)
        if budget is not None:
            spawn["failureBudget"] = budget
        if policy is not None:
            spawn["onBudgetExceeded"] = policy
        with pytest.raises(DefinitionInvalid):
            await engine.deploy([bad, worker()])


async def test_children_failing_inside_the_spawn_exceed_the_budget_in_that_hop(
        engine: Engine) -> None:
    failing = worker()  # every child ends in its failed stage at once
    failing["stages"][0] = {"name": "work", "transitions": [
        {"name": "to-gave-up", "to": "gave-up", "when": "true"},
        {"name": "to-done", "to": "done", "when": "false"}]}
    await engine.deploy([budgeted({"count": 1}, max_active=2), failing])
    begun = await engine.start_instance("p", fields=items(*NAMES))
    p = (await engine.fire_action(begun.instance.id_, "go", "go")).instance
    assert p.currentStage == "failed"  # not "next": the settled gate never fired
    assert activity_status(p) == "failed" and len(cohort_failed(p)) == 1
    assert {r.outcome for r in p.subworkflows} == {"failed"}
    await assert_repaired(engine)


async def test_a_redrive_returns_the_failed_activity_and_the_budget_acts_again(
        engine: Engine) -> None:
    p = await start(engine, budgeted({"count": 0}, max_active=2, exit_on_failure=False))
    ids = await child_ids(engine, p.id_)
    await fail(engine, ids["n0"])
    assert activity_status(await engine.get_instance(p.id_)) == "failed"
    result = await engine.redrive_cohort(p.id_, "translate")
    print(f"redrive: {result}")
    redriven = await engine.get_instance(p.id_)
    assert activity_status(redriven) == "active"  # still in the visit: reopened
    assert len(cohort_failed(redriven)) == 1
    live = {r.rowKey: r.child_id for r in redriven.subworkflows if r.resolved is None
            and not r.queued}
    assert live and "n0" in live and live["n0"] != ids["n0"]
    await fail(engine, live["n0"])  # the second attempt fails too: the budget acts again
    again = await engine.get_instance(p.id_)
    assert activity_status(again) == "failed" and len(cohort_failed(again)) == 2
    await assert_repaired(engine)
