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
parent document, read from the lake's change-stream history once the cohort
completed: a stream open during the fires would add its own work to every
write the lake makes), errors, and whether
every child's registry row (in chunks beside the parent) is stamped ``resolved``;
then the parent document's size and the ratios time(N) / time(1,000).

The calibration (``_calibration.py``): before each cohort and again after
it, on the same daemon, ``--calibrate S`` seconds (default 5; 0 skips it)
of the child fire's raw commit (find + update + commit on a ~2 KB document,
``--callers`` concurrent callers, on a collection indexed like the dataset,
no kinflow in the way). Printed: efficiency = (N / (spawn + complete)) /
raw commits per second (the mean of the two calibrations; far apart, the
load moved), the API's and the lake's CPU per child from the spawn to
completion, and the lake's CPU per raw commit.

Each size gets a fresh server, stopped at the end (SIGTERM to its process
group). Note the machine's load (``uptime``) beside any figure you keep.

The window: ``--max-active N`` gives the parent's spawn
``maxActive: N`` (``windowed_parent``). Rows beyond the window start queued,
without a child, so the callers fire only children that exist (``_window``
polls the lake for the cohort's live children and feeds them in ``forEach``
order), and a sampler counts the live child documents every ~0.5 s: the
table's ``peak active`` is the most it saw (over how many samples), which
must not pass N. ``--compare-window N`` runs every size twice, without a
window and then with ``maxActive: N``, and prints ``time(window) / time(no
window)`` (spawn + complete) per size.

Profiling the fires (docs/performance.md, "What a child's fireAction costs"):
``--py-spy DIR`` samples the server (and its lake daemon) with py-spy during
the fire phase only and prints where the server's busy samples went
(``_spy_summary``); ``--opcounters`` prints the lake's operations per fire
by kind (query, update, command, ...) over the same phase.

    python bench/cohort_api.py [--sizes 100,1000] [--callers 8] [--calibrate 5]
                               [--py-spy DIR] [--opcounters]
                               [--max-active N | --compare-window N]
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
from _calibration import Calibration, raw_commit_rate
from _cohort_definitions import CHILD, PARENT, windowed_parent
from _process import cpu_seconds, free_port, lake_pid, stop_group
from _spy_summary import start_recording, stop_recording, summarise
from _window import ActiveSampler, FeedReport, feed_started
from bson.timestamp import Timestamp
from pymongo import AsyncMongoClient
from pymongo.errors import OperationFailure

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
    parent_writes: int | None = 0  # None: the lake's change history no longer reaches back
    errors: Counter[str] = field(default_factory=Counter)
    stamped: int = 0
    parent_bytes: int = 0
    fire_ops: Counter[str] = field(default_factory=Counter)
    fire_cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds during the fires
    cohort_cpu: dict[str, float] = field(default_factory=dict)  # spawn to completion
    calibration: Calibration | None = None
    calibration_after: Calibration | None = None  # the same, once the cohort completed
    max_active: int | None = None  # the spawn's window (None: no window)
    peak_active: int = 0  # the most live children any lake sample saw
    samples: int = 0
    feed: FeedReport | None = None

    @property
    def total(self) -> float:
        return self.spawn + self.complete

    @property
    def raw_rate(self) -> float:
        """The lake's raw child commits per second: the mean of before and after."""
        rates = [c.rate for c in (self.calibration, self.calibration_after) if c is not None]
        return sum(rates) / len(rates) if rates else 0.0

    @property
    def efficiency(self) -> float | None:
        """Children per second through the API over the lake's raw commits per second."""
        if not self.total or not self.raw_rate:
            return None
        return self.size / self.total / self.raw_rate

    def quantile(self, q: float) -> float:
        if len(self.latencies) < 2:
            return self.latencies[0] if self.latencies else 0.0
        return statistics.quantiles(self.latencies, n=100)[int(q * 100) - 1]


@dataclass
class Profiling:
    """What to record during the fire phase (nothing by default)."""

    spy_dir: Path | None = None
    opcounters: bool = False
    slow_ms: int | None = None  # the lake's profiler: statements slower than this
    server_pid: int | None = None
    lake_pid: int | None = None
    spies: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def start(self, size: int) -> None:
        if self.spy_dir is None:
            return
        for name, pid in (("api", self.server_pid), ("lake", self.lake_pid)):
            if pid is not None:
                out = self.spy_dir / f"fires-{size}-{name}.txt"
                self.spies.append((start_recording(pid, out), out))

    def stop(self, seconds: float) -> None:
        for spy, out in self.spies:
            stop_recording(spy)
            if out.exists():
                print(f"  py-spy {out.name} ({seconds:.1f} s of fires):")
                print(summarise(out.read_text(), seconds=seconds, rate=100), flush=True)
        self.spies.clear()


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine spent busy so far (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def cpu_snapshot(profiling: Profiling) -> dict[str, float]:
    return {"api": cpu_seconds(profiling.server_pid), "lake": cpu_seconds(profiling.lake_pid),
            "bench": cpu_seconds(os.getpid()), "machine": machine_busy_seconds()}


async def opcounters(lake: AsyncMongoClient[dict[str, Any]]) -> Counter[str]:
    status = await lake.admin.command("serverStatus")
    return Counter({k: int(v) for k, v in (status.get("opcounters") or {}).items()})


def statement_shape(entry: dict[str, Any]) -> str:
    """A profiler entry as its operation, collection and the shape of its filter."""
    command = entry.get("command") or {}
    filter_ = command.get("filter") or command.get("q") or {}
    if not filter_ and command.get("updates"):
        filter_ = command["updates"][0].get("q") or {}
    if not filter_ and command.get("pipeline"):
        filter_ = (command["pipeline"][0] or {}).get("$match") or {}
    keys = ",".join(sorted(filter_)) if isinstance(filter_, dict) else "?"
    return f"{entry.get('op')} {entry.get('ns')} {{{keys}}}"


async def slow_statements(lake: AsyncMongoClient[dict[str, Any]], slow_ms: int) -> str:
    """The lake profiler's statements over ``slow_ms`` during the fires, by shape."""
    by_shape: dict[str, list[float]] = {}
    async for entry in lake.kinflow["system.profile"].find():
        by_shape.setdefault(statement_shape(entry), []).append(float(entry.get("millis", 0)))
    lines = [f"  lake statements slower than {slow_ms} ms during the fires:"]
    for shape, millis in sorted(by_shape.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"    {len(millis):5d}x  total {sum(millis):8.0f} ms  max {max(millis):6.0f}"
                     f" ms  {shape}")
    return "\n".join(lines)


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


async def operation_time(lake: AsyncMongoClient[dict[str, Any]]) -> Timestamp:
    reply = await lake.admin.command("ping")
    found = reply.get("operationTime") or (reply.get("$clusterTime") or {}).get("clusterTime")
    if not isinstance(found, Timestamp):
        raise SystemExit("the lake reports no operation time: cannot count parent writes")
    return found


async def count_parent_writes(lake: AsyncMongoClient[dict[str, Any]], parent_id: str,
                              since: Timestamp, until: Timestamp) -> int | None:
    """Updates and replaces of the parent between two operation times, from the history.

    Read after the run on purpose: a change stream open during the fires makes
    the lake match every write against it (measured: ~0.5-0.8 ms of lake CPU
    per fire, docs/performance.md).
    """
    pipeline = [{"$match": {"documentKey._id": parent_id,
                            "operationType": {"$in": ["update", "replace"]}}}]
    writes, quiet_since = 0, time.monotonic()
    try:
        async with await lake.kinflow.production.watch(
                pipeline, start_at_operation_time=since, max_await_time_ms=200) as stream:
            # read until the history passes ``until``, or 15 s pass quiet (the lake filters
            # tens of thousands of children's events before it finds the next parent write)
            while time.monotonic() - quiet_since < 15.0:
                change = await stream.try_next()
                if change is None:
                    continue
                if change["clusterTime"] > until:
                    break
                writes += 1
                quiet_since = time.monotonic()
    except OperationFailure:  # the history (15 minutes, 100,000 entries) passed the spawn
        return None
    # every cohort writes its parent at least once (the round that stamps its last row), so
    # none found means the lake's history no longer reaches back (a 10,000-row window run
    # writes more than its 100,000 entries), not a cohort without parent writes
    return writes or None


async def one_size(size: int, callers: int, extra: dict[str, str],
                   profiling: Profiling | None = None, max_active: int | None = None,
                   calibrate: float = 5.0) -> Result:
    result = Result(size, max_active=max_active)
    with tempfile.TemporaryDirectory(prefix="kinflow-cohort-api-") as tmp:
        data_dir, port = Path(tmp), free_port()
        with kinflow_serve(data_dir, port, extra) as process:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                         timeout=600) as http:
                await wait_healthy(http, process)
                lake_port = json.loads((data_dir / "lake.json").read_text())["port"]
                lake: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
                    f"mongodb://127.0.0.1:{lake_port}/", directConnection=True,
                    maxIdleTimeMS=60_000)  # the daemon drops connections silent for 300 s
                profiling = profiling or Profiling()
                profiling.server_pid = process.pid
                profiling.lake_pid = lake_pid(data_dir)
                try:
                    if calibrate > 0:
                        result.calibration = await raw_commit_rate(
                            lake, profiling.lake_pid, "kinflow.production", callers=callers,
                            seconds=calibrate)
                    await run_cohort(http, lake, result, callers, profiling)
                    if calibrate > 0:  # again after: a load that moved shows as a gap
                        result.calibration_after = await raw_commit_rate(
                            lake, profiling.lake_pid, "kinflow.production", callers=callers,
                            seconds=calibrate)
                finally:
                    await lake.close()
    return result


async def run_cohort(http: httpx.AsyncClient, lake: AsyncMongoClient[dict[str, Any]],
                     result: Result, callers: int, profiling: Profiling) -> None:
    size, window = result.size, result.max_active
    parent = PARENT if window is None else windowed_parent(window)
    await call(http, DEPLOY, {"d": [CHILD, parent]})
    items = asyncio.Queue[int]()
    for n in range(size):
        items.put_nowait(n)

    async def put_items() -> None:
        while not items.empty():
            n = items.get_nowait()
            await call(http, PUT, {"d": {"_id": f"item-{n:05d}", "_type": "bench-item"}})

    await asyncio.gather(*(put_items() for _ in range(callers)))

    ops_before = await lake_requests(lake)
    cpu_at_spawn = cpu_snapshot(profiling)
    started = time.perf_counter()
    parent_id = (await call(http, START))["startInstance"]["instance"]["id"]
    result.spawn = time.perf_counter() - started
    since = await operation_time(lake)
    # registry rows are documents of their own beside the dataset (core/cohort/chunks.py)
    rows = lake.kinflow["production.rows"]
    order: dict[str, int] = {}
    queued = 0
    async for chunk in rows.find({"parent": parent_id},
                                 {"rows.ref": 1, "rows.queued": 1}).sort("chunk", 1):
        for row in chunk["rows"]:
            order[str(row["ref"]["id"]).split(":", 2)[-1]] = len(order)
            queued += bool(row.get("queued"))
    if len(order) != size:
        raise SystemExit(f"spawned {len(order)} of {size}")
    if queued != (0 if window is None else max(0, size - window)):
        raise SystemExit(f"{queued} queued rows for a window of {window} over {size}")
    children = asyncio.Queue[str | None]()
    sampler = ActiveSampler(lake, parent_id)
    feeder: asyncio.Task[FeedReport] | None = None
    if window is None:
        for child_id in order:
            children.put_nowait(child_id)
        for _ in range(callers):
            children.put_nowait(None)

    async def fire() -> None:
        while (child := await children.get()) is not None:
            began = time.perf_counter()
            try:
                await call(http, FIRE, {"id": child})
            except ApiError as exc:
                result.errors[exc.code] += 1
                continue
            result.latencies.append(time.perf_counter() - began)

    ops_at_fire = await opcounters(lake) if profiling.opcounters else Counter[str]()
    if profiling.slow_ms is not None:
        await lake.kinflow.command({"profile": 1, "slowms": profiling.slow_ms})
    profiling.start(size)
    cpu_at_fire = cpu_snapshot(profiling)
    started = time.perf_counter()
    if window is not None:
        sampler.start()
        feeder = asyncio.create_task(feed_started(lake, parent_id, order, children, callers))
    await asyncio.gather(*(fire() for _ in range(callers)))
    if feeder is not None:
        result.feed = await feeder
        if result.feed.stalled:
            result.errors["window-stalled"] += 1
    result.fire = time.perf_counter() - started
    result.fire_cpu = {k: v - cpu_at_fire[k] for k, v in cpu_snapshot(profiling).items()}
    profiling.stop(result.fire)
    if profiling.opcounters:
        result.fire_ops = await opcounters(lake)
        result.fire_ops.subtract(ops_at_fire)
    # a failed fire leaves its child live: the parent then never moves on
    deadline = time.monotonic() + (30 if result.errors else 600)
    while await parent_stage(lake, parent_id) == "fan":
        if time.monotonic() > deadline:
            result.errors["parent-never-completed"] += 1
            break
        await asyncio.sleep(0.05)
    result.complete = time.perf_counter() - started
    result.cohort_cpu = {k: v - cpu_at_spawn[k] for k, v in cpu_snapshot(profiling).items()}
    if window is not None:
        await sampler.stop()
        result.peak_active, result.samples = sampler.peak, sampler.samples
        if sampler.peak > window:
            result.errors["window-overfilled"] += 1
    stage = (await call(http, STAGE, {"id": parent_id}))["instance"]["currentStage"]
    if stage != "over":
        result.errors[f"parent-in-{stage}"] += 1
    if profiling.slow_ms is not None:
        await lake.kinflow.command({"profile": 0})
        print(await slow_statements(lake, profiling.slow_ms), flush=True)
    result.lake_ops = await lake_requests(lake) - ops_before
    result.parent_writes = await count_parent_writes(lake, parent_id, since,
                                                     await operation_time(lake))
    final = await lake.kinflow.production.find_one({"_id": parent_id})
    assert final is not None
    result.parent_bytes = len(bson.encode(final))
    result.stamped = sum([1 async for chunk in rows.find({"parent": parent_id})
                          for row in chunk["rows"] if row.get("resolved")])


def print_table(results: list[Result], callers: int, extra: dict[str, str]) -> None:
    load = os.getloadavg()
    settings = " ".join(f"{k}={v}" for k, v in extra.items()) or "defaults"
    print(f"\nCohort through the API ({callers} HTTP callers, kinflow serve {settings}, "
          f"embedded lake; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    head = ("N", "window", "spawn s", "fire s", "complete s", "fires/s", "p50 ms", "p99 ms",
            "lake ops/child", "parent writes", "errors", "stamped", "parent KB",
            "peak active")
    rows = [head]
    for r in results:
        writes = "lost" if r.parent_writes is None else str(r.parent_writes)
        window = "-" if r.max_active is None else str(r.max_active)
        peak = "-" if r.max_active is None else f"{r.peak_active} ({r.samples} samples)"
        rows.append((f"{r.size:,}", window, f"{r.spawn:.2f}", f"{r.fire:.2f}", f"{r.complete:.2f}",
                     f"{r.size / r.fire:.0f}" if r.fire else "-",
                     f"{r.quantile(0.5) * 1000:.0f}", f"{r.quantile(0.99) * 1000:.0f}",
                     f"{r.lake_ops / r.size:.1f}", writes,
                     str(sum(r.errors.values())) + (f" {dict(r.errors)}" if r.errors else ""),
                     f"{r.stamped}/{r.size}", f"{r.parent_bytes / 1024:.0f}", peak))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    for r in results:
        c, after = r.calibration, r.calibration_after
        if c is not None:
            then = (f"; after the cohort {after.rate:.0f}/s, {after.lake_ms:.2f} ms"
                    if after is not None else "")
            print(f"raw child commits (N = {r.size:,}): {c.rate:.0f}/s over {c.seconds:.1f} s "
                  f"({c.commits} commits, {c.indexes} indexes), lake CPU {c.lake_ms:.2f} ms "
                  f"per raw commit{then}; efficiency {r.size / r.total:.1f}/s / "
                  f"{r.raw_rate:.0f}/s = {r.efficiency or 0:.2f}")
        if r.cohort_cpu:
            api, lake = (r.cohort_cpu[k] * 1000 / r.size for k in ("api", "lake"))
            ratio = f"; API / lake per raw commit = {api / c.lake_ms:.2f}" if c else ""
            print(f"CPU ms per child, spawn to completion (N = {r.size:,}): API {api:.2f}, "
                  f"lake {lake:.2f}{ratio}")
        if r.fire_cpu:
            cpu = ", ".join(f"{k} {v * 1000 / r.size:.1f}" for k, v in r.fire_cpu.items())
            print(f"CPU ms per fire during the fires (N = {r.size:,}): {cpu} "
                  f"(machine: every process on both cores; {os.cpu_count()} cores)")
        if r.fire_ops:
            per_fire = ", ".join(f"{kind} {n / r.size:.2f}" for kind, n in
                                 sorted(r.fire_ops.items()) if n)
            print(f"lake operations per fire during the fires (N = {r.size:,}): {per_fire} "
                  "(commands include the transactions' commits and every client's pings)")
    for r in results:
        if r.feed is not None:
            print(f"window {r.max_active} (N = {r.size:,}): {r.feed.fed} children fed to the "
                  f"callers after {r.feed.polls} polls of the lake ({r.feed.poll_seconds:.2f} s "
                  f"in the polls); peak {r.peak_active} live children over {r.samples} samples")
    plain = {r.size: r for r in results if r.max_active is None}
    windowed = {r.size: r for r in results if r.max_active is not None}
    for variant in (plain, windowed):
        base = variant.get(1000)
        for r in variant.values():
            if base is not None and r.size > 1000:
                label = "" if r.max_active is None else f" (window {r.max_active})"
                print(f"time({r.size:,}) / time(1,000){label} = {r.total / base.total:.2f}")
    for size, r in windowed.items():
        if size in plain:
            print(f"time(window {r.max_active}) / time(no window) at N = {size:,}: "
                  f"{r.total:.2f} / {plain[size].total:.2f} s = "
                  f"{r.total / plain[size].total:.2f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--env", action="append", default=[], metavar="KINFLOW_X=VALUE",
                        help="a setting for the server (to compare against the defaults)")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="sample the server and its lake during the fires into DIR")
    parser.add_argument("--slow-ms", type=int, default=None, metavar="MS",
                        help="turn the lake's profiler on during the fires and print the "
                             "statements slower than MS, by shape")
    parser.add_argument("--calibrate", type=float, default=5.0, metavar="S",
                        help="seconds of raw child commits before each cohort (0: none)")
    parser.add_argument("--opcounters", action="store_true",
                        help="print the lake's operations per fire by kind")
    window = parser.add_mutually_exclusive_group()
    window.add_argument("--max-active", type=int, default=None, metavar="N",
                        help="give the parent's spawn maxActive: N (a window)")
    window.add_argument("--compare-window", type=int, default=None, metavar="N",
                        help="run each size without a window, then with maxActive: N, "
                             "and print time(window) / time(no window)")
    args = parser.parse_args()
    for given in (args.max_active, args.compare_window):
        if given is not None and given < 1:
            parser.error("a window is at least 1")
    extra = dict(item.split("=", 1) for item in args.env)
    windows: list[int | None] = [args.max_active]
    if args.compare_window is not None:
        windows = [None, args.compare_window]
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        for max_active in windows:
            label = "" if max_active is None else f" with maxActive {max_active}"
            print(f"cohort of {size:,}{label} ...", flush=True)
            profiling = Profiling(spy_dir=args.py_spy, opcounters=args.opcounters,
                                  slow_ms=args.slow_ms)
            results.append(await one_size(size, args.callers, extra, profiling, max_active,
                                          args.calibrate))
            r = results[-1]
            peak = "" if max_active is None else f", peak active {r.peak_active}"
            print(f"  spawn {r.spawn:.2f} s, complete {r.complete:.2f} s after the first fire, "
                  f"errors {sum(r.errors.values())}{peak}", flush=True)
    print_table(results, args.callers, extra)


if __name__ == "__main__":
    asyncio.run(main())
