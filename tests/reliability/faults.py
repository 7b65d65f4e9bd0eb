"""Fault rounds: drivers work through the fault proxy, then the heartbeat and the checker.

One embedded lake daemon for the whole run; a ``FaultProxy`` in front of it.
Each round starts ``drivers`` engine processes (tests/reliability/driver.py,
each with a seed and a journal of its own) whose only way to the lake is the
proxy; once they are all ready the proxy injects faults until the round's
time is up and the drivers stop by themselves. A driver must exit 0: a fault
may surface only as a typed refusal (counted by code), never as an exception
kinflow did not type. Then, on a connection that goes around the proxy, the
heartbeat runs until nothing is owed, the checker (``Ledger``) asserts every
invariant and ``KillAudit`` that every keyed call was applied once and every
cleanup ran once.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.reliability.driver import SECONDS_VAR
from tests.reliability.driver_process import driver, engine_on_own_lake
from tests.reliability.family import Shape, definitions
from tests.reliability.fault_proxy import FaultPlan, ProxyThread, injected
from tests.reliability.invariants import Ledger, settle
from tests.reliability.journal import Journal
from tests.reliability.kill_audit import KillAudit

READY_TIMEOUT = 60.0
DATABASE = "faults"
RETRYABLE = {"lake-unavailable", "concurrent-modification"}
"""What a fault on the wire may turn into; everything else refused is the driver's
ordinary business (an action no longer enabled, a cohort not spawned yet, ...)."""


@dataclass
class FaultReport:
    rounds: int = 0
    operations: int = 0
    seconds: float = 0.0
    faults: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)  # by code, from the drivers
    ops: Counter[str] = field(default_factory=Counter)
    repaired_items: int = 0
    keyed: int = 0  # keyed calls the drivers journaled, each checked applied once
    bulk_fires: int = 0  # children reached by a journaled fireCohort under its derived key
    instances: int = 0
    workflows_done: int = 0  # roots that reached a terminal state
    ledger: Ledger = field(default_factory=Ledger)
    audit: KillAudit = field(default_factory=KillAudit)

    def read(self, line: str) -> None:
        """Count one line a driver printed (``op ...``: an operation, maybe a refusal)."""
        if line.startswith("op "):
            self.operations += 1
            what = line.split(" ", 2)[-1]
            if what.startswith("refused:"):
                self.refused[what.removeprefix("refused:")] += 1
            self.ops[what.split("(")[0].split(".")[0].split(":")[0]] += 1

    @property
    def injected(self) -> int:
        return injected(self.faults)

    def summary(self, label: str) -> str:
        faults = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items()))
        refused = ", ".join(f"{k} {n}" for k, n in self.refused.most_common()) or "none"
        return (f"{label}: {self.injected} faults injected in {self.seconds:.0f} s of load "
                f"({faults}); {self.rounds} rounds, {self.operations} driver operations, "
                f"{self.workflows_done} root workflows finished of {self.instances} instances; "
                f"{self.keyed} keyed calls, each applied once ({self.bulk_fires} children "
                f"fired by a bulk call); "
                f"refusals by code: {refused}; internal-error "
                f"{self.refused.get('internal-error', 0)}; {self.repaired_items} items repaired; "
                f"{self.ledger.checks} invariant checks in {self.ledger.rounds} rounds, "
                f"0 violations")


class DriverFailed(AssertionError):
    """A driver exited with an error: a fault reached it as something kinflow did not type."""


async def _driver(uri: str, seed: int, shape: Shape, seconds: float, files: tuple[Path, Path],
                  report: FaultReport, ready: asyncio.Event, go: asyncio.Event) -> None:
    env = {**os.environ, SECONDS_VAR: str(seconds)}
    async with driver("tests.reliability.driver", uri, DATABASE, str(seed), str(shape.parents),
                      str(shape.children), str(shape.grandchildren), *(str(f) for f in files),
                      env=env, on_line=report.read, keep=80, ready=ready) as running:
        await asyncio.wait_for(ready.wait(), READY_TIMEOUT)
        await go.wait()
        # the driver stops itself after `seconds`; a generous guard against a hang
        status = await asyncio.wait_for(running.finished(), seconds + 120)
        if status != 0:
            raise DriverFailed(f"driver {seed} exited {status}:\n{running.text()}")


async def _round(proxy: ProxyThread, n: int, seed: int, shape: Shape, drivers: int,
                 seconds: float, data_dir: Path, report: FaultReport) -> None:
    readies = [asyncio.Event() for _ in range(drivers)]
    go = asyncio.Event()
    tasks = [asyncio.create_task(_driver(
        proxy.uri(), seed * 1000 + n * 10 + i, shape, seconds,
        (data_dir / f"journal-{i}.ndjson", data_dir / "cleanups.log"), report, readies[i], go))
        for i in range(drivers)]
    try:
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), READY_TIMEOUT)
        proxy.faults(True)  # the drivers connected cleanly; now the wire misbehaves
        began = time.monotonic()
        go.set()
        await asyncio.gather(*tasks)
        report.seconds += time.monotonic() - began
    finally:
        proxy.faults(False)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def run_faults(data_dir: Path, *, seconds: float, round_seconds: float, shape: Shape,
                     seed: int, plan: FaultPlan, drivers: int = 2) -> FaultReport:
    """Rounds of ``round_seconds`` until ``seconds`` of faulted load; raises on the first
    violated invariant or driver that failed."""
    rng = random.Random(seed)
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    report = FaultReport()
    effect_log = data_dir / "cleanups.log"
    async with engine_on_own_lake(data_dir, DATABASE, definitions(),
                                  effect_log=effect_log) as (uri, engine):
        lake = engine.lake
        upstream = int(uri.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        with ProxyThread(upstream, plan, seed) as proxy:
            proxy.faults(False)
            n = 0
            while report.seconds < seconds:
                await _round(proxy, n, seed, shape, drivers,
                             min(round_seconds, seconds - report.seconds), data_dir, report)
                n += 1
                report.rounds = n
                report.repaired_items += await settle(engine)
                instances = await report.ledger.check(engine, rng)
                report.bulk_fires = 0
                for i in range(drivers):
                    report.audit.check(report.ledger, instances,
                                       Journal(data_dir / f"journal-{i}.ndjson"), effect_log,
                                       set())
                    report.bulk_fires += report.audit.bulk_fires
            report.faults.update(proxy.counts())
        report.keyed = sum(len(Journal(data_dir / f"journal-{i}.ndjson").begun())
                           for i in range(drivers))
        roots = await lake.find({"_type": "kinflow.instance", "parentInstance": None},
                                projection={"completedAt": 1})
        report.workflows_done = sum(1 for r in roots if r.get("completedAt") is not None)
        report.instances = await lake.count({"_type": "kinflow.instance"})
    return report
