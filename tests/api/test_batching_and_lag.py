"""Batched reads for big pages, and the cut-off of a subscriber that lags.

These run the schema directly on the test's event loop (``schema.execute`` /
``schema.subscribe``) over the real lake and a real change hub, so the test
can count the lake commands a query costs and hold a subscriber still.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pymongo import AsyncMongoClient, monitoring

from kinflow.engine import Engine
from kinflow.http.tokens import TokenTable
from kinflow.schema import build_schema
from kinflow.schema.context import Context, Services
from kinflow.schema.hubs import Hubs
from kinflow.settings import Settings
from kinflow.storage import Lake

pytestmark = pytest.mark.lake


class Reads(monitoring.CommandListener):
    """Counts the read commands a client sends."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in ("find", "count", "aggregate", "getMore"):
            self.commands.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def services(lake: Lake, **settings: Any) -> Services:
    return Services(settings=Settings(**settings), lake=lake, engine=Engine(lake),
                    hubs=Hubs(lake, queue_size=1000), tokens=TokenTable({}))  # fmt: skip


def instance(doc_id: str, parent: str | None = None) -> dict[str, Any]:
    return {
        "_id": doc_id, "_type": "kinflow.instance", "dataset": "production",
        "definition": "leaf", "pinnedVersion": 1, "currentStage": "translating",
        "ancestors": [{"id": f"lake:production:{parent}"}] if parent else [],
        "startedAt": "2026-01-01T00:00:00.000Z", "lastChangedAt": "2026-01-01T00:00:00.000Z",
    }  # fmt: skip


@pytest.fixture
async def counted(lake_uri: str, lake: Lake) -> AsyncIterator[tuple[Lake, Reads]]:
    reads = Reads()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(lake_uri,
                                                                event_listeners=[reads])
    yield Lake(client, lake.database), reads
    await client.close()


async def test_a_page_of_a_thousand_children_costs_a_handful_of_reads(
    lake: Lake, counted: tuple[Lake, Reads]
) -> None:
    await lake.create(instance("root"))
    await lake.create_many([instance(f"child-{n:04d}", "root") for n in range(1000)])
    reader, reads = counted
    context = Context(services=services(reader))
    result = await build_schema().execute(
        """{ instances(where: {parentId: "root"}, first: 1000) { totalCount
             nodes { id status currentStage parent { id } children { id }
                     ancestors { id } } } }""",
        context_value=context,
    )
    assert result.errors is None
    assert result.data is not None
    nodes = result.data["instances"]["nodes"]
    assert len(nodes) == 1000 and result.data["instances"]["totalCount"] == 1000
    assert {n["parent"]["id"] for n in nodes} == {"root"}
    assert all(n["status"] == "ACTIVE" and n["children"] == [] for n in nodes)
    # parent lookup, count, page (+ cursor batches), one batched parent load, one children query
    assert len(reads.commands) <= 8, reads.commands


async def test_a_lagging_subscriber_is_told_to_resubscribe(lake: Lake) -> None:
    svc = services(lake, subscription_queue_size=2)
    try:
        context = Context(services=svc, websocket=True)
        stream = await build_schema().subscribe(
            'subscription { documentChanged(id: "note-1") }', context_value=context)
        assert not hasattr(stream, "errors")
        first = await stream.__anext__()  # type: ignore[union-attr]
        assert first.data == {"documentChanged": None}
        for n in range(5):  # the subscriber reads nothing meanwhile
            await lake.replace({"_id": "note-1", "_type": "note", "n": n}, expected_rev=None)
        for _ in range(3000):  # the hub drops a subscriber when it cuts it off
            if svc.hubs.subscriber_count() == 0:
                break
            await asyncio.sleep(0.01)
        lagged = await stream.__anext__()  # type: ignore[union-attr]
        assert lagged.errors and lagged.errors[0].extensions["code"] == "subscription-lagged"
        assert lagged.errors[0].extensions["details"]["resubscribe"] is True
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()  # type: ignore[union-attr]
        assert svc.hubs.subscriber_count() == 0

        again = await build_schema().subscribe(
            'subscription { documentChanged(id: "note-1") }', context_value=context)
        fresh = await again.__anext__()  # type: ignore[union-attr]
        assert fresh.data is not None
        assert fresh.data["documentChanged"]["n"] == 4
        await again.aclose()  # type: ignore[union-attr]
    finally:
        await svc.hubs.stop()
