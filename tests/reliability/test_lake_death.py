"""The embedded lake dies under load: every process notices, says so, and recovers.

Three processes on one data directory: ``kinflow serve`` (it starts the
daemon: the owner), ``kinflow serve --no-worker`` and ``kinflow worker``
(both reuse it), with clients driving order families through both APIs
(tests/reliability/orders.py) and a probe reading both ``/healthz``.

1. The daemon is SIGKILLed. The owner starts it again on the same port
   (about 0.6 s here); the others follow. So that the outage lasts long
   enough to watch, the test holds the data directory's WiredTiger lock for
   2 s after the kill (as a daemon still shutting down would): every start
   fails meanwhile, and both APIs must answer ``/healthz`` with 503, never
   200, until the lake is back; then 200.
2. The owner is SIGKILLed (its daemon dies with it, by its parent-death
   signal), the lock again held 2 s. The other API and the worker must
   notice; one of them takes the lake over (``lake.json`` names it), and
   the API is healthy again.

Meanwhile every refusal a client sees is typed (``lake-unavailable`` and
the like, never ``internal-error``) and no call outlasts the operation
timeout by more than a few seconds. Afterwards the survivors stop within
10 s of SIGTERM and the audit finds every invariant intact, nothing
acknowledged lost, no child stamped twice, no effect run twice (but after
its runner was killed).

Short form (``make test``): one daemon kill, one owner kill, 4 clients.
Long form (``make soak``): 5 daemon kills, then the owner, 8 clients.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.reliability.audit import assert_the_run_held, audit
from tests.reliability.figures import record
from tests.reliability.orders import Apis, Tally, deploy, drive
from tests.reliability.procs import STOP_LIMIT, Fleet, Proc, health

pytestmark = [
    pytest.mark.lake,
    pytest.mark.skipif(bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")),
                       reason="embedded lake only"),
]
OPERATION_TIMEOUT = 10.0
HOLD = 2.0  # seconds the test keeps the lake from starting again
NOTICE = 1.0  # seconds a process may take to notice (its keeper looks every 0.5 s)


@dataclass
class Probe:
    """``/healthz`` of each API, read every 0.1 s apart: (time asked, status) per API."""

    apis: list[Proc]
    seen: dict[str, list[tuple[float, int | None]]] = field(default_factory=dict)
    running: bool = True

    async def run(self) -> None:
        await asyncio.gather(*(self._follow(api) for api in self.apis))

    async def _follow(self, api: Proc) -> None:
        while self.running and api.alive() and api.base is not None:
            asked = time.monotonic()  # when asked, not answered: a slow 200 began earlier
            status, _ = await asyncio.to_thread(health, api.base, 5.0)
            self.seen.setdefault(api.name, []).append((asked, status))
            await asyncio.sleep(0.1)

    def outage(self, name: str, killed: float, released: float) -> tuple[float, float, int]:
        """503 while the lake was held down, then 200: seconds to each, and 503s seen."""
        series = sorted(self.seen.get(name, []))
        held = [s for t, s in series if killed + NOTICE <= t < released]
        if not held:  # one slow answer spanned the whole window: judge the probe in flight
            held = [s for t, s in series if killed <= t < released][-1:]
        assert held and all(s == 503 for s in held), \
            f"{name} answered {held} while the lake was down (503 expected): " \
            f"{[(round(t - killed, 2), s) for t, s in series if t > killed - 1]}"
        down = next(t for t, s in series if t >= killed and s == 503)
        back = next((t for t, s in series if t >= released and s == 200), None)
        assert back is not None, f"{name} never became healthy again"
        return down - killed, back - killed, len(held)


async def hold_lock(data_dir: Path, seconds: float) -> float:
    """Take the dead daemon's WiredTiger lock before anyone restarts it; release it later."""
    fd = os.open(data_dir / "lake" / "WiredTiger.lock", os.O_RDWR)
    try:
        deadline = time.monotonic() + 0.4
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:  # the killed daemon's lock goes with its exit
                assert time.monotonic() < deadline, "the lake restarted before the test held it"
                await asyncio.sleep(0.002)
        await asyncio.sleep(seconds)
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return time.monotonic()
    finally:
        os.close(fd)


async def wait_healthy(api: Proc, timeout: float = 60.0) -> None:
    assert api.base is not None
    deadline = time.monotonic() + timeout
    while (await asyncio.to_thread(health, api.base, 5.0))[0] != 200:
        assert time.monotonic() < deadline, f"{api.name} did not recover"
        await asyncio.sleep(0.1)


async def run_deaths(data_dir: Path, seed: int, *, clients: int, daemon_kills: int,
                     gap: float) -> str:
    rng = random.Random(seed)
    fleet = Fleet(data_dir, env={"KINFLOW_OPERATION_TIMEOUT": str(OPERATION_TIMEOUT)})
    tally = Tally()
    outages: list[str] = []
    try:
        owner = fleet.api("owner", worker=True)
        other = fleet.api("other", worker=False)
        worker = fleet.worker("worker")
        assert fleet.state()["owner"] == owner.pid
        assert owner.base is not None and other.base is not None
        await deploy(owner.base)
        probe = Probe([owner, other])
        probing = asyncio.create_task(probe.run())
        targets = Apis([owner.base, other.base], rng)
        seconds = gap * (daemon_kills + 2)
        load = asyncio.create_task(drive(targets, clients, seconds, tally))
        for _ in range(daemon_kills):
            await asyncio.sleep(gap * rng.uniform(0.6, 1.0))
            port = fleet.state()["port"]
            killed_at = time.monotonic()
            old = fleet.kill_daemon()
            released = await hold_lock(data_dir, HOLD)
            state = await asyncio.to_thread(fleet.wait_lake, old)
            # the owner restarts it, unless the lock outlasted the others' patience
            assert state["owner"] in (owner.pid, other.pid, worker.pid), state
            assert state["port"] == port, state  # same port: every client reconnects itself
            await wait_healthy(owner)
            await wait_healthy(other)
            await asyncio.sleep(0.5)
            for api in (owner, other):
                down, back, n = probe.outage(api.name, killed_at, released)
                outages.append(f"{api.name} 503 after {down:.1f} s ({n} probes), 200 again "
                               f"{back - HOLD:.1f} s after the lock")
        await asyncio.sleep(gap * 0.8)
        killed_at = time.monotonic()
        before = fleet.state()
        victim = next(p for p in fleet.procs if p.pid == before["owner"])
        if victim.base is not None:
            targets.drop(victim.base)
        fleet.kill(victim)  # the daemon dies with the process that started it
        released = await hold_lock(data_dir, HOLD)
        state = await asyncio.to_thread(fleet.wait_lake, before["pid"])
        taker = next(p for p in fleet.procs if p.pid == state["owner"] and p.alive())
        outages.append(f"{victim.name} (the lake's owner) killed: {taker.name} took it over")
        for api in (owner, other):
            if api.alive():
                await wait_healthy(api)
                await asyncio.sleep(0.5)
                down, back, n = probe.outage(api.name, killed_at, released)
                outages.append(f"{api.name} 503 after {down:.1f} s ({n} probes), 200 again "
                               f"{back - HOLD:.1f} s after the lock")
        await load
        probe.running = False
        await probing
        assert sum(p.alive() for p in fleet.procs) == 2
        await asyncio.to_thread(fleet.stop_all)
    finally:
        await asyncio.to_thread(fleet.cleanup)
    figures = await audit(fleet, tally, seed)
    line = (f"lake deaths ({clients} clients, {daemon_kills} daemon kills, then the owner): "
            f"{'; '.join(outages)}; {tally.summary()}; audit {figures}; survivors stopped in "
            f"{max(fleet.stop_seconds.values()):.1f} s")
    assert_the_run_held(tally, fleet)
    assert tally.slowest < OPERATION_TIMEOUT + 5, line
    return line


async def test_the_lake_dies_and_every_process_recovers(tmp_path: Path, seed: int) -> None:
    line = await run_deaths(tmp_path / "lake", seed, clients=4, daemon_kills=1, gap=8.0)
    record("lake-death-short", line)


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_lake_death_soak(tmp_path: Path, seed: int) -> None:
    line = await run_deaths(tmp_path / "lake", seed, clients=8, daemon_kills=5, gap=20.0)
    record("lake-death-soak", line)


async def test_every_process_stops_within_10_s_of_sigterm_while_the_lake_is_gone(
        tmp_path: Path) -> None:
    """The daemon killed and kept from starting again, calls waiting on it: SIGTERM still wins."""
    fleet = Fleet(tmp_path / "lake", env={"KINFLOW_OPERATION_TIMEOUT": "60"})
    try:
        owner = fleet.api("owner", worker=True)
        fleet.api("other", worker=False)
        fleet.worker("worker")
        assert owner.base is not None
        await deploy(owner.base)
        await asyncio.sleep(1.0)
        tally = Tally()
        fleet.kill_daemon()
        holding = asyncio.create_task(hold_lock(fleet.data_dir, 30.0))
        await asyncio.sleep(1.0)
        # calls now wait on the lake (a 60 s operation timeout); stop everything meanwhile
        waiting = [asyncio.create_task(drive(Apis([p.base], random.Random(0)), 2, 1.0, tally))
                   for p in fleet.procs if p.base is not None]
        await asyncio.sleep(2.0)
        await asyncio.to_thread(fleet.stop_all)
        holding.cancel()
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, holding, return_exceptions=True)
    finally:
        await asyncio.to_thread(fleet.cleanup)
    record("lake-gone-sigterm", "stopped while the lake was gone: " + ", ".join(
        f"{name} {seconds:.1f} s" for name, seconds in fleet.stop_seconds.items()))
    assert max(fleet.stop_seconds.values()) < STOP_LIMIT, fleet.stop_seconds
    assert "internal-error" not in tally.codes


async def test_a_second_sigterm_stops_a_worker_at_once(tmp_path: Path) -> None:
    """Once told twice, ``kinflow worker`` leaves at once, busy or not (it used to ignore both)."""
    fleet = Fleet(tmp_path / "lake", env={"KINFLOW_OPERATION_TIMEOUT": "60"})
    try:
        worker = fleet.worker("worker")  # it starts the lake, so it owns it
        fleet.kill_daemon()
        holding = asyncio.create_task(hold_lock(fleet.data_dir, 30.0))
        await asyncio.sleep(1.0)
        began = time.monotonic()
        os.killpg(worker.pid, signal.SIGTERM)
        await asyncio.sleep(0.3)
        os.killpg(worker.pid, signal.SIGTERM)
        await asyncio.to_thread(worker.process.wait, STOP_LIMIT)
        took = time.monotonic() - began
        holding.cancel()
        await asyncio.gather(holding, return_exceptions=True)
    finally:
        await asyncio.to_thread(fleet.cleanup)
    record("worker-second-sigterm", f"kinflow worker gone {took:.2f} s after two SIGTERMs")
    # a first SIGTERM alone waits for its 9 s watchdog; the second must not (0.3 s measured)
    assert not worker.alive() and took < 6.0, f"{took:.1f} s"
