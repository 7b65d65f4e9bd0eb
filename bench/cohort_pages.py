"""What a cohort page and the cohort's counts read on a large cohort: chunks and ms.

Spawns one windowed cohort (``--rows``, ``maxActive: 100``) on the embedded
lake, finishes ``--finish`` of its children, then reads what the ``cohort``
query and ``Cohort.page`` read (schema/cohort_page.py): the counts, pages of
100 unfiltered and filtered by status, a GROQ-filtered page with its
``totalCount``, and for comparison the whole registry. Printed per read: the
chunk documents the lake handed over and the best of ``--repeat`` timings
(docs/subworkflows.md, "Paged cohorts").

    PYTHONPATH=. python bench/cohort_pages.py [--rows 10000] [--finish 30] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from _cohort_definitions import CHILD, windowed_parent
from _harness import lake_uri
from rich.console import Console
from rich.table import Table

from kinflow.core.context import Limits
from kinflow.engine import Engine
from kinflow.schema.bulk import CohortFilter
from kinflow.schema.cohort_page import encode, indexed
from kinflow.schema.instance_parts import ChildStatus
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client


class Chunks:
    """Counts the chunk documents ``get_many``/``find`` return from the rows collection."""

    def __init__(self, lake: Lake, collection: str) -> None:
        self.n = 0
        find, get_many = lake.find, lake.get_many

        async def counted_find(filter_: Any, **kwargs: Any) -> list[dict[str, Any]]:
            found = await find(filter_, **kwargs)
            self.n += len(found) if kwargs.get("dataset") == collection else 0
            return found

        async def counted_get_many(ids: Any, **kwargs: Any) -> dict[str, dict[str, Any]]:
            found = await get_many(ids, **kwargs)
            self.n += len(found) if kwargs.get("dataset") == collection else 0
            return found

        lake.find = counted_find  # type: ignore[method-assign]
        lake.get_many = counted_get_many  # type: ignore[method-assign]


async def run(uri: str, rows: int, finish: int, repeat: int) -> list[tuple[str, int, float]]:
    settings = Settings(mongodb_uri=uri, operation_timeout=600.0)
    lake = Lake(make_client(uri, settings), f"bench_{uuid.uuid4().hex[:8]}",
                operation_timeout=600.0)
    await lake.ensure_dataset()
    engine = Engine(lake, limits=Limits.from_settings(settings), propagation="inline")
    await engine.ensure_ready()
    await engine.deploy([CHILD, windowed_parent(100)])
    await lake.collection().insert_many(
        [{"_id": f"item-{n:05d}", "_type": "bench-item", "_rev": "r"} for n in range(rows)])
    parent_id = (await engine.start_instance("bench-parent")).instance.id_
    started = (await engine.get_instance(parent_id)).subworkflows
    for row in [r for r in started if not r.queued][:finish]:
        await engine.fire_action(row.child_id, "task", "finish")
    store = engine.rows
    chunks = Chunks(store.lake, store.collection)
    doc = await lake.get(parent_id)
    assert doc is not None
    found = await indexed(store, engine.limits, doc, "translate")
    assert found is not None
    source = found[0]

    async def groq_page() -> int:
        page = await source.page(100, None, CohortFilter(where="rowKey > 'item-09990'"))
        return await page.total_count()

    async def whole() -> Any:
        store._chunks.clear()
        return await engine.assemble(doc)

    reads: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("cohort (counts + last row)", lambda: indexed(store, engine.limits, doc, "translate")),
        ("page 100, unfiltered, first", lambda: source.page(100, None, None)),
        ("page 100, unfiltered, from the middle",
         lambda: source.page(100, encode("row", rows // 2 - 1), None)),
        ("page 100, status DONE", lambda: source.page(
            100, None, CohortFilter(status=[ChildStatus.DONE]))),
        ("page 100, status QUEUED", lambda: source.page(
            100, None, CohortFilter(status=[ChildStatus.QUEUED]))),
        ("page 100, status ACTIVE", lambda: source.page(
            100, None, CohortFilter(status=[ChildStatus.ACTIVE]))),
        ("GROQ where page + totalCount", groq_page),
        ("whole registry (Engine.assemble)", whole),
    ]
    table: list[tuple[str, int, float]] = []
    for name, read in reads:
        best, n = float("inf"), 0
        for _ in range(repeat):
            chunks.n = 0
            began = time.perf_counter()
            await read()
            best = min(best, time.perf_counter() - began)
            n = chunks.n
        table.append((name, n, best * 1000))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--finish", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--uri", default=None, help="a MongoDB URI instead of the embedded lake")
    args = parser.parse_args()
    with lake_uri(args.uri) as uri:
        rows = asyncio.run(run(uri, args.rows, args.finish, args.repeat))
    table = Table(title=f"Cohort of {args.rows:,} rows, {args.finish} finished "
                        f"(best of {args.repeat})")
    for column, justify in (("read", "left"), ("chunks", "right"), ("ms", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for name, n, ms in rows:
        table.add_row(name, str(n), f"{ms:.1f}")
    Console().print(table)


if __name__ == "__main__":
    main()
