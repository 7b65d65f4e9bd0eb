"""The change hub leaves out of its stream the changes every subscriber skips.

While each subscriber skips a prefix of ids (the engine's content reactions skip the
engine's own documents), the lake sends none of their changes; a subscriber that wants
them widens the stream at once, from where it subscribed, and nobody sees a change twice.
The lake moves the stream's resume token past what it leaves out, so a restart of the
embedded daemon resumes from there.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pymongo.errors import OperationFailure

from kinflow.settings import Settings
from kinflow.storage import ChangeEvent, ChangeHub, Lake, Subscription
from kinflow.storage import hub as hub_module
from kinflow.storage.connect import LakeConnection, open_lake

SKIP = ("instance.",)
HANG_GUARD = 60.0  # seconds: a hang, not a timing


@pytest.fixture(autouse=True)
def narrow_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_module, "LEAN_AFTER", 0.0)


async def until(sub: Subscription, doc_id: str) -> list[ChangeEvent]:
    """Every event up to and including the first change of ``doc_id``."""
    events: list[ChangeEvent] = []
    while not events or events[-1].document_id != doc_id:
        events.append(await sub.next(timeout=10))
        assert events[-1].kind != "resync", events
    return events


async def lean_subscriber(lake: Lake, hub: ChangeHub) -> Subscription:
    """A subscriber skipping ``SKIP``, once it has seen a change (the stream then reopens
    filtered)."""
    lean = await hub.subscribe("*", documents=False, skip=SKIP)
    await lake.create({"_id": "doc.start", "_type": "t"})
    await until(lean, "doc.start")
    return lean


async def passed(hub: ChangeHub) -> None:
    """Two empty reads after the writes so far: the stream's token is past them."""
    target = hub.quiet_rounds + 2
    async with asyncio.timeout(10):
        while True:
            if hub.quiet_rounds >= target:
                return
            await asyncio.sleep(0.05)


async def test_skipped_changes_are_left_out_while_every_subscriber_skips_them(
    lake: Lake, hub: ChangeHub
) -> None:
    lean = await lean_subscriber(lake, hub)
    for n in range(20):
        await lake.create({"_id": f"instance.{n}", "_type": "t"})
    await lake.create({"_id": "doc.1", "_type": "t"})
    assert [e.document_id for e in await until(lean, "doc.1")] == ["doc.1"]
    lean.close()


async def test_a_subscriber_wanting_skipped_changes_widens_the_stream_without_duplicates(
    lake: Lake, hub: ChangeHub
) -> None:
    lean = await lean_subscriber(lake, hub)
    await lake.create({"_id": "instance.before", "_type": "t"})
    await lake.create({"_id": "doc.a", "_type": "t"})
    assert [e.document_id for e in await until(lean, "doc.a")] == ["doc.a"]
    wide = await hub.subscribe("*")
    await lake.create({"_id": "instance.after", "_type": "t"})
    await lake.create({"_id": "doc.b", "_type": "t"})
    assert [e.document_id for e in await until(wide, "doc.b")] == ["instance.after", "doc.b"]
    seen = [e.document_id for e in await until(lean, "doc.b")]
    assert seen[-1] == "doc.b" and "doc.a" not in seen  # the hint widened; no change twice
    wide.close()
    await lake.create({"_id": "instance.later", "_type": "t"})
    await lake.create({"_id": "doc.c", "_type": "t"})
    later = [e.document_id for e in await until(lean, "doc.c")]
    assert later.count("doc.c") == 1 and "doc.b" not in later
    lean.close()


async def test_the_resume_token_moves_past_the_changes_left_out(
    lake: Lake, hub: ChangeHub
) -> None:
    lean = await lean_subscriber(lake, hub)
    for n in range(20):
        await lake.create({"_id": f"instance.{n}", "_type": "t"})
    await passed(hub)
    # an unfiltered stream resumed from the hub's token starts after the left-out changes
    async with await lake.collection().watch(resume_after=hub.resume_token) as raw:
        await lake.create({"_id": "doc.probe", "_type": "t"})
        change = await raw.next()
    assert change["documentKey"]["_id"] == "doc.probe"
    lean.close()


embedded_only = pytest.mark.skipif(bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")),
                                   reason="restarts the embedded daemon")


@pytest.fixture
async def owned(data_dir: Path) -> AsyncIterator[LakeConnection]:
    settings = Settings(_env_file=None, mongodb_uri=None, data_dir=data_dir, database="hubs",
                        embedded_sync_on_commit=False, embedded_memory_mb=0)  # fmt: skip
    connection = await open_lake(settings)
    try:
        await connection.lake.ensure_dataset()
        yield connection
    finally:
        await connection.close()


async def restart(connection: LakeConnection) -> None:
    assert connection.keeper is not None
    assert await connection.keeper.restart_planned()


@embedded_only
@pytest.mark.lake
async def test_a_filtered_stream_resumes_after_a_daemon_restart_from_past_the_left_out(
    owned: LakeConnection,
) -> None:
    lake = owned.lake
    hub = ChangeHub(lake, queue_size=500)
    await hub.start()
    try:
        async with asyncio.timeout(HANG_GUARD):
            lean = await lean_subscriber(lake, hub)
            for n in range(30):
                await lake.create({"_id": f"instance.{n}", "_type": "t"})
            await passed(hub)
            await restart(owned)
            await lake.create({"_id": "doc.after", "_type": "t"})
            assert [e.document_id for e in await until(lean, "doc.after")] == ["doc.after"]
            wide = await hub.subscribe("*")  # and no left-out change is replayed to anyone
            await lake.create({"_id": "doc.last", "_type": "t"})
            assert [e.document_id for e in await until(wide, "doc.last")] == ["doc.last"]
    finally:
        await hub.stop()


@embedded_only
@pytest.mark.lake
async def test_a_resume_token_the_lake_refuses_gives_way_to_an_earlier_one(
    owned: LakeConnection,
) -> None:
    """The embedded lake's token after a read ending on a command names the database's
    command namespace, which it refuses to resume this stream from."""
    lake = owned.lake
    hub = ChangeHub(lake, queue_size=500)
    await hub.start()
    try:
        async with asyncio.timeout(HANG_GUARD):
            lean = await lean_subscriber(lake, hub)
            await lake.create({"_id": "instance.0", "_type": "t"})
            await lake.db.create_collection("another")  # the last entry: a command
            await passed(hub)
            with pytest.raises(OperationFailure):  # what the hub will meet
                await lake.collection().watch(resume_after=hub.resume_token)
            await restart(owned)
            await lake.create({"_id": "doc.after", "_type": "t"})
            assert [e.document_id for e in await until(lean, "doc.after")] == ["doc.after"]
    finally:
        await hub.stop()
