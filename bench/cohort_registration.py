"""Registration of a large cohort in batches, through the API.

docs/subworkflows.md#registration-and-limits says how it works.

For each size (``--sizes 100000`` by default) this starts ``kinflow serve`` with
default settings (its own data directory, hence its own embedded lake, a free
port on 127.0.0.1), then:

* content (timed, as the yardstick): N ``bench-item`` documents written straight
  into the lake with pymongo ``insert_many`` in batches of 1,000 (the lake's raw
  insert rate for these very documents, in this run);
* registration (timed): ``startInstance`` of a parent whose first stage spawns
  one child per item with ``maxActive: 200`` (``*[_type == 'bench-item']{_id}``,
  registered a batch per parent commit), until the parent no longer owes
  registration (polled on the lake every 100 ms, a projection of two fields);
  then ``Cohort.total`` and ``Cohort.registering`` are read through the API;
* ``--complete`` (optional): the children finish at once when created (a child
  whose first stage moves on by itself), so the window refills from every
  commit; timed until the parent leaves its fan-out stage.

Printed per size: seconds, rows/s, rows/s over the raw insert rate, the API's and
the lake's RSS before and after (MiB), the parent document's size (KB), the
registry's chunk documents, and errors (rows not done with ``--complete``, and
``ERROR``/traceback lines in the server's log). With ``--complete`` a second table
gives children/s, the API's RSS when half the rows were done and at the end, and
the CPU milliseconds per child of the API and of the lake daemon (user + system:
on a shared machine they say more than the wall time). Note ``uptime`` beside any
figure kept.

``--repeat N`` runs each size N times and gives the second table each size's median run
(the 2,000-row time is the least steady: docs/performance.md).

    python bench/cohort_registration.py [--sizes 100000,1000000] [--complete] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import bson
import pymongo.errors
from _cohort_definitions import one_action_child
from _process import cpu_seconds, lake_pid, rss_kib
from _served import Lake, served
from cohort_api import DEPLOY, call

CHILD = one_action_child("reg", "Registration")
AUTO_CHILD = {**CHILD, "name": "reg-auto", "stages": [
    {"name": "work", "transitions": [{"name": "to-done", "to": "done", "when": "true"}]},
    {"name": "done"}]}


def parent(child: str, max_active: int) -> dict[str, Any]:
    return {
        "name": "reg-parent", "title": "Registration parent", "initialStage": "fan",
        "fields": [], "stages": [
            {"name": "fan", "activities": [{"name": "translate", "actions": [
                {"name": "fan-out", "when": "true", "spawn": {
                    "forEach": "*[_type == 'bench-item']{_id}", "maxActive": max_active,
                    "definition": {"name": child}, "with": {"item": "$row._id"}}},
                {"name": "all-done", "status": "done", "when": "$cohort.settled"},
            ]}], "transitions": [{"name": "to-over", "to": "over"}]},
            {"name": "over"}]}


START = 'mutation { startInstance(definition: "reg-parent") { instance { id } } }'
COHORT = ('query($id: ID!) { cohort(parentId: $id, activity: "translate") '
          "{ total registering queued active done settled } }")


def mib(pid: int | None) -> float:
    return (rss_kib(pid) or 0) / 1024 if pid is not None else 0.0


async def insert_content(lake: Lake, n: int) -> float:
    """Write the items with insert_many; the raw rate (documents per second)."""
    coll = lake.kinflow.production
    started = time.perf_counter()
    for start in range(0, n, 1000):
        await coll.insert_many([{"_id": f"bench-item-{i:07d}", "_type": "bench-item",
                                 "n": i, "site": f"site-{i % 97}", "title": f"Item {i}"}
                                for i in range(start, min(n, start + 1000))], ordered=False)
    return n / (time.perf_counter() - started)


async def one_size(size: int, max_active: int, complete: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"size": size}
    async with served("kinflow-registration-", timeout=600) as server:
        http, lake, process = server.http, server.lake, server.process
        lake_process = lake_pid(server.data_dir)
        row["raw"] = await insert_content(lake, size)
        child = AUTO_CHILD if complete else CHILD
        await call(http, DEPLOY, {"d": [child, parent(str(child["name"]), max_active)]})
        row["api0"], row["lake0"] = mib(process.pid), mib(lake_process)
        print(f"size {size:,}: API pid {process.pid}, lake pid {lake_process}", flush=True)
        peak = row["api0"]
        cpu0 = cpu_seconds(process.pid), cpu_seconds(lake_process)
        started = time.perf_counter()
        parent_id = (await call(http, START))["startInstance"]["instance"]["id"]
        docs = lake.kinflow.production
        while True:
            try:
                found = await docs.find_one({"_id": parent_id}, {
                    "owesRegistration": 1, "currentStage": 1, "cohortRows.counts": 1})
            except pymongo.errors.AutoReconnect:  # the server restarted its lake (its memory
                await asyncio.sleep(0.5)  # budget): this bench's own client reconnects
                continue
            peak = max(peak, mib(process.pid))
            if complete and "mid" not in row and 2 * done_rows(found) >= size:
                row["mid"] = mib(process.pid)  # the API's RSS when half the rows are done
            owed = bool((found or {}).get("owesRegistration"))
            if not owed and not complete:
                break
            if complete and (found or {}).get("currentStage") == "over":
                break
            await asyncio.sleep(0.1)
        row["seconds"] = time.perf_counter() - started
        row["api_cpu"] = cpu_seconds(process.pid) - cpu0[0]
        row["lake_cpu"] = cpu_seconds(lake_process) - cpu0[1]
        if lake_pid(server.data_dir) != lake_process:  # its CPU before the restart is lost
            print(f"  the lake restarted (pid {lake_process} -> {lake_pid(server.data_dir)})",
                  file=sys.stderr)
        row["api1"], row["lake1"], row["peak"] = mib(process.pid), mib(lake_process), peak
        cohort = (await call(http, COHORT, {"id": parent_id}))["cohort"]
        row["cohort"] = cohort
        stored = await docs.find_one({"_id": parent_id})
        row["parent_kb"] = len(bson.encode(stored or {})) / 1024
        row["chunks"] = await lake.kinflow["production.rows"].count_documents(
            {"parent": parent_id})
        logged = logged_errors(server.data_dir / "serve.log")
        undone = size - int(cohort["done"]) if complete else 0
        if undone:
            print(f"  {undone:,} rows not done: {cohort}", file=sys.stderr)
        row["errors"] = logged + undone
    return row


def done_rows(parent: dict[str, Any] | None) -> int:
    """Rows whose child is done, by the parent's cohort counts (``status:outcome``)."""
    return sum(int(n) for entry in (parent or {}).get("cohortRows") or []
               for name, n in (entry.get("counts") or {}).items() if name.startswith("done:"))


def logged_errors(log: Path) -> int:
    """Lines of the server's log that report an error or a traceback."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return 0
    for line in lines:  # a planned restart of the lake explains a cut connection
        if "restart" in line and " WARNING " in line:
            print("  server log:", line, file=sys.stderr)
    found = [n for n, line in enumerate(lines)
             if " ERROR " in line or line.startswith("Traceback")]
    for n in found[:3]:  # the log goes with the server's temporary directory: show the first
        print("  server log:", *lines[n:n + 12], sep="\n    ", file=sys.stderr)
    return len(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--max-active", type=int, default=200)
    parser.add_argument("--complete", action="store_true",
                        help="children finish at creation; time until the parent moves on")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per size; the second table takes each size's median run")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}", flush=True)
    print("| rows | seconds | rows/s | raw insert_many/s | % of raw | API MiB before -> after "
          "(peak) | lake MiB before -> after | parent KB | chunks | total | registering | "
          "errors |")
    print("|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---|---:|")
    done: list[dict[str, Any]] = []
    spread: list[str] = []
    for size in (int(s) for s in args.sizes.split(",")):
        runs = []
        for _ in range(max(1, args.repeat)):
            r = asyncio.run(one_size(size, args.max_active, args.complete))
            runs.append(r)
            rate = size / r["seconds"]
            print(f"| {size:,} | {r['seconds']:.1f} | {rate:,.0f} | {r['raw']:,.0f} | "
                  f"{100 * rate / r['raw']:.0f}% | {r['api0']:.0f} -> {r['api1']:.0f} "
                  f"({r['peak']:.0f}) | {r['lake0']:.0f} -> {r['lake1']:.0f} | "
                  f"{r['parent_kb']:.1f} | {r['chunks']} | {r['cohort']['total']:,} | "
                  f"{r['cohort']['registering']} | {r['errors']} |", flush=True)
        runs.sort(key=lambda run: float(run["seconds"]))
        done.append(runs[len(runs) // 2])  # the median run (the upper one of an even count)
        spread.append(f"{size:,}: " + ", ".join(f"{run['seconds']:.1f}" for run in runs) + " s")
    if args.complete:
        if args.repeat > 1:  # a short run's time varies most: say how much
            print(f"median of {args.repeat} runs per size ({'; '.join(spread)})")
        completion_table(done)
    print(f"load: {os.getloadavg()}", flush=True)


def completion_table(rows: list[dict[str, Any]]) -> None:
    """Children/s, time over the previous size's, the API's RSS from the middle to the end
    of the run, CPU ms per child of the API and the lake."""
    print("| rows | children/s | time / previous size's | API MiB at half -> end | "
          "API CPU ms/child | lake CPU ms/child |")
    print("|---:|---:|---:|---|---:|---:|")
    previous: dict[str, Any] | None = None
    for r in rows:
        size = r["size"]
        ratio = f"{r['seconds'] / previous['seconds']:.2f}" if previous else ""
        mid = r.get("mid", 0.0)
        change = f" ({100 * (r['api1'] - mid) / mid:+.0f}%)" if mid else ""
        print(f"| {size:,} | {size / r['seconds']:,.0f} | {ratio} | {mid:.0f} -> "
              f"{r['api1']:.0f}{change} | {1000 * r['api_cpu'] / size:.2f} | "
              f"{1000 * r['lake_cpu'] / size:.2f} |", flush=True)
        previous = r


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
