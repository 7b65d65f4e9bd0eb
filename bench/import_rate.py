"""Getting documents in: ``kinflow lake import`` and ``putDocuments`` against the raw lake.

One run, one ``kinflow serve`` with default settings (its own temporary data
directory, hence its own embedded lake, a free port on 127.0.0.1), and the
same small documents (``{_id, _type, title, n}``, about 100 bytes) each time:

* raw: ``insert_many`` in batches of 1,000 straight on the server's lake
  daemon (a database of its own), the documents stamped with the system
  fields the lake keeps, into a bare collection and into one with the
  indexes of the server's dataset (copied from it): the reference rates,
  each the mean of a run before and one after the two others;
* import: ``kinflow lake import production FILE`` of ``--count`` documents
  from an NDJSON file, timed as a user sees it (the command's start-up and
  its checking pass included; the lake is the server's, found through the
  data directory);
* putDocuments: ``--count`` documents through the API in calls of
  ``--batch`` documents, one caller.

Printed: documents per second of each, and its ratios to the two raw rates
(the target is at least 0.5), with the machine's load.

    python bench/import_rate.py [--count 100000] [--batch 1000] [--raw-count N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from _process import free_port, lake_port, launch_serve, stop_group, wait_healthy
from pymongo import AsyncMongoClient

PUT = """mutation($d: [JSON!]!) { putDocuments(documents: $d) { count created } }"""
STAMP = "2026-01-01T00:00:00.000Z"


def small(prefix: str, n: int) -> dict[str, Any]:
    return {"_id": f"{prefix}-{n:07d}", "_type": "bench-item", "title": f"Item {n}", "n": n}


async def raw_rate(port: int, count: int, batch: int, *, indexed: bool) -> float:
    """``insert_many`` of ``count`` stamped small documents, in batches, on a fresh database:
    into a bare collection, or (``indexed``) one with the indexes of the server's dataset."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        f"mongodb://127.0.0.1:{port}/?directConnection=true", retryWrites=False)
    database = f"bench_raw_{uuid.uuid4().hex[:8]}"
    coll = client[database]["production"]
    docs = [{**small(f"raw-{indexed}", n), "_rev": uuid.uuid4().hex[:16], "_createdAt": STAMP,
             "_updatedAt": STAMP} for n in range(count)]  # fmt: skip
    try:
        await coll.insert_one({"_id": "warm", "_type": "bench-item"})
        if indexed:
            specs = [spec async for spec in await client["kinflow"]["production"].list_indexes()
                     if spec["name"] != "_id_"]  # fmt: skip
            await client[database].command("createIndexes", "production", indexes=[
                {k: v for k, v in spec.items() if k not in ("v", "ns")} for spec in specs])
        began = time.perf_counter()
        for first in range(0, count, batch):
            await coll.insert_many(docs[first:first + batch], ordered=True)
        return count / (time.perf_counter() - began)
    finally:
        await client.drop_database(database)
        await client.close()


def import_rate(data_dir: Path, count: int) -> float:
    """``kinflow lake import`` of an NDJSON file of ``count`` documents, wall clock."""
    source = data_dir / "items.ndjson"
    with source.open("w") as handle:
        for n in range(count):
            handle.write(json.dumps(small("imported", n)) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KINFLOW_")}
    env["KINFLOW_DATA_DIR"] = str(data_dir)
    kinflow = str(Path(sys.executable).with_name("kinflow"))
    began = time.perf_counter()
    done = subprocess.run([kinflow, "lake", "import", "production", str(source)], env=env,
                          cwd=data_dir, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - began
    if done.returncode != 0 or f"{count:,} created" not in done.stdout:
        raise SystemExit(f"lake import failed: {done.stdout}{done.stderr}")
    return count / elapsed


async def api_rate(base: str, count: int, batch: int) -> float:
    """``putDocuments`` of ``count`` documents in calls of ``batch``, one caller."""
    async with httpx.AsyncClient(base_url=base, timeout=600.0) as http:
        began = time.perf_counter()
        for first in range(0, count, batch):
            documents = [small("put", n) for n in range(first, min(first + batch, count))]
            answer = (await http.post("/graphql", json={"query": PUT,
                                                         "variables": {"d": documents}})).json()
            if answer.get("errors") or answer["data"]["putDocuments"]["created"] != len(
                    documents):
                raise SystemExit(f"putDocuments failed: {answer}")
        return count / (time.perf_counter() - began)


async def measure(data_dir: Path, base: str, count: int, batch: int, raw_count: int
                  ) -> list[tuple[str, float]]:
    """Each rate, printed as soon as it is measured (a slow machine shows partial results)."""
    port = lake_port(data_dir)
    assert port is not None, "the server wrote no lake.json"
    rates: dict[str, list[float]] = {}

    def keep(name: str, value: float) -> None:
        rates.setdefault(name, []).append(value)
        print(f"  {name}: {value:,.0f} docs/s (load {os.getloadavg()[0]:.2f})", flush=True)

    for when in ("before", "after"):
        if when == "after":
            keep("kinflow lake import", await asyncio.to_thread(import_rate, data_dir, count))
            keep(f"putDocuments, {batch:,} per call", await api_rate(base, count, batch))
        keep("raw, bare collection", await raw_rate(port, raw_count, batch, indexed=False))
        keep("raw, the dataset's indexes", await raw_rate(port, raw_count, batch, indexed=True))
    order = ("raw, bare collection", "raw, the dataset's indexes", "kinflow lake import",
             f"putDocuments, {batch:,} per call")
    return [(name, sum(rates[name]) / len(rates[name])) for name in order]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--raw-count", type=int, default=None,
                        help="documents per raw run (default --count; fewer on a slow machine)")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="kinflow-import-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    load = os.getloadavg()[0]
    process = launch_serve(data_dir, port)
    try:
        wait_healthy(base, process)
        rows = asyncio.run(measure(data_dir, base, args.count, args.batch,
                                   args.raw_count or args.count))
    finally:
        stop_group(process)
    print(f"{args.count:,} small documents ({args.raw_count or args.count:,} per raw run); "
          f"load {load:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end (raw: the mean of a run before and one after)")
    print(f"{'':32s} {'docs/s':>8s}  {'/ bare':>6s}  {'/ indexed':>9s}")
    for name, value in rows:
        print(f"{name:32s} {value:8,.0f}  {value / rows[0][1]:6.2f}  {value / rows[1][1]:9.2f}")


if __name__ == "__main__":
    main()
