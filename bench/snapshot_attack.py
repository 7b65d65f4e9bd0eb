"""A viewer's subscription-snapshot attack against ``kinflow serve``, and what it costs.

Starts ``kinflow serve`` as the README does (a viewer and an admin token) on a fresh
data directory, starts ``--instances`` instances each carrying a field of about 10 KB,
then opens ``--sockets`` websockets with a viewer's token, each subscribing
``--subscriptions`` times to ``instancesChanged`` (every snapshot lists up to 1,000
instance documents) and reading every frame. Meanwhile ``/healthz`` is polled every
50 ms and the server's RSS sampled. Prints the RSS before, at its peak and after, the
probe's latencies, the frames delivered and the refusals by code.

    .venv/bin/python bench/snapshot_attack.py --sockets 2 --subscriptions 100
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from _process import free_port, launch_serve, rss_kib, stop_group, wait_healthy
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

VIEWER = "bench-viewer-token-0123456789"
ADMIN = "bench-admin-token-0123456789"
TOKENS = f"{VIEWER}=vera:viewer,{ADMIN}=ada:admin"
PAD = "x" * 10_000
DEFINITION = {"name": "padded", "title": "Padded", "initialStage": "open",
              "fields": [{"name": "pad", "type": "string", "initialValue": {"type": "input"}}],
              "stages": [{"name": "open"}]}  # fmt: skip
SUBSCRIBE = "subscription { instancesChanged { kind instance { id fields } } }"


async def _post(http: httpx.AsyncClient, query: str, variables: dict[str, Any]) -> Any:
    answer = await http.post("/graphql", json={"query": query, "variables": variables},
                             headers={"Authorization": f"Bearer {ADMIN}"})  # fmt: skip
    body = answer.json()
    if body.get("errors"):
        raise RuntimeError(json.dumps(body["errors"])[:300])
    return body["data"]


async def _seed(http: httpx.AsyncClient, count: int) -> None:
    await _post(http, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) "
                      "{ definitions { name } } }", {"d": [DEFINITION]})  # fmt: skip
    start = ('mutation($f: JSON) { startInstance(definition: "padded", fields: $f) '
             "{ instance { id } } }")
    gate = asyncio.Semaphore(8)

    async def one() -> None:
        async with gate:
            await _post(http, start, {"f": {"pad": PAD}})

    await asyncio.gather(*(one() for _ in range(count)))


async def _socket(url: str, subscriptions: int, instances: int, frames: Counter[str]) -> None:
    """Subscribe ``subscriptions`` times and read until every snapshot is in (or refused)."""
    try:
        async with connect(url, subprotocols=[Subprotocol("graphql-transport-ws")],
                           max_size=None, open_timeout=60) as ws:  # fmt: skip
            await ws.send(json.dumps({"type": "connection_init",
                                      "payload": {"authorization": f"Bearer {VIEWER}"}}))
            await ws.recv()
            for n in range(subscriptions):
                await ws.send(json.dumps({"type": "subscribe", "id": str(n),
                                          "payload": {"query": SUBSCRIBE}}))  # fmt: skip
            seen: Counter[str] = Counter()
            open_ids = set(map(str, range(subscriptions)))
            async with asyncio.timeout(600):
                while open_ids:
                    message = json.loads(await ws.recv())
                    kind, op = message["type"], message.get("id")
                    if kind == "next" and message["payload"].get("errors"):
                        error = message["payload"]["errors"][0]
                        frames["refused:" + str(error.get("extensions", {}).get("code"))] += 1
                        open_ids.discard(op)
                    elif kind == "next":
                        frames["snapshot frames"] += 1
                        seen[op] += 1
                        if seen[op] >= instances:
                            open_ids.discard(op)
                    elif kind in ("error", "complete"):
                        frames[kind] += 1
                        open_ids.discard(op)
    except ConnectionClosed as closed:
        frames[f"closed:{closed.rcvd.code if closed.rcvd else '?'}"] += 1
    except TimeoutError:
        frames["gave up after 600 s"] += 1


async def _probe(http: httpx.AsyncClient, stop: asyncio.Event, latencies: list[float],
                 pid: int, rss: list[int]) -> None:  # fmt: skip
    while not stop.is_set():
        began = time.monotonic()
        with contextlib.suppress(httpx.HTTPError):
            await http.get("/healthz", timeout=30)
        latencies.append(time.monotonic() - began)
        rss.append(rss_kib(pid) or 0)
        await asyncio.sleep(0.05)


async def attack(base: str, pid: int, args: argparse.Namespace) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        await _seed(http, args.instances)
        before = rss_kib(pid) or 0
        latencies: list[float] = []
        rss: list[int] = [before]
        stop = asyncio.Event()
        probe = asyncio.create_task(_probe(http, stop, latencies, pid, rss))
        frames: Counter[str] = Counter()
        url = base.replace("http", "ws") + "/graphql"
        began = time.monotonic()
        await asyncio.gather(*(_socket(url, args.subscriptions, args.instances, frames)
                               for _ in range(args.sockets)))  # fmt: skip
        took = time.monotonic() - began
        await asyncio.sleep(2)
        stop.set()
        await probe
        after = rss_kib(pid) or 0
    ordered = sorted(latencies)
    budget = args.max_documents or "default"
    print(f"{args.sockets} sockets x {args.subscriptions} instancesChanged over "
          f"{args.instances} instances of ~10 KB, snapshot budget {budget}, {took:.1f} s")
    print(f"  API RSS: before {before / 1024:.0f} MiB, peak {max(rss) / 1024:.0f} MiB "
          f"(+{(max(rss) - before) / 1024:.0f}), after {after / 1024:.0f} MiB")
    print(f"  /healthz: {len(ordered)} probes, p50 {statistics.median(ordered) * 1000:.0f} ms, "
          f"p99 {ordered[int(len(ordered) * 0.99) - 1] * 1000:.0f} ms, "
          f"max {ordered[-1] * 1000:.0f} ms")
    print("  frames:", dict(sorted(frames.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--sockets", type=int, default=2)
    parser.add_argument("--subscriptions", type=int, default=100)
    parser.add_argument("--max-documents", type=int, default=None,
                        help="KINFLOW_SNAPSHOT_MAX_DOCUMENTS for the server (default: its own); "
                             "a huge value shows the server without the snapshot budget")
    args = parser.parse_args()
    env = {"KINFLOW_API_TOKENS": TOKENS}
    if args.max_documents is not None:
        env["KINFLOW_SNAPSHOT_MAX_DOCUMENTS"] = str(args.max_documents)
    with tempfile.TemporaryDirectory(prefix="kinflow-snapshots-") as tmp:
        port = free_port()
        process = launch_serve(Path(tmp), port, env)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_healthy(base, process)
            asyncio.run(attack(base, process.pid, args))
        finally:
            stop_group(process)


if __name__ == "__main__":
    main()
