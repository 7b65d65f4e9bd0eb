"""Soak: a sustained load against ``kinflow serve`` (with its worker), with latency and memory.

Starts ``kinflow serve`` as a subprocess on 127.0.0.1 and a free port, with a
data directory of its own (so its own embedded lake), deploys the canonical
article review, and runs ``--clients`` concurrent clients until the time is
up. Each client drives whole workflows through the GraphQL API:

    putDocument (an article with --children locales) -> startInstance ->
    fireAction write.submit (spawns one translation per locale) ->
    fireAction translate.submit on every child -> fireAction approve.approve
    -> query the parent (it must be completed)

Printed at the end: workflows completed per second, then per operation the
count, throughput, p50 and p99 latency and errors by code, and the RSS of
the API process and of its lake daemon (from /proc) at start and at end.
Every refusal or transport error is counted, never retried.

Unless ``--no-attacks`` is given, an attacker runs beside the clients the
denial-of-service attempts of ``bench/_attacks.py`` while a probe times
``/healthz``; their answers and the probe's latency are printed after the
table.

    python bench/soak.py [--minutes 10] [--clients 8] [--children 3] [--no-attacks]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
from _attacks import AttackTally, attacker, health_probe
from _process import free_port, lake_pid, lake_port, rss_kib, stop_group

ROOT = Path(__file__).resolve().parents[1]
DEFINITIONS = ROOT / "examples" / "definitions" / "article-review.json"
LOCALES = ["de", "fr", "es", "it", "nl", "pt", "pl", "sv"]
START = ("mutation($f: JSON) { startInstance(definition: \"article-review\", fields: $f) "
         "{ instance { id } } }")
FIRE = ("mutation($id: ID!, $a: String!, $b: String!) { fireAction(instanceId: $id, "
        "activity: $a, action: $b) { instance { status subworkflows { childId } } } }")
PUT = "mutation($d: JSON!) { putDocument(document: $d) }"
READ = "query($id: ID!) { instance(id: $id) { status currentStage } }"


class Stats:
    """Latencies and errors per operation."""

    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, Counter[str]] = defaultdict(Counter)
        self.workflows = 0

    async def call(self, http: httpx.AsyncClient, op: str, query: str,
                   variables: dict[str, Any]) -> dict[str, Any] | None:
        started = time.perf_counter()
        try:
            response = await http.post("/graphql", json={"query": query,
                                                          "variables": variables})
            body: dict[str, Any] = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            self.errors[op][type(exc).__name__] += 1
            return None
        self.latency[op].append(time.perf_counter() - started)
        if response.status_code >= 500:
            self.errors[op][f"http-{response.status_code}"] += 1
            return None
        if body.get("errors"):
            code = (body["errors"][0].get("extensions") or {}).get("code", "graphql")
            self.errors[op][str(code)] += 1
            return None
        data: dict[str, Any] = body["data"]
        return data


async def one_workflow(http: httpx.AsyncClient, stats: Stats, name: str, children: int) -> None:
    article = {"_id": name, "_type": "article", "title": name, "locales": LOCALES[:children]}
    if await stats.call(http, "putDocument", PUT, {"d": article}) is None:
        return
    started = await stats.call(http, "startInstance", START, {"f": {"subject": name}})
    if started is None:
        return
    parent = started["startInstance"]["instance"]["id"]
    submitted = await stats.call(http, "fireAction.submit", FIRE,
                                 {"id": parent, "a": "write", "b": "submit"})
    if submitted is None:
        return
    for row in submitted["fireAction"]["instance"]["subworkflows"]:
        await stats.call(http, "fireAction.child", FIRE,
                         {"id": row["childId"], "a": "translate", "b": "submit"})
    await stats.call(http, "fireAction.approve", FIRE,
                     {"id": parent, "a": "approve", "b": "approve"})
    read = await stats.call(http, "instance", READ, {"id": parent})
    if read is not None and read["instance"]["status"].lower() == "completed":
        stats.workflows += 1
    elif read is not None:
        stats.errors["workflow"][f"ended-{read['instance']['status']}"] += 1


async def client_loop(base: str, stats: Stats, n: int, deadline: float, children: int) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as http:
        k = 0
        while time.monotonic() < deadline:
            await one_workflow(http, stats, f"soak-{n}-{k}", children)
            k += 1


async def wait_ready(base: str, process: subprocess.Popen[bytes], seconds: float = 90) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=2.0) as http:
        for _ in range(int(seconds * 4)):
            if process.poll() is not None:
                raise SystemExit(f"kinflow serve exited with {process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get("/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.25)
    raise SystemExit("kinflow serve did not become healthy")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def report(stats: Stats, seconds: float, memory: dict[str, tuple[int | None, int | None]]
           ) -> None:
    print(f"soak: {seconds:.0f} s, {stats.workflows} workflows completed "
          f"({stats.workflows / seconds:.2f}/s)")
    print(f"{'operation':<20} {'count':>7} {'per s':>7} {'p50 ms':>8} {'p99 ms':>8}  errors")
    for op in sorted(set(stats.latency) | set(stats.errors)):
        values = stats.latency.get(op, [])
        p50 = percentile(values, 0.5) if values else 0.0
        p99 = percentile(values, 0.99) if values else 0.0
        print(f"{op:<20} {len(values):>7} {len(values) / seconds:>7.1f} {p50:>8.1f} "
              f"{p99:>8.1f}  {dict(stats.errors.get(op, {})) or '-'}")
    for who, (start, end) in memory.items():
        if start and end:
            print(f"memory {who}: {start / 1024:.1f} MiB at start, {end / 1024:.1f} MiB at end "
                  f"({(end - start) / 1024:+.1f} MiB)")


def launch(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    """``kinflow serve`` in a session of its own (so the whole group can be stopped)."""
    env = {**os.environ, "KINFLOW_DATA_DIR": str(data_dir), "KINFLOW_HOST": "127.0.0.1",
           "KINFLOW_PORT": str(port), "KINFLOW_WORKER_INTERVAL": "0.5"}
    env.pop("KINFLOW_MONGODB_URI", None)
    env.pop("KINFLOW_API_TOKENS", None)
    kinflow = str(Path(sys.executable).with_name("kinflow"))
    with (data_dir / "serve.log").open("wb") as log:
        return subprocess.Popen([kinflow, "serve"], env=env, cwd=data_dir, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


async def soak(minutes: float, clients: int, children: int, attacks: bool) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="kinflow-soak-"))
    port = free_port()
    process = launch(data_dir, port)
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_ready(base, process)
        async with httpx.AsyncClient(base_url=base, timeout=60.0) as http:
            deployed = await http.post("/graphql", json={
                "query": "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) "
                         "{ definitions { name } } }",
                "variables": {"d": json.loads(DEFINITIONS.read_text())}})
            assert not deployed.json().get("errors"), deployed.text
        lake = lake_pid(data_dir)
        start_rss = {"api": rss_kib(process.pid), "lake": rss_kib(lake) if lake else None}
        stats = Stats()
        began = time.monotonic()
        deadline = began + minutes * 60
        tally = AttackTally()
        lake_uri = f"mongodb://127.0.0.1:{lake_port(data_dir)}/?directConnection=true"
        extra = ([attacker(base, lake_uri, deadline, tally), health_probe(base, deadline, tally)]
                 if attacks else [])
        await asyncio.gather(*(client_loop(base, stats, n, deadline, children)
                               for n in range(clients)), *extra)
        elapsed = time.monotonic() - began
        memory = {"api": (start_rss["api"], rss_kib(process.pid)),
                  "lake": (start_rss["lake"], rss_kib(lake) if lake else None)}
        report(stats, elapsed, memory)
        if attacks:
            tally.report()
        print(f"server alive at end: {process.poll() is None}; log: {data_dir / 'serve.log'}")
    finally:
        stop_group(process, grace=20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--children", type=int, default=3)
    parser.add_argument("--no-attacks", dest="attacks", action="store_false",
                        help="leave out the denial-of-service attempts")
    args = parser.parse_args()
    # SIGTERM (a timeout, a CI stop) unwinds like Ctrl-C, so the server is stopped
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(soak(args.minutes, args.clients, args.children, args.attacks))


if __name__ == "__main__":
    main()
