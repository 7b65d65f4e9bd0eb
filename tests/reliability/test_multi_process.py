"""Several processes on one embedded lake: two APIs and two workers under load, then kills.

Two ``kinflow serve --no-worker`` and two ``kinflow worker`` processes share
one data directory: the first API starts the daemon, the other three reuse
it through ``lake.json``. Clients drive order families (tests/reliability/
orders.py), each call to a random API, each order watched by a subscriber
on another API than the one that started it. Mid-load one API and one
worker are SIGKILLed; the survivors must carry the load on. Afterwards every
survivor stops within 10 s of SIGTERM, and the audit (tests/reliability/
audit.py) finds every invariant intact, nothing acknowledged lost, no child
stamped twice and no effect run twice (but after its runner was killed).

Short form (``make test``): 4 clients, 24 s, the second API and the first
worker killed at 12 s. Long form (``make soak``): 8 clients, 3 minutes,
the lake's owner among the APIs that may be killed.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path

import pytest

from tests.reliability.audit import assert_the_run_held, audit
from tests.reliability.figures import record
from tests.reliability.orders import Apis, Tally, deploy, drive
from tests.reliability.procs import Fleet, health

pytestmark = [
    pytest.mark.lake,
    pytest.mark.skipif(bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")),
                       reason="embedded lake only"),
]


async def run_fleet(data_dir: Path, seed: int, *, clients: int, seconds: float,
                    kill_at: float, kill_owner: bool) -> str:
    rng = random.Random(seed)
    fleet = Fleet(data_dir, env={"KINFLOW_OPERATION_TIMEOUT": "10"})
    tally = Tally()
    try:
        apis = [fleet.api("api-1", worker=False), fleet.api("api-2", worker=False)]
        workers = [fleet.worker("worker-1"), fleet.worker("worker-2")]
        owner = fleet.state()["owner"]
        assert owner == apis[0].pid, "the first API starts the lake, the others reuse it"
        assert apis[0].base is not None and apis[1].base is not None
        await deploy(apis[0].base)
        targets = Apis([apis[0].base, apis[1].base], rng)
        load = asyncio.create_task(drive(targets, clients, seconds, tally))
        await asyncio.sleep(kill_at)
        victim = rng.choice(apis) if kill_owner else apis[1]
        worker_victim = rng.choice(workers)
        assert victim.base is not None
        targets.drop(victim.base)
        fleet.kill(victim)
        fleet.kill(worker_victim)
        await load
        survivors = [p for p in fleet.procs if p.alive()]
        assert len(survivors) == 2, [p.name for p in fleet.procs]
        survivor_api = next(a for a in apis if a.alive())
        assert survivor_api.base is not None
        status, body = await asyncio.to_thread(health, survivor_api.base)
        assert status == 200, body
        await asyncio.to_thread(fleet.stop_all)
    finally:
        await asyncio.to_thread(fleet.cleanup)
    figures = await audit(fleet, tally, seed)
    line = (f"multi-process ({clients} clients, {seconds:.0f} s, killed {victim.name} and "
            f"{worker_victim.name} at {kill_at:.0f} s): {tally.summary()}; audit {figures}; "
            f"stopped in {max(fleet.stop_seconds.values()):.1f} s")
    assert_the_run_held(tally, fleet)
    assert tally.seen_elsewhere >= len(tally.shipped) // 2, line
    return line


async def test_two_apis_and_two_workers_share_one_lake_and_survive_kills(
        tmp_path: Path, seed: int) -> None:
    line = await run_fleet(tmp_path / "lake", seed, clients=4, seconds=24, kill_at=12,
                           kill_owner=False)
    record("multi-process-short", line)


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_multi_process_soak(tmp_path: Path, seed: int) -> None:
    line = await run_fleet(tmp_path / "lake", seed, clients=8, seconds=180, kill_at=90,
                           kill_owner=True)
    record("multi-process-soak", line)
