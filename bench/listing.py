"""What a page of ``instances`` costs in each order, over roots with large cohorts.

Newest first sorts by ``startedAt`` (no index serves it, so the lake sorts every
matching instance), ascending ids by ``_id`` (the ``type_id`` index). On a fresh
embedded lake (or ``--uri``) this starts ``--roots`` roots that each spawn
``--children`` children, then reads the first page of 50, and the page after it,
``--reads`` times in each order, with and without the roots-only filter, and
prints the median and the slowest read in milliseconds.

    python bench/listing.py --roots 4 --children 500
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from _harness import engine_on_a_fresh_database, lake_uri

from kinflow.core.readmodel import roots_filter
from kinflow.core.state import INSTANCE_TYPE
from kinflow.schema import listing
from kinflow.storage import Lake

PAGE = 50


def definitions(children: int) -> list[dict[str, Any]]:
    """A root whose one stage spawns ``children`` leaves at once; leaves wait."""
    leaf = {"name": "listing-leaf", "title": "leaf", "initialStage": "work", "lifecycle": "child",
            "fields": [], "stages": [{"name": "work", "activities": [{"name": "task", "actions": [
                {"name": "finish", "status": "done"}]}],
                "transitions": [{"name": "to-done", "to": "done"}]}, {"name": "done"}]}
    root = {"name": "listing-root", "title": "root", "initialStage": "work", "fields": [],
            "stages": [{"name": "work", "activities": [{"name": "fan", "actions": [
                {"name": "fan-out", "when": "true", "spawn": {
                    "forEach": "[" + ",".join(str(i) for i in range(children)) + "]",
                    "definition": {"name": "listing-leaf"}}},
                {"name": "close", "status": "done"}]}],
                "transitions": [{"name": "to-done", "to": "done"}]}, {"name": "done"}]}
    return [root, leaf]


async def timed(lake: Lake, query: dict[str, Any], order: listing.Order, reads: int
                ) -> tuple[float, float]:
    """Median and slowest milliseconds of reading page one and then page two."""
    took = []
    for _ in range(reads):
        started = time.perf_counter()
        first = await lake.find(query, sort=order.sort, limit=PAGE + 1)
        narrowed = order.after(query, order.cursor(first[PAGE - 1])) if len(first) > PAGE else None
        if narrowed is not None:
            await lake.find(narrowed, sort=order.sort, limit=PAGE + 1)
        took.append((time.perf_counter() - started) * 1000 / 2)
    return statistics.median(took), max(took)


async def run(uri: str, roots: int, children: int, reads: int) -> None:
    async with engine_on_a_fresh_database(uri, definitions(children)) as engine:
        lake = engine.lake
        started = time.perf_counter()
        for _ in range(roots):
            await engine.start_instance("listing-root")
        total = await lake.count({"_type": INSTANCE_TYPE})
        print(f"{roots} roots, {total:,} instances in {time.perf_counter() - started:.1f} s "
              f"(load {os.getloadavg()[0]:.2f})")
        every = {"_type": INSTANCE_TYPE}
        only_roots = {"_type": INSTANCE_TYPE, **roots_filter()}
        for label, query in (("every instance", every), ("roots only", only_roots)):
            for name, order in (("ascending ids", listing.BY_ID),
                                ("newest first", listing.NEWEST_FIRST)):
                median, slowest = await timed(lake, query, order, reads)
                print(f"  {label:15} {name:14} page of {PAGE}: median {median:6.1f} ms, "
                      f"slowest {slowest:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--roots", type=int, default=4)
    parser.add_argument("--children", type=int, default=500)
    parser.add_argument("--reads", type=int, default=20)
    parser.add_argument("--uri", default=None, help="a MongoDB URI instead of the embedded lake")
    args = parser.parse_args()
    with lake_uri(args.uri) as uri:
        asyncio.run(run(uri, args.roots, args.children, args.reads))


if __name__ == "__main__":
    main()
