"""What the benchmarks share: a lake to measure on, an engine on a fresh database of it, a rate
loop, a ratio table.

Benchmarks run as scripts (``python bench/<name>.py``), so this module is imported
as a sibling: ``from _harness import ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kinflow.engine import Engine
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client
from kinflow.storage.embedded import EmbeddedLake

Rows = list[tuple[str, float, float]]


def measure(
    doc: str | None, run: Callable[[str, float], Coroutine[Any, Any, Rows]]
) -> tuple[str, Rows]:
    """Parse ``--seconds``/``--uri``, run ``run(uri, seconds)`` on that lake; return its rows."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each cell")
    parser.add_argument("--uri", default=None, help="a MongoDB URI instead of the embedded lake")
    args = parser.parse_args()
    with lake_uri(args.uri) as uri:
        return args.uri or "embedded", asyncio.run(run(uri, args.seconds))


@contextmanager
def lake_uri(uri: str | None, *, sync_on_commit: bool = True) -> Iterator[str]:
    """``uri`` when given, else a fresh embedded daemon (stopped afterwards)."""
    if uri is not None:
        yield uri
        return
    daemon = EmbeddedLake(Path(tempfile.mkdtemp(prefix="kinflow-bench-")),
                          sync_on_commit=sync_on_commit)  # fmt: skip
    try:
        yield daemon.start()
    finally:
        daemon.stop()


@asynccontextmanager
async def engine_on_a_fresh_database(uri: str, definitions: list[dict[str, Any]]
                                     ) -> AsyncIterator[Engine]:
    """A ready engine on a database of its own (``bench_<random>``) of the lake at ``uri``,
    ``definitions`` deployed; the database is dropped afterwards."""
    settings = Settings(mongodb_uri=uri, operation_timeout=600.0)
    client = make_client(uri, settings)
    lake = Lake(client, f"bench_{uuid.uuid4().hex[:8]}", operation_timeout=600.0)
    try:
        await lake.ensure_dataset()
        engine = Engine(lake)
        await engine.ensure_ready()
        await engine.deploy(definitions)
        yield engine
    finally:
        await client.drop_database(lake.database)
        await client.close()


async def rate(op: Callable[[int], Awaitable[None]], tasks: int, seconds: float) -> float:
    """Completed operations per second over ``tasks`` concurrent loops of ``op(task)``."""
    stop = time.perf_counter() + seconds
    done = [0] * tasks

    async def loop(task: int) -> None:
        while time.perf_counter() < stop:
            await op(task)
            done[task] += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop(t) for t in range(tasks)))
    return sum(done) / (time.perf_counter() - started)


def print_rates(title: str, rows: Rows, ratios: Rows | None = None) -> None:
    """One row per operation with its 1-task and 8-task rates, then the ratios."""
    table = Table(title=title)
    table.add_column("operation")
    table.add_column("1 task", justify="right")
    table.add_column("8 tasks", justify="right")
    for name, one, eight in rows:
        table.add_row(name, f"{one:,.0f}", f"{eight:,.0f}")
    for name, one, eight in ratios or []:
        table.add_row(name, f"{one:.2f}", f"{eight:.2f}")
    Console().print(table)
