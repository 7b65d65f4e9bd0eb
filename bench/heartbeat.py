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
reads every instance (docs/performance.md has the figures).

    python bench/heartbeat.py [--count 10000] [--batch 50] [--uri mongodb://...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from _harness import lake_uri

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


async def timed(label: str, work: Any) -> Any:
    started = time.perf_counter()
    result = await work
    print(f"  {label}: {(time.perf_counter() - started) * 1000:,.0f} ms", flush=True)
    return result


async def run(uri: str, count: int, batch: int) -> None:
    settings = Settings(mongodb_uri=uri, operation_timeout=600.0)
    client = make_client(uri, settings)
    lake = Lake(client, f"bench_{uuid.uuid4().hex[:8]}", operation_timeout=600.0)
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
        await timed("idle pass", worker.run_pass())
        await timed("idle pass again", worker.run_pass())
        past = iso(datetime.now(UTC) - timedelta(minutes=1))
        await lake.collection().update_many({"_type": "kinflow.instance"},
                                            {"$set": {"nextEvaluationAt": past}})
        due = await timed("due query alone", engine.due_instances(limit=batch))
        assert len(due) == batch
        report = await timed(f"due pass ({batch} ticks)", worker.run_pass())
        print(f"  ticked {len(report.of('tick'))}, failed {len(report.failed)}")
    finally:
        await client.drop_database(lake.database)
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--uri", default=None)
    args = parser.parse_args()
    with lake_uri(args.uri) as uri:
        asyncio.run(run(uri, args.count, args.batch))


if __name__ == "__main__":
    main()
