"""A benchmark's own ``kinflow serve``, with an HTTP client on it and a client on its lake.

Imported as a sibling (``from _served import ...``) by the benchmarks that drive a cohort
through the API. ``served`` starts the server as a user runs it (``_process.launch_serve``:
default settings plus the benchmark's, a fresh temporary data directory and so a fresh
embedded lake, a free port on 127.0.0.1), waits until it is healthy, and yields the
clients; afterwards it closes them and stops the server (SIGTERM to its process group).
``children_of`` and ``until_it_leaves`` read the lake directly: an API read would load the
whole parent each time and compete with the round it waits for.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from _process import free_port, lake_port, launch_serve, stop_group, wait_healthy
from pymongo import AsyncMongoClient

Lake = AsyncMongoClient[dict[str, Any]]


@dataclass
class Served:
    data_dir: Path
    process: subprocess.Popen[bytes]
    http: httpx.AsyncClient  # its base URL is the server's
    lake: Lake  # on the server's embedded lake daemon


@contextlib.asynccontextmanager
async def served(prefix: str, extra_env: dict[str, str] | None = None, *,
                 timeout: float = 900.0) -> AsyncIterator[Served]:
    """``kinflow serve`` on a temporary data directory named ``prefix...``; HTTP calls time
    out after ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        data_dir, port = Path(tmp), free_port()
        base = f"http://127.0.0.1:{port}"
        process = launch_serve(data_dir, port, extra_env)
        try:
            await asyncio.to_thread(wait_healthy, base, process, 120.0)
            async with httpx.AsyncClient(base_url=base, timeout=timeout) as http:
                # maxIdleTimeMS: the daemon closes a connection silent for 300 s, and a
                # pooled one it closed would fail the bench's next statement
                lake: Lake = AsyncMongoClient(f"mongodb://127.0.0.1:{lake_port(data_dir)}/",
                                              directConnection=True, maxIdleTimeMS=60_000)
                try:
                    yield Served(data_dir, process, http, lake)
                finally:
                    await lake.close()
        finally:
            stop_group(process)


async def children_of(lake: Lake, parent_id: str) -> list[str]:
    """The ids of the parent's children that exist (queued rows have none)."""
    found = lake.kinflow.production.find({"_type": "kinflow.instance",
                                          "parentInstance": parent_id}, {"_id": 1})
    return [str(doc["_id"]) async for doc in found]


async def until_it_leaves(lake: Lake, parent_id: str, stage: str, seconds: float) -> bool:
    """Poll the parent's stage every 50 ms until it is no longer ``stage``: False if it still
    was after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        found = await lake.kinflow.production.find_one({"_id": parent_id}, {"currentStage": 1})
        if (found or {}).get("currentStage") != stage:
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)


def size_and_callers(doc: str | None, size_help: str, callers_help: str) -> tuple[int, int]:
    """``--size`` (default 1,000) and ``--callers`` (default 8) from the command line."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--size", type=int, default=1000, help=size_help)
    parser.add_argument("--callers", type=int, default=8, help=callers_help)
    args = parser.parse_args()
    return args.size, args.callers
