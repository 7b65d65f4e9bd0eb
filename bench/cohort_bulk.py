"""One ``fireCohort`` over N children versus N single ``fireAction`` calls, through the API.

A frontend drives a large cohort with one bulk call instead of N
calls. This starts ``kinflow serve`` with default settings (its own temporary
data directory and embedded lake, a free port on 127.0.0.1), deploys the
cohort benchmarks' parent and child (bench/_cohort_definitions.py), puts N
``bench-item`` documents and starts two parents, each spawning one child per
item (not timed). Then, over GraphQL/HTTP:

* singles: ``--callers`` concurrent callers send one ``fireAction(finish)``
  per child of the first parent;
* bulk: one ``fireCohort(finish)`` over every child of the second parent.

Printed for each: the time until the calls returned, and until the parent
left its fan-out stage (its gate counts live rows; polled on the lake every
50 ms), with errors; then bulk / singles for both. The server is stopped at
the end (SIGTERM to its process group).

    python bench/cohort_bulk.py [--size 1000] [--callers 8]
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
from _cohort_definitions import CHILD, PARENT
from _served import Lake, children_of, served, size_and_callers, until_it_leaves
from cohort_api import DEPLOY, FIRE, PUT, START, ApiError, call

FIRE_COHORT = """mutation($p: ID!) { fireCohort(parentId: $p, activity: "translate",
  childActivity: "task", action: "finish", idempotencyKey: "bench") {
  matched applied skipped refusals { code } } }"""


@dataclass
class Run:
    """One way of firing on every child of one parent."""

    name: str
    calls: float = 0.0  # seconds until every call returned
    complete: float = 0.0  # seconds until the parent left its fan-out stage
    errors: Counter[str] = field(default_factory=Counter)


async def until_complete(lake: Lake, parent_id: str, run: Run, started: float) -> None:
    if not await until_it_leaves(lake, parent_id, "fan", 30 if run.errors else 600):
        run.errors["parent-never-completed"] += 1
    run.complete = time.perf_counter() - started


async def singles(http: httpx.AsyncClient, lake: Lake, parent_id: str, callers: int) -> Run:
    run = Run(f"{callers} callers x fireAction")
    queue = asyncio.Queue[str]()
    for child_id in await children_of(lake, parent_id):
        queue.put_nowait(child_id)

    async def caller() -> None:
        while not queue.empty():
            child_id = queue.get_nowait()
            try:
                await call(http, FIRE, {"id": child_id})
            except ApiError as exc:
                run.errors[exc.code] += 1

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    run.calls = time.perf_counter() - started
    await until_complete(lake, parent_id, run, started)
    return run


async def bulk(http: httpx.AsyncClient, lake: Lake, parent_id: str, size: int) -> Run:
    run = Run("one fireCohort")
    started = time.perf_counter()
    try:
        result = (await call(http, FIRE_COHORT, {"p": parent_id}))["fireCohort"]
    except ApiError as exc:
        run.errors[exc.code] += 1
    else:
        if result["applied"] != size:
            run.errors[f"applied-{result['applied']}"] += 1
        run.errors.update(r["code"] for r in result["refusals"])
    run.calls = time.perf_counter() - started
    await until_complete(lake, parent_id, run, started)
    return run


async def main(size: int, callers: int) -> None:
    async with served("kinflow-cohort-bulk-") as server:
        http, lake = server.http, server.lake
        await call(http, DEPLOY, {"d": [CHILD, PARENT]})
        for n in range(size):
            await call(http, PUT, {"d": {"_id": f"item-{n:05d}", "_type": "bench-item"}})
        one = (await call(http, START))["startInstance"]["instance"]["id"]
        other = (await call(http, START))["startInstance"]["instance"]["id"]
        runs = [await singles(http, lake, one, callers), await bulk(http, lake, other, size)]
    print(f"{size:,} children, kinflow serve with default settings")
    print(f"{'':28} {'calls s':>9} {'complete s':>11}  errors")
    for run in runs:
        errors = ", ".join(f"{k} {v}" for k, v in run.errors.items()) or "none"
        print(f"{run.name:28} {run.calls:9.2f} {run.complete:11.2f}  {errors}")
    single, many = runs
    print(f"{'bulk / singles':28} {many.calls / single.calls:9.2f} "
          f"{many.complete / single.complete:11.2f}")


if __name__ == "__main__":
    asyncio.run(main(*size_and_callers(__doc__, "children per parent",
                                       "concurrent single callers")))
