"""What an explicit purge costs: finished families of three, counted by a dry run, then purged.

On a fresh embedded lake (or ``--uri``) this deploys a root that spawns one
``mid`` child, which spawns one ``leaf`` (both detached), starts
``--families`` roots, finishes every member, and then times the purge that
``kinflow purge --before <now>`` and ``purgeInstances`` run: first a dry run
(counts only), then the purge itself. It prints families and instances per
second; docs/retention.md quotes the figures.

    python bench/retention.py --families 300
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from _harness import engine_on_a_fresh_database, lake_uri

from kinflow.core.retention import PurgeFilter
from kinflow.engine import Engine
from kinflow.engine.retention import Purger
from kinflow.timestamps import iso


def generation(name: str, spawns: str | None) -> dict[str, Any]:
    """One stage with a ``finish`` action; ``spawns`` names the child it starts (detached)."""
    actions: list[dict[str, Any]] = [{"name": "finish", "status": "done"}]
    if spawns:
        actions.insert(0, {"name": "fan-out", "when": "true", "spawn": {
            "forEach": "['a']", "definition": {"name": spawns}, "onExit": "detach"}})
    return {"name": name, "title": name, "initialStage": "work", "fields": [],
            "stages": [{"name": "work", "activities": [{"name": "task", "actions": actions}],
                        "transitions": [{"name": "to-done", "to": "done"}]},
                       {"name": "done"}]}


FAMILY = [generation("purge-root", "purge-mid"), generation("purge-mid", "purge-leaf"),
          generation("purge-leaf", None)]


async def finish_family(engine: Engine, root: str) -> int:
    """Finish the leaf, then the mid, then the root; the number of members finished."""
    ids = [root]
    for definition in ("purge-mid", "purge-leaf"):
        found = await engine.lake.find({"_type": "kinflow.instance", "definition": definition,
                                        "parentInstance": ids[-1]}, projection={"_id": 1})
        ids.append(str(found[0]["_id"]))
    for member in reversed(ids):
        await engine.fire_action(member, "task", "finish")
    return len(ids)


async def run(uri: str, families: int) -> None:
    async with engine_on_a_fresh_database(uri, FAMILY) as engine:
        lake = engine.lake
        instances = 0
        for _ in range(families):
            root = (await engine.start_instance("purge-root")).instance.id_
            instances += await finish_family(engine, root)
        print(f"{families:,} families, {instances:,} instances (load {os.getloadavg()[0]:.2f})")
        now = datetime.now(UTC) + timedelta(seconds=1)
        where = PurgeFilter(finished_before=iso(now))
        purger = Purger(lake, lake.default_dataset)
        for dry_run in (True, False):
            started = time.perf_counter()
            counts = await purger.purge(where, now, dry_run=dry_run)
            took = time.perf_counter() - started
            print(f"  {'dry run' if dry_run else 'purge'}: {counts.roots:,} families, "
                  f"{counts.instances:,} instances in {took:.2f} s "
                  f"({counts.roots / took:,.0f} families/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--families", type=int, default=300)
    parser.add_argument("--uri", default=None, help="a MongoDB URI instead of the embedded lake")
    args = parser.parse_args()
    with lake_uri(args.uri) as uri:
        asyncio.run(run(uri, args.families))


if __name__ == "__main__":
    main()
