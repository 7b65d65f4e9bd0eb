"""A gate that reads content reacts to a change of that content, not at the next heartbeat."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from kinflow.engine import Engine
from kinflow.engine.reactions import follow_content_changes
from kinflow.storage.hub import ChangeHub
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake

GATED = simple("gated", [
    {"name": "waiting", "transitions": [
        {"name": "go", "to": "approved", "when": "$fields.subject.status == 'approved'"}]},
    {"name": "approved"},
], fields=[{"name": "subject", "type": "subject", "initialValue": {"type": "input"}}])


async def test_instances_for_document_and_tick_on_change(engine: Engine) -> None:
    await engine.lake.create({"_id": "doc-1", "_type": "article", "status": "draft"})
    await engine.deploy([GATED])
    iid = (await engine.start_instance("gated", fields={"subject": "doc-1"})).instance.id_
    assert [i.id_ for i in await engine.instances_for_document("doc-1")] == [iid]
    assert await engine.instances_for_document("doc-2") == []
    stored = await engine.lake.get("doc-1")
    await engine.lake.replace({**stored, "status": "approved"}, expected_rev=stored["_rev"])
    results = await engine.react_to_document_change("lake:production:doc-1")
    assert [r.instance.currentStage for r in results] == ["approved"]
    assert await engine.instances_for_document("doc-1") == []  # completed: no longer watched


async def test_the_change_hub_follower_ticks_watchers(engine: Engine) -> None:
    await engine.lake.create({"_id": "doc-1", "_type": "article", "status": "draft"})
    await engine.deploy([GATED])
    iid = (await engine.start_instance("gated", fields={"subject": "doc-1"})).instance.id_
    hub = ChangeHub(engine.lake)
    await hub.start()
    ready = asyncio.Event()
    follower = asyncio.create_task(follow_content_changes(engine, hub, ready=ready))
    try:
        await ready.wait()
        stored = await engine.lake.get("doc-1")
        await engine.lake.replace({**stored, "status": "approved"}, expected_rev=stored["_rev"])
        for _ in range(200):
            if (await engine.get_instance(iid)).currentStage == "approved":
                break
            await asyncio.sleep(0.05)
        assert (await engine.get_instance(iid)).currentStage == "approved"
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        await hub.stop()


async def test_query_reads_the_lake_with_bound_params(engine: Engine) -> None:
    await engine.lake.create({"_id": "a1", "_type": "article", "status": "draft"})
    await engine.lake.create({"_id": "a2", "_type": "article", "status": "approved"})
    found = await engine.query("*[_type == 'article' && status == $s]._id", {"s": "approved"})
    assert found == ["a2"]
