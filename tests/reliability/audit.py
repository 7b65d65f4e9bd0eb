"""After a multi-process run: reopen the lake, finish what is owed, check everything.

Runs once every kinflow process of the test has stopped: the test starts
the data directory's daemon itself, lets the heartbeat settle (with the
``ship`` handler registered, so a pending effect runs here and is counted
like any other run), then asserts the subworkflow invariants and the order
checks (nothing acknowledged lost, no child stamped twice, no effect run
twice). Its engine's clock runs ``LATER`` ahead, so an effect claimed by a
killed worker (a 300 s lease) is taken over now rather than in five minutes.
"""

from __future__ import annotations

import asyncio
import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kinflow.engine import Engine
from kinflow.storage.embedded import EmbeddedLake
from tests.reliability.family import open_lake
from tests.reliability.invariants import Ledger, settle
from tests.reliability.orders import Tally, check_orders
from tests.reliability.procs import STOP_LIMIT, Fleet
from tests.reliability.ship_handler import register

LATER = timedelta(minutes=10)
ALLOWED = {"lake-unavailable", "concurrent-modification", "action-disabled"}
"""The refusals a client of a multi-process run may see: the lake or a process going away,
a race another client won, an action no longer enabled."""


async def settle_and_check(uri: str, effect_log: Path, tally: Tally, killed: set[int],
                           seed: int) -> dict[str, Any]:
    """On the lake at ``uri`` (database ``kinflow``), with the ``ship`` handler logging to
    ``effect_log``: settle what is owed, run the checker and the order checks; the figures."""
    lake = open_lake(uri, "kinflow")
    os.environ["KINFLOW_TEST_EFFECT_LOG"] = str(effect_log)
    try:
        engine = Engine(lake, clock=lambda: datetime.now(UTC) + LATER)
        register(engine)
        await engine.ensure_ready()
        repaired = await settle(engine)
        ledger = Ledger()
        await ledger.check(engine, random.Random(seed))
        figures = await check_orders(engine, tally, effect_log, killed)
        return {**figures, "repaired": repaired, "checks": ledger.checks}
    finally:
        os.environ.pop("KINFLOW_TEST_EFFECT_LOG", None)
        await lake.close()


async def audit(fleet: Fleet, tally: Tally, seed: int) -> dict[str, Any]:
    daemon = EmbeddedLake(fleet.data_dir)
    uri = await asyncio.to_thread(daemon.start)
    try:
        return await settle_and_check(uri, fleet.effect_log, tally, fleet.killed, seed)
    finally:
        await asyncio.to_thread(daemon.stop)


def assert_the_run_held(tally: Tally, fleet: Fleet) -> None:
    """What every multi-process run must show: clients refused only with ``ALLOWED`` codes,
    no watcher told of an internal error, every process stopped in time, an order shipped,
    no process logging an internal error."""
    assert set(tally.codes) <= ALLOWED, f"unexpected refusals: {tally.codes}"
    assert "internal-error" not in tally.watch_errors
    assert max(fleet.stop_seconds.values()) < STOP_LIMIT, fleet.stop_seconds
    assert tally.shipped, "no order shipped"
    assert not fleet.logs_mention("internal error"), "a process logged an internal error"
