"""Cohort scale through the API: ``kinflow serve`` as a user runs it, N children, 8 callers.

For each size (100 and 1,000 by default; ``--sizes 100,1000,5000,10000``)
this starts ``kinflow serve`` with default settings (its own temporary data
directory, hence its own embedded lake, and a free port on 127.0.0.1), then
over GraphQL/HTTP:

* setup (not timed): deploys a parent and a one-action child definition and
  puts N ``bench-item`` documents;
* spawn: ``startInstance`` of the parent, whose first stage spawns one child
  per item (a ``*`` query through the GROQ push-down);
* fire: ``--callers`` concurrent HTTP callers ``fireAction`` every child's
  only action (each call timed);
* complete: the clock stops when the parent has left its fan-out stage (its
  gate counts live rows), polled on the lake every 50 ms (a projection: an API
  read would load the whole parent each time and slow the round it waits for),
  then confirmed through the API.

Printed per size: spawn / fire / complete seconds (complete counts from the
first fire), fires per second, per-fire p50 / p99, lake operations per child
(the lake's ``serverStatus`` request counter over spawn + fires + completion,
divided by N), parent writes over the cohort's life (change events on the
parent document, read from the lake's change stream), errors, and whether
every child's registry row in the parent document is stamped ``resolved``;
then the parent document's size and the ratios time(N) / time(1,000).

Each size gets a fresh server, stopped at the end (SIGTERM to its process
group). Note the machine's load (``uptime``) beside any figure you keep.

    python bench/cohort_api.py [--sizes 100,1000] [--callers 8]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bson
import httpx
from _cohort_definitions import CHILD, PARENT
from _process import free_port, stop_group
from pymongo import AsyncMongoClient

ROOT = Path(__file__).resolve().parents[1]

DEPLOY = "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }"
PUT = "mutation($d: JSON!) { putDocument(document: $d) }"
START = ('mutation { startInstance(definition: "bench-parent") '
         "{ instance { id currentStage } } }")
FIRE = ("mutation($id: ID!) { fireAction(instanceId: $id, activity: \"task\", "
        "action: \"finish\") { instance { status } } }")
STAGE = "query($id: ID!) { instance(id: $id) { currentStage } }"


@contextlib.contextmanager
def kinflow_serve(data_dir: Path, port: int, extra: dict[str, str]
                  ) -> Iterator[subprocess.Popen[bytes]]:
    """``kinflow serve`` with default settings (plus ``extra``), its own data dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KINFLOW_")}
    env.update(KINFLOW_DATA_DIR=str(data_dir), KINFLOW_PORT=str(port), **extra)
    env["PYTHONPATH"] = str(ROOT)  # this checkout's kinflow, whatever the venv points at
    log = (data_dir / "serve.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "kinflow.cli", "serve"], env=env,
                               cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        yield process
    finally:
        stop_group(process)
        log.close()


class ApiError(Exception):
    """A GraphQL error or transport failure (counted by code)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


async def call(http: httpx.AsyncClient, query: str, variables: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    try:
        response = await http.post("/graphql", json={"query": query,
                                                      "variables": variables or {}})
        body: dict[str, Any] = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ApiError(type(exc).__name__) from exc
    if body.get("errors"):
        raise ApiError(str((body["errors"][0].get("extensions") or {}).get("code", "graphql")))
    data: dict[str, Any] = body["data"]
    return data


async def wait_healthy(http: httpx.AsyncClient, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("kinflow serve exited during start-up (see serve.log)")
        with contextlib.suppress(httpx.HTTPError):
            if (await http.get("/healthz")).status_code == 200:
                return
        await asyncio.sleep(0.1)
    raise SystemExit("kinflow serve did not become healthy in 120 s")


@dataclass
class Result:
    size: int
    spawn: float = 0.0
    fire: float = 0.0
    complete: float = 0.0
    latencies: list[float] = field(default_factory=list)
    lake_ops: int = 0
    parent_writes: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    stamped: int = 0
    parent_bytes: int = 0

    def quantile(self, q: float) -> float:
        if len(self.latencies) < 2:
            return self.latencies[0] if self.latencies else 0.0
        return statistics.quantiles(self.latencies, n=100)[int(q * 100) - 1]


async def lake_requests(lake: AsyncMongoClient[dict[str, Any]]) -> int:
    status = await lake.admin.command("serverStatus")
    network = status.get("network") or {}
    if "numRequests" in network:
        return int(network["numRequests"])
    return int(sum((status.get("opcounters") or {}).values()))


async def parent_stage(lake: AsyncMongoClient[dict[str, Any]], parent_id: str) -> str:
    """The parent's stage, read from the lake (an API read would load the whole parent
    every 50 ms and compete with the round it waits for)."""
    found = await lake.kinflow.production.find_one({"_id": parent_id}, {"currentStage": 1})
    return str((found or {}).get("currentStage"))


async def count_parent_writes(lake: AsyncMongoClient[dict[str, Any]], parent_id: str,
                              ready: asyncio.Event, counter: list[int]) -> None:
    pipeline = [{"$match": {"documentKey._id": parent_id,
                            "operationType": {"$in": ["update", "replace"]}}}]
    async with await lake.kinflow.production.watch(pipeline) as stream:
        ready.set()
        async for _ in stream:
            counter[0] += 1


async def one_size(size: int, callers: int, extra: dict[str, str]) -> Result:
    result = Result(size)
    with tempfile.TemporaryDirectory(prefix="kinflow-cohort-api-") as tmp:
        data_dir, port = Path(tmp), free_port()
        with kinflow_serve(data_dir, port, extra) as process:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                         timeout=600) as http:
                await wait_healthy(http, process)
                lake_port = json.loads((data_dir / "lake.json").read_text())["port"]
                lake: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
                    f"mongodb://127.0.0.1:{lake_port}/", directConnection=True)
                try:
                    await run_cohort(http, lake, result, callers)
                finally:
                    await lake.close()
    return result


async def run_cohort(http: httpx.AsyncClient, lake: AsyncMongoClient[dict[str, Any]],
                     result: Result, callers: int) -> None:
    size = result.size
    await call(http, DEPLOY, {"d": [CHILD, PARENT]})
    items = asyncio.Queue[int]()
    for n in range(size):
        items.put_nowait(n)

    async def put_items() -> None:
        while not items.empty():
            n = items.get_nowait()
            await call(http, PUT, {"d": {"_id": f"item-{n:05d}", "_type": "bench-item"}})

    await asyncio.gather(*(put_items() for _ in range(callers)))

    ops_before = await lake_requests(lake)
    started = time.perf_counter()
    parent_id = (await call(http, START))["startInstance"]["instance"]["id"]
    result.spawn = time.perf_counter() - started
    writes = [0]
    ready = asyncio.Event()
    watcher = asyncio.create_task(count_parent_writes(lake, parent_id, ready, writes))
    await asyncio.wait_for(ready.wait(), 30)
    parent = await lake.kinflow.production.find_one({"_id": parent_id}, {"subworkflows.ref": 1})
    assert parent is not None
    children = asyncio.Queue[str]()
    for row in parent.get("subworkflows", []):
        children.put_nowait(str(row["ref"]["id"]).split(":", 2)[-1])
    if children.qsize() != size:
        raise SystemExit(f"spawned {children.qsize()} of {size}")

    async def fire() -> None:
        while not children.empty():
            child = children.get_nowait()
            began = time.perf_counter()
            try:
                await call(http, FIRE, {"id": child})
            except ApiError as exc:
                result.errors[exc.code] += 1
                continue
            result.latencies.append(time.perf_counter() - began)

    started = time.perf_counter()
    await asyncio.gather(*(fire() for _ in range(callers)))
    result.fire = time.perf_counter() - started
    # a failed fire leaves its child live: the parent then never moves on
    deadline = time.monotonic() + (30 if result.errors else 600)
    while await parent_stage(lake, parent_id) == "fan":
        if time.monotonic() > deadline:
            result.errors["parent-never-completed"] += 1
            break
        await asyncio.sleep(0.05)
    result.complete = time.perf_counter() - started
    stage = (await call(http, STAGE, {"id": parent_id}))["instance"]["currentStage"]
    if stage != "over":
        result.errors[f"parent-in-{stage}"] += 1
    result.lake_ops = await lake_requests(lake) - ops_before
    await asyncio.sleep(0.5)  # let the change stream deliver the last events
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher
    result.parent_writes = writes[0]
    final = await lake.kinflow.production.find_one({"_id": parent_id})
    assert final is not None
    result.parent_bytes = len(bson.encode(final))
    result.stamped = sum(1 for row in final.get("subworkflows", []) if row.get("resolved"))


def print_table(results: list[Result], callers: int, extra: dict[str, str]) -> None:
    load = os.getloadavg()
    settings = " ".join(f"{k}={v}" for k, v in extra.items()) or "defaults"
    print(f"\nCohort through the API ({callers} HTTP callers, kinflow serve {settings}, "
          f"embedded lake; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    head = ("N", "spawn s", "fire s", "complete s", "fires/s", "p50 ms", "p99 ms",
            "lake ops/child", "parent writes", "errors", "stamped", "parent KB")
    rows = [head]
    for r in results:
        rows.append((f"{r.size:,}", f"{r.spawn:.2f}", f"{r.fire:.2f}", f"{r.complete:.2f}",
                     f"{r.size / r.fire:.0f}" if r.fire else "-",
                     f"{r.quantile(0.5) * 1000:.0f}", f"{r.quantile(0.99) * 1000:.0f}",
                     f"{r.lake_ops / r.size:.1f}", str(r.parent_writes),
                     str(sum(r.errors.values())) + (f" {dict(r.errors)}" if r.errors else ""),
                     f"{r.stamped}/{r.size}", f"{r.parent_bytes / 1024:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    by_size = {r.size: r for r in results}
    base = by_size.get(1000)
    if base is not None:
        for r in results:
            if r.size > 1000:
                total = r.spawn + r.complete
                print(f"time({r.size:,}) / time(1,000) = "
                      f"{total / (base.spawn + base.complete):.2f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--env", action="append", default=[], metavar="KINFLOW_X=VALUE",
                        help="a setting for the server (to compare against the defaults)")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        print(f"cohort of {size:,} ...", flush=True)
        results.append(await one_size(size, args.callers, extra))
        r = results[-1]
        print(f"  spawn {r.spawn:.2f} s, complete {r.complete:.2f} s after the first fire, "
              f"errors {sum(r.errors.values())}", flush=True)
    print_table(results, args.callers, extra)


if __name__ == "__main__":
    asyncio.run(main())
