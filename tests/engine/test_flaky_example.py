"""examples/definitions/flaky-batch.json with examples/handlers.py: some first attempts
fail, some hang; the cohort's deadline and retries end every row succeeded
(docs/subworkflows.md#settlement; README, "Deadlines and retries")."""

from __future__ import annotations

import pytest

from kinflow.cli.inputs import load_definitions
from kinflow.engine import Engine
from kinflow.plugins import load_handlers
from kinflow.worker import Worker
from tests.engine.conftest import Clock
from tests.engine.invariants import assert_repaired
from tests.engine.test_examples import EXAMPLES

pytestmark = pytest.mark.lake


async def test_every_row_succeeds_after_its_retries(engine: Engine, clock: Clock) -> None:
    load_handlers(engine, str(EXAMPLES.parent / "handlers.py"))
    await engine.deploy(load_definitions([EXAMPLES / "flaky-batch.json"]))
    started = await engine.start_instance("flaky-batch")
    parent_id = started.instance.id_
    for _ in range(30):  # one heartbeat a second, as `make demo`'s worker
        report = await Worker(engine, grace_seconds=0).run_pass()
        assert not report.failed, report.failed
        if (await engine.get_instance(parent_id)).currentStage == "done":
            break
        clock.advance(seconds=1)
    done = await engine.get_instance(parent_id)
    assert done.currentStage == "done", [(r.rowKey, r.outcome, r.attempt, r.queued)
                                         for r in done.subworkflows]
    rows = {r.rowKey: r for r in done.subworkflows}
    assert {r.outcome for r in rows.values()} == {"succeeded"}
    assert {k: rows[k].attempt or 1 for k in rows} == {
        "ok-1": 1, "ok-2": 1, "fail-1": 2, "fail-2": 2, "hang-1": 2, "hang-2": 2}
    timed = [h["rowKey"] for h in done.history if h.get("_type") == "childTimedOut"]
    assert sorted(timed) == ["hang-1", "hang-2"]
    await assert_repaired(engine)
