"""Where one child ``fireAction`` spends its time, traced inside the API process.

The app (``create_app`` with default settings: embedded lake, in-process
worker) runs in this process behind httpx's ASGI transport, so a pymongo
``CommandListener`` sees every lake command and cProfile sees every frame.
Setup: a parent spawns ``--size`` children (default 1,000) through the API.
Then ``--fires`` children (default 200) are fired **one at a time**, so every
command the lake receives between a fire's start and end belongs to it or to
the background (change stream, heartbeat, propagation rounds, named apart).

Printed: per fire, wall and CPU milliseconds and the lake's share of the
wall time (sum of command round trips); lake commands per fire by name and
collection, inside a transaction or not; the same for a request that only
crosses HTTP and GraphQL (``{ __typename }``: the floor every request pays);
then cProfile's time per category (``_profile_categories``). No uvicorn or socket between client and
app here: ``cohort_api.py --py-spy`` covers the served path.

    PYTHONPATH=. python bench/fire_profile.py [--size 1000] [--fires 200] [--query TEXT]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _cohort_definitions import CHILD, PARENT
from _profile_categories import categorise
from cohort_api import DEPLOY, FIRE, PUT, START
from pymongo import monitoring

from kinflow.http.app import create_app
from kinflow.settings import Settings

CHILDREN = "*[_type == 'kinflow.instance' && pinnedVersion > 0 && definition == 'bench-child']._id"
FLOOR = "query { __typename }"
BACKGROUND = frozenset({"getMore", "hello", "isMaster", "ismaster", "endSessions", "ping"})


@dataclass
class Commands:
    """Every lake command, with its round trip, while ``recording`` is set."""

    recording: bool = False
    seen: list[tuple[str, str, bool, float]] = field(default_factory=list)
    pending: dict[int, tuple[str, str, bool]] = field(default_factory=dict)


class Listener(monitoring.CommandListener):
    """Feeds ``Commands`` (registered globally, so the app's own client reports too)."""

    def __init__(self, commands: Commands) -> None:
        self.commands = commands

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if not self.commands.recording:
            return
        name = event.command_name
        target = event.command.get(name)
        collection = target.split(".", 1)[-1] if isinstance(target, str) else ""
        in_txn = "txnNumber" in event.command and event.command.get("autocommit") is False
        self.commands.pending[event.request_id] = (name, collection, in_txn)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        self._done(event.request_id, event.duration_micros)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self._done(event.request_id, event.duration_micros)

    def _done(self, request_id: int, micros: int) -> None:
        begun = self.commands.pending.pop(request_id, None)
        if begun is not None:
            self.commands.seen.append((*begun, micros / 1000))


async def gql(http: httpx.AsyncClient, query: str, variables: dict[str, Any] | None = None
              ) -> dict[str, Any]:
    body: dict[str, Any] = (await http.post("/graphql", json={
        "query": query, "variables": variables or {}})).json()
    if body.get("errors"):
        raise SystemExit(f"GraphQL error: {body['errors'][0]}")
    data: dict[str, Any] = body["data"]
    return data


@dataclass
class Batch:
    """Figures of one batch of sequential fires."""

    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    lake_ms: list[float] = field(default_factory=list)
    per_fire: Counter[tuple[str, str, bool]] = field(default_factory=Counter)
    round_trips: dict[tuple[str, str, bool], list[float]] = field(default_factory=dict)
    background: Counter[str] = field(default_factory=Counter)

    def report(self, label: str) -> None:
        n = len(self.walls)
        print(f"  {label}: wall p50 {statistics.median(self.walls):.2f} ms "
              f"(mean {statistics.mean(self.walls):.2f}), CPU p50 "
              f"{statistics.median(self.cpus):.2f} ms, lake round trips p50 "
              f"{statistics.median(self.lake_ms):.2f} ms")
        for (name, collection, in_txn), count in sorted(self.per_fire.items(),
                                                        key=lambda x: -x[1]):
            trips = self.round_trips.get((name, collection, in_txn), [0.0])
            print(f"    {count / n:5.2f}  {name:18s} {collection:24s} "
                  f"{'txn' if in_txn else '   '}  round trip p50 {statistics.median(trips):.2f} ms")
        if self.background:
            print("    background per fire: " + ", ".join(
                f"{name} {count / n:.2f}" for name, count in self.background.most_common()))


async def fire_batch(http: httpx.AsyncClient, commands: Commands, children: list[str],
                     fire_text: str, profile: cProfile.Profile | None) -> Batch:
    batch = Batch()
    for child in children:
        commands.seen.clear()
        commands.recording = True
        wall, cpu = time.perf_counter(), time.process_time()
        if profile is not None:
            profile.enable()
        await gql(http, fire_text, {"id": child} if "$id" in fire_text else None)
        if profile is not None:
            profile.disable()
        batch.walls.append((time.perf_counter() - wall) * 1000)
        batch.cpus.append((time.process_time() - cpu) * 1000)
        commands.recording = False
        mine = [c for c in commands.seen if c[0] not in BACKGROUND]
        batch.lake_ms.append(sum(c[3] for c in mine))
        batch.per_fire.update((c[0], c[1], c[2]) for c in mine)
        for name, collection, in_txn, ms in mine:
            batch.round_trips.setdefault((name, collection, in_txn), []).append(ms)
        batch.background.update(c[0] for c in commands.seen if c[0] in BACKGROUND)
    return batch


async def run(size: int, fires: int, fire_text: str, top: int, callers: str, only: str
              ) -> None:
    if size < 3 + 2 * fires:
        raise SystemExit("--size must be at least 3 + 2 x --fires")
    commands = Commands()
    monitoring.register(Listener(commands))
    profile = cProfile.Profile()
    with tempfile.TemporaryDirectory(prefix="kinflow-fire-profile-") as tmp:
        app = create_app(Settings(data_dir=Path(tmp)))
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1",
                timeout=600) as http:
            await gql(http, DEPLOY, {"d": [CHILD, PARENT]})
            for n in range(size):
                await gql(http, PUT, {"d": {"_id": f"item-{n:05d}", "_type": "bench-item"}})
            await gql(http, START)
            engine = app.state.engine
            children = sorted(await engine.query(CHILDREN))
            if len(children) < size:
                raise SystemExit(f"spawned {len(children)} of {size}")
            for child in children[:3]:  # warm the caches a long-lived server has
                await gql(http, fire_text, {"id": child})
            await engine.maintenance.settle_propagation()
            plain = await fire_batch(http, commands, children[3:3 + fires], fire_text, None)
            floor = await fire_batch(http, commands, children[3:3 + fires], FLOOR, None)
            profiled = await fire_batch(http, commands, children[3 + fires:3 + 2 * fires],
                                        fire_text, profile)
            await engine.maintenance.settle_propagation()
    print(f"\nsequential child fires in a {size:,}-child cohort (in process, ASGI transport; "
          f"load {os.getloadavg()[0]:.2f})")
    plain.report(f"{fires} fires")
    floor.report(f"{fires} requests of {FLOOR!r} (HTTP + GraphQL, nothing else)")
    profiled.report(f"{fires} more under cProfile")
    stats = pstats.Stats(profile)
    print("  cProfile, ms per fire by category:")
    for label, seconds in categorise(stats):
        print(f"    {seconds * 1000 / fires:6.2f}  {label}")
    if top:
        stats.sort_stats("tottime").print_stats(*([only] if only else []), top)
        if callers:
            stats.print_callers(callers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--fires", type=int, default=200)
    parser.add_argument("--query", default=FIRE, help="the fireAction text to send")
    parser.add_argument("--top", type=int, default=0,
                        help="also print cProfile's top N functions by their own time")
    parser.add_argument("--callers", default="", help="with --top: print this function's callers")
    parser.add_argument("--only", default="", help="with --top: only functions matching this")
    args = parser.parse_args()
    asyncio.run(run(args.size, args.fires, args.query, args.top, args.callers, args.only))


if __name__ == "__main__":
    main()
