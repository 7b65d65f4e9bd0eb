"""The embedded lake daemon's memory under rewrites of one large document.

Starts ``kinflow serve`` (no worker) on 127.0.0.1 with a data directory of its
own, so its own embedded lake, then rewrites one document of ``--mib`` MiB
``--writes`` times with ``putDocument`` (one client, one write at a time: the
worst case is the leak per transaction, not concurrency). The daemon's
resident memory is read from /proc (its pid from ``lake.json``, which changes
when the daemon is restarted) before the first write, after every write, and
``--settle`` seconds after the last.

Printed: the memory budget (``KINFLOW_EMBEDDED_MEMORY_MB``), the daemon's RSS
before, its maximum and its mean during, after, the number of daemon restarts,
writes per second, failed writes by code, and whether the maximum stayed under
the budget plus 25%. ``--budget 0`` shows the daemon without restarts (stop it
early with ``--writes``: it grows by about 13 MiB per 6 MiB write).

    python bench/lake_memory.py [--writes 1000] [--mib 6] [--budget 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from _process import free_port, lake_pid, launch_serve, stop_group, wait_healthy

from kinflow.storage.memory_guard import rss_mib

PUT = "mutation($d: JSON!) { putDocument(document: $d) }"


def article(mib: int) -> dict[str, Any]:
    """An article of about ``mib`` MiB: Portable Text blocks of 1 KiB of text each."""
    text = ("The quick brown fox jumps over the lazy dog. " * 23)[:1000]
    blocks = [{"_key": f"b{i}", "_type": "block", "style": "normal",
               "children": [{"_type": "span", "text": text}]}
              for i in range(mib * 1024 * 1024 // 1100)]  # fmt: skip
    return {"_id": "big-article", "_type": "article", "title": "A long read", "body": blocks}


def launch(data_dir: Path, port: int, budget: int) -> subprocess.Popen[bytes]:
    """``kinflow serve`` without its worker, the lake's memory budget ``budget`` MiB."""
    return launch_serve(data_dir, port, {
        "KINFLOW_WORKER": "false", "KINFLOW_EMBEDDED_MEMORY_MB": str(budget),
        "KINFLOW_MAX_REQUEST_BYTES": str(64 * 1024 * 1024)})


class Sampler:
    """The daemon's RSS, sampled every ``period`` seconds whichever daemon is current."""

    def __init__(self, data_dir: Path, period: float = 0.2) -> None:
        self.data_dir, self.period = data_dir, period
        self.samples: list[float] = []
        self.pids: set[int] = set()

    def sample(self) -> float | None:
        pid = lake_pid(self.data_dir)
        rss = rss_mib(pid) if pid is not None else None
        if pid is not None and rss is not None:
            self.pids.add(pid)
            self.samples.append(rss)
        return rss

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.sample()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.period)


async def rewrite(http: httpx.AsyncClient, doc: dict[str, Any], errors: Counter[str]) -> bool:
    try:
        response = await http.post("/graphql", json={"query": PUT, "variables": {"d": doc}})
        body = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        errors[type(exc).__name__] += 1
        return False
    if body.get("errors"):
        code = str((body["errors"][0].get("extensions") or {}).get("code", "graphql"))
        if not errors[code]:
            print(f"  first {code}: {str(body['errors'][0].get('message'))[:200]}")
        errors[code] += 1
        return False
    return True


async def measure(writes: int, mib: int, budget: int, settle: float) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="kinflow-lakemem-"))
    port = free_port()
    process = launch(data_dir, port, budget)
    try:
        await asyncio.to_thread(wait_healthy, f"http://127.0.0.1:{port}", process)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            sampler = Sampler(data_dir)
            before = sampler.sample()
            sampler.samples.clear()
            doc = article(mib)
            size = len(json.dumps(doc)) / 1024 / 1024
            print(f"document: {size:.1f} MiB of JSON; budget {budget} MiB; {writes} rewrites")
            stop = asyncio.Event()
            watcher = asyncio.create_task(sampler.run(stop))
            errors: Counter[str] = Counter()
            ok = 0
            began = time.monotonic()
            for n in range(1, writes + 1):
                ok += await rewrite(http, doc, errors)
                if n % max(1, writes // 10) == 0:
                    print(f"  {n:>5} writes  {time.monotonic() - began:7.1f} s  daemon "
                          f"{sampler.sample() or 0:7.1f} MiB  restarts {len(sampler.pids) - 1}")
            elapsed = time.monotonic() - began
            stop.set()
            await watcher
            during = list(sampler.samples)
            await asyncio.sleep(settle)
            after = sampler.sample()
            health = (await http.get("/healthz")).json()
        report(before, during, after, budget, ok, writes, elapsed, errors,
               len(sampler.pids) - 1, health)
    finally:
        stop_group(process, grace=20)
        print(f"data directory: {data_dir} (serve.log, lake.log)")


def report(before: float | None, during: list[float], after: float | None, budget: int,
           ok: int, writes: int, elapsed: float, errors: Counter[str], restarts: int,
           health: dict[str, Any]) -> None:
    peak = max(during) if during else 0.0
    mean = sum(during) / len(during) if during else 0.0
    print(f"daemon RSS MiB: before {before or 0:.1f}, during max {peak:.1f} / mean {mean:.1f} "
          f"({len(during)} samples), after {after or 0:.1f}")
    print(f"daemon restarts: {restarts}; healthz after: {health.get('status', health)}")
    print(f"writes: {ok} of {writes} succeeded in {elapsed:.0f} s ({ok / elapsed:.2f}/s); "
          f"failed: {dict(errors) or '-'}")
    if budget:
        limit = budget * 1.25
        verdict = "under" if peak < limit else "OVER"
        print(f"max {peak:.0f} MiB is {verdict} the budget plus 25% ({limit:.0f} MiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--mib", type=int, default=6, help="size of the document")
    parser.add_argument("--budget", type=int, default=1024,
                        help="KINFLOW_EMBEDDED_MEMORY_MB (0: no restarts)")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds to wait after the last write")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(measure(args.writes, args.mib, args.budget, args.settle))


if __name__ == "__main__":
    main()
