"""``redriveCohort`` and the bulk machinery against the embedded lake.

The parent's gate waits until every row of the cohort succeeded, so failed,
aborted and cancelled rows keep it in the spawning stage visit, where a
redrive is allowed.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from kinflow.core.cohort import spawn
from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.core.cohort.selection import CohortFilter
from kinflow.core.context import Limits
from kinflow.core.errors import (
    CohortNotFound,
    IdempotencyKeyReused,
    InjectedFault,
    RedriveNotAllowed,
)
from kinflow.core.state import Instance
from kinflow.engine import Engine
from kinflow.groq import GroqSyntaxError
from kinflow.storage import Lake
from kinflow.worker import Worker
from tests.engine.cohort_defs import items, parent
from tests.engine.conftest import Clock
from tests.engine.definitions import simple
from tests.engine.invariants import assert_repaired
from tests.engine.outcome_defs import worker

pytestmark = pytest.mark.lake

ALL_SUCCEEDED = ("count($subworkflows[activity == 'translate' && current"
                 " && outcome != 'succeeded']) == 0")


def flaky() -> dict[str, Any]:
    """A child that finishes at once: ``failed`` when its item starts with ``f``."""
    work = {"name": "work", "transitions": [
        {"name": "to-gave-up", "to": "gave-up", "when": "string::startsWith($fields.item, 'f')"},
        {"name": "to-done", "to": "done", "when": "true"}]}
    return simple("c", [work, {"name": "done"}, {"name": "gave-up", "outcome": "failed"}],
                  lifecycle="child", outputs=["item"],
                  fields=[{"name": "item", "type": "string", "initialValue": {"type": "input"}}])


async def begin(engine: Engine, *names: str, child: dict[str, Any] | None = None) -> Instance:
    await engine.deploy([parent(settled=ALL_SUCCEEDED), child or worker()])
    started = await engine.start_instance("p", fields=items(*names))
    return (await engine.fire_action(started.instance.id_, "go", "go")).instance


def rows(instance: Instance) -> dict[str, dict[str, Any]]:
    return {r["rowKey"]: r for r in subworkflow_rows(instance, instance.open_entry())}


def ids(instance: Instance) -> dict[str, str]:
    return {key: row["_id"] for key, row in rows(instance).items()}


async def fail(engine: Engine, child_id: str) -> None:
    await engine.fire_action(child_id, "task", "give-up")


async def document(engine: Engine, child_id: str) -> dict[str, Any]:
    found = await engine.lake.find({"_id": child_id})
    assert len(found) == 1
    return found[0]


async def test_redrive_starts_new_attempts_of_failed_rows_only(engine: Engine) -> None:
    p = await begin(engine, "a", "b", "c", "d")
    first = ids(p)
    await engine.fire_action(first["a"], "task", "finish", params={"words": 3})
    await fail(engine, first["b"])
    await engine.abort_instance(first["c"], reason="stuck")
    succeeded = await document(engine, first["a"])

    result = await engine.redrive_cohort(p.id_, "translate")
    print(result)
    assert (result.matched, result.applied, result.skipped, result.refusals) == (4, 2, 2, [])
    p = await engine.get_instance(p.id_)
    seen = rows(p)
    entry = p.open_entry()
    assert p.currentStage == "review" and entry is not None
    # succeeded and live rows untouched: same child, same document
    assert seen["a"]["_id"] == first["a"] and seen["a"]["outcome"] == "succeeded"
    assert await document(engine, first["a"]) == succeeded
    assert seen["d"]["_id"] == first["d"] and seen["d"]["attempt"] == 1
    for key in ("b", "c"):
        expected = spawn.child_id(p.id_, entry.key_, "translate", "fan-out", key, attempt=2)
        assert seen[key]["_id"] == expected == spawn.attempt_id(first[key], 2)
        assert (seen[key]["status"], seen[key]["outcome"]) == ("active", None)
        assert (seen[key]["attempt"], seen[key]["previousChildIds"]) == (2, [first[key]])
        child = await document(engine, expected)
        assert child["parentInstance"] == p.id_
        assert [f["value"] for f in child["fields"] if f["name"] == "item"] == [key]
    # the old attempts' history stays with the row; the redrive is recorded
    kinds = [(h["_type"], h["instanceRef"]["id"].rsplit(":", 1)[-1]) for h in p.history
             if h["_type"] in ("spawned", "subworkflowRedriven")]
    assert ("spawned", first["b"]) in kinds and ("subworkflowRedriven", seen["b"]["_id"]) in kinds

    for key in ("b", "c", "d"):
        await engine.fire_action(seen[key]["_id"], "task", "finish", params={"words": 1})
    done = await engine.get_instance(p.id_)
    assert done.currentStage == "next"
    await assert_repaired(engine)


async def test_a_replay_under_the_same_key_never_redrives_a_row_twice(engine: Engine) -> None:
    p = await begin(engine, "a", "b")
    first = ids(p)
    await fail(engine, first["a"])
    await engine.fire_action(first["b"], "task", "finish", params={"words": 2})

    once = await engine.redrive_cohort(p.id_, "translate", idempotency_key="k1")
    assert (once.matched, once.applied, once.skipped) == (2, 1, 1)
    second = ids(await engine.get_instance(p.id_))["a"]
    await fail(engine, second)  # the new attempt fails too: the row is eligible again

    replay = await engine.redrive_cohort(p.id_, "translate", idempotency_key="k1")
    assert (replay.matched, replay.applied, replay.skipped) == (2, 0, 2)
    row = rows(await engine.get_instance(p.id_))["a"]
    assert (row["attempt"], row["_id"], row["outcome"]) == (2, second, "failed")

    with pytest.raises(IdempotencyKeyReused):  # the same key for another call
        await engine.redrive_cohort(p.id_, "translate", idempotency_key="k1",
                                    where=CohortFilter(row_keys=("a",)))
    again = await engine.redrive_cohort(p.id_, "translate", idempotency_key="k2")
    assert (again.applied, again.skipped) == (1, 1)
    row = rows(await engine.get_instance(p.id_))["a"]
    assert (row["attempt"], row["previousChildIds"]) == (3, [first["a"], second])
    assert row["_id"] == spawn.attempt_id(first["a"], 3)


async def five_failed_rows(lake: Lake, clock: Clock
                           ) -> tuple[Engine, list[str], Instance]:
    """An engine redriving two rows per batch, and a cohort of five failed rows."""
    engine = Engine(lake, clock=clock, limits=replace(Limits(), bulk_batch=2))
    await engine.ensure_ready()
    names = [f"r{i}" for i in range(5)]
    p = await begin(engine, *names)
    first = ids(p)
    for name in names:
        await fail(engine, first[name])
    return engine, names, p


async def test_an_interrupted_call_is_finished_by_retrying_it_with_its_key(
        lake: Lake, clock: Clock) -> None:
    engine, names, p = await five_failed_rows(lake, clock)

    engine.faults.arm("mid-bulk")
    with pytest.raises(InjectedFault):
        await engine.redrive_cohort(p.id_, "translate", idempotency_key="batch")
    half = rows(await engine.get_instance(p.id_))
    assert [half[n]["attempt"] for n in names] == [2, 2, 1, 1, 1]  # one batch committed

    rest = await engine.redrive_cohort(p.id_, "translate", idempotency_key="batch")
    assert (rest.matched, rest.applied, rest.skipped) == (5, 3, 2)
    final = rows(await engine.get_instance(p.id_))
    assert [final[n]["attempt"] for n in names] == [2] * 5
    assert all(final[n]["status"] == "active" for n in names)
    assert (await engine.redrive_cohort(p.id_, "translate", idempotency_key="batch")).applied == 0
    assert (await engine.get_instance(p.id_)).owesBulk is None  # the retry ended the call
    await assert_repaired(engine)


async def test_the_heartbeat_forgets_a_cut_call_whose_parent_left_the_stage(
        lake: Lake, clock: Clock) -> None:
    engine = Engine(lake, clock=clock, limits=replace(Limits(), bulk_batch=1))
    await engine.ensure_ready()
    p = await begin(engine, "a", "b")
    first = ids(p)
    for name in ("a", "b"):
        await fail(engine, first[name])
    engine.faults.arm("mid-bulk")
    with pytest.raises(InjectedFault):
        await engine.redrive_cohort(p.id_, "translate", idempotency_key="gone")
    await engine.set_stage(p.id_, "next")
    report = await Worker(engine, grace_seconds=0).run_pass()
    assert ("bulk", p.id_) in report.processed and not report.failed
    left = await engine.get_instance(p.id_)
    assert left.owesBulk is None and left.bulkCalls is None
    assert [rows(left)[n]["attempt"] for n in ("a", "b")] == [2, 1]


@pytest.mark.parametrize("key", ["beat", None])
async def test_an_interrupted_call_is_finished_by_one_heartbeat(
        lake: Lake, clock: Clock, key: str | None) -> None:
    engine, names, p = await five_failed_rows(lake, clock)

    engine.faults.arm("mid-bulk", times=2)
    with pytest.raises(InjectedFault):
        await engine.redrive_cohort(p.id_, "translate", idempotency_key=key)
    cut = await engine.get_instance(p.id_)
    calls = cut.bulkCalls or []
    assert cut.owesBulk and len(calls) == 1 and calls[0].keyed is (key is not None)
    assert calls[0].key == key or (key is None and calls[0].key.startswith("bulk-"))
    cut_again = await Worker(engine, grace_seconds=0).run_pass()  # the heartbeat is cut too
    assert [kind for kind, _, _ in cut_again.failed] == ["bulk"]
    assert (await engine.get_instance(p.id_)).owesBulk  # so it stays owed
    assert [rows(await engine.get_instance(p.id_))[n]["attempt"] for n in names] == \
        [2, 2, 1, 1, 1]

    report = await Worker(engine, grace_seconds=0).run_pass()
    assert ("bulk", p.id_) in report.processed and not report.failed
    final = await engine.get_instance(p.id_)
    assert [rows(final)[n]["attempt"] for n in names] == [2] * 5
    assert final.owesBulk is None and final.bulkCalls is None
    await assert_repaired(engine)


async def test_redrive_is_refused_outside_the_stage_visit_and_on_a_finished_parent(
        engine: Engine) -> None:
    p = await begin(engine, "a")
    await fail(engine, ids(p)["a"])
    await engine.set_stage(p.id_, "next")
    with pytest.raises(RedriveNotAllowed) as left:
        await engine.redrive_cohort(p.id_, "translate")
    assert left.value.code == "redrive-not-allowed"
    assert left.value.details["reason"] == "stage-left"

    q = await engine.start_instance("p", fields=items("x"))
    q_parent = (await engine.fire_action(q.instance.id_, "go", "go")).instance
    await fail(engine, ids(q_parent)["x"])
    await engine.abort_instance(q_parent.id_)
    with pytest.raises(RedriveNotAllowed) as finished:
        await engine.redrive_cohort(q_parent.id_, "translate")
    assert finished.value.details["reason"] == "parent-finished"
    row = rows(await engine.get_instance(q_parent.id_))["x"]
    assert row["attempt"] == 1


async def test_a_cohort_never_spawned_and_a_bad_filter_are_refused_before_anything(
        engine: Engine) -> None:
    p = await begin(engine, "a")
    await fail(engine, ids(p)["a"])
    with pytest.raises(CohortNotFound):
        await engine.redrive_cohort(p.id_, "go")
    with pytest.raises(GroqSyntaxError):
        await engine.redrive_cohort(p.id_, "translate", where=CohortFilter(where="outputs.("))
    assert rows(await engine.get_instance(p.id_))["a"]["attempt"] == 1


async def test_a_where_on_outputs_selects_exactly_the_matching_rows_among_200(
        engine: Engine) -> None:
    names = [f"f{i:03d}" for i in range(100)] + [f"s{i:03d}" for i in range(100, 200)]
    p = await begin(engine, *names, child=flaky())
    before = rows(p)
    assert sum(1 for r in before.values() if r["outcome"] == "failed") == 100

    spec = CohortFilter(where="outputs.item >= 'f050'", status=("done",))
    began = time.perf_counter()
    result = await engine.redrive_cohort(p.id_, "translate", where=spec)
    print(f"redrive of 50 rows selected among 200: {time.perf_counter() - began:.2f} s "
          f"{(result.matched, result.applied, result.skipped)}")
    assert (result.matched, result.applied, result.skipped) == (150, 50, 100)
    after = rows(await engine.get_instance(p.id_))
    redriven = sorted(k for k, r in after.items() if r["attempt"] == 2)
    assert redriven == [f"f{i:03d}" for i in range(50, 100)]
    # the new attempts failed at once again (same handoff); nothing else changed
    assert all(after[k]["outcome"] == "failed" for k in redriven)
    assert all(after[k]["_id"] == before[k]["_id"] for k in names if k not in redriven)


async def test_redriven_rows_obey_the_window_and_wait_queued_in_order(engine: Engine) -> None:
    definition = parent(settled=ALL_SUCCEEDED)
    definition["stages"][1]["activities"][0]["actions"][0]["spawn"]["maxActive"] = 2
    await engine.deploy([definition, worker()])
    begun = await engine.start_instance("p", fields=items("a", "b", "c", "d"))
    p = (await engine.fire_action(begun.instance.id_, "go", "go")).instance
    for _ in range(4):  # fail whichever children are live until every row failed
        live = [r for r in rows(await engine.get_instance(p.id_)).values()
                if r["status"] == "active"]
        await fail(engine, live[0]["_id"])
    assert {r["outcome"] for r in rows(await engine.get_instance(p.id_)).values()} == {"failed"}

    result = await engine.redrive_cohort(p.id_, "translate")
    assert (result.matched, result.applied) == (4, 4)
    seen = rows(await engine.get_instance(p.id_))
    assert [seen[k]["status"] for k in "abcd"] == ["active", "active", "queued", "queued"]
    assert all(seen[k]["attempt"] == 2 for k in "abcd")
    await engine.fire_action(seen["a"]["_id"], "task", "finish", params={"words": 1})
    seen = rows(await engine.get_instance(p.id_))
    assert [seen[k]["status"] for k in "abcd"] == ["done", "active", "active", "queued"]
    child = await document(engine, seen["c"]["_id"])
    assert [f["value"] for f in child["fields"] if f["name"] == "item"] == ["c"]


async def test_a_row_spawned_before_handoffs_were_kept_is_refused_alone(
        lake: Lake, clock: Clock) -> None:
    engine = Engine(lake, clock=clock)
    await engine.ensure_ready()
    p = await begin(engine, "a", "b")
    first = ids(p)
    await fail(engine, first["a"])
    await fail(engine, first["b"])
    # the row of "a" as an engine before this change stored it: no handoff
    await lake.update_many({"parent": p.id_, "chunk": 0}, {"$unset": {"rows.0.handoff": ""}},
                           dataset=engine.rows.collection, now=clock())
    fresh = Engine(lake, clock=clock)  # nothing cached from before the edit
    await fresh.ensure_ready()
    result = await fresh.redrive_cohort(p.id_, "translate")
    assert (result.matched, result.applied, result.skipped) == (2, 1, 0)
    assert [(r.child_id, r.row_key, r.code) for r in result.refusals] == [
        (first["a"], "a", "redrive-handoff-missing")]
    seen = rows(await fresh.get_instance(p.id_))
    assert (seen["a"]["attempt"], seen["b"]["attempt"]) == (1, 2)


async def test_an_activity_failed_by_the_budget_returns_to_active_on_redrive(
        engine: Engine) -> None:
    definition = parent(settled=ALL_SUCCEEDED)
    spawn_block = definition["stages"][1]["activities"][0]["actions"][0]["spawn"]
    spawn_block.update(failureBudget={"count": 0}, onBudgetExceeded="continue")
    await engine.deploy([definition, worker()])
    begun = await engine.start_instance("p", fields=items("a", "b"))
    p = (await engine.fire_action(begun.instance.id_, "go", "go")).instance
    await fail(engine, ids(p)["a"])
    p = await engine.get_instance(p.id_)
    entry = p.open_entry()
    assert p.currentStage == "review" and entry is not None
    assert entry.activity("translate").status == "failed"  # type: ignore[union-attr]

    result = await engine.redrive_cohort(p.id_, "translate")
    assert (result.applied, result.skipped) == (1, 1)
    p = await engine.get_instance(p.id_)
    entry = p.open_entry()
    assert entry is not None and entry.activity("translate").status == "active"  # type: ignore[union-attr]
    for row in rows(p).values():
        await engine.fire_action(row["_id"], "task", "finish", params={"words": 1})
    assert (await engine.get_instance(p.id_)).currentStage == "next"


async def test_rows_the_budget_skipped_while_queued_wait_again_under_their_own_ids(
        engine: Engine) -> None:
    definition = parent(settled=ALL_SUCCEEDED)
    spawn_block = definition["stages"][1]["activities"][0]["actions"][0]["spawn"]
    spawn_block.update(maxActive=1, failureBudget={"count": 0})
    await engine.deploy([definition, worker()])
    begun = await engine.start_instance("p", fields=items("a", "b", "c"))
    p = (await engine.fire_action(begun.instance.id_, "go", "go")).instance
    first = ids(p)
    await fail(engine, first["a"])
    skipped = rows(await engine.get_instance(p.id_))
    assert [(skipped[k]["status"], skipped[k]["outcome"]) for k in "bc"] == \
        [("aborted", "aborted")] * 2

    result = await engine.redrive_cohort(p.id_, "translate")
    assert (result.matched, result.applied) == (3, 3)
    seen = rows(await engine.get_instance(p.id_))
    assert (seen["a"]["_id"], seen["a"]["attempt"]) == (spawn.attempt_id(first["a"], 2), 2)
    for key in "bc":  # no child ever existed for them: same id, first attempt, no history
        assert (seen[key]["_id"], seen[key]["attempt"], seen[key]["previousChildIds"]) == \
            (first[key], 1, [])
    assert [seen[k]["status"] for k in "abc"] == ["active", "queued", "queued"]
    for key in "abc":
        live = rows(await engine.get_instance(p.id_))[key]
        await engine.fire_action(live["_id"], "task", "finish", params={"words": 1})
    assert (await engine.get_instance(p.id_)).currentStage == "next"
    await assert_repaired(engine)
