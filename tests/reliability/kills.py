"""Kill rounds: start the driver, SIGKILL it at a random moment or a fault point, repair,
check.

Every other round (from the second on) the driver is told to SIGKILL itself at
a fault point of a commit boundary, taken in turn from ``FAULT_POINTS``: the
cancellation's and the bulk calls' (``before-cancel-children``,
``before-cancel-stamp``, ``mid-bulk``) and the older ``before-propagation``
and ``before-drain``; if it never gets there the test kills it after the
round's delay like any other. The lake daemon is started here, once, and
keeps running across every kill (only the driver dies), so whatever the
driver committed stays committed and whatever it left half-done is the
heartbeat's to finish. A driver killed in the middle of a transaction leaves
that transaction open on the server; as ``kinflow serve`` does when it
starts (docs/reliability.md), the recovery step ends the dead process's
sessions with ``killAllSessions`` before the heartbeat runs. The driver
journals its keyed operations in ``journal.ndjson`` (the next one retries
what a kill cut) and the holds' cleanups log each run in ``cleanups.log``,
both in the data directory; ``KillAudit`` reads them after every check.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.reliability.driver_process import driver, engine_on_own_lake
from tests.reliability.family import Shape, definitions
from tests.reliability.invariants import Ledger, settle
from tests.reliability.journal import Journal
from tests.reliability.kill_audit import KillAudit

READY_TIMEOUT = 60.0
FAULT_POINTS = ("before-cancel-children", "mid-bulk", "before-cancel-stamp",
                "before-propagation", "mid-bulk", "before-drain")


@dataclass
class KillReport:
    kills: int = 0
    exited_early: int = 0  # rounds where the driver finished before the kill came
    operations: int = 0
    repaired_items: int = 0
    instances: int = 0
    ledger: Ledger = field(default_factory=Ledger)
    audit: KillAudit = field(default_factory=KillAudit)
    at_points: Counter[str] = field(default_factory=Counter)  # the driver killed itself there
    armed: Counter[str] = field(default_factory=Counter)  # rounds a point was armed
    killed: set[int] = field(default_factory=set)  # pids of the drivers that died by SIGKILL
    retries: int = 0  # operations a kill cut, run again with their key
    ops: Counter[str] = field(default_factory=Counter)  # driver operations by kind

    def read(self, line: str) -> None:
        """Count one line the driver printed (an operation, a retry, a fault point's kill)."""
        if line.startswith("op "):
            self.operations += 1
            what = line.split(" ", 3)[-1] if line.startswith("op retry ") else \
                line.split(" ", 2)[-1]
            self.ops[what.split("(")[0].split(".")[0]] += 1
            self.retries += line.startswith("op retry ")
        elif line.startswith("killing at "):
            self.at_points[line.removeprefix("killing at ")] += 1


class DriverFailed(AssertionError):
    """The driver died on its own with an error: a bug the kill did not cause."""


async def one_kill(uri: str, database: str, seed: int, shape: Shape, delay: float,
                   report: KillReport, files: tuple[Path, Path],
                   point: tuple[str, int] | None = None) -> None:
    """Run the driver, kill it ``delay`` seconds after it is ready (or let it finish, or
    let it kill itself at ``point``, its fault point and the how-manieth time)."""
    armed = [point[0], str(point[1])] if point else []
    async with driver("tests.reliability.driver", uri, database, str(seed), str(shape.parents),
                      str(shape.children), str(shape.grandchildren), *(str(f) for f in files),
                      *armed, on_line=report.read, keep=60) as running:
        process = running.process
        await asyncio.wait_for(running.ready.wait(), READY_TIMEOUT)
        await asyncio.sleep(delay)
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
        status = await running.finished()
        if status == -signal.SIGKILL:
            report.kills += 1
            report.killed.add(process.pid)
        else:
            if status != 0:
                raise DriverFailed(f"driver exited {status}:\n{running.text()}")
            report.exited_early += 1


async def run_kills(data_dir: Path, *, kills: int, shape: Shape, seed: int,
                    max_delay: float = 1.5, reap: bool = True) -> KillReport:
    """``kills`` rounds against one daemon; raises on the first violated invariant."""
    rng = random.Random(seed)
    report = KillReport()
    journal, effect_log = data_dir / "journal.ndjson", data_dir / "cleanups.log"
    async with engine_on_own_lake(data_dir, "kills", definitions(),
                                  effect_log=effect_log) as (uri, engine):
        lake = engine.lake
        for n in range(kills):
            point = None
            if n % 2:
                point = (FAULT_POINTS[(n // 2) % len(FAULT_POINTS)], rng.randint(1, 3))
                report.armed[point[0]] += 1
            delay = rng.uniform(0.05, max_delay) if point is None else max_delay * 2
            await one_kill(uri, "kills", seed * 1000 + n, shape, delay, report,
                           (journal, effect_log), point)
            if reap:
                await lake.client.admin.command("killAllSessions", [])
            report.repaired_items += await settle(engine)
            instances = await report.ledger.check(engine, rng)
            report.audit.check(report.ledger, instances, Journal(journal), effect_log,
                               report.killed)
        report.instances = await lake.count({"_type": "kinflow.instance"})
    return report
