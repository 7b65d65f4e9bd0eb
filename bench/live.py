"""The live path under load: orders with children, one childCompleted subscriber per order.

Starts ``kinflow serve`` as a user would: default settings (its worker on,
its own data directory and embedded lake, 127.0.0.1, a free port), with only
the ``ship`` effect's handler configured (``bench/_orders.py``). Deploys the
order of ``_orders.py`` and runs ``--clients`` loops until the time is up;
each loop, for one order at a time:

    startInstance (its first stage spawns --children lines) -> open a websocket
    and subscribe childCompleted for the order -> fireAction pick.pack on each
    line -> poll the order until its gate has moved it to ready -> fireAction
    ship.ship -> read the order once (it must be shipped)

The subscriber stays open in the background until every packed line's event
has arrived (30 s at most), so a slow delivery does not slow the loop.

Printed at the end: workflows completed and per second; per operation
(startInstance, fireAction child, fireAction ship, instance read, then the
websocket's subscribe, the gate's polls and the whole gate wait) the count,
p50, p99 and max ms and errors by code; completed workflows per second in
20-second slices and the smallest slice as a share of their mean; the
delivery latency of ``childCompleted`` (arrival at the client minus the
event's ``at``, the child's commit time); the RSS of the API process and of
its lake daemon at start, at minute 10 (on runs that long), at end and
their maximum, and their CPU share; the lake daemon's restarts as ``/healthz``
reports them (the planned ones, and the calls their restart gate held back).
``--json FILE`` writes all of it.

``--stall-ms N`` records every operation slower than N ms on a timeline
(which, when, how long) and, while one is in flight past N ms, takes a
``py-spy dump`` of the API process and of the lake daemon into
``--dump-dir`` (at most one pair per 2 s; see ``_stalls.py``).

    python bench/live.py [--clients 8] [--minutes 2] [--children 3] [--json FILE]
                         [--stall-ms N [--dump-dir DIR]] [--env KINFLOW_X=VALUE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from _orders import definitions
from _process import (
    cpu_seconds,
    free_port,
    lake_pid,
    lake_port,
    launch_serve,
    rss_kib,
    stop_group,
    wait_healthy,
)
from _stalls import StallWatch, find_py_spy
from pymongo import AsyncMongoClient
from pymongo.errors import PyMongoError
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

ORDERS = Path(__file__).resolve().with_name("_orders.py")
DEPLOY = "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }"
START = ('mutation { startInstance(definition: "order") '
         "{ instance { id subworkflows { childId } } } }")
FIRE = ("mutation($id: ID!, $a: String!, $b: String!) { fireAction(instanceId: $id, "
        "activity: $a, action: $b) { instance { id currentStage } } }")
READ = "query($id: ID!) { instance(id: $id) { id status currentStage } }"
WATCH = "subscription($p: ID!) { childCompleted(parentId: $p) { kind at row { childId } } }"
# the table's rows: the four operations first, then the loop's other steps
OPERATIONS = ["startInstance", "fireAction child", "fireAction ship", "instance read",
              "subscribe", "instance poll", "gate wait"]
SLICE = 20.0  # seconds
GATE_TIMEOUT = 60.0  # seconds an order may take to reach ready before it is given up
DELIVERY_GRACE = 30.0  # seconds a subscriber waits for its events after the order shipped
MINUTE_10 = 600.0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=8, help="concurrent client loops")
    parser.add_argument("--minutes", type=float, default=2.0, help="length of the load")
    parser.add_argument("--children", type=int, default=3, help="lines (children) per order")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE",
                        help="write every figure to FILE")
    parser.add_argument("--stall-ms", type=float, default=None, metavar="N",
                        help="record operations slower than N ms; py-spy dumps while they wait")
    parser.add_argument("--dump-dir", type=Path, default=None, metavar="DIR",
                        help="where the py-spy dumps go (default: stall-dumps in the data dir)")
    parser.add_argument("--env", action="append", default=[], metavar="KINFLOW_X=VALUE",
                        help="a setting for the server, to compare against the defaults")
    args = parser.parse_args(argv)
    if any("=" not in item or not item.startswith("KINFLOW_") for item in args.env):
        parser.error("--env takes KINFLOW_X=VALUE")
    if args.dump_dir is not None and args.stall_ms is None:
        parser.error("--dump-dir needs --stall-ms")
    if min(args.clients, args.children) < 1 or args.minutes <= 0:
        parser.error("--clients and --children must be at least 1, --minutes above 0")
    return args


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def slices(completions: Sequence[float], seconds: float, width: float = SLICE) -> list[float]:
    """Completed workflows per second in each whole ``width``-second slice of the load
    (``completions``: seconds since it began; a last, partial slice is left out)."""
    counts = [0] * int(seconds // width)
    for at in completions:
        if 0 <= at and int(at // width) < len(counts):
            counts[int(at // width)] += 1
    return [count / width for count in counts]


def smallest_share(rates: Sequence[float]) -> float | None:
    """The smallest slice as a percentage of the slices' mean."""
    mean = sum(rates) / len(rates) if rates else 0.0
    return 100 * min(rates) / mean if mean > 0 else None


def commit_time(at: str) -> float:
    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


@dataclass
class Figures:
    """What the clients measured; times in ms, moments in seconds since the load began."""

    watch: StallWatch
    began: float = field(default_factory=time.monotonic)
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    completed: list[float] = field(default_factory=list)
    delivery: list[float] = field(default_factory=list)
    delivered: Counter[str] = field(default_factory=Counter)  # events by kind
    delivery_errors: Counter[str] = field(default_factory=Counter)

    async def call(self, http: httpx.AsyncClient, op: str, query: str,
                   variables: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """One GraphQL call, timed; its data, or None after counting why not."""
        token = self.watch.begin(op)
        try:
            response = await http.post("/graphql", json={"query": query,
                                                          "variables": variables or {}})
            body: dict[str, Any] = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            self.watch.end(token)
            self.errors[op][type(exc).__name__] += 1
            return None
        self.latency[op].append(self.watch.end(token))
        if body.get("errors"):
            code = (body["errors"][0].get("extensions") or {}).get("code", "graphql")
            self.errors[op][str(code)] += 1
            return None
        if response.status_code >= 400 or not body.get("data"):
            self.errors[op][f"http-{response.status_code}"] += 1
            return None
        data: dict[str, Any] = body["data"]
        return data


class Subscriber:
    """One order's ``childCompleted`` subscription on a websocket of its own."""

    def __init__(self, figures: Figures) -> None:
        self.figures = figures
        self.expected = 0
        self.received = 0
        self.ws: ClientConnection | None = None
        self.reader: asyncio.Task[None] | None = None
        self.ponged = asyncio.Event()
        self.all_in = asyncio.Event()

    async def open(self, base: str, order: str) -> bool:
        """Connect, subscribe, and ping once (the pong follows the subscribe message)."""
        token = self.figures.watch.begin("subscribe")
        try:
            self.ws = await connect(base.replace("http://", "ws://") + "/graphql",
                                    subprotocols=[Subprotocol("graphql-transport-ws")],
                                    open_timeout=60)  # fmt: skip
            await self.ws.send(json.dumps({"type": "connection_init", "payload": {}}))
            ack = json.loads(await asyncio.wait_for(self.ws.recv(), 60))
            if ack.get("type") != "connection_ack":
                raise ConnectionError(f"no connection_ack: {ack.get('type')}")
            await self.ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {
                "query": WATCH, "variables": {"p": order}}}))
            self.reader = asyncio.create_task(self.read(self.ws))
            await self.ws.send(json.dumps({"type": "ping"}))
            await asyncio.wait_for(self.ponged.wait(), 60)
        except Exception as exc:  # refused, closed or timed out: counted, the order goes on
            self.figures.watch.end(token)
            self.figures.errors["subscribe"][type(exc).__name__] += 1
            await self.close()
            return False
        self.figures.latency["subscribe"].append(self.figures.watch.end(token))
        return True

    async def read(self, ws: ClientConnection) -> None:
        try:
            async for raw in ws:
                arrived = time.time()
                message = json.loads(raw)
                kind = message.get("type")
                if kind == "pong":
                    self.ponged.set()
                elif kind == "next":
                    self.on_event(message["payload"], arrived)
                elif kind in ("error", "complete"):
                    if kind == "error":
                        self.count_error(message.get("payload") or [])
                    return
        except Exception as exc:  # the socket went away
            self.figures.delivery_errors[type(exc).__name__] += 1
        finally:
            self.all_in.set()

    def on_event(self, payload: dict[str, Any], arrived: float) -> None:
        if payload.get("errors"):
            self.count_error(payload["errors"])
            return
        event = payload["data"]["childCompleted"]
        self.figures.delivered[event["kind"]] += 1
        if event["kind"] != "snapshot":  # a snapshot's child finished before the subscription
            self.figures.delivery.append((arrived - commit_time(event["at"])) * 1000)
        self.received += 1
        if self.expected and self.received >= self.expected:
            self.all_in.set()

    def count_error(self, errors: list[dict[str, Any]]) -> None:
        code = ((errors[0].get("extensions") or {}).get("code") if errors else None)
        self.figures.delivery_errors[str(code or "graphql")] += 1

    async def finish(self, expected: int) -> None:
        """Wait (a while) for the events of the ``expected`` finished children, then close."""
        self.expected = expected
        if self.received < expected:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.all_in.wait(), DELIVERY_GRACE)
        if self.received < expected:
            self.figures.delivery_errors["missed"] += expected - self.received
        await self.close()

    async def close(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reader


async def wait_gate(http: httpx.AsyncClient, figures: Figures, order: str) -> bool:
    """Poll the order until its gate has moved it to ``ready`` (True) or time is up."""
    token = figures.watch.begin("gate wait")
    deadline = time.monotonic() + GATE_TIMEOUT
    try:
        while True:
            read = await figures.call(http, "instance poll", READ, {"id": order})
            if read is not None and read["instance"]["currentStage"] == "ready":
                return True
            if time.monotonic() > deadline:
                figures.errors["gate wait"]["timeout"] += 1
                return False
            await asyncio.sleep(0.1)
    finally:
        figures.latency["gate wait"].append(figures.watch.end(token))


async def one_order(http: httpx.AsyncClient, base: str, figures: Figures,
                    closing: list[asyncio.Task[None]]) -> None:
    started = await figures.call(http, "startInstance", START)
    if started is None:
        return
    order = started["startInstance"]["instance"]["id"]
    lines = [row["childId"] for row in started["startInstance"]["instance"]["subworkflows"]]
    subscriber = Subscriber(figures)
    subscribed = await subscriber.open(base, order)
    packed = 0
    try:
        for line in lines:
            if await figures.call(http, "fireAction child", FIRE,
                                  {"id": line, "a": "pick", "b": "pack"}) is None:
                return
            packed += 1
        if not await wait_gate(http, figures, order):
            return
        if await figures.call(http, "fireAction ship", FIRE,
                              {"id": order, "a": "ship", "b": "ship"}) is None:
            return
        read = await figures.call(http, "instance read", READ, {"id": order})
        if read is not None and read["instance"]["currentStage"] == "shipped":
            figures.completed.append(time.monotonic() - figures.began)
        elif read is not None:
            figures.errors["instance read"][f"ended-{read['instance']['currentStage']}"] += 1
    finally:
        if subscribed:
            closing.append(asyncio.create_task(subscriber.finish(packed)))


class Resources:
    """RSS samples (every 2 s) and CPU seconds of the API process and its lake daemon."""

    def __init__(self, api: int, data_dir: Path, began: float) -> None:
        self.api, self.data_dir, self.began = api, data_dir, began
        self.samples: dict[str, list[tuple[float, int]]] = {"api": [], "lake": []}
        self.cpu_start = self.cpu()

    def pids(self) -> dict[str, int | None]:
        return {"api": self.api, "lake": lake_pid(self.data_dir)}

    def cpu(self) -> dict[str, float]:
        return {who: cpu_seconds(pid) for who, pid in self.pids().items()}

    def sample(self) -> None:
        at = time.monotonic() - self.began
        for who, pid in self.pids().items():
            kib = rss_kib(pid) if pid is not None else None
            if kib is not None:
                self.samples[who].append((at, kib))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.sample()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 2.0)

    def summary(self, seconds: float) -> dict[str, Any]:
        """MiB at start, at minute 10 (None on shorter runs), at end and the max; CPU shares."""
        out: dict[str, Any] = {}
        cpu_end = self.cpu()
        for who, samples in self.samples.items():
            mib = [(at, kib / 1024) for at, kib in samples]
            at_10 = next((m for at, m in mib if at >= MINUTE_10), None)
            out[who] = {"start_mib": mib[0][1] if mib else None, "minute_10_mib": at_10,
                        "end_mib": mib[-1][1] if mib else None,
                        "max_mib": max((m for _, m in mib), default=None),
                        "cpu_share": (cpu_end[who] - self.cpu_start[who]) / seconds}
        return out


def op_figures(figures: Figures) -> dict[str, dict[str, Any]]:
    ops = [op for op in OPERATIONS if op in figures.latency or op in figures.errors]
    ops += sorted((set(figures.latency) | set(figures.errors)) - set(ops))
    return {op: {"count": len(figures.latency.get(op, [])),
                 "p50_ms": percentile(figures.latency.get(op, []), 0.50),
                 "p99_ms": percentile(figures.latency.get(op, []), 0.99),
                 "max_ms": max(figures.latency.get(op, []), default=0.0),
                 "errors": dict(figures.errors.get(op, {}))} for op in ops}


async def pending_effects(data_dir: Path) -> int | str:
    """Orders whose ``ship`` effect has not run once the load stopped (its hint,
    ``effectsDueAt``, is indexed): a few may wait for the worker's next pass; a number
    that grows with the run means effects are not running. Read on the lake itself: a
    GROQ count over every order made the daemon decode them all."""
    port = lake_port(data_dir)
    if port is None:
        return "no lake"
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        f"mongodb://127.0.0.1:{port}/?directConnection=true", serverSelectionTimeoutMS=30000)
    try:
        return await client.kinflow.production.count_documents(
            {"_type": "kinflow.instance", "effectsDueAt": {"$gt": ""}})
    except PyMongoError as exc:
        return f"unknown ({type(exc).__name__})"
    finally:
        await client.close()


async def subscribers_left(base: str, settle: float = 5.0) -> int | str:
    """The hub's subscribers once every client closed its websocket (``/healthz``),
    after ``settle`` seconds for the closes to reach the server: anything left is a
    subscription the server never let go of, and its memory with it."""
    await asyncio.sleep(settle)
    try:
        async with httpx.AsyncClient(base_url=base, timeout=10.0) as http:
            return int((await http.get("/healthz")).json()["hub"]["subscribers"])
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        return f"unknown ({type(exc).__name__})"


async def daemon_report(base: str) -> dict[str, Any] | str:
    """The lake daemon as the server's keeper reports it (``/healthz``): its restarts,
    the planned ones among them (the memory guard's) and the calls they held back."""
    try:
        async with httpx.AsyncClient(base_url=base, timeout=10.0) as http:
            return dict((await http.get("/healthz")).json()["lake"]["daemon"])
    except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
        return f"unknown ({type(exc).__name__})"


async def load(args: argparse.Namespace, base: str, data_dir: Path, api_pid: int,
               ) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as http:
        answer = (await http.post("/graphql", json={
            "query": DEPLOY, "variables": {"d": definitions(args.children)}})).json()
    if answer.get("errors"):
        raise SystemExit(f"deploying the order failed: {answer['errors']}")
    began = time.monotonic()
    resources = Resources(api_pid, data_dir, began)
    spy = find_py_spy() if args.stall_ms is not None else None
    dump_dir = args.dump_dir or data_dir / "stall-dumps"
    watch = StallWatch(args.stall_ms, resources.pids, spy=spy, dump_dir=dump_dir)
    figures = Figures(watch=watch, began=began)
    deadline = began + args.minutes * 60
    closing: list[asyncio.Task[None]] = []
    stop = asyncio.Event()
    background = [asyncio.create_task(resources.run(stop)), asyncio.create_task(watch.run(stop))]

    async def client() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=60.0) as http:
            while time.monotonic() < deadline:
                await one_order(http, base, figures, closing)

    await asyncio.gather(*(client() for _ in range(args.clients)))
    loops_done = time.monotonic() - began
    await asyncio.gather(*closing)
    left = await subscribers_left(base)
    daemon = await daemon_report(base)
    stop.set()
    await asyncio.gather(*background)
    resources.sample()
    effects = await pending_effects(data_dir)
    rates = slices(figures.completed, args.minutes * 60)
    return {
        "settings": {"clients": args.clients, "minutes": args.minutes,
                     "children": args.children, "stall_ms": args.stall_ms},
        "seconds": loops_done, "workflows": len(figures.completed),
        "workflows_per_s": len(figures.completed) / loops_done,
        "operations": op_figures(figures),
        "slices_per_s": rates, "smallest_slice_pct": smallest_share(rates),
        "delivery": {"count": len(figures.delivery),
                     "p50_ms": percentile(figures.delivery, 0.50),
                     "p99_ms": percentile(figures.delivery, 0.99),
                     "max_ms": max(figures.delivery, default=0.0),
                     "kinds": dict(figures.delivered), "errors": dict(figures.delivery_errors)},
        "memory": resources.summary(loops_done),
        "effects_pending": effects,
        "subscribers_left": left,
        "daemon": daemon,
        "stalls": {"py_spy": spy, "dump_dir": str(dump_dir) if watch.dumps else None,
                   "timeline": [s.as_json() for s in sorted(watch.timeline,
                                                             key=lambda s: s.start)],
                   "dumps": [d.as_json() for d in watch.dumps]},
    }  # fmt: skip


def mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} MiB"


def report(result: dict[str, Any], shown_stalls: int = 40) -> None:
    s = result["settings"]
    print(f"live: {s['clients']} clients x {s['children']} children, {result['seconds']:.0f} s: "
          f"{result['workflows']} workflows completed ({result['workflows_per_s']:.2f}/s)")
    print(f"{'operation':<18} {'count':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  errors")
    for op, f in result["operations"].items():
        print(f"{op:<18} {f['count']:>7} {f['p50_ms']:>8.0f} {f['p99_ms']:>8.0f} "
              f"{f['max_ms']:>8.0f}  {f['errors'] or '-'}")
    rates, share = result["slices_per_s"], result["smallest_slice_pct"]
    print(f"{SLICE:.0f}-second slices (workflows/s): "
          f"{' '.join(f'{r:.2f}' for r in rates) or '-'}"
          + (f"; smallest {share:.0f}% of the mean" if share is not None else ""))
    d = result["delivery"]
    print(f"childCompleted delivery (arrival - event's at): {d['count']} events, "
          f"p50 {d['p50_ms']:.0f} ms, p99 {d['p99_ms']:.0f} ms, max {d['max_ms']:.0f} ms; "
          f"kinds {d['kinds'] or '-'}, errors {d['errors'] or '-'}")
    print(f"orders whose ship effect has not run after the load: {result['effects_pending']}")
    print(f"subscriptions the server still holds after every client closed: "
          f"{result['subscribers_left']}")
    daemon = result["daemon"]
    if isinstance(daemon, dict):
        gate = daemon.get("gate") or {}
        print(f"lake daemon restarts: {daemon.get('restarts')} (planned "
              f"{daemon.get('plannedRestarts')}); calls held at the restart gate "
              f"{gate.get('waited', '-')}, restarts begun with calls in flight "
              f"{gate.get('undrained', '-')}")
    else:
        print(f"lake daemon: {daemon}")
    for who, m in result["memory"].items():
        print(f"memory {who}: start {mib(m['start_mib'])}, minute 10 "
              f"{mib(m['minute_10_mib'])}, end {mib(m['end_mib'])}, max "
              f"{mib(m['max_mib'])}; CPU {100 * m['cpu_share']:.0f}% of a core")
    stalls = result["stalls"]
    if s["stall_ms"] is None:
        return
    timeline = stalls["timeline"]
    print(f"stalls over {s['stall_ms']:.0f} ms: {len(timeline)}; py-spy "
          f"{stalls['py_spy'] or 'not found (no dumps)'}; {len(stalls['dumps'])} dump pairs"
          + (f" in {stalls['dump_dir']}" if stalls["dump_dir"] else ""))
    for entry in timeline[:shown_stalls]:
        print(f"  {entry['start_s']:>8.2f} s  {entry['op']:<18} {entry['duration_ms']:>8.0f} ms"
              + (f"  {', '.join(entry['dumps'])}" if entry["dumps"] else ""))
    if len(timeline) > shown_stalls:
        print(f"  ... {len(timeline) - shown_stalls} more (--json has them all)")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    # SIGTERM (a timeout, a CI stop) unwinds like Ctrl-C, so the server is stopped
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    data_dir = Path(tempfile.mkdtemp(prefix="kinflow-live-"))
    port = free_port()
    extra = dict(item.split("=", 1) for item in args.env)
    process = launch_serve(data_dir, port, {"KINFLOW_EFFECT_HANDLERS": str(ORDERS), **extra})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, process)
        result = asyncio.run(load(args, base, data_dir, process.pid))
        result["server_alive_at_end"] = process.poll() is None
        report(result)
        print(f"server alive at end: {result['server_alive_at_end']}; "
              f"log: {data_dir / 'serve.log'}")
        if args.json is not None:
            args.json.write_text(json.dumps(result, indent=2))
    finally:
        stop_group(process, grace=20)


if __name__ == "__main__":
    main()
