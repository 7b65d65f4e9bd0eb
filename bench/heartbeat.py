"""Heartbeat pass cost: one ``Worker.run_pass`` over N idle, then N due instances.

On a fresh embedded lake (or ``--uri``): deploys a one-stage definition whose
instance waits on an action, starts one instance and copies its document to
N instances (new ids, same shape), then times

* an idle pass (nothing owed: every query should find nothing, cheaply);
* a due pass after every instance's ``nextEvaluationAt`` is moved into the
  past (the pass ticks one batch, ``--batch``, and leaves the rest to the
  next passes), plus the due query alone.

The worker's queries must be served by an index on the embedded lake, whose
planner uses an index only when it covers every predicate; an unserved query
reads every instance (docs/performance.md has the figures). So every pass is
watched with a pymongo ``CommandListener``: each distinct read it sent
(``find``, ``aggregate``, ``count``, by collection and filter shape) is
replayed with ``explain`` (``executionStats``) and printed with its plan
(``IXSCAN <index>`` or ``COLLSCAN``), the documents it examined and how many
times the pass sent it. ``--passes`` repeats each pass to show the spread.

    python bench/heartbeat.py [--count 10000] [--batch 50] [--passes 3] [--uri mongodb://...]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from _harness import lake_uri
from pymongo import monitoring

from kinflow.engine import Engine
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client
from kinflow.timestamps import iso
from kinflow.worker import Worker

WAITING: dict[str, Any] = {
    "name": "bench-waiting", "title": "Waits for a person", "initialStage": "open",
    "fields": [],
    "stages": [
        {"name": "open", "activities": [{"name": "review", "actions": [
            {"name": "close", "status": "done"}]}],
         "transitions": [{"name": "to-closed", "to": "closed"}]},
        {"name": "closed"},
    ],
}


READS = ("find", "aggregate", "count", "distinct")
_SESSION_KEYS = {"lsid", "$clusterTime", "$db", "txnNumber", "autocommit", "startTransaction",
                 "readConcern", "$readPreference", "maxTimeMS", "apiVersion"}


class Reads(monitoring.CommandListener):
    """The reads a pass sends to one database, by shape, with how often each was sent."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.recording = False
        self.sent: Counter[str] = Counter()
        self.commands: dict[str, dict[str, Any]] = {}

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if not self.recording or event.database_name != self.database:
            return
        if event.command_name not in READS:
            return
        command = {k: v for k, v in event.command.items() if k not in _SESSION_KEYS}
        key = shape_of(event.command_name, command)
        self.sent[key] += 1
        self.commands.setdefault(key, copy.deepcopy(command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def shape_of(name: str, command: dict[str, Any]) -> str:
    """The command's name, collection and predicate fields (values left out)."""
    if name == "aggregate":
        match = next((stage["$match"] for stage in command.get("pipeline", [])
                      if "$match" in stage), {})
    else:
        match = command.get("filter") or command.get("query") or {}
    fields = ",".join(f"{k}:{_operator(v)}" for k, v in match.items())
    return f"{name} {command.get(name)} {{{fields}}}"


def _operator(value: Any) -> str:
    if isinstance(value, dict) and value and all(str(k).startswith("$") for k in value):
        return "/".join(sorted(value))
    return "="


def plan_of(explained: dict[str, Any]) -> tuple[str, int | None]:
    """The winning plan's leaf stages (IXSCAN <index> / COLLSCAN) and documents examined."""
    planner = explained.get("queryPlanner")
    stats = explained.get("executionStats")
    if planner is None:  # an aggregate: the first stage's $cursor holds the plan
        for stage in explained.get("stages", []):
            cursor = stage.get("$cursor")
            if cursor:
                planner, stats = cursor.get("queryPlanner"), cursor.get("executionStats")
                break
    leaves: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        children = [node[k] for k in ("inputStage",) if k in node] + node.get("inputStages", [])
        if not children:
            leaves.append(node.get("stage", "?") + (f" {node['indexName']}"
                                                    if "indexName" in node else ""))
        for child in children:
            walk(child)

    walk((planner or {}).get("winningPlan", {}))
    examined = (stats or {}).get("totalDocsExamined")
    return " + ".join(leaves) or "?", examined


async def explain_reads(lake: Lake, reads: Reads) -> None:
    """Replay every read the passes sent with explain, and once for real (timed).

    The embedded daemon's explain prints COLLSCAN for a filter with an ``_id``
    equality plus other predicates, yet runs it as a lookup by ``_id`` (about a
    millisecond over 10,000 documents; a ``hint`` on ``_id_`` makes it scan the
    whole index, ~100x slower), so such a read is judged by its time.
    """
    db = lake.client[lake.database]
    for key, command in sorted(reads.commands.items()):
        try:
            explained = await db.command({"explain": command, "verbosity": "executionStats"})
            plan, examined = plan_of(explained)
        except Exception as exc:  # a command the server cannot explain is reported, not fatal
            plan, examined = f"no explain ({type(exc).__name__})", None
        started = time.perf_counter()
        await db.command(command)
        took = (time.perf_counter() - started) * 1000
        by_id = "_id:=" in key
        served = plan.startswith("IXSCAN") or by_id
        note = (" (an _id equality: looked up by _id)" if by_id and not plan.startswith("IXSCAN")
                else "")
        print(f"    {reads.sent[key]:4d}x  {key}\n           explain: {plan}, examined "
              f"{examined if examined is not None else '?'}; ran in {took:,.1f} ms{note}"
              f"{'' if served else '  <-- no index'}")


async def timed(label: str, work: Any) -> Any:
    started = time.perf_counter()
    result = await work
    print(f"  {label}: {(time.perf_counter() - started) * 1000:,.0f} ms", flush=True)
    return result


async def passes(label: str, worker: Worker, reads: Reads, count: int) -> Any:
    """``count`` passes, each timed; the reads they sent are recorded."""
    report = None
    reads.recording = True
    for n in range(count):
        report = await timed(f"{label} {n + 1}", worker.run_pass())
    reads.recording = False
    return report


async def run(uri: str, count: int, batch: int, repeat: int) -> None:
    database = f"bench_{uuid.uuid4().hex[:8]}"
    reads = Reads(database)
    monitoring.register(reads)
    settings = Settings(mongodb_uri=uri, operation_timeout=600.0)
    client = make_client(uri, settings)
    lake = Lake(client, database, operation_timeout=600.0)
    try:
        await lake.ensure_dataset()
        engine = Engine(lake)
        await engine.ensure_ready()
        await engine.deploy([WAITING])
        first = await engine.start_instance("bench-waiting")
        template = await lake.get(first.instance.id_)
        assert template is not None
        copies = []
        for n in range(count - 1):
            copy = dict(template)
            copy["_id"] = f"instance.bench{n:07d}"
            copies.append(copy)
        for start in range(0, len(copies), 1000):
            await lake.collection().insert_many(copies[start:start + 1000])
        worker = Worker(engine, batch=batch, grace_seconds=0)
        await worker.ensure_ready()
        load = os.getloadavg()[0]
        print(f"{count:,} instances (load {load:.2f}), batch {batch}")
        await worker.run_pass()  # the first pass of a process also sets itself up
        await passes("idle pass", worker, reads, repeat)
        print("  reads of the idle passes:")
        await explain_reads(lake, reads)
        reads.sent.clear()
        reads.commands.clear()
        past = iso(datetime.now(UTC) - timedelta(minutes=1))
        await lake.collection().update_many({"_type": "kinflow.instance"},
                                            {"$set": {"nextEvaluationAt": past}})
        due = await timed("due query alone", engine.maintenance.due_instances(limit=batch))
        assert len(due) == batch
        report = await passes(f"due pass ({batch} ticks)", worker, reads, repeat)
        print(f"  last pass ticked {len(report.of('tick'))}, failed {len(report.failed)}")
        print("  reads of the due passes:")
        await explain_reads(lake, reads)
    finally:
        await client.drop_database(lake.database)
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--passes", type=int, default=3, help="passes timed of each kind")
    parser.add_argument("--uri", default=None)
    args = parser.parse_args()
    with lake_uri(args.uri) as uri:
        asyncio.run(run(uri, args.count, args.batch, args.passes))


if __name__ == "__main__":
    main()
