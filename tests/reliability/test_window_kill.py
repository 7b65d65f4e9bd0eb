"""A window left under-filled by a real SIGKILL is refilled by one heartbeat pass.

A parent spawns one child per row with ``maxActive: 3``. A separate process
(tests/reliability/window_driver.py) finishes a live child and SIGKILLs itself
at ``before-propagation``: the child's finish is committed, the parent's
commit that would stamp its row and start the next queued row never happens,
so the window holds 2 live children. One worker pass from the test, against
the same lake daemon, must bring it back to 3 (never more); the cohort is
then driven to completion with the lake sampled throughout, and the
reliability checker and the repair invariants must find nothing wrong and
no row with two children.

Short form (``make test``): one kill over 10 rows. Long form (``slow``): a
kill at every finish of a 16-row cohort, each repaired by one pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path
from typing import Any

import pytest

from kinflow.engine import Engine
from kinflow.storage import Lake
from kinflow.worker import Worker
from tests.engine.cohort_defs import child, items, windowed
from tests.engine.invariants import assert_repaired
from tests.reliability.driver_process import engine_on_own_lake, run_until_killed_at
from tests.reliability.invariants import Ledger, settle

pytestmark = pytest.mark.lake

DATABASE = "windowkill"
WINDOW = 3
POINT = "before-propagation"
DRIVER_TIMEOUT = 120.0


def daemon_engine(data_dir: Path
                  ) -> contextlib.AbstractAsyncContextManager[tuple[str, Engine]]:
    """A lake daemon of the test's own and an engine, ``p`` of the subworkflow tests
    deployed with ``maxActive: 3``."""
    return engine_on_own_lake(data_dir, DATABASE, [windowed(WINDOW), child()])


async def live_children(lake: Lake, parent_id: str) -> list[dict[str, Any]]:
    """The cohort's children that exist and have not finished: what occupies the window."""
    return await lake.find({"_type": "kinflow.instance", "parentInstance": parent_id,
                            "completedAt": None}, projection={"_id": 1})


async def kill_while_finishing(uri: str, child_id: str) -> str:
    """Run the driver on ``child_id``; it must die by SIGKILL at the fault point."""
    return await run_until_killed_at(POINT, "tests.reliability.window_driver", uri, DATABASE,
                                     POINT, child_id, timeout=DRIVER_TIMEOUT)


class Sampler:
    """Counts the window's live children from the lake every few milliseconds."""

    def __init__(self, lake: Lake, parent_id: str) -> None:
        self.lake, self.parent_id = lake, parent_id
        self.peak = 0
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.peak = max(self.peak, len(await live_children(self.lake, self.parent_id)))
            self.samples += 1
            await asyncio.sleep(0.01)

    def __enter__(self) -> Sampler:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def crash_and_repair(uri: str, engine: Engine, parent_id: str) -> str:
    """Kill a driver between the oldest live child's finish and the parent's commit, then
    run one heartbeat pass; asserts the window before and after. Returns the killed child."""
    lake = engine.lake
    before = await engine.get_instance(parent_id)
    order = {r.child_id: i for i, r in enumerate(before.subworkflows)}
    live = await live_children(lake, parent_id)
    queued = sum(1 for r in before.subworkflows if r.queued)
    victim = min((str(c["_id"]) for c in live), key=order.__getitem__)
    await kill_while_finishing(uri, victim)
    await lake.client.admin.command("killAllSessions", [])  # as `kinflow serve` does at start

    finished = await lake.get(victim)
    assert finished is not None and finished.get("completedAt") is not None, "finish not committed"
    left = await engine.get_instance(parent_id)
    row = next(r for r in left.subworkflows if r.child_id == victim)
    assert row.resolved is None, "the parent's commit ran although the driver died before it"
    assert sum(1 for r in left.subworkflows if r.queued) == queued, "a queued row started"
    assert len(await live_children(lake, parent_id)) == len(live) - 1  # under-filled

    report = await Worker(engine, grace_seconds=0, worker_id="window-kill").run_pass()
    assert not report.failed, report.failed
    repaired = await engine.get_instance(parent_id)
    row = next(r for r in repaired.subworkflows if r.child_id == victim)
    assert row.resolved is not None and row.outcome == "succeeded"
    expected = min(WINDOW, len(live) - 1 + queued)
    assert len(await live_children(lake, parent_id)) == expected, "one pass did not refill"
    assert sum(1 for r in repaired.subworkflows if r.queued) == queued - (expected - len(live) + 1)
    await assert_repaired(engine)
    return victim


async def drive_to_completion(engine: Engine, parent_id: str, sampler: Sampler) -> None:
    """Finish every live child at once, round after round, until the parent moves on."""
    for _ in range(40):
        if (await engine.get_instance(parent_id)).currentStage == "next":
            return
        live = await live_children(engine.lake, parent_id)
        assert 0 < len(live) <= WINDOW, f"{len(live)} live children"
        await asyncio.gather(*(engine.fire_action(str(c["_id"]), "task", "finish")
                               for c in live))
        await engine.driver.propagator.idle()
        assert len(await live_children(engine.lake, parent_id)) <= WINDOW
    raise AssertionError(f"cohort of {parent_id} never completed (sampled peak {sampler.peak})")


async def check_final(engine: Engine, parent_id: str, names: list[str], seed: int) -> None:
    """Every row done once, one child per row, and the checkers find nothing."""
    final = await engine.get_instance(parent_id)
    assert final.currentStage == "next"
    assert [r.rowKey for r in final.subworkflows] == names
    assert all(r.resolved is not None and r.outcome == "succeeded" for r in final.subworkflows)
    children = await engine.lake.find({"_type": "kinflow.instance", "parentInstance": parent_id})
    assert len(children) == len(names), "a child created twice (or missing)"
    handed = sorted(f["value"] for c in children for f in c["fields"] if f["name"] == "item")
    assert handed == sorted(names), "a row's child started with another row's handoff"
    assert len({r.child_id for r in final.subworkflows}) == len(names)
    assert await settle(engine) == 0, "work still owed after the cohort completed"
    ledger = Ledger()
    await ledger.check(engine, random.Random(seed))
    await assert_repaired(engine)
    print(f"checker: {ledger.checks} invariant checks, 0 violations")


async def start_cohort(engine: Engine, names: list[str]) -> str:
    started = await engine.start_instance("p", fields=items(*names))
    parent_id = started.instance.id_
    await engine.fire_action(parent_id, "go", "go")
    assert len(await live_children(engine.lake, parent_id)) == WINDOW
    return parent_id


async def test_a_sigkill_between_a_finish_and_the_next_start_is_refilled_by_one_pass(
        tmp_path: Path, seed: int) -> None:
    names = [f"row{i:02d}" for i in range(10)]
    async with daemon_engine(tmp_path / "lake") as (uri, engine):
        parent_id = await start_cohort(engine, names)
        with Sampler(engine.lake, parent_id) as sampler:
            victim = await crash_and_repair(uri, engine, parent_id)
            await drive_to_completion(engine, parent_id, sampler)
        print(f"killed while finishing {victim}; window peak {sampler.peak} over "
              f"{sampler.samples} lake samples")
        assert sampler.peak <= WINDOW
        await check_final(engine, parent_id, names, seed)


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_a_sigkill_at_every_finish_never_leaves_the_window_wrong(
        tmp_path: Path, seed: int) -> None:
    names = [f"row{i:02d}" for i in range(16)]
    async with daemon_engine(tmp_path / "lake") as (uri, engine):
        parent_id = await start_cohort(engine, names)
        kills = 0
        with Sampler(engine.lake, parent_id) as sampler:
            while (await engine.get_instance(parent_id)).currentStage != "next":
                await crash_and_repair(uri, engine, parent_id)
                kills += 1
                if not await live_children(engine.lake, parent_id):
                    await settle(engine)  # the last stamp moved the parent on (or will)
        print(f"{kills} kills; window peak {sampler.peak} over {sampler.samples} lake samples")
        assert kills == len(names)
        assert sampler.peak <= WINDOW
        await check_final(engine, parent_id, names, seed)
