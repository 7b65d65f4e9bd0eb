"""Automatic retries at scale: N children whose first attempt fails, through the API.

This starts ``kinflow serve`` with default settings (its own temporary data
directory and embedded lake, a free port on 127.0.0.1), deploys a child that
can finish or give up (its ``gave-up`` stage is ``outcome: failed``), inserts N
``bench-item`` documents straight into the lake (not timed), then runs two cohorts of N rows on the
same server, each timed from the first call until the parent left its fan-out
stage (polled on the lake every 50 ms):

* baseline: the spawn has no retry; ``--callers`` concurrent callers fire
  ``finish`` on every child;
* retry: the spawn has ``retry: {attempts: 2}`` (no backoff); the callers
  fire ``give-up`` on every first attempt, then ``finish`` on its second
  attempt (``<first id>-a2``, queued behind the other first attempts, and
  queued again for a moment while the parent's round has not created it).

Then it checks through the API that every row of the retry cohort ended
``succeeded`` on attempt 2 (none on another attempt, none failed) and prints
the spawn (``startInstance``), the time from the first fire to completion and
their sum, the ratios retry / no failures (the target is at most 2.2 on the
total: twice the fires, and a second child per row created by the parent's
rounds, against one spawn of N children), errors, and ``uptime``.
The server is stopped at the end (SIGTERM to its process group).

    python bench/cohort_retry.py [--size 1000] [--callers 8]
"""

from __future__ import annotations

import asyncio
import copy
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
from _cohort_definitions import CHILD, windowed_parent
from _served import Lake, children_of, served, size_and_callers, until_it_leaves
from cohort_api import DEPLOY, ApiError, call

FIRE = ("mutation($id: ID!, $a: String!) { fireAction(instanceId: $id, activity: \"task\", "
        "action: $a) { changed } }")
START = ('mutation($d: String!) { startInstance(definition: $d) '
         "{ instance { id currentStage } } }")
ROWS = """query($p: ID!) { cohort(parentId: $p, activity: "translate") {
  total failed retrying page(first: 1000) { nodes { attempt outcome } } } }"""


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
    spawn: float = 0.0  # seconds of the startInstance call that spawns the cohort
    complete: float = 0.0  # seconds from the first fire until the parent left ``fan``

    @property
    def total(self) -> float:
        return self.spawn + self.complete
    errors: Counter[str] = field(default_factory=Counter)


async def cohort(http: httpx.AsyncClient, lake: Lake, definition: str, callers: int,
                 *, fail_first: bool) -> tuple[Run, str]:
    run = Run(definition)
    begun = time.perf_counter()
    parent_id = (await call(http, START, {"d": definition}))["startInstance"]["instance"]["id"]
    run.spawn = time.perf_counter() - begun
    first = await children_of(lake, parent_id)
    queue = asyncio.Queue[tuple[str, str]]()
    for child_id in first:
        queue.put_nowait((child_id, "give-up" if fail_first else "finish"))
    expected = len(first) * (2 if fail_first else 1)
    done = asyncio.Event()

    async def caller() -> None:
        while run.fires < expected and not done.is_set():
            try:
                child_id, action = await asyncio.wait_for(queue.get(), 1.0)
            except TimeoutError:
                continue
            try:
                await call(http, FIRE, {"id": child_id, "a": action})
            except ApiError as exc:
                if exc.code == "instance-not-found":  # its parent's round has not run yet
                    await asyncio.sleep(0.2)
                    queue.put_nowait((child_id, action))
                else:
                    run.errors[exc.code] += 1
                continue
            run.fires += 1
            if action == "give-up":  # the retry's child id is known: <first id>-a2
                queue.put_nowait((f"{child_id}-a2", "finish"))

    started = time.perf_counter()
    tasks = [asyncio.create_task(caller()) for _ in range(callers)]
    if not await until_it_leaves(lake, parent_id, "fan", 900):
        run.errors["parent-never-completed"] += 1
    run.complete = time.perf_counter() - started
    done.set()
    await asyncio.gather(*tasks)
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
    async with served("kinflow-cohort-retry-") as server:
        http, lake = server.http, server.lake
        await call(http, DEPLOY, {"d": definitions()})
        await lake.kinflow.production.insert_many(  # setup: straight in
            [{"_id": f"item-{n:05d}", "_type": "bench-item"} for n in range(size)])
        plain, _ = await cohort(http, lake, "bench-plain", callers, fail_first=False)
        retried, parent_id = await cohort(http, lake, "bench-retry", callers, fail_first=True)
        verdict = await check(http, parent_id, size)
    print(f"{size:,} children, {callers} callers, kinflow serve with default settings")
    print(f"{'':34} {'fires':>6} {'spawn s':>8} {'complete s':>11} {'total s':>8}  errors")
    for run, label in ((plain, "no failures"), (retried, "first attempt fails, retry")):
        errors = ", ".join(f"{k} {v}" for k, v in run.errors.items()) or "none"
        print(f"{label:34} {run.fires:6} {run.spawn:8.2f} {run.complete:11.2f} "
              f"{run.total:8.2f}  {errors}")
    print(f"{'retry / no failures':34} {'':6} {'':8} "
          f"{retried.complete / plain.complete:11.2f} {retried.total / plain.total:8.2f}")
    print(f"check: {verdict}")


if __name__ == "__main__":
    asyncio.run(main(*size_and_callers(__doc__, "children per cohort", "concurrent callers")))
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
