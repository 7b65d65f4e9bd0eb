"""``$cohort``, ``$cohorts``, ``aggregate`` and ``cohort-too-large-for-rows`` against the
embedded lake (docs/subworkflows.md#cohort-and-aggregates)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kinflow.core.cohort import counts
from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.core.cohort.selection import CohortFilter
from kinflow.core.context import Limits
from kinflow.core.errors import CohortTooLargeForRows
from kinflow.core.state import Instance
from kinflow.engine import Engine
from kinflow.engine.parking import Parking
from kinflow.storage import Lake
from kinflow.worker import Worker
from tests.engine.cohort_defs import items, parent
from tests.engine.conftest import Clock
from tests.engine.outcome_defs import tallying, worker
from tests.engine.settle_defs import settling, start

pytestmark = pytest.mark.lake

FIGURES = {"words": "sum(outputs.wordCount)", "top": "max(outputs.wordCount)",
           "low": "min(outputs.wordCount)", "mean": "avg(outputs.wordCount)",
           "big": "count(outputs.wordCount > 15)", "done": "count()"}


def ids(instance: Instance) -> dict[str, str]:
    return {r["rowKey"]: r["_id"] for r in subworkflow_rows(instance, instance.open_entry())}


def fired(instance: Instance, activity: str) -> list[str]:
    entry = instance.open_entry()
    found = entry.activity(activity) if entry is not None else None
    return list(found.firedActions) if found is not None else []


def spawn_of(definition: dict[str, Any]) -> dict[str, Any]:
    actions = definition["stages"][1]["activities"][0]["actions"]
    return next(a["spawn"] for a in actions if "spawn" in a)


async def started(engine: Engine, *names: str) -> Instance:
    begun = await engine.start_instance("p", fields=items(*names))
    return (await engine.fire_action(begun.instance.id_, "go", "go")).instance


def cohort(instance: Instance) -> dict[str, Any]:
    """The translate cohort's ``$cohort`` (of the visit that spawned it)."""
    visit = instance.subworkflows[-1].stageEntry
    return counts.cohort_object(instance, "translate", visit)


async def test_gates_on_cohort_and_cohorts_move_the_parent(engine: Engine) -> None:
    definition = parent(settled="$cohort.succeeded >= 2")
    definition["stages"][1]["transitions"][0]["when"] = "$cohorts.translate.settled"
    await engine.deploy([definition, worker()])
    p = await started(engine, "a", "b", "c")
    children = ids(p)
    await engine.fire_action(children["a"], "task", "finish", params={"words": 1})
    p = await engine.get_instance(p.id_)
    assert "all-done" not in fired(p, "translate") and p.currentStage == "review"
    await engine.fire_action(children["b"], "task", "finish", params={"words": 2})
    p = await engine.get_instance(p.id_)
    assert "all-done" in fired(p, "translate")  # $cohort.succeeded >= 2
    assert p.currentStage == "review"  # c still runs: not settled
    await engine.fire_action(children["c"], "task", "give-up")
    p = await engine.get_instance(p.id_)
    assert p.currentStage == "next"  # $cohorts.translate.settled


async def test_cohorts_reads_another_activitys_cohort(engine: Engine) -> None:
    await engine.deploy([tallying({"one-failed": "$cohorts.translate.failed == 1",
                                   "own-null": "$cohort == null"}), worker()])
    p = await started(engine, "a", "b")
    assert fired(p, "tally") == ["own-null"]  # tally spawns nothing: its $cohort is null
    await engine.fire_action(ids(p)["a"], "task", "give-up")
    p = await engine.get_instance(p.id_)
    assert "one-failed" in fired(p, "tally")
    assert cohort(p)["failed"] == 1 and cohort(p)["active"] == 1


async def test_aggregates_match_the_outputs_and_a_redrive_takes_the_old_attempt_out(
        engine: Engine) -> None:
    definition = tallying({"sixty": "$cohorts.translate.aggregates.words == 60"},
                          settled="false")
    spawn_of(definition)["aggregate"] = FIGURES
    await engine.deploy([definition, worker()])
    p = await started(engine, "a", "b", "c", "d")
    assert cohort(p)["aggregates"] == {"words": 0, "top": None, "low": None, "mean": None,
                                       "big": 0, "done": 0}
    children = ids(p)
    await engine.fire_action(children["d"], "task", "give-up")  # wordCount stays 7
    for key, words in (("a", 10), ("b", 20), ("c", 30)):
        await engine.fire_action(children[key], "task", "finish", params={"words": words})
    p = await engine.get_instance(p.id_)
    assert cohort(p)["aggregates"] == {"words": 67, "top": 30, "low": 7, "mean": 16.75,
                                       "big": 2, "done": 4}
    assert "sixty" not in fired(p, "tally")
    await engine.redrive_cohort(p.id_, "translate", where=CohortFilter(outcome=("failed",)))
    p = await engine.get_instance(p.id_)
    assert cohort(p)["aggregates"] == {"words": 60, "top": 30, "low": 10, "mean": 20,
                                       "big": 2, "done": 3}
    assert "sixty" in fired(p, "tally")
    stored = next(e for e in p.cohortRows or [] if e["activity"] == "translate")
    assert len(str(stored["aggregates"])) < 1000


async def test_subworkflows_on_a_large_cohort_is_refused_and_cohort_works(
        lake: Lake, clock: Clock) -> None:
    engine = Engine(lake, clock=clock, limits=replace(Limits(), condition_rows=3))
    await engine.ensure_ready()
    await engine.deploy([parent(), worker()])  # its gate counts $subworkflows
    begun = await engine.start_instance("p", fields=items("a", "b", "c"))
    with pytest.raises(CohortTooLargeForRows) as refused:
        await engine.fire_action(begun.instance.id_, "go", "go")
    assert refused.value.details["rows"] == 3 and refused.value.details["limit"] == 3
    moved = await engine.get_instance(begun.instance.id_)  # "go" committed; the hop that
    assert moved.currentStage == "review" and not moved.subworkflows  # spawns did not
    first = await Worker(engine, worker_id="w", grace_seconds=0).run_pass()
    assert first.parked == [("tick", moved.id_, "cohort-too-large-for-rows")]
    parked = await Parking(engine.lake, engine.dataset).get(moved.id_)
    assert parked is not None and parked.details["activity"] == "translate"
    small = await engine.start_instance("p", fields=items("a", "b"))
    assert (await engine.fire_action(small.instance.id_, "go", "go")).instance.subworkflows

    definition = parent(settled="$cohort.settled", name="q")
    await engine.deploy([definition])
    begun = await engine.start_instance("q", fields=items("a", "b", "c"))
    q = (await engine.fire_action(begun.instance.id_, "go", "go")).instance
    for child in ids(q).values():
        await engine.fire_action(child, "task", "finish", params={"words": 1})
    q = await engine.get_instance(q.id_)
    assert q.currentStage == "next"


async def beat(engine: Engine, passes: int = 2) -> None:
    for _ in range(passes):
        report = await Worker(engine, grace_seconds=0).run_pass()
        assert not report.failed, report.failed


async def test_retries_and_time_outs_in_the_counts_and_the_aggregates(
        engine: Engine, clock: Clock) -> None:
    definition = settling(childTimeoutSeconds=60, retry={"attempts": 2, "backoffSeconds": 10},
                          aggregate={"words": "sum(outputs.wordCount)", "n": "count()"})
    p = await start(engine, definition, ["a", "b", "c"])
    first = ids(p)
    await engine.fire_action(first["b"], "task", "give-up")  # re-queued for a retry
    seen = cohort(await engine.get_instance(p.id_))
    assert (seen["retrying"], seen["queued"], seen["failed"], seen["active"]) == (1, 1, 0, 2)
    assert seen["aggregates"] == {"words": 0, "n": 0}  # its failed attempt left at once
    await engine.fire_action(first["a"], "task", "finish", params={"words": 5})
    clock.advance(seconds=61)  # c times out; b's retry is due
    await beat(engine)
    seen = cohort(await engine.get_instance(p.id_))
    assert (seen["retrying"], seen["timedOut"], seen["active"]) == (1, 0, 1)  # c waits
    await engine.fire_action(ids(await engine.get_instance(p.id_))["b"], "task", "finish",
                             params={"words": 7})
    clock.advance(seconds=10)
    await beat(engine)
    clock.advance(seconds=61)  # c's second and last attempt times out
    await beat(engine)
    seen = cohort(await engine.get_instance(p.id_))
    assert {k: seen[k] for k in ("total", "succeeded", "failed", "timedOut", "aborted",
                                 "retrying", "queued", "settled")} == {
        "total": 3, "succeeded": 2, "failed": 1, "timedOut": 1, "aborted": 1, "retrying": 0,
        "queued": 0, "settled": True}
    assert seen["aggregates"] == {"words": 12, "n": 3}


async def test_a_paused_cohort_reads_paused_and_is_not_settled(engine: Engine) -> None:
    p = await start(engine, settling(maxActive=1), ["a", "b"])
    await engine.pause_cohort(p.id_, "translate", reason="downstream is down")
    await engine.fire_action(ids(p)["a"], "task", "finish", params={"words": 1})
    seen = cohort(await engine.get_instance(p.id_))
    assert (seen["paused"], seen["queued"], seen["active"], seen["settled"]) == (
        True, 1, 0, False)
    await engine.resume_cohort(p.id_, "translate")
    assert cohort(await engine.get_instance(p.id_))["paused"] is False


async def test_a_quorum_over_an_aggregate_completes_in_the_commit_that_reaches_it(
        engine: Engine) -> None:
    definition = settling(completeWhen="$cohort.aggregates.words >= 10",
                          aggregate={"words": "sum(outputs.wordCount)"})
    p = await start(engine, definition, ["a", "b", "c"])
    await engine.fire_action(ids(p)["a"], "task", "finish", params={"words": 4})
    assert cohort(await engine.get_instance(p.id_))["complete"] is False
    await engine.fire_action(ids(p)["b"], "task", "finish", params={"words": 6})
    seen = cohort(await engine.get_instance(p.id_))
    assert {k: seen[k] for k in ("complete", "succeeded", "aborted", "failed", "settled")} \
        == {"complete": True, "succeeded": 2, "aborted": 1, "failed": 0, "settled": True}
    assert seen["aggregates"] == {"words": 10}
