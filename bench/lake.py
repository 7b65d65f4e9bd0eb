"""Raw lake throughput on the embedded server: the ceiling the engine works under.

Prints single-document inserts/s, fenced updates/s and 3-write transactions/s
with 1 and with 8 concurrent tasks, all measured in one run on one daemon.
Each cell runs for ``--seconds`` (default 3).

    python bench/lake.py [--seconds 3] [--uri mongodb://...]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kinflow.errors import RevisionConflict
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client
from kinflow.storage.embedded import EmbeddedLake

Op = Callable[[int, int], Awaitable[None]]


async def rate(op: Op, tasks: int, seconds: float) -> float:
    """Operations per second with ``tasks`` concurrent loops."""
    stop = time.perf_counter() + seconds
    done = [0] * tasks

    async def loop(task: int) -> None:
        i = 0
        while time.perf_counter() < stop:
            await op(task, i)
            i += 1
        done[task] = i

    started = time.perf_counter()
    await asyncio.gather(*(loop(t) for t in range(tasks)))
    return sum(done) / (time.perf_counter() - started)


async def run(uri: str, seconds: float) -> list[tuple[str, float, float]]:
    settings = Settings(mongodb_uri=uri)
    lake = Lake(make_client(uri, settings), f"bench_{uuid.uuid4().hex[:8]}")
    await lake.ensure_dataset()
    run_id = uuid.uuid4().hex[:6]
    revs: dict[str, str] = {}

    async def insert(task: int, i: int) -> None:
        await lake.create({"_id": f"i-{run_id}-{task}-{i}-{time.perf_counter_ns()}", "_type": "b"})

    async def fenced_update(task: int, i: int) -> None:
        doc_id = f"u-{task}"
        if doc_id not in revs:
            revs[doc_id] = (await lake.create({"_id": doc_id, "_type": "b", "n": 0}))["_rev"]
        try:
            revs[doc_id] = await lake.update(doc_id, {"$inc": {"n": 1}}, expected_rev=revs[doc_id])
        except RevisionConflict:
            revs[doc_id] = ((await lake.get(doc_id)) or {})["_rev"]

    async def transaction(task: int, i: int) -> None:
        run_doc = f"run-{run_id}-{task}"

        async def body(session: Any) -> None:
            stamp = f"{task}-{i}-{time.perf_counter_ns()}"
            await lake.create({"_id": f"step-{stamp}", "_type": "b"}, session=session)
            await lake.collection().update_one(
                {"_id": run_doc}, {"$inc": {"n": 1}, "$setOnInsert": {"_type": "b"}},
                upsert=True, session=session,
            )  # fmt: skip
            await lake.create({"_id": f"event-{stamp}", "_type": "b"}, session=session)

        await lake.transaction(body)

    rows = []
    for name, op in [("single inserts/s", insert), ("fenced updates/s", fenced_update),
                     ("3-write transactions/s", transaction)]:  # fmt: skip
        one = await rate(op, 1, seconds)
        eight = await rate(op, 8, seconds)
        rows.append((name, one, eight))
    await lake.client.drop_database(lake.database)
    await lake.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--uri", default=None, help="a MongoDB URI instead of the embedded lake")
    args = parser.parse_args()
    daemon = None
    uri = args.uri
    if uri is None:
        daemon = EmbeddedLake(Path(tempfile.mkdtemp(prefix="kinflow-bench-")))
        uri = daemon.start()
    try:
        rows = asyncio.run(run(uri, args.seconds))
    finally:
        if daemon is not None:
            daemon.stop()
    table = Table(title=f"lake throughput ({'embedded' if daemon else uri}, sync-on-commit)")
    table.add_column("operation")
    table.add_column("1 task", justify="right")
    table.add_column("8 tasks", justify="right")
    for name, one, eight in rows:
        table.add_row(name, f"{one:,.0f}", f"{eight:,.0f}")
    Console().print(table)


if __name__ == "__main__":
    main()
