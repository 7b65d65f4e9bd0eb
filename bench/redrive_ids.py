"""What a redrive pays for reading its rows' next child ids before it queues them.

Each ``redriveCohort`` batch reads, in its own transaction, the ids its rows'
next attempts would take, so a row whose id holds a document the engine did
not write is refused alone (``child-id-taken``) instead of failing the batch.
This measures that read where it costs most: a parent whose N children all
fail at once, redriven whole again and again (every attempt fails at once
too, so every call redrives all N rows in ``KINFLOW_BULK_BATCH_ROWS``
batches). Calls alternate between the engine as shipped and the same engine
with the read replaced by "nothing is taken"; printed: the median seconds of
each, the difference per row, and the lake reads the check made.

    python bench/redrive_ids.py [--rows 256] [--calls 6] [--uri mongodb://...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from typing import Any

from _harness import lake_uri

from kinflow.core.cohort import redrive
from kinflow.engine import Engine
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client

FAILING_CHILD: dict[str, Any] = {
    "name": "bench-failing", "title": "Fails at once", "lifecycle": "child",
    "initialStage": "work",
    "fields": [{"name": "item", "type": "string", "initialValue": {"type": "input"}}],
    "stages": [
        {"name": "work", "transitions": [{"name": "to-failed", "to": "failed", "when": "true"}]},
        {"name": "failed", "outcome": "failed"},
    ],
}
PARENT: dict[str, Any] = {
    "name": "bench-redriven", "title": "Redriven parent", "initialStage": "fan",
    "fields": [{"name": "items", "type": "array", "of": [{"name": "name", "type": "string"}],
                "initialValue": {"type": "input"}}],
    "stages": [
        {"name": "fan", "activities": [{"name": "translate", "actions": [
            {"name": "fan-out", "when": "true", "spawn": {
                "forEach": "$fields.items[].name",
                "definition": {"name": "bench-failing"}, "with": {"item": "$row"}}},
            {"name": "all-done", "status": "done", "when":
                "count($subworkflows[activity == 'translate' && current && "
                "outcome != 'succeeded']) == 0"},
        ]}], "transitions": [{"name": "to-over", "to": "over"}]},
        {"name": "over"},
    ],
}


async def run(uri: str, rows: int, calls: int) -> None:
    lake = Lake(make_client(uri, Settings(mongodb_uri=uri)), f"bench_{uuid.uuid4().hex[:8]}")
    engine = Engine(lake)
    await engine.ensure_ready()
    await engine.deploy([FAILING_CHILD, PARENT])
    items = {"items": [{"name": f"item-{n}"} for n in range(rows)]}
    parent = (await engine.start_instance("bench-redriven", fields=items)).instance.id_
    shipped = redrive.occupied
    reads = 0

    def counted(ctx: Any, ids: list[str]) -> set[str]:
        nonlocal reads
        unknown = [i for i in ids if ctx.gdr(i) not in ctx.documents
                   and ctx.gdr(i) not in ctx.absent]
        reads += 1 if unknown else 0
        return shipped(ctx, ids)

    timings: dict[str, list[float]] = {"checked": [], "unchecked": []}
    for call in range(2 * calls):
        name = "checked" if call % 2 == 0 else "unchecked"
        redrive.occupied = counted if name == "checked" else (lambda ctx, ids: set())
        started = time.perf_counter()
        result = await engine.redrive_cohort(parent, "translate")
        timings[name].append(time.perf_counter() - started)
        assert result.applied == rows and not result.refusals, result
    redrive.occupied = shipped
    checked = statistics.median(timings["checked"])
    unchecked = statistics.median(timings["unchecked"])
    print(f"redriveCohort of {rows} rows, {calls} calls each, median seconds:")
    print(f"  with the id check   {checked:.3f}")
    print(f"  without it          {unchecked:.3f}")
    print(f"  difference per row  {(checked - unchecked) / rows * 1000:.3f} ms")
    print(f"  in-transaction id reads made by the check: {reads} "
          f"({reads / calls:.1f} per call)")
    await lake.client.drop_database(lake.database)
    await lake.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256, help="children of the parent")
    parser.add_argument("--calls", type=int, default=6, help="redrives timed each way")
    parser.add_argument("--uri", default=None, help="a MongoDB URI instead of the embedded lake")
    args = parser.parse_args()
    with lake_uri(args.uri) as uri:
        asyncio.run(run(uri, args.rows, args.calls))


if __name__ == "__main__":
    main()
