"""Every lake read behind ``/metrics`` rides an index on the embedded lake, so a dataset
holding many content documents is not walked per scrape, and the gauges still count right."""

from __future__ import annotations

from typing import Any

from kinflow.engine import Engine
from kinflow.observability.gauges import OPEN_PARENTS_QUERY, Watched, backlog_queries
from kinflow.storage import Lake
from kinflow.storage.database import side_name

INSTANCE = {"_type": "kinflow.instance"}
PAST, NOW, LATER = "2026-01-01T00:00:00Z", "2026-12-03T00:00:00Z", "2999-01-01T00:00:00Z"


def _plan(explained: dict[str, Any]) -> str:
    return str(explained["queryPlanner"]["winningPlan"])


async def test_each_gauge_query_is_index_served_and_counts_right(lake: Lake) -> None:
    engine = Engine(lake)
    await engine.ensure_ready()
    coll = lake.collection()
    await coll.insert_many([{"_id": f"content{i}", "_type": "cohort.person", "n": i}
                            for i in range(200)])
    counts = {"active:1": 2, "done:1": 3}
    await coll.insert_many([
        {"_id": "open", **INSTANCE, "completedAt": None, "rowCount": 5,
         "cohortRows": [{"counts": counts}], "cohorts": [{"pausedAt": PAST}]},
        {"_id": "open-unset", **INSTANCE, "rowCount": 1,  # completedAt not stored
         "cohortRows": [{"counts": {"queued:1": 1}}]},
        {"_id": "closed", **INSTANCE, "completedAt": PAST, "rowCount": 4,
         "cohortRows": [{"counts": counts}]},
        {"_id": "due", **INSTANCE, "nextEvaluationAt": PAST, "effectsDueAt": PAST,
         "propagateTo": "open", "owing": "owesAborts materialising"},
        {"_id": "due-later", **INSTANCE, "nextEvaluationAt": LATER, "effectsDueAt": LATER},
        {"_id": "due-done", **INSTANCE, "nextEvaluationAt": PAST, "completedAt": PAST},
        {"_id": "child", **INSTANCE, "parentInstance": "open"},
    ])
    stamps = lake.collection(side_name("production", "stamps"))
    await stamps.insert_one({"_id": "stamps.a", "_type": "kinflow.stamps", "parent": "open",
                             "children": ["c1", "c2"]})
    db = coll.database
    reads = [("", OPEN_PARENTS_QUERY)] + [
        (side, filter_) for side, filter_, _ in backlog_queries(NOW).values()]
    for side, filter_ in reads:
        name = side_name("production", side) if side else coll.name
        plan = _plan(await db.command({"explain": {"find": name, "filter": filter_}}))
        assert "COLLSCAN" not in plan and "IXSCAN" in plan, (filter_, plan)

    watched = Watched(None, None, engine)
    await watched.refresh()
    assert watched.rows == {"active": 2, "done": 3, "queued": 1}
    assert (watched.cohorts, watched.paused) == (2, 1)
    assert watched.backlog == {"tick": 1, "effects": 1, "propagate": 3, "materialising": 1,
                               "owesBulk": 0, "owesAborts": 1, "owesCancels": 0,
                               "owesRegistration": 0}
