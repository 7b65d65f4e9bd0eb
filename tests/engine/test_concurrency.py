"""Many callers on one instance: every call lands once or fails typed; keys apply once."""

from __future__ import annotations

import asyncio

import pytest

from kinflow.engine import Engine
from kinflow.errors import KinflowError
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake

COUNTER = simple("counter", [
    {"name": "a", "activities": [{"name": "w", "actions": [
        {"name": "bump", "ops": [{"type": "field.inc", "target": "n"}]},
        {"name": "stop", "status": "done"}]}],
     "transitions": [{"name": "t", "to": "b"}]},
    {"name": "b"},
], fields=[{"name": "n", "type": "number", "initialValue": {"type": "literal", "value": 0}}])


async def test_twenty_concurrent_fires_each_land_or_fail_typed(engine: Engine) -> None:
    await engine.deploy([COUNTER])
    iid = (await engine.start_instance("counter")).instance.id_
    outcomes = await asyncio.gather(
        *(engine.fire_action(iid, "w", "bump") for _ in range(20)), return_exceptions=True
    )
    landed = [o for o in outcomes if not isinstance(o, BaseException)]
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert all(isinstance(f, KinflowError) for f in failed), failed
    assert all(f.code == "concurrent-modification" for f in failed if isinstance(f, KinflowError))
    final = await engine.get_instance(iid)
    fired = [r for r in final.history if r["_type"] == "actionFired"]
    assert final.fields[0].value == len(landed) == len(fired)
    assert len(landed) >= 1


async def test_twenty_concurrent_calls_with_one_key_apply_once(engine: Engine) -> None:
    await engine.deploy([COUNTER])
    iid = (await engine.start_instance("counter")).instance.id_
    outcomes = await asyncio.gather(
        *(engine.fire_action(iid, "w", "bump", idempotency_key="same") for _ in range(20)),
        return_exceptions=True,
    )
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert all(isinstance(f, KinflowError) for f in failed), failed
    applied = [o for o in outcomes if not isinstance(o, BaseException) and o.changed]
    assert len(applied) <= 1
    final = await engine.get_instance(iid)
    assert final.fields[0].value == 1
    assert [r["_type"] for r in final.history].count("actionFired") == 1
    assert [p.key for p in final.processedRequests] == ["same"]
