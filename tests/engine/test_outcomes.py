"""Outcomes and outputs of finished children on their rows.

The rules: docs/subworkflows.md#outcomes-and-outputs.

Every path that stamps a row is driven against the embedded lake: the inline
round of a small cohort, the background round, the drain of condemned rows,
a child that finishes inside its parent's spawn, and a child whose document
is gone. Parents read the stamps in conditions (``$subworkflows[].outcome``,
``.outputs``).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.core.context import Limits
from kinflow.core.errors import DefinitionInvalid
from kinflow.core.state import Instance
from kinflow.engine import Engine
from tests.engine.cohort_defs import items, parent
from tests.engine.outcome_defs import tallying, worker

pytestmark = pytest.mark.lake


def rows(instance: Instance) -> dict[str, dict[str, Any]]:
    return {r["rowKey"]: r for r in subworkflow_rows(instance, instance.open_entry())}


def fired(instance: Instance, activity: str) -> list[str]:
    entry = instance.open_entry()
    found = entry.activity(activity) if entry is not None else None
    return list(found.firedActions) if found is not None else []


async def started(engine: Engine, *names: str) -> Instance:
    begun = await engine.start_instance("p", fields=items(*names))
    return (await engine.fire_action(begun.instance.id_, "go", "go")).instance


async def test_succeeded_failed_and_aborted_children_and_a_gate_reading_them(
        engine: Engine) -> None:
    gate = ("count($subworkflows[outcome == 'failed']) == 1 && "
            "count($subworkflows[outcome == 'aborted']) == 1 && "
            "count($subworkflows[outcome == 'succeeded']) == 1")
    await engine.deploy([tallying({"mixed": gate}), worker()])
    p = await started(engine, "a", "b", "c")
    ids = {r["rowKey"]: r["_id"] for r in rows(p).values()}
    assert {k: r["outcome"] for k, r in rows(p).items()} == {"a": None, "b": None, "c": None}

    await engine.fire_action(ids["a"], "task", "finish", params={"words": 10})
    failed = await engine.fire_action(ids["b"], "task", "give-up")
    assert failed.instance.terminal_state == "completed"  # a failed outcome still completes
    assert failed.instance.currentStage == "gave-up"
    p = await engine.get_instance(p.id_)
    assert fired(p, "tally") == []  # the gate waits for the third outcome
    await engine.abort_instance(ids["c"], reason="not needed")

    p = await engine.get_instance(p.id_)
    seen = rows(p)
    assert {k: (r["status"], r["outcome"]) for k, r in seen.items()} == {
        "a": ("done", "succeeded"), "b": ("done", "failed"), "c": ("aborted", "aborted")}
    assert seen["a"]["outputs"] == {"wordCount": 10, "item": "a"}
    assert seen["b"]["outputs"] == {"wordCount": 7, "item": "b"}
    assert seen["c"]["outputs"] is None and seen["c"]["outputsError"] is None
    assert all(r["attempt"] == 1 and r["previousChildIds"] == [] for r in seen.values())
    assert "mixed" in fired(p, "tally")
    child = await engine.lake.find({"_id": ids["b"]}, projection={"result": 1})
    assert child[0]["result"] == {"outcome": "failed", "outputs": {"wordCount": 7, "item": "b"}}


async def test_outputs_are_copied_on_the_stamp_and_summed_by_a_condition(
        engine: Engine) -> None:
    total = "math::sum($subworkflows[activity == 'translate' && current].outputs.wordCount)"
    await engine.deploy([tallying({"sixty": f"{total} == 60"}), worker()])
    p = await started(engine, "a", "b", "c")
    ids = {r["rowKey"]: r["_id"] for r in rows(p).values()}
    for key, words in (("a", 10), ("b", 20)):
        await engine.fire_action(ids[key], "task", "finish", params={"words": words})
    p = await engine.get_instance(p.id_)
    assert rows(p)["c"]["outputs"] is None and "sixty" not in fired(p, "tally")
    await engine.fire_action(ids["c"], "task", "finish", params={"words": 30})
    p = await engine.get_instance(p.id_)
    assert [r["outputs"]["wordCount"] for r in rows(p).values()] == [10, 20, 30]
    assert "sixty" in fired(p, "tally")
    # the stamp that resolved each row carried its outputs: no row is resolved without them
    stamped = [row for row in p.subworkflows if row.resolved is not None]
    assert len(stamped) == 3 and all(row.outputs is not None for row in stamped)


async def test_outputs_over_the_cap_leave_outputs_null_and_say_why(engine: Engine) -> None:
    small = Engine(engine.lake, clock=engine.clock, limits=Limits(row_output_bytes=60))
    await small.deploy([parent(), worker()])
    begun = await small.start_instance("p", fields={"items": [{"name": "x" * 80},
                                                             {"name": "short"}]})
    p = (await small.fire_action(begun.instance.id_, "go", "go")).instance
    for row in rows(p).values():
        await small.fire_action(row["_id"], "task", "finish", params={"words": 3})
    p = await small.get_instance(p.id_)
    seen = rows(p)
    big = seen["x" * 80]
    assert big["outcome"] == "succeeded"
    assert big["outputs"] is None and big["outputsError"] == "output-too-large"
    assert seen["short"]["outputs"] == {"wordCount": 3, "item": "short"}
    assert seen["short"]["outputsError"] is None
    child = await small.get_instance(big["_id"])
    assert child.fields[0].value == "x" * 80  # the child keeps its fields


async def test_a_child_that_finishes_inside_the_spawn_is_stamped_the_same_way(
        engine: Engine) -> None:
    await engine.deploy([parent(), worker(auto=True)])
    p = await started(engine, "a", "b")
    # the spawn's own commit registered the rows already resolved, with outputs
    assert {k: (r["status"], r["outcome"], r["outputs"]) for k, r in rows(p).items()} == {
        "a": ("done", "succeeded", {"wordCount": 7, "item": "a"}),
        "b": ("done", "succeeded", {"wordCount": 7, "item": "b"})}


async def test_a_large_spawn_stamps_children_created_after_its_commit(engine: Engine) -> None:
    small = Engine(engine.lake, clock=engine.clock, limits=Limits(spawn_txn=2))
    await small.deploy([parent(), worker(auto=True)])
    p = await started(small, "a", "b", "c", "d", "e")
    p = await small.get_instance(p.id_)
    assert [r["outputs"] for r in rows(p).values()] == [
        {"wordCount": 7, "item": k} for k in "abcde"]
    assert all(r["outcome"] == "succeeded" for r in rows(p).values())


async def test_the_background_round_stamps_outcome_and_outputs(engine: Engine) -> None:
    background = Engine(engine.lake, clock=engine.clock, propagation="background")
    await background.deploy([parent(), worker()])
    p = await started(background, "a", "b")
    ids = {r["rowKey"]: r["_id"] for r in rows(p).values()}
    await background.fire_action(ids["a"], "task", "finish", params={"words": 5})
    await background.fire_action(ids["b"], "task", "give-up")
    await background.maintenance.settle_propagation()
    p = await background.get_instance(p.id_)
    assert {k: (r["outcome"], r["outputs"]) for k, r in rows(p).items()} == {
        "a": ("succeeded", {"wordCount": 5, "item": "a"}),
        "b": ("failed", {"wordCount": 7, "item": "b"})}


async def test_drained_and_missing_children_read_aborted(engine: Engine) -> None:
    await engine.deploy([parent(), worker()])
    p = await started(engine, "a", "b", "c")
    ids = {r["rowKey"]: r["_id"] for r in rows(p).values()}
    await engine.fire_action(ids["a"], "task", "finish", params={"words": 1})
    await engine.lake.delete(ids["c"])
    await engine.tick(p.id_)  # the tick notices the missing child
    aborted = await engine.abort_instance(p.id_)  # the drain aborts and stamps "b"
    seen = rows(aborted.instance)
    assert {k: (r["status"], r["outcome"]) for k, r in seen.items()} == {
        "a": ("done", "succeeded"), "b": ("aborted", "aborted"), "c": ("aborted", "aborted")}


async def test_rows_stamped_before_outcomes_existed_read_from_their_resolution(
        engine: Engine) -> None:
    await engine.deploy([parent(), worker()])
    p = await started(engine, "a")
    row = p.subworkflows[0]
    await engine.fire_action(row.child_id, "task", "finish", params={"words": 2})
    p = await engine.get_instance(p.id_)
    old = p.subworkflows[0].model_copy(update={"outcome": None, "outputs": None})
    legacy = copy.copy(p)
    legacy.subworkflows = [old]
    view = subworkflow_rows(legacy, legacy.open_entry())[0]
    assert view["outcome"] == "succeeded" and view["outputs"] is None


async def test_deploy_refuses_bad_outcomes_and_unknown_outputs_in_one_error(
        engine: Engine) -> None:
    bad = worker(outputs=["wordCount", "title", "wordCount"])
    bad["stages"][2]["outcome"] = "exploded"
    bad["stages"][0]["outcome"] = "failed"  # not terminal
    with pytest.raises(DefinitionInvalid) as refused:
        await engine.deploy([parent(), bad])
    issues = {(i["path"], i["message"]) for i in refused.value.details["issues"]}
    paths = {path for path, _ in issues}
    assert "stages[2].outcome" in paths  # the enum value
    assert ("outputs[1]", "output 'title' names no workflow-scope field") in issues
    assert ("outputs[2]", "output 'wordCount' is listed twice") in issues
    assert await engine.lake.count({}) == 0
    only_stage = worker()
    only_stage["stages"][0]["outcome"] = "failed"
    with pytest.raises(DefinitionInvalid) as refused:
        await engine.deploy([only_stage])
    assert [i["path"] for i in refused.value.details["issues"]] == ["stages[0].outcome"]
