"""Does the lake's CPU per child grow with the dataset? The same small cohort on lakes of two sizes.

For each ``--extra`` count (``0,50000`` by default) this starts ``kinflow serve`` with
default settings (its own data directory, hence its own embedded lake), writes that many
filler documents straight into the lake with ``insert_many`` (half finished child
instances of another parent, half content documents of another type: what a large
cohort leaves behind), then runs the self-completing cohort of
``bench/cohort_registration.py --complete`` (``--rows`` rows, ``maxActive`` 200) and
prints the lake daemon's and the API's CPU milliseconds per child (user + system) and
the wall time. With CPU per child flat across ``--extra``, the lake's work per child does
not depend on the size of the dataset; ``--rows`` at two sizes (``--extra 0``) compares
cohorts of two sizes. ``--env NAME=VALUE`` passes a setting to the server. Two runs at
once (an old tree through ``PYTHONPATH`` beside the new) share the machine's load.

    python bench/cohort_growth.py [--extra 0,50000] [--rows 2000] [--env NAME=VALUE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _process import cpu_seconds, lake_pid
from _served import Lake, served
from cohort_api import DEPLOY, call
from cohort_registration import AUTO_CHILD, START, parent

FINISHED = "2026-01-01T00:00:00.000000Z"


def filler(i: int) -> dict[str, Any]:
    """A finished child instance of another parent (even ``i``) or a content document."""
    if i % 2:
        return {"_id": f"filler-item-{i:07d}", "_type": "filler-item", "n": i,
                "site": f"site-{i % 97}", "title": f"Filler {i}"}
    return {"_id": f"filler-run-{i:07d}", "_type": "kinflow.instance", "definition": "filler",
            "version": 1, "currentStage": "done", "completedAt": FINISHED,
            "parentInstance": "filler-parent", "ancestors": [{"id": "filler-parent"}],
            "fields": {"item": f"filler-item-{i + 1:07d}"}, "history": [
                {"at": FINISHED, "kind": "transition", "from": "work", "to": "done"}],
            "_rev": "r1", "_createdAt": FINISHED, "_updatedAt": FINISHED}


async def fill(lake: Lake, n: int) -> None:
    coll = lake.kinflow.production
    for start in range(0, n, 1000):
        await coll.insert_many([filler(i) for i in range(start, min(n, start + 1000))],
                               ordered=False)


async def items(lake: Lake, n: int) -> None:
    coll = lake.kinflow.production
    for start in range(0, n, 1000):
        await coll.insert_many([{"_id": f"bench-item-{i:07d}", "_type": "bench-item", "n": i,
                                 "site": f"site-{i % 97}", "title": f"Item {i}"}
                                for i in range(start, min(n, start + 1000))], ordered=False)


After = Callable[[Lake, int | None, int], Awaitable[None]]


async def one_run(extra: int, rows: int, after: After | None = None,
                  env: dict[str, str] | None = None) -> dict[str, Any]:
    """The cohort on a lake holding ``extra`` filler documents; ``after`` (an analysis of
    the lake the cohort left, given the lake, its daemon's pid and ``rows``) runs before
    the server stops."""
    result: dict[str, Any] = {"extra": extra}
    async with served("kinflow-growth-", env, timeout=600) as server:
        http, lake, process = server.http, server.lake, server.process
        daemon = lake_pid(server.data_dir)
        await fill(lake, extra)
        await items(lake, rows)
        await call(http, DEPLOY, {"d": [AUTO_CHILD, parent(str(AUTO_CHILD["name"]), 200)]})
        cpu0 = cpu_seconds(process.pid), cpu_seconds(daemon)
        started = time.perf_counter()
        parent_id = (await call(http, START))["startInstance"]["instance"]["id"]
        docs = lake.kinflow.production
        while True:
            found = await docs.find_one({"_id": parent_id}, {"currentStage": 1})
            if (found or {}).get("currentStage") == "over":
                break
            await asyncio.sleep(0.1)
        result["seconds"] = time.perf_counter() - started
        result["api_ms"] = 1000 * (cpu_seconds(process.pid) - cpu0[0]) / rows
        result["lake_ms"] = 1000 * (cpu_seconds(daemon) - cpu0[1]) / rows
        if after is not None:
            await after(lake, daemon, rows)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--extra", default="0,50000")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for kinflow serve (repeatable)")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    print(f"load: {os.getloadavg()} settings: {env}", flush=True)
    print("| extra documents | rows | seconds | lake CPU ms/child | API CPU ms/child |")
    print("|---:|---:|---:|---:|---:|", flush=True)
    for extra in (int(s) for s in args.extra.split(",")):
        r = asyncio.run(one_run(extra, args.rows, env=env))
        print(f"| {extra:,} | {args.rows:,} | {r['seconds']:.1f} | {r['lake_ms']:.2f} | "
              f"{r['api_ms']:.2f} |", flush=True)
    print(f"load: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
