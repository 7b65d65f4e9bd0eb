"""Child ids against the embedded lake: a row's earlier attempts keep their ids taken, so
a same-visit respawn after a redrive never reuses the first attempt's id."""

from __future__ import annotations

import pytest

from kinflow.engine import Engine
from tests.engine.cohort_defs import items, parent
from tests.engine.outcome_defs import worker
from tests.engine.test_redrive import fail, ids

pytestmark = pytest.mark.lake


async def test_a_respawn_after_a_redrive_takes_a_fresh_id(engine: Engine) -> None:
    closing = {"name": "close", "status": "done"}  # fired by a caller: the visit stays open
    await engine.deploy([parent(caller_fired=True, extra_actions=[closing]), worker()])
    started = await engine.start_instance("p", fields=items("a"))
    await engine.fire_action(started.instance.id_, "go", "go")
    spawned = await engine.fire_action(started.instance.id_, "translate", "fan-out")
    first = ids(spawned.instance)["a"]
    await fail(engine, first)
    await engine.redrive_cohort(started.instance.id_, "translate")
    await engine.fire_action(f"{first}-a2", "task", "finish", params={"words": 3})

    again = await engine.fire_action(started.instance.id_, "translate", "fan-out")
    rows = [r for r in again.instance.subworkflows if r.rowKey == "a"]
    assert [r.child_id for r in rows] == [f"{first}-a2", f"{first}-2"]
    assert len(await engine.lake.find({"_id": f"{first}-2"})) == 1
