"""Automatic retries at scale: N children whose first attempt fails, through the API.

This starts ``kinflow serve`` with default settings (its own temporary data
directory and embedded lake, a free port on 127.0.0.1), deploys a child that
can finish or give up (its ``gave-up`` stage is ``outcome: failed``), puts N
``bench-item`` documents (not timed), then runs two cohorts of N rows on the
same server, each timed from the first call until the parent left its fan-out
stage (polled on the lake every 50 ms):

* baseline: the spawn has no retry; ``--callers`` concurrent callers fire
  ``finish`` on every child;
* retry: the spawn has ``retry: {attempts: 2}`` (no backoff); the callers
  fire ``give-up`` on every first attempt, and ``finish`` on every second
  attempt as soon as it exists (a poller finds the ``<first id>-a2`` children
  on the lake and feeds them to the callers).

Then it checks through the API that every row of the retry cohort ended
``succeeded`` on attempt 2 (none on another attempt, none failed) and prints
both times, their ratio (the target is at most 2.2: twice the fires, plus
the re-queues, which ride on the stamps' commits), errors, and ``uptime``.
The server is stopped at the end (SIGTERM to its process group).

    python bench/cohort_retry.py [--size 1000] [--callers 8]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _cohort_definitions import CHILD, windowed_parent
from _process import free_port
from cohort_api import DEPLOY, PUT, ApiError, call, kinflow_serve, parent_stage
from cohort_api import wait_healthy as serve_healthy
from pymongo import AsyncMongoClient

FIRE = ("mutation($id: ID!, $a: String!) { fireAction(instanceId: $id, activity: \"task\", "
        "action: $a) { changed } }")
START = ('mutation($d: String!) { startInstance(definition: $d) '
         "{ instance { id currentStage } } }")
ROWS = """query($p: ID!) { cohort(parentId: $p, activity: "translate") {
  total failed retrying page(first: 1000) { nodes { attempt outcome } } } }"""
Lake = AsyncMongoClient[dict[str, Any]]


def definitions() -> list[dict[str, Any]]:
    """The child (``finish`` or ``give-up``) and two parents: ``bench-plain`` and
    ``bench-retry`` (``retry: {attempts: 2}``); both wait for queued rows too."""
    child = copy.deepcopy(CHILD)
    work = child["stages"][0]
    work["activities"][0]["actions"].append({"name": "give-up", "status": "failed"})
    work["transitions"].insert(0, {"name": "to-gave-up", "to": "gave-up",
                                   "when": "$anyActivityFailed"})
    child["stages"].append({"name": "gave-up", "outcome": "failed"})
    plain = windowed_parent(1)
    spawn = plain["stages"][0]["activities"][0]["actions"][0]["spawn"]
    del spawn["maxActive"]  # no window: every child starts at once
    plain["name"] = "bench-plain"
    retrying = copy.deepcopy(plain)
    retrying["name"] = "bench-retry"
    retrying["stages"][0]["activities"][0]["actions"][0]["spawn"]["retry"] = {"attempts": 2}
    return [child, plain, retrying]


@dataclass
class Run:
    name: str
    fires: int = 0
    complete: float = 0.0  # seconds from the first fire until the parent left ``fan``
    errors: Counter[str] = field(default_factory=Counter)


async def children(lake: Lake, parent_id: str, suffix: str | None = None) -> list[str]:
    query: dict[str, Any] = {"_type": "kinflow.instance", "parentInstance": parent_id}
    if suffix is not None:
        query["_id"] = {"$regex": f"{suffix}$"}
    return [str(doc["_id"]) async for doc in lake.kinflow.production.find(query, {"_id": 1})]


async def cohort(http: httpx.AsyncClient, lake: Lake, definition: str, callers: int,
                 *, fail_first: bool) -> tuple[Run, str]:
    run = Run(definition)
    parent_id = (await call(http, START, {"d": definition}))["startInstance"]["instance"]["id"]
    first = await children(lake, parent_id)
    queue = asyncio.Queue[tuple[str, str]]()
    for child_id in first:
        queue.put_nowait((child_id, "give-up" if fail_first else "finish"))
    expected = len(first) * (2 if fail_first else 1)
    done = asyncio.Event()

    async def feed() -> None:  # the second attempts, as the parent's rounds start them
        seen: set[str] = set()
        while not done.is_set():
            for child_id in await children(lake, parent_id, "-a2"):
                if child_id not in seen:
                    seen.add(child_id)
                    queue.put_nowait((child_id, "finish"))
            await asyncio.sleep(0.1)

    async def caller() -> None:
        while run.fires < expected and not done.is_set():
            try:
                child_id, action = await asyncio.wait_for(queue.get(), 1.0)
            except TimeoutError:
                continue
            try:
                await call(http, FIRE, {"id": child_id, "a": action})
                run.fires += 1
            except ApiError as exc:
                run.errors[exc.code] += 1

    started = time.perf_counter()
    tasks = [asyncio.create_task(caller()) for _ in range(callers)]
    feeder = asyncio.create_task(feed()) if fail_first else None
    deadline = time.monotonic() + 900
    while await parent_stage(lake, parent_id) == "fan":
        if time.monotonic() > deadline:
            run.errors["parent-never-completed"] += 1
            break
        await asyncio.sleep(0.05)
    run.complete = time.perf_counter() - started
    done.set()
    await asyncio.gather(*tasks, *([feeder] if feeder else []))
    return run, parent_id


async def check(http: httpx.AsyncClient, parent_id: str, size: int) -> str:
    """Every row succeeded on attempt 2, and nothing is failed or still retrying."""
    found = (await call(http, ROWS, {"p": parent_id}))["cohort"]
    shapes = Counter((n["attempt"], n["outcome"]) for n in found["page"]["nodes"])
    ok = (found["total"] == size and found["failed"] == 0 and found["retrying"] == 0
          and shapes == Counter({(2, "succeeded"): min(size, 1000)}))
    return ("every row succeeded on attempt 2" if ok else
            f"NOT as expected: total {found['total']} failed {found['failed']} "
            f"retrying {found['retrying']} rows {dict(shapes)}")


async def main(size: int, callers: int) -> None:
    with tempfile.TemporaryDirectory(prefix="kinflow-cohort-retry-") as tmp:
        data_dir, port = Path(tmp), free_port()
        with kinflow_serve(data_dir, port, {}) as process:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                         timeout=900) as http:
                await serve_healthy(http, process)
                lake_port = json.loads((data_dir / "lake.json").read_text())["port"]
                lake: Lake = AsyncMongoClient(f"mongodb://127.0.0.1:{lake_port}/",
                                              directConnection=True)
                try:
                    await call(http, DEPLOY, {"d": definitions()})
                    for n in range(size):
                        await call(http, PUT, {"d": {"_id": f"item-{n:05d}",
                                                     "_type": "bench-item"}})
                    plain, _ = await cohort(http, lake, "bench-plain", callers,
                                            fail_first=False)
                    retried, parent_id = await cohort(http, lake, "bench-retry", callers,
                                                      fail_first=True)
                    verdict = await check(http, parent_id, size)
                finally:
                    await lake.close()
    print(f"{size:,} children, {callers} callers, kinflow serve with default settings")
    print(f"{'':34} {'fires':>6} {'complete s':>11}  errors")
    for run, label in ((plain, "no failures"), (retried, "first attempt fails, retry")):
        errors = ", ".join(f"{k} {v}" for k, v in run.errors.items()) or "none"
        print(f"{label:34} {run.fires:6} {run.complete:11.2f}  {errors}")
    print(f"{'retry / no failures':34} {'':6} {retried.complete / plain.complete:11.2f}")
    print(f"check: {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000, help="children per cohort")
    parser.add_argument("--callers", type=int, default=8, help="concurrent callers")
    args = parser.parse_args()
    asyncio.run(main(args.size, args.callers))
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
