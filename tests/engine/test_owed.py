"""``owed``: one index serves every heartbeat query, exactly, and old datasets upgrade."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import IndexModel

from kinflow.core import owed
from kinflow.engine import Engine
from kinflow.engine.indexes import INSTANCES, RETIRED_INDEXES
from kinflow.engine.owedupgrade import upgrade_owed
from kinflow.storage import Lake
from kinflow.worker import Worker
from tests.engine.cohort_defs import child, items, parent
from tests.engine.conftest import Clock
from tests.engine.test_worker import TIMED

pytestmark = pytest.mark.lake

NOW = "2026-01-01T12:00:00.000Z"
EARLY, LATE = "2026-01-01T11:00:00.000Z", "2026-01-01T13:00:00.000Z"
# every kind beside the others, due and not yet due: under MongoDB's array semantics a
# careless encoding lets one document meet a range with two different elements
MIXED: dict[str, list[Any]] = {
    "due-now": ["due:" + EARLY, "propagate:p1"],
    "due-later": ["due:" + LATE, "propagate:p1", "owes-aborts"],
    "effects-now": ["due:" + LATE, {"effects": EARLY}, "materialising"],
    "effects-later": [{"effects": LATE}, "owes-aborts", "propagate:p2"],
    "aborts": ["owes-aborts"],
    "materialising": ["materialising", "due:" + LATE],
    "propagate-only": ["propagate:p2"],
    "nothing": [],
}
QUERIES: dict[str, tuple[dict[str, Any], set[str]]] = {
    "due": (owed.due_by(NOW), {"due-now"}),
    "effects": (owed.effects_by(NOW), {"effects-now"}),
    "aborts": (owed.OWES_ABORTS, {"due-later", "effects-later", "aborts"}),
    "materialising": (owed.IS_MATERIALISING, {"effects-now", "materialising"}),
    "any propagate": (owed.ANY_PROPAGATE, {"due-now", "due-later", "effects-later",
                                           "propagate-only"}),
    "propagate to p1": (owed.propagating_to("p1"), {"due-now", "due-later"}),
}


async def _seed(lake: Lake, dataset: str) -> None:
    await lake.collection(dataset).insert_many(
        [{"_id": name, "_type": "kinflow.instance", "_rev": "r", "owed": entries}
         for name, entries in MIXED.items()]
        + [{"_id": "content", "_type": "article", "owed": ["due:" + EARLY]}])


@pytest.mark.parametrize("query", sorted(QUERIES))
async def test_each_query_finds_exactly_its_kind_by_index_and_by_scan(
        engine: Engine, lake: Lake, query: str) -> None:
    """Exact through ``instance_owed`` and through a scan of a collection without it (the
    array semantics MongoDB gives a multikey field either way)."""
    filter_, expected = QUERIES[query]
    await _seed(lake, engine.dataset)
    scratch = lake.db["owed_scratch"]
    await _seed(lake, "owed_scratch")
    indexed = await lake.find({**INSTANCES, **filter_}, projection={"_id": 1})
    scanned = await scratch.find({**INSTANCES, **filter_}, {"_id": 1}).to_list()
    assert {d["_id"] for d in indexed} == expected
    assert {d["_id"] for d in scanned} == expected


@pytest.mark.parametrize("query", sorted(QUERIES))
async def test_each_query_is_served_by_the_one_index(engine: Engine, lake: Lake,
                                                     query: str) -> None:
    filter_, expected = QUERIES[query]
    await _seed(lake, engine.dataset)
    explained = await lake.db.command({"explain": {"find": engine.dataset,
                                                   "filter": {**INSTANCES, **filter_}},
                                       "verbosity": "executionStats"})
    plan = explained["queryPlanner"]["winningPlan"]
    while "inputStage" in plan:
        plan = plan["inputStage"]
    assert (plan["stage"], plan.get("indexName")) == ("IXSCAN", "instance_owed")
    assert explained["executionStats"]["totalDocsExamined"] == len(expected)


async def test_the_dataset_has_one_index_for_the_heartbeat(engine: Engine, lake: Lake) -> None:
    names = {index["name"] async for index in await lake.collection().list_indexes()}
    assert "instance_owed" in names and not names & set(RETIRED_INDEXES)


async def test_commits_keep_owed_in_step_with_the_hints(lake: Lake, clock: Clock) -> None:
    engine = Engine(lake, clock=clock, propagation="background")
    await engine.ensure_ready()
    await engine.deploy([TIMED, child(), parent()])
    timed = (await engine.start_instance("timed")).instance
    stored = await lake.get(timed.id_)
    assert stored is not None and timed.nextEvaluationAt
    assert stored["owed"] == ["due:" + timed.nextEvaluationAt,
                              {"effects": stored["effectsDueAt"]}]  # its ping is queued

    parent_id = (await engine.start_instance("p", fields=items("a", "b"))).instance.id_
    kids = [r.child_id for r in (await engine.fire_action(parent_id, "go", "go")
                                 ).instance.subworkflows]
    await engine.fire_action(kids[0], "task", "finish")
    done = await lake.get(kids[0])
    assert done is not None and done["owed"] == ["propagate:" + parent_id]
    assert await engine.due_instances() == []  # a finished child is never due
    await engine.settle_propagation()
    done = await lake.get(kids[0])
    assert done is not None and not done.get("owed") and "propagateTo" not in done
    assert [d["_id"] for d in await lake.find({**INSTANCES, **owed.ANY_PROPAGATE})] == []


async def test_a_dataset_from_before_owed_is_upgraded_at_start(lake: Lake,
                                                               clock: Clock) -> None:
    """Instances stored with the old hints only are found by the heartbeat after a start."""
    engine = Engine(lake, clock=clock)
    await engine.ensure_ready()
    await engine.deploy([TIMED])
    timed = (await engine.start_instance("timed")).instance
    coll = lake.collection()
    old = {"instance_due": "nextEvaluationAt", "instance_propagate": "propagateTo",
           "instance_owes_aborts": "owesAborts", "instance_materialising": "materialising",
           "instance_effects_due": "effectsDueAt"}
    await coll.create_indexes([IndexModel([(key, 1)], name=name, partialFilterExpression=INSTANCES)
                               for name, key in old.items()])
    await coll.update_many({}, {"$unset": {"owed": ""}})  # as the previous version wrote them
    await coll.insert_many([
        {"_id": "kid", "_type": "kinflow.instance", "_rev": "r1", "propagateTo": "gone",
         "propagateToken": "t", "completedAt": "2026-01-01T00:00:00.000Z",
         "nextEvaluationAt": EARLY},
        {"_id": "drained", "_type": "kinflow.instance", "_rev": "r2", "owesAborts": True,
         "materialising": True, "effectsDueAt": LATE},
    ])

    restarted = Engine(lake, clock=clock)
    await restarted.ensure_ready()
    upgraded = await lake.get(timed.id_)
    assert upgraded is not None and upgraded["owed"] == [
        "due:" + str(timed.nextEvaluationAt), {"effects": upgraded["effectsDueAt"]}]
    assert (await lake.get("kid") or {}).get("owed") == ["propagate:gone"]
    assert (await lake.get("drained") or {}).get("owed") == [
        {"effects": LATE}, "materialising", "owes-aborts"]
    names = {index["name"] async for index in await coll.list_indexes()}
    assert not names & set(old) and "instance_owed" in names
    assert await upgrade_owed(lake, restarted.dataset) == 0  # done: nothing left to do

    clock.advance(hours=1)
    report = await Worker(restarted, grace_seconds=0).run_pass()
    assert ("tick", timed.id_) in report.processed
    assert ("propagate", "gone") in report.processed
    kid = await lake.get("kid")
    assert kid is not None and not kid.get("owed") and "propagateTo" not in kid
