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
    entry = instance.open_entry()
    assert entry is not None
    return counts.cohort_object(instance, "translate", entry.key_)


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
