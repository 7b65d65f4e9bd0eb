"""A `$now` gate publishes nextEvaluationAt; once it passes, a heartbeat tick moves on."""

from __future__ import annotations

import pytest

from kinflow.engine import Engine
from tests.engine.conftest import Clock
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake

TIMER = simple("timer", [
    {"name": "waiting", "transitions": [
        {"name": "late", "to": "overdue", "when": "dateTime($now) > dateTime($fields.due)"}]},
    {"name": "overdue"},
], fields=[{"name": "due", "type": "datetime", "initialValue": {"type": "input"}}])


async def test_time_gate_is_due_and_moves_on_tick(engine: Engine, clock: Clock) -> None:
    await engine.deploy([TIMER])
    started = await engine.start_instance("timer", fields={"due": "2026-01-01T13:00:00.000Z"})
    iid = started.instance.id_
    assert started.next_evaluation_at is not None
    assert started.next_evaluation_at.startswith("2026-01-01T13:00:00")
    assert await engine.maintenance.due_instances() == []
    clock.advance(hours=2)
    assert await engine.maintenance.due_instances() == [iid]
    ticked = await engine.tick(iid)
    assert ticked.instance.currentStage == "overdue" and ticked.cascaded == 1
    assert ticked.next_evaluation_at is None
    assert await engine.maintenance.due_instances() == []
