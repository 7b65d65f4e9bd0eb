"""The lake's own limit for a child fire's commit: the raw rate a cohort is compared with.

``raw_commit_rate`` runs the commit of a child ``fireAction`` with no kinflow
in the way, on the daemon a ``kinflow serve`` just started (the same process,
the same moment, the same change stream of the server open on it): ``callers``
concurrent tasks each run, in one transaction, ``find`` by ``_id`` + ``update``
by ``_id`` + ``commitTransaction`` on a ~2 KB document shaped like a bench
child, the update shaped like a real fire's (a ``$set`` of the state that
changed and a ``$push`` of six history entries, about 2.6 KB of operators).

The documents live in a collection of their own database (dropped after),
with a copy of every index of the dataset's collection, so the daemon
maintains as many indexes per write as it does for a child (a child fire
pays for each, ``docs/performance.md``, "Fewer indexes on the dataset").
Each document is written once while the pool lasts, as each child is.

Reported: commits per second, and the daemon's CPU milliseconds per commit
(from ``/proc``) over the same seconds.
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from dataclasses import dataclass
from typing import Any

from _process import cpu_seconds
from pymongo import AsyncMongoClient, UpdateOne

DATABASE = "bench_calibration"
STAMP = "2026-01-01T00:00:00.000Z"
ACTOR = {"kind": "system", "id": "kinflow", "roles": []}
CONTEXT = {"runtime": "python", "engine": "kinflow"}


@dataclass
class Calibration:
    commits: int
    seconds: float
    lake_cpu: float  # the daemon's CPU seconds over the same time
    indexes: int  # indexes of the calibration collection (those of the dataset)

    @property
    def rate(self) -> float:
        return self.commits / self.seconds if self.seconds else 0.0

    @property
    def lake_ms(self) -> float:
        return self.lake_cpu * 1000 / self.commits if self.commits else 0.0


def _entry(kind: str, **extra: Any) -> dict[str, Any]:
    return {"_key": uuid.uuid4().hex[:12], "_type": kind, "at": STAMP, **extra,
            "actor": ACTOR, "executionContext": CONTEXT}


def child_document(n: int) -> dict[str, Any]:
    """A ~2 KB document with a child instance's fields, in the calibration database (which
    no kinflow process reads), so the dataset's partial indexes take it as they take a child."""
    snapshot = "x" * 700  # the child's definition snapshot, kept as a string
    return {
        "_id": f"calibration.{n:06d}", "_type": "kinflow.instance", "modelVersion": 1,
        "minReaderModel": 1, "dataset": "production", "definition": "bench-child",
        "pinnedVersion": 1, "pinnedContentHash": "2b538287dc5851c7",
        "definitionSnapshot": snapshot,
        "fields": [{"_key": "11c258f13413", "_type": "string", "name": "item",
                    "value": f"item-{n}"}],
        "context": [], "ancestors": [{"id": "lake:production:parent", "type": "x"}],
        "currentStage": "work",
        "stages": [{"_key": "17df92935007", "name": "work", "enteredAt": STAMP, "fields": [],
                    "activities": [{"_key": "d2c9a15c21bd", "name": "task",
                                    "status": "active", "startedAt": STAMP,
                                    "firedActions": [], "fields": []}]}],
        "pendingEffects": [], "effectHistory": [], "processedRequests": [],
        "startedAt": STAMP, "lastChangedAt": STAMP, "watch": [], "startedBy": ACTOR,
        "parentInstance": "parent",
        "history": [_entry("stageEntered", stage="work")],
        "_rev": "r0", "_createdAt": STAMP, "_updatedAt": STAMP,
    }


def fire_update() -> dict[str, Any]:
    """The operators of one child fire: the changed state set, the new history pushed."""
    stages = [{"_key": "17df92935007", "name": "work", "enteredAt": STAMP, "exitedAt": STAMP,
               "fields": [], "activities": [{"_key": "d2c9a15c21bd", "name": "task",
                                             "status": "done", "startedAt": STAMP,
                                             "completedAt": STAMP, "completedBy": "kinflow",
                                             "firedActions": [], "fields": []}]},
              {"_key": "393906683ce5", "name": "done", "enteredAt": STAMP, "fields": [],
               "activities": []}]
    pushed = [
        _entry("actionFired", stage="work", activity="task", action="finish",
               driverKind="system"),
        _entry("activityStatusChanged", stage="work", activity="task", to="done"),
        _entry("opApplied", stage="work", activity="task", action="finish",
               opType="status.set", resolved={"activity": "task", "status": "done"}),
        _entry("stageExited", stage="work", toStage="done", transition="to-done"),
        _entry("transitionFired", fromStage="work", toStage="done", transition="to-done"),
        _entry("stageEntered", stage="done", fromStage="work", transition="to-done"),
    ]
    return {"$set": {"completedAt": STAMP, "currentStage": "done", "lastChangedAt": STAMP,
                     "propagateTo": "parent", "propagateToken": uuid.uuid4().hex[:12],
                     "result": {"outcome": "ok"},
                     "stages": stages, "_rev": uuid.uuid4().hex[:16], "_updatedAt": STAMP},
            "$push": {"history": {"$each": pushed}}}


async def raw_commit_rate(lake: AsyncMongoClient[dict[str, Any]], lake_pid: int | None,
                          source: str, *, callers: int, seconds: float, pool: int = 4000,
                          group: int = 1) -> Calibration:
    """``callers`` tasks committing find + update + commit for ``seconds``, on a copy of the
    indexes of collection ``source`` (``database.collection``) of the same daemon.

    ``group`` > 1 commits that many documents per transaction (one ``find`` by
    ``$in``, one ``update`` command of ``group`` statements, one commit): what a
    group commit of concurrent fires would cost the daemon per document."""
    database, collection = source.split(".", 1)
    db = lake[DATABASE]
    await lake.drop_database(DATABASE)
    target = db["children"]
    indexes = 0
    async for spec in await lake[database][collection].list_indexes():
        if spec["name"] == "_id_":
            continue
        options = {k: v for k, v in spec.items() if k not in ("key", "v", "ns")}
        await target.create_index(list(spec["key"].items()), **options)
        indexes += 1
    for start in range(0, pool, 500):
        await target.insert_many([child_document(n)
                                  for n in range(start, min(pool, start + 500))])
    template = fire_update()
    ids = iter(range(10**9))
    commits = [0]
    stop = time.perf_counter() + seconds

    def fresh() -> dict[str, Any]:
        ops = copy.deepcopy(template)
        ops["$set"]["_rev"] = uuid.uuid4().hex[:16]
        return ops

    async def one(doc_ids: list[str]) -> None:
        async with lake.start_session() as session:
            async with await session.start_transaction():
                if len(doc_ids) == 1:
                    await target.find_one({"_id": doc_ids[0]}, session=session)
                    await target.update_one({"_id": doc_ids[0]}, fresh(), session=session)
                    return
                await target.find({"_id": {"$in": doc_ids}}, session=session).to_list(None)
                await target.bulk_write([UpdateOne({"_id": i}, fresh()) for i in doc_ids],
                                        ordered=False, session=session)

    async def caller() -> None:
        while time.perf_counter() < stop:
            await one([f"calibration.{next(ids) % pool:06d}" for _ in range(group)])
            commits[0] += group

    cpu, began = cpu_seconds(lake_pid), time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    elapsed, used = time.perf_counter() - began, cpu_seconds(lake_pid) - cpu
    await lake.drop_database(DATABASE)
    return Calibration(commits[0], elapsed, used, indexes + 1)
