"""``engine_for(dataset)`` builds engines like the default one."""

from __future__ import annotations

import pytest

from kinflow.core.context import Limits
from kinflow.engine import EffectCall, Engine
from kinflow.http.tokens import TokenTable
from kinflow.schema.context import Services
from kinflow.schema.hubs import Hubs
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.datasets import Datasets
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake

PINGING = simple("pinging", [
    {"name": "a", "activities": [{"name": "w", "actions": [
        {"name": "ping", "effects": [{"name": "ping"}]},
        {"name": "finish", "status": "done"}]}],
     "transitions": [{"name": "t", "to": "b"}]},
    {"name": "b"},
])


async def test_an_extra_datasets_engine_has_the_default_engines_handlers_and_limits(
        lake: Lake) -> None:
    calls: list[str] = []

    async def ping(call: EffectCall) -> None:
        calls.append(call.instance_id)

    engine = Engine(lake, limits=Limits(cascade_moves=7), propagation="inline")
    engine.register_handler("ping", ping)
    await engine.ensure_ready()
    datasets = Datasets(lake, ["other"])
    await datasets.prepare()
    services = Services(settings=Settings(), lake=lake, engine=engine,
                        hubs=Hubs(lake, queue_size=10, datasets=datasets),
                        tokens=TokenTable({}))
    other = services.engine_for("other")
    assert other.dataset == "other" and other is services.engine_for("other")
    assert other.limits.cascade_moves == 7 and other.driver.propagator.mode == "inline"
    assert other.clock is engine.clock
    await other.deploy([PINGING])
    iid = (await other.start_instance("pinging")).instance.id_
    await other.fire_action(iid, "w", "ping")
    report = await other.drain_effects(iid)
    assert calls == [iid], report
