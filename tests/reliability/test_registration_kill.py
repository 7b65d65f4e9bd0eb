"""Registration in batches survives a real SIGKILL: every row key registered exactly once.

A parent spawns a windowed cohort over 120 lake documents, read 7 documents a batch
(docs/subworkflows.md#registration-and-limits). Its spawn registers the first batch;
a separate process (tests/reliability/registration_driver.py) registers the rest
and SIGKILLs itself:

* at the ``mid-registration`` fault point before its fourth batch (three batch
  commits landed, the checkpoint after the third);
* (``slow``) at a random moment, 20 times over fresh parents: reading a batch,
  inside a batch's transaction, between commits.

The test then resumes the registration (as the heartbeat does, from the committed
checkpoint) and checks: the rows' keys are the documents' ids in ``_id`` order, each
exactly once; no child was created twice; the window held; nothing is owed.
"""

from __future__ import annotations

import contextlib
import random
import signal
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kinflow.core.context import Limits
from kinflow.engine import Engine
from tests.engine.cohort_defs import WAITING, child, parent, with_item, with_window
from tests.reliability.driver_process import engine_on_own_lake, run_until_it_dies

pytestmark = pytest.mark.lake

DATABASE = "regkill"
ITEMS = [f"item-{n:03d}" for n in range(120)]
BATCH = 7
MAX_ACTIVE = 5
DRIVER_TIMEOUT = 180.0


def lake_parent() -> dict[str, Any]:
    return with_window(with_item(parent("*[_type == 'item']{_id}", settled=WAITING),
                                 "$row._id"), MAX_ACTIVE)


@contextlib.asynccontextmanager
async def daemon_engine(data_dir: Path) -> AsyncIterator[tuple[str, Engine]]:
    async with engine_on_own_lake(data_dir, DATABASE, [lake_parent(), child()],
                                  limits=replace(Limits(), registration_batch=BATCH)
                                  ) as (uri, engine):
        for name in ITEMS:
            await engine.lake.create({"_id": name, "_type": "item"})
        yield uri, engine


async def spawned(engine: Engine) -> str:
    """A parent whose spawn registered its first batch; the rest is left owed."""
    engine.faults.arm("mid-registration")  # this process's background stops at once
    started = await engine.start_instance("p")
    await engine.fire_action(started.instance.id_, "go", "go")
    await engine.registrar.idle()
    return started.instance.id_


async def run_driver(uri: str, parent_id: str, mode: str, arg: str) -> str:
    status, text = await run_until_it_dies(
        "tests.reliability.registration_driver", uri, DATABASE, parent_id, str(BATCH), mode,
        arg, timeout=DRIVER_TIMEOUT)
    assert status in (-signal.SIGKILL, 3), f"exited {status}:\n{text}"
    return text


async def check_exactly_once(engine: Engine, parent_id: str) -> int:
    """Resume as the heartbeat does and check every key once; returns rows before resuming."""
    await engine.lake.client.admin.command("killAllSessions", [])
    before = len((await engine.get_instance(parent_id)).subworkflows)
    await engine.maintenance.finish_registration(parent_id)
    p = await engine.get_instance(parent_id)
    keys = [r.rowKey for r in p.subworkflows]
    assert keys == ITEMS, "a row key registered twice, skipped or out of order"
    assert p.owesRegistration is None
    assert all(c.registration is None for c in p.cohorts or [])
    children = await engine.lake.find({"_type": "kinflow.instance",
                                       "parentInstance": parent_id}, projection={"_id": 1})
    ids = [c["_id"] for c in children]
    assert len(ids) == len(set(ids)) == sum(1 for r in p.subworkflows if not r.queued)
    assert len(ids) == MAX_ACTIVE  # nothing finished: the window holds
    return before


async def test_a_sigkill_at_the_registration_fault_point_resumes_exactly_once(
        tmp_path: Path) -> None:
    async with daemon_engine(tmp_path / "lake") as (uri, engine):
        parent_id = await spawned(engine)
        text = await run_driver(uri, parent_id, "point", "4")
        assert "killing at mid-registration" in text, text
        p = await engine.get_instance(parent_id)
        # the spawn's batch and three more (a batch reads about BATCH documents)
        assert 4 * BATCH <= len(p.subworkflows) < len(ITEMS)
        assert p.owesRegistration is True
        before = await check_exactly_once(engine, parent_id)
        print(f"killed with {before} of {len(ITEMS)} rows registered; resumed exactly once")


@pytest.mark.slow
async def test_a_sigkill_at_random_moments_resumes_exactly_once(tmp_path: Path,
                                                                 seed: int) -> None:
    rng = random.Random(seed)
    async with daemon_engine(tmp_path / "lake") as (uri, engine):
        cut = []
        for _ in range(20):
            parent_id = await spawned(engine)
            await run_driver(uri, parent_id, "after", f"{rng.uniform(0.05, 1.5):.3f}")
            cut.append(await check_exactly_once(engine, parent_id))
        print(f"20 kills; rows registered when killed: {cut}")
        assert any(BATCH < n < len(ITEMS) for n in cut), "no kill landed mid-registration"
