"""Cohort scale: spawn N children, complete each with one fire_action, time both.

For each size (100, 1,000, 5,000 by default), on a fresh database of one
embedded lake (or ``--uri``):

* spawn: ``start_instance`` of a parent whose first stage spawns one child of
  a one-action definition per ``bench-item`` document (a ``*`` query through
  the GROQ push-down); the call returns once every child exists;
* settle: 8 concurrent callers ``fire_action`` every child's only action; the
  clock stops when the parent has moved past its settled gate.

Printed per size: spawn and settle seconds, parent commits (writes to the
parent document, counted by a pymongo ``CommandListener``), lake operations
per child (every command the client sent), propagation rounds, and the ratio
time(5,000) / time(1,000) (the target is at most 6, i.e. near-linear).

The engine runs with ``propagation="background"``: a child's verb returns
after its own commit and the parent reacts in coalesced rounds
(docs/subworkflows.md explains why inline waits would make this quadratic).

    python bench/cohort.py [--sizes 100,1000,5000] [--callers 8] [--uri mongodb://...]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from _cohort_definitions import CHILD, PARENT
from pymongo import monitoring
from rich.console import Console
from rich.table import Table

from kinflow.engine import Engine, Limits
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client
from kinflow.storage.embedded import EmbeddedLake


@dataclass
class Counter(monitoring.CommandListener):
    """Counts every command the client sends, and writes aimed at one document."""

    total: int = 0
    target: str | None = None
    target_writes: int = 0
    by_name: dict[str, int] = field(default_factory=dict)

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.total += 1
        self.by_name[event.command_name] = self.by_name.get(event.command_name, 0) + 1
        if self.target is None or event.command_name != "update":
            return
        for update in event.command.get("updates", []):
            if update.get("q", {}).get("_id") == self.target:
                self.target_writes += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@dataclass
class Row:
    size: int
    spawn: float
    settle: float
    parent_commits: int
    ops_per_child: float
    rounds: int

    @property
    def total(self) -> float:
        return self.spawn + self.settle


async def one_size(uri: str, settings: Settings, size: int, callers: int) -> Row:
    counter = Counter()
    client = make_client(uri, settings)
    client_with_listener = type(client)(uri, tz_aware=True, event_listeners=[counter])
    await client.close()
    lake = Lake(client_with_listener, f"bench_{uuid.uuid4().hex[:8]}",
                operation_timeout=600.0)
    try:
        await lake.ensure_dataset()
        engine = Engine(lake, limits=Limits.from_settings(settings), propagation="background")
        await engine.ensure_ready()
        await engine.deploy([CHILD, PARENT])
        await lake.collection().insert_many(
            [{"_id": f"item-{n:05d}", "_type": "bench-item", "_rev": "r"} for n in range(size)])

        counter.total = 0
        started = time.perf_counter()
        result = await engine.start_instance("bench-parent")
        spawn = time.perf_counter() - started
        parent_id = result.instance.id_
        counter.target = parent_id
        children = [row.child_id for row in result.instance.subworkflows]
        assert len(children) == size, f"spawned {len(children)} of {size}"

        queue: asyncio.Queue[str] = asyncio.Queue()
        for child in children:
            queue.put_nowait(child)

        async def caller() -> None:
            while not queue.empty():
                child = queue.get_nowait()
                await engine.fire_action(child, "task", "finish")

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(callers)))
        await engine.maintenance.settle_propagation()
        parent = await engine.get_instance(parent_id)
        if parent.currentStage != "over":  # not expected; a tick would be the heartbeat's
            parent = (await engine.tick(parent_id)).instance
        settle = time.perf_counter() - started
        assert parent.currentStage == "over", parent.currentStage
        assert all(row.resolved is not None for row in parent.subworkflows)
        return Row(size, spawn, settle, counter.target_writes, counter.total / size,
                   engine.driver.propagator.rounds)
    finally:
        await client_with_listener.drop_database(lake.database)
        await client_with_listener.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--uri", default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    daemon: EmbeddedLake | None = None
    uri = args.uri
    if uri is None:
        daemon = EmbeddedLake(Path(tempfile.mkdtemp(prefix="kinflow-bench-")))
        uri = daemon.start()
    settings = Settings(mongodb_uri=uri, operation_timeout=600.0)
    console = Console()
    rows: list[Row] = []
    try:
        for size in sizes:
            console.print(f"cohort of {size:,} ...")
            rows.append(await one_size(uri, settings, size, args.callers))
    finally:
        if daemon is not None:
            daemon.stop()
    table = Table(title=f"Cohort scale ({args.callers} concurrent callers, embedded lake)")
    for column in ("children", "spawn s", "settle s", "total s", "parent commits",
                   "lake ops / child", "propagation rounds"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(f"{row.size:,}", f"{row.spawn:.2f}", f"{row.settle:.2f}",
                      f"{row.total:.2f}", str(row.parent_commits), f"{row.ops_per_child:.1f}",
                      str(row.rounds))
    console.print(table)
    by_size = {row.size: row for row in rows}
    if 1000 in by_size and 5000 in by_size:
        ratio = by_size[5000].total / by_size[1000].total
        console.print(f"time(5,000) / time(1,000) = {ratio:.2f} (target <= 6)")


if __name__ == "__main__":
    asyncio.run(main())
