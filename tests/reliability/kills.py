"""Kill rounds: start the driver, SIGKILL it at a random moment, repair, check.

The lake daemon is started here, once, and keeps running across every kill
(only the driver dies), so whatever the driver committed stays committed and
whatever it left half-done is the heartbeat's to finish. A driver killed in
the middle of a transaction leaves that transaction open on the server; as
``kinflow serve`` does when it starts (docs/reliability.md), the recovery
step ends the dead process's sessions with ``killAllSessions`` before the
heartbeat runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kinflow.engine import Engine
from kinflow.storage.embedded import EmbeddedLake
from tests.reliability.family import ROOT, Shape, definitions, open_lake
from tests.reliability.invariants import Ledger, settle

READY_TIMEOUT = 60.0


@dataclass
class KillReport:
    kills: int = 0
    exited_early: int = 0  # rounds where the driver finished before the kill came
    operations: int = 0
    repaired_items: int = 0
    instances: int = 0
    ledger: Ledger = field(default_factory=Ledger)


class DriverFailed(AssertionError):
    """The driver died on its own with an error: a bug the kill did not cause."""


async def _pump(stream: asyncio.StreamReader, lines: deque[str], ready: asyncio.Event,
                report: KillReport) -> None:
    while raw := await stream.readline():
        line = raw.decode(errors="replace").rstrip()
        lines.append(line)
        if line == "ready":
            ready.set()
        elif line.startswith("op "):
            report.operations += 1


async def one_kill(uri: str, database: str, seed: int, shape: Shape, delay: float,
                   report: KillReport) -> None:
    """Run the driver, kill it ``delay`` seconds after it is ready (or let it finish)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.reliability.driver", uri, database, str(seed),
        str(shape.parents), str(shape.children), str(shape.grandchildren),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    lines: deque[str] = deque(maxlen=60)
    ready = asyncio.Event()
    assert process.stdout is not None
    pump = asyncio.create_task(_pump(process.stdout, lines, ready, report))
    try:
        await asyncio.wait_for(ready.wait(), READY_TIMEOUT)
        await asyncio.sleep(delay)
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            report.kills += 1
        await process.wait()
        await pump
        if process.returncode != -signal.SIGKILL:
            if process.returncode != 0:
                tail = "\n".join(lines)
                raise DriverFailed(f"driver exited {process.returncode}:\n{tail}")
            report.exited_early += 1
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        pump.cancel()


async def run_kills(data_dir: Path, *, kills: int, shape: Shape, seed: int,
                    max_delay: float = 1.5, reap: bool = True) -> KillReport:
    """``kills`` rounds against one daemon; raises on the first violated invariant."""
    rng = random.Random(seed)
    daemon = EmbeddedLake(data_dir, sync_on_commit=True, test_commands=False)
    uri = daemon.start()
    report = KillReport()
    lake = open_lake(uri, "kills")
    try:
        engine = Engine(lake)
        await engine.ensure_ready()
        await engine.deploy(definitions())
        for n in range(kills):
            await one_kill(uri, "kills", seed * 1000 + n, shape, rng.uniform(0.05, max_delay),
                           report)
            if reap:
                await lake.client.admin.command("killAllSessions", [])
            report.repaired_items += await settle(engine)
            await report.ledger.check(engine, rng)
        report.instances = await lake.count({"_type": "kinflow.instance"})
    finally:
        await lake.close()
        await asyncio.to_thread(daemon.stop)
    return report
