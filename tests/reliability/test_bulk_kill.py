"""A ``fireCohort`` cut by a real SIGKILL half-way is finished by a retry with its
key, and no child gets the action twice.

A parent spawns 60 children (tests/engine/bulk_defs.py). A separate process
(tests/reliability/bulk_driver.py) runs one ``fireCohort`` over them, ten rows a
batch, and SIGKILLs itself:

* at ``mid-bulk`` before the fourth batch: three batches fired and marked on the
  parent, the call recorded as owed (``owesBulk``);
* at the 25th ``before-propagation`` of a ``finish``: 25 children's commits
  landed, the third batch's marks never written, up to seven more fires in
  flight when the process died.

The test then retries the call with the same key against the same lake daemon:
it must report every row (matched 60) and apply only the rest, every child must
carry exactly one ``actionFired`` of the action, the call must no longer be owed,
and the repair invariants and the reliability checker must find nothing wrong.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import replace
from pathlib import Path

import pytest

from kinflow.core.context import Limits
from kinflow.engine import Engine
from tests.engine.bulk_defs import cohort_parent, nudgeable, records
from tests.engine.invariants import assert_repaired
from tests.reliability.bulk_driver import BATCH
from tests.reliability.driver_process import engine_on_own_lake, run_until_killed_at
from tests.reliability.invariants import Ledger, settle

pytestmark = pytest.mark.lake

DATABASE = "bulkkill"
ROWS = 60
DRIVER_TIMEOUT = 180.0
KEY = "kill-key"


def daemon_engine(data_dir: Path
                  ) -> contextlib.AbstractAsyncContextManager[tuple[str, Engine]]:
    """A lake daemon of the test's own and an engine batching like the driver's."""
    return engine_on_own_lake(data_dir, DATABASE, [cohort_parent(), nudgeable()],
                              limits=replace(Limits(), bulk_batch=BATCH))


async def kill_while_firing(uri: str, point: str, nth: int, parent_id: str,
                            action: str) -> None:
    await run_until_killed_at(point, "tests.reliability.bulk_driver", uri, DATABASE, point,
                              str(nth), parent_id, action, KEY, timeout=DRIVER_TIMEOUT)


async def fired(engine: Engine, parent_id: str, action: str) -> list[int]:
    """``actionFired`` entries of ``action`` per child, in row order."""
    children = await engine.lake.find({"_type": "kinflow.instance",
                                       "parentInstance": parent_id})
    assert len(children) == ROWS, "a child created twice (or missing)"
    by_item = {next(f["value"] for f in c["fields"] if f["name"] == "item"): c
               for c in children}
    return [sum(1 for h in by_item[f"a{i:02d}"]["history"]
                if h["_type"] == "actionFired" and h.get("action") == action)
            for i in range(ROWS)]


@pytest.mark.parametrize(("point", "nth", "action"), [
    ("mid-bulk", 3, "nudge"),
    ("before-propagation", 25, "finish"),
])
async def test_a_sigkilled_fire_cohort_is_finished_by_a_retry_and_fires_nothing_twice(
        tmp_path: Path, seed: int, point: str, nth: int, action: str) -> None:
    async with daemon_engine(tmp_path / "lake") as (uri, engine):
        started = await engine.start_instance(
            "p", fields=records(*(f"a{i:02d}" for i in range(ROWS))))
        parent_id = started.instance.id_
        await engine.fire_action(parent_id, "go", "go")

        await kill_while_firing(uri, point, nth, parent_id, action)
        await engine.lake.client.admin.command("killAllSessions", [])
        cut = await fired(engine, parent_id, action)
        assert max(cut) == 1, "a child got the action twice before the retry"
        done_before = sum(cut)
        assert 0 < done_before < ROWS, f"the kill was not half-way: {done_before} fired"
        if point == "mid-bulk":
            assert done_before == nth * BATCH
            assert (await engine.get_instance(parent_id)).owesBulk

        retry = await engine.fire_cohort(parent_id, "translate", "task", action,
                                         idempotency_key=KEY)
        await engine.driver.propagator.idle()
        print(f"killed at {point} with {done_before} fired; retry: {retry}")
        assert retry.matched == ROWS and not retry.refusals
        assert retry.applied == ROWS - done_before
        assert retry.applied + retry.skipped == ROWS
        assert await fired(engine, parent_id, action) == [1] * ROWS
        parent = await engine.get_instance(parent_id)
        assert parent.owesBulk is None and parent.bulkCalls is None

        await settle(engine)
        if action == "finish":
            final = await engine.get_instance(parent_id)
            assert all(r.outcome == "succeeded" for r in final.subworkflows)
        ledger = Ledger()
        await ledger.check(engine, random.Random(seed))
        await assert_repaired(engine)
        print(f"checker: {ledger.checks} invariant checks, 0 violations")
