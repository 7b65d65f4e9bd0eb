"""Subscription fan-out through the real server: delivered events/s and commit-to-client latency.

Runs ``kinflow.http.app:create_app`` under uvicorn on 127.0.0.1 (embedded lake in
a temporary directory), starts 100 parents whose start spawns 10 children each (a real
spawn: registry rows in their chunks, ``ancestors`` on each child), then for
100 and for 1,000 ``childChanged`` subscriptions (spread over the 100
parents, 10 per websocket) drives 1,000 child stage moves and measures
every delivery. Latency runs from the child's commit (its ``_updatedAt``,
stamped by the committing write) to receipt by the client. By default each
change is one lake write of the child's stage, so the figures are the API's
fan-out; ``--driver engine`` makes each change a ``fireAction`` (two engine
commits plus propagation to the parent), which the embedded lake caps at a
few moves per second.

    python bench/subscriptions.py [--parents 100] [--children 10] [--concurrency 16]
                                  [--driver lake|engine]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from _process import free_port
from rich.console import Console
from rich.table import Table
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

from kinflow.engine import Engine
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client, transaction_slots

STEPS = ["one", "two", "three", "done"]
CHILD: dict[str, Any] = {
    "name": "bench-child", "title": "Bench child", "initialStage": "one", "fields": [],
    "stages": [
        *({"name": stage, "activities": [{"name": f"work-{stage}", "actions": [
            {"name": "next", "status": "done"}]}],
           "transitions": [{"name": f"to-{after}", "to": after}]}
          for stage, after in itertools.pairwise(STEPS)),
        {"name": "done"},
    ],
}  # fmt: skip


def parent_definition(children: int) -> dict[str, Any]:
    """A parent whose start spawns ``children`` bench children (rows 0 .. children-1)."""
    rows = "[" + ", ".join(str(n) for n in range(children)) + "]"
    return {
        "name": "bench-parent", "title": "Bench parent", "initialStage": "watching",
        "fields": [],
        "stages": [
            {"name": "watching", "activities": [{"name": "fan", "actions": [
                {"name": "spawn", "when": "true", "spawn": {
                    "forEach": rows, "definition": {"name": "bench-child"}}},
                {"name": "close", "status": "done"}]}],
             "transitions": [{"name": "to-closed", "to": "closed"}]},
            {"name": "closed"},
        ],
    }  # fmt: skip


SUBSCRIPTION = """subscription($p: ID!) { childChanged(parentId: $p) {
  kind at row { childId status stage } } }"""
PER_SOCKET = 10


@contextlib.contextmanager
def server(data_dir: Path) -> Iterator[tuple[str, str]]:
    """uvicorn on 127.0.0.1; yields (base url, lake uri) and stops both on exit."""
    port = free_port()
    env = {**os.environ, "KINFLOW_DATA_DIR": str(data_dir), "KINFLOW_HUB_QUEUE_SIZE": "5000"}
    env.pop("KINFLOW_MONGODB_URI", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "kinflow.http.app:create_app", "--factory",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        env=env,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the server did not come up") from None
                time.sleep(0.2)
        state = json.loads((data_dir / "lake.json").read_text())
        yield base, f"mongodb://127.0.0.1:{state['port']}/?directConnection=true"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def gather_limited(concurrency: int, jobs: list[Any]) -> list[Any]:
    gate = asyncio.Semaphore(concurrency)

    async def run(job: Any) -> Any:
        async with gate:
            return await job

    return list(await asyncio.gather(*(run(j) for j in jobs)))


async def build(engine: Engine, parents: int, children: int, concurrency: int
                ) -> dict[str, list[str]]:
    """Start ``parents`` parents through the engine; each start spawns its children.

    The families are what a user's spawn stores (registry rows in their chunk
    documents, ``ancestors`` on each child), so the subscriptions resolve them
    as they would in production.
    """
    await engine.deploy([CHILD, parent_definition(children)])
    started = await gather_limited(concurrency, [
        engine.start_instance("bench-parent") for _ in range(parents)])
    family: dict[str, list[str]] = {}
    for result in started:
        parent = result.instance
        kids = [row.child_id for row in parent.subworkflows]
        if len(kids) != children:
            raise SystemExit(f"{parent.id_} spawned {len(kids)} children, not {children}")
        family[parent.id_] = kids
    return family


async def drive(engine: Engine, driver: str, child: str, step: str) -> None:
    """One child change: an engine verb (two commits), or one lake write of its stage."""
    if driver == "engine":
        await engine.fire_action(child, f"work-{step}", "next")
        return
    after = STEPS[STEPS.index(step) + 1]
    await engine.lake.update(child, {"$set": {"currentStage": after}})


@dataclass
class Receiver:
    snapshots: int = 0
    latencies: list[float] = field(default_factory=list)
    last_receipt: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    expected: int = 0
    expected_snapshots: int = 0

    async def read(self, ws: ClientConnection) -> None:
        async for raw in ws:
            now = time.time()
            message = json.loads(raw)
            if message.get("type") != "next":
                continue
            event = message["payload"]["data"]["childChanged"]
            if event["kind"] == "snapshot":
                self.snapshots += 1
                if self.snapshots >= self.expected_snapshots:
                    self.ready.set()
                continue
            committed = datetime.fromisoformat(event["at"].replace("Z", "+00:00")).timestamp()
            self.latencies.append((now - committed) * 1000)
            self.last_receipt = now
            if len(self.latencies) >= self.expected:
                self.done.set()


async def open_socket(url: str, parent_ids: list[str]) -> ClientConnection:
    ws = await connect(url, subprotocols=[Subprotocol("graphql-transport-ws")],
                       max_size=None, open_timeout=60)  # fmt: skip
    await ws.send(json.dumps({"type": "connection_init", "payload": {}}))
    ack = json.loads(await ws.recv())
    assert ack["type"] == "connection_ack", ack
    for n, pid in enumerate(parent_ids):
        await ws.send(json.dumps({"id": str(n), "type": "subscribe", "payload": {
            "query": SUBSCRIPTION, "variables": {"p": pid}}}))
    return ws


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def phase(url: str, engine: Engine, family: dict[str, list[str]], subscriptions: int,
                step: str, concurrency: int, driver: str) -> dict[str, Any]:
    parent_ids = list(family)
    targets = [parent_ids[n % len(parent_ids)] for n in range(subscriptions)]
    children_per_parent = len(next(iter(family.values())))
    subs_per_parent = subscriptions / len(parent_ids)
    receiver = Receiver(expected=int(subs_per_parent * sum(len(k) for k in family.values())),
                        expected_snapshots=subscriptions * children_per_parent)
    sockets = [await open_socket(url, targets[i:i + PER_SOCKET])
               for i in range(0, len(targets), PER_SOCKET)]  # fmt: skip
    readers = [asyncio.create_task(receiver.read(ws)) for ws in sockets]
    await asyncio.wait_for(receiver.ready.wait(), timeout=300)
    # interleaved across parents, so concurrent moves rarely stamp the same parent
    children = [kids[c] for c in range(children_per_parent) for kids in family.values()]
    started = time.time()
    await gather_limited(concurrency, [drive(engine, driver, cid, step) for cid in children])
    driven = time.time()
    try:
        await asyncio.wait_for(receiver.done.wait(), timeout=120)
    except TimeoutError:
        pass
    for ws in sockets:
        await ws.close()
    for task in readers:
        task.cancel()
    elapsed = max(receiver.last_receipt, driven) - started
    delivered = len(receiver.latencies)
    return {
        "subscriptions": subscriptions, "sockets": len(sockets), "changes": len(children),
        "expected": receiver.expected, "delivered": delivered,
        "commits_per_s": len(children) / (driven - started),
        "events_per_s": delivered / elapsed if elapsed > 0 else 0.0,
        "p50": percentile(receiver.latencies, 0.50), "p99": percentile(receiver.latencies, 0.99),
    }  # fmt: skip


async def main(args: argparse.Namespace) -> None:
    console = Console(width=150)
    with tempfile.TemporaryDirectory(prefix="kinflow-bench-") as tmp, \
            server(Path(tmp) / "data") as (base, lake_uri):  # fmt: skip
        settings = Settings(mongodb_uri=lake_uri)
        lake = Lake(make_client(lake_uri, settings), settings.database)
        # the cap every kinflow process on the embedded lake has (without it 16 open
        # transactions pin the daemon's newest page and the moves crawl at 6/s)
        lake.slots = transaction_slots(settings, embedded=True)
        engine = Engine(lake)
        await engine.ensure_ready()
        console.print(f"building {args.parents} parents x {args.children} children ...")
        family = await build(engine, args.parents, args.children, args.concurrency)
        url = base.replace("http", "ws") + "/graphql"
        results = []
        for subscriptions, step in ((args.parents, "one"), (args.parents * 10, "two")):
            console.print(f"{subscriptions} subscriptions ...")
            results.append(await phase(url, engine, family, subscriptions, step,
                                       args.concurrency, args.driver))  # fmt: skip
        await lake.close()
    table = Table(title="childChanged fan-out (uvicorn, 1 worker, embedded lake, 127.0.0.1, "
                        f"changes by {args.driver})")
    for column in ("subscriptions", "websockets", "child changes", "events delivered",
                   "commits/s", "delivered events/s", "p50 ms", "p99 ms"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(str(r["subscriptions"]), str(r["sockets"]), str(r["changes"]),
                      f"{r['delivered']}/{r['expected']}", f"{r['commits_per_s']:.0f}",
                      f"{r['events_per_s']:.0f}", f"{r['p50']:.0f}", f"{r['p99']:.0f}")
    console.print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parents", type=int, default=100)
    parser.add_argument("--children", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--driver", choices=("lake", "engine"), default="lake",
                        help="make each child change with a lake write (default) or fireAction")
    asyncio.run(main(parser.parse_args()))
