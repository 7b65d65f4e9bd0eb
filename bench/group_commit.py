"""Would a group commit pay on the embedded lake? The raw child commit, one or k per transaction.

Starts an embedded lake, lets an engine create its dataset (so the dataset's
collection has every index the engine declares), then runs the calibration of
``bench/cohort_api.py`` (``_calibration.raw_commit_rate``: find + update +
commit on a ~2 KB child-shaped document, on a collection indexed like the
dataset) with ``--callers`` concurrent callers, once per group size: 1 is the
engine's shape today, k > 1 commits k documents per transaction (one ``find``
by ``$in``, one ``update`` command of k statements, one commit). Each size
runs ``--rounds`` times, alternated, so a change of the machine's speed hits
every size alike.

Printed per group size and round: documents committed per second and the
daemon's CPU milliseconds per document.

    PYTHONPATH=. python bench/group_commit.py [--groups 1,2,4,8] [--seconds 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

from _calibration import raw_commit_rate
from pymongo import AsyncMongoClient

from kinflow.engine import Engine
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client
from kinflow.storage.embedded import EmbeddedLake


async def run(uri: str, pid: int, groups: list[int], seconds: float, rounds: int,
              callers: int) -> None:
    client = make_client(uri, Settings(mongodb_uri=uri, operation_timeout=600.0))
    lake = Lake(client, "production", operation_timeout=600.0)
    await lake.ensure_dataset()
    await Engine(lake).ensure_ready()
    await client.close()
    raw: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, directConnection=True)
    try:
        print(f"{callers} callers, {seconds:.0f} s per measurement")
        for n in range(rounds):
            for group in groups:
                c = await raw_commit_rate(raw, pid, "production.production", callers=callers,
                                          seconds=seconds, group=group)
                print(f"  round {n + 1}, {group} per transaction: {c.rate:6.0f} documents/s, "
                      f"lake CPU {c.lake_ms:5.2f} ms per document ({c.indexes} indexes; "
                      f"load {os.getloadavg()[0]:.2f})", flush=True)
    finally:
        await raw.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default="1,2,4,8")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--callers", type=int, default=8)
    args = parser.parse_args()
    daemon = EmbeddedLake(Path(tempfile.mkdtemp(prefix="kinflow-group-commit-")))
    uri = daemon.start()
    try:
        assert daemon.pid is not None
        asyncio.run(run(uri, daemon.pid, [int(g) for g in args.groups.split(",")],
                        args.seconds, args.rounds, args.callers))
    finally:
        daemon.stop()


if __name__ == "__main__":
    main()
