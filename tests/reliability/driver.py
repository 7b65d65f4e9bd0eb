"""The process the kill tests SIGKILL: real engine verbs on the release family, at random.

Run as ``python -m tests.reliability.driver URI DATABASE SEED PARENTS CHILDREN GRANDCHILDREN``.
It keeps ``PARENTS`` releases live (starting the next one when one finishes),
and otherwise fires random actions on live instances: translations are
submitted or given up, reviews approved or rejected, releases cancelled, and
now and then any live instance is aborted. Refusals (an action that is no
longer enabled, a target another step just finished) are normal here and
only counted. Anything else is a bug: the driver exits non-zero with the
trace, and the test fails on it. It prints ``ready`` once connected and one
line per operation, so the test can kill it in the middle of real work; it
stops by itself after a bounded number of operations.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from typing import Any

from kinflow.engine import Engine
from kinflow.errors import KinflowError
from kinflow.storage import Lake
from tests.reliability.family import Shape, instance_id, open_lake, release_id, seed_release

MAX_OPS = 5000
LIVE = {"_type": "kinflow.instance", "completedAt": None}


async def live_instances(lake: Lake) -> list[dict[str, Any]]:
    return await lake.find(LIVE, projection={"_id": 1, "definition": 1, "currentStage": 1})


async def started_releases(lake: Lake) -> tuple[int, int]:
    """(how many releases were ever started, how many are live)."""
    found = await lake.find({"_type": "kinflow.instance", "definition": "release"},
                            projection={"completedAt": 1})
    return len(found), sum(1 for doc in found if doc.get("completedAt") is None)


async def step(engine: Engine, rng: random.Random, shape: Shape) -> str:
    """One random operation; returns what it tried."""
    lake = engine.lake
    started, live = await started_releases(lake)
    if live < shape.parents and rng.random() < 0.5:
        await seed_release(lake, started, shape)
        await engine.start_instance("release", fields={"subject": release_id(started)},
                                    instance_id=instance_id(started))
        return "start"
    candidates = await live_instances(lake)
    if not candidates:
        return "idle"
    target = rng.choice(candidates)
    iid, definition, stage = str(target["_id"]), target["definition"], target["currentStage"]
    roll = rng.random()
    if roll < 0.04:
        await engine.abort_instance(iid, reason="driver")
        return "abort"
    if definition == "translate-article":
        action = "submit" if roll < 0.85 else "give-up"
        await engine.fire_action(iid, "translate", action)
        return f"translate.{action}"
    if definition == "release-review" and stage == "review":
        action = "approve" if roll < 0.9 else "reject"
        await engine.fire_action(iid, "sign-off", action)
        return f"sign-off.{action}"
    if definition == "release" and roll < 0.12:
        await engine.fire_action(iid, "manage", "cancel")
        return "cancel"
    await engine.tick(iid)
    return "tick"


async def main(uri: str, database: str, seed: int, shape: Shape) -> int:
    rng = random.Random(seed)
    lake = open_lake(uri, database)
    engine = Engine(lake)
    await engine.ensure_ready()
    print("ready", flush=True)
    refused: Counter[str] = Counter()
    try:
        for n in range(MAX_OPS):
            try:
                what = await step(engine, rng, shape)
            except KinflowError as refusal:
                refused[refusal.code] += 1
                what = f"refused:{refusal.code}"
            print(f"op {n} {what}", flush=True)
    finally:
        await lake.close()
    print(f"done {dict(refused)}", flush=True)
    return 0


if __name__ == "__main__":
    uri_arg, db_arg, seed_arg, *dims = sys.argv[1:]
    parents, children, grandchildren = (int(d) for d in dims)
    sys.exit(asyncio.run(main(uri_arg, db_arg, int(seed_arg),
                              Shape(parents, children, grandchildren))))
