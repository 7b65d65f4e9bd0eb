"""The process the kill tests SIGKILL: real engine verbs on two families, at random.

Run as ``python -m tests.reliability.driver URI DATABASE SEED PARENTS CHILDREN
GRANDCHILDREN JOURNAL EFFECT_LOG [POINT NTH]``. It keeps ``PARENTS`` releases
and ``PARENTS`` event bookings live (starting the next one when one ends) and
otherwise acts at random on live instances: translations submitted, given up
or pinged, reviews approved or rejected, releases cancelled by their
``manage`` action, holds confirmed; any instance (a root or a child) aborted or
gracefully cancelled (``cancelInstance``); bulk calls on a cohort
(``fireCohort`` with and without a filter, ``abortCohort``, ``cancelCohort``,
``redriveCohort``); a hold's ``release-seat`` cleanup run (the handler logs
each run to ``EFFECT_LOG``); ticks.

Every operation but a tick, a start and an effect run carries an idempotency
key, and is written to ``JOURNAL`` before it starts and after it ends
(tests/reliability/journal.py). A driver starts by running again, with the
same key, every operation a kill cut: the client's retry after a crash.

With ``POINT NTH`` its engine's fault point ``POINT`` SIGKILLs this process the
``NTH`` time it is reached, and the operations lean towards the ones that reach
it (cancellations for ``before-cancel-*``, bulk calls for ``mid-bulk``).

Refusals (an action that is no longer enabled, a cohort not spawned yet, a
target another step just finished) are normal here and only counted. Anything
else is a bug: the driver exits non-zero with the trace, and the test fails
on it. It prints ``ready`` once connected and one line per operation, so the
test can kill it in the middle of real work; it stops by itself after a
bounded number of operations.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from kinflow.core.cohort.selection import CohortFilter
from kinflow.core.context import Limits
from kinflow.engine import Engine
from kinflow.errors import KinflowError
from kinflow.storage import Lake
from tests.reliability import cleanup_handler
from tests.reliability.driver_process import KillAt
from tests.reliability.family import (
    PING,
    Shape,
    booking_id,
    instance_id,
    open_lake,
    release_id,
    seats,
    seed_release,
)
from tests.reliability.journal import Journal

MAX_OPS = 5000
LIVE = {"_type": "kinflow.instance", "completedAt": None}
BATCH = 2
"""Rows per bulk commit: small, so a call over 2 to 5 rows spans batches (``mid-bulk``)."""
LEASE_SECONDS = 2.0
"""The driver's effect claims: a claim a kill orphaned is taken over two seconds later."""
SECONDS_VAR = "KINFLOW_DRIVER_SECONDS"
"""When set, the driver also stops (cleanly) after that many seconds of operations."""
CANCEL_POINTS = ("before-cancel-children", "before-cancel-stamp")

# where each family's bulk calls go: (parent definition, cohort activity, child activity)
COHORTS = {"release": ("reviews", "sign-off"), "release-review": ("translate", "translate"),
           "event-booking": ("holds", "hold")}
CHILD_ACTIONS = {"release": ("approve", "approve", "reject"),
                 "release-review": ("submit", PING, PING, "give-up"),
                 "event-booking": ("confirm", PING, PING)}
FILTERS: tuple[dict[str, Any] | None, ...] = (
    None, {"status": ["active"]}, {"where": "stage != 'done' && !cancelling"})


async def live_instances(lake: Lake) -> list[dict[str, Any]]:
    return await lake.find(LIVE, projection={"_id": 1, "definition": 1, "currentStage": 1,
                                             "cancellingAt": 1})


async def started(lake: Lake, definition: str) -> tuple[int, int]:
    """(how many roots of ``definition`` were ever started, how many are live)."""
    found = await lake.find({"_type": "kinflow.instance", "definition": definition},
                            projection={"completedAt": 1})
    return len(found), sum(1 for doc in found if doc.get("completedAt") is None)


def cohort_filter(where: dict[str, Any] | None) -> CohortFilter | None:
    if where is None:
        return None
    return CohortFilter(status=tuple(where["status"]) if "status" in where else None,
                        where=where.get("where"))


async def perform(engine: Engine, entry: dict[str, Any]) -> str:
    """Run one journaled operation (the first time or as a retry); returns its label."""
    op, key, where = entry["op"], entry["key"], cohort_filter(entry.get("where"))
    target = entry["target"]
    if op == "fire":
        await engine.fire_action(target, entry["activity"], entry["action"], idempotency_key=key)
        return f"{entry['activity']}.{entry['action']}"
    if op == "abort":
        await engine.abort_instance(target, reason="driver", idempotency_key=key)
    elif op == "cancel":
        await engine.cancel_instance(target, reason="driver", idempotency_key=key)
    elif op == "fireCohort":
        await engine.fire_cohort(target, entry["activity"], entry["childActivity"],
                                 entry["action"], where=where, idempotency_key=key)
    elif op == "abortCohort":
        await engine.abort_cohort(target, entry["activity"], where=where, reason="driver",
                                  idempotency_key=key)
    elif op == "cancelCohort":
        await engine.cancel_cohort(target, entry["activity"], where=where, reason="driver",
                                   idempotency_key=key)
    elif op == "redriveCohort":
        await engine.redrive_cohort(target, entry["activity"], where=where,
                                    idempotency_key=key)
    else:
        raise AssertionError(f"unknown journaled operation {op!r}")
    filtered = "" if where is None else "(filtered)"
    return f"{op}{filtered}.{entry['definition']}"


def choose(rng: random.Random, target: dict[str, Any], point: str | None
           ) -> dict[str, Any] | None:
    """A keyed operation on ``target`` (None: tick it), leaning towards ``point``."""
    iid, definition = str(target["_id"]), target["definition"]
    stage, cancelling = target.get("currentStage"), target.get("cancellingAt") is not None
    base = {"target": iid, "definition": definition}
    cancel_share = 0.3 if point in CANCEL_POINTS else 0.08
    bulk_share = 0.45 if point == "mid-bulk" else 0.15
    roll = rng.random()
    if roll < 0.03:
        return {**base, "op": "abort"}
    roll -= 0.03
    if roll < cancel_share:
        return {**base, "op": "cancel"}
    roll -= cancel_share
    if definition in COHORTS and roll < bulk_share:
        activity, child_activity = COHORTS[definition]
        kind = rng.random()
        where = rng.choice(FILTERS)
        if kind < 0.55:
            return {**base, "op": "fireCohort", "activity": activity,
                    "childActivity": child_activity,
                    "action": rng.choice(CHILD_ACTIONS[definition]), "where": where}
        if kind < 0.7:
            return {**base, "op": "abortCohort", "activity": activity, "where": where}
        if kind < 0.9:
            return {**base, "op": "cancelCohort", "activity": activity, "where": where}
        return {**base, "op": "redriveCohort", "activity": activity,
                "where": rng.choice((None, {"status": ["cancelled", "aborted"]}))}
    if cancelling:
        return None
    if definition == "translate-article":
        action = rng.choice(("submit", "submit", "give-up", PING, PING))
        return {**base, "op": "fire", "activity": "translate", "action": action}
    if definition == "release-review" and stage == "review":
        return {**base, "op": "fire", "activity": "sign-off",
                "action": "approve" if rng.random() < 0.9 else "reject"}
    if definition == "release" and rng.random() < 0.1:
        return {**base, "op": "fire", "activity": "manage", "action": "cancel"}
    if definition == "seat-hold" and stage == "holding":
        return {**base, "op": "fire", "activity": "hold",
                "action": rng.choice(("confirm", PING))}
    return None


async def keep_live(engine: Engine, rng: random.Random, shape: Shape) -> str | None:
    """Start a release or a booking when fewer than ``shape.parents`` of it are live."""
    lake = engine.lake
    n, live = await started(lake, "release")
    if live < shape.parents and rng.random() < 0.35:
        await seed_release(lake, n, shape)
        await engine.start_instance("release", fields={"subject": release_id(n)},
                                    instance_id=instance_id(n))
        return "start.release"
    n, live = await started(lake, "event-booking")
    if live < shape.parents and rng.random() < 0.35:
        await engine.start_instance("event-booking", fields=seats(n, shape),
                                    instance_id=booking_id(n))
        return "start.booking"
    return None


async def step(engine: Engine, rng: random.Random, shape: Shape, journal: Journal,
               name: str, point: str | None) -> str:
    """One random operation; returns what it tried."""
    begun = await keep_live(engine, rng, shape)
    if begun is not None:
        return begun
    candidates = await live_instances(engine.lake)
    if not candidates:
        return "idle"
    target = rng.choice(candidates)
    iid = str(target["_id"])
    if target["definition"] == "seat-hold" and target.get("currentStage") == "releasing" \
            and rng.random() < 0.5:
        await engine.drain_effects(iid)
        return "cleanup"
    entry = choose(rng, target, point)
    if entry is None:
        await engine.tick(iid)
        return "tick"
    entry["key"] = name
    journal.begin(entry)
    try:
        return await perform(engine, entry)
    finally:
        journal.end(name)  # a refusal ends it too: a retry would be refused alike


async def retry_cut(engine: Engine, journal: Journal, refused: Counter[str]) -> None:
    """Run again, under the same key, every operation an earlier kill cut."""
    for entry in journal.unfinished():
        try:
            what = await perform(engine, entry)
        except KinflowError as refusal:
            refused[refusal.code] += 1
            what = f"refused:{refusal.code}"
        journal.end(entry["key"])
        print(f"op retry {entry['key']} {what}", flush=True)


async def main(uri: str, database: str, seed: int, shape: Shape, journal: Journal,
               effect_log: Path, point: str | None, nth: int) -> int:
    rng = random.Random(seed)
    lake = open_lake(uri, database)
    limits = replace(Limits(), bulk_batch=BATCH, effect_lease_seconds=LEASE_SECONDS)
    engine = Engine(lake, limits=limits, faults=KillAt(point, nth) if point else None)
    cleanup_handler.register(engine, effect_log)
    await engine.ensure_ready()
    print("ready", flush=True)
    refused: Counter[str] = Counter()
    deadline = time.monotonic() + float(os.environ.get(SECONDS_VAR) or "inf")
    try:
        await retry_cut(engine, journal, refused)
        for n in range(MAX_OPS):
            if time.monotonic() > deadline:
                break
            try:
                what = await step(engine, rng, shape, journal, f"k{seed}-{n}", point)
            except KinflowError as refusal:
                refused[refusal.code] += 1
                what = f"refused:{refusal.code}"
            print(f"op {n} {what}", flush=True)
    finally:
        await lake.close()
    print(f"done {dict(refused)}", flush=True)
    return 0


if __name__ == "__main__":
    uri_arg, db_arg, seed_arg, *rest = sys.argv[1:]
    parents, children, grandchildren = (int(d) for d in rest[:3])
    journal_arg, log_arg, *kill_at = rest[3:]
    sys.exit(asyncio.run(main(
        uri_arg, db_arg, int(seed_arg), Shape(parents, children, grandchildren),
        Journal(Path(journal_arg)), Path(log_arg), kill_at[0] if kill_at else None,
        int(kill_at[1]) if kill_at else 0)))
