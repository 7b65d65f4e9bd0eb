"""The change hub: snapshot then changes, exactly once and in order; overflow; resume."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest

from kinflow.storage import ChangeEvent, ChangeHub, Lake, Subscription, doc_topic
from kinflow.storage.subscription import Fence


@pytest.fixture
async def hub(lake: Lake) -> AsyncIterator[ChangeHub]:
    hub = ChangeHub(
        lake, queue_size=50, topic_functions=[lambda d: [f"parent:{d['parent']}"]
                                              if d.get("parent") else []]
    )  # fmt: skip
    await hub.start()
    yield hub
    await hub.stop()


def doc_snapshot(lake: Lake, doc_id: str) -> Any:
    async def load(session: Any) -> Sequence[Mapping[str, Any]]:
        doc = await lake.get(doc_id, session=session)
        return [doc] if doc else []

    return load


async def drain(sub: Subscription, count: int) -> list[Any]:
    return [await sub.next(timeout=10) for _ in range(count)]


async def test_snapshot_then_each_change_once_in_order(lake: Lake, hub: ChangeHub) -> None:
    await lake.create({"_id": "a", "_type": "t", "n": 0})
    for n in range(1, 4):  # changes before subscribing must not be replayed
        await lake.patch("a", {"$set": {"n": n}})
    sub = await hub.subscribe(doc_topic("a"), doc_snapshot(lake, "a"))
    for n in range(4, 14):
        await lake.patch("a", {"$set": {"n": n}})
    events = await drain(sub, 11)
    assert events[0].kind == "snapshot" and events[0].document["n"] == 3
    assert [e.kind for e in events[1:]] == ["update"] * 10
    assert [e.updated_fields["n"] for e in events[1:]] == list(range(4, 14))
    with pytest.raises(TimeoutError):
        await sub.next(timeout=0.3)  # nothing more: no duplicate
    sub.close()


async def test_writes_racing_the_snapshot_are_neither_lost_nor_doubled(
    lake: Lake, hub: ChangeHub
) -> None:
    await lake.create({"_id": "r", "_type": "t", "n": 0})

    async def writer() -> None:
        for n in range(1, 41):
            await lake.patch("r", {"$set": {"n": n}})

    task = asyncio.create_task(writer())
    await asyncio.sleep(0.02)
    sub = await hub.subscribe(doc_topic("r"), doc_snapshot(lake, "r"))
    await task
    first = await sub.next(timeout=10)
    seen = [first.document["n"]]
    while seen[-1] != 40:
        event = await sub.next(timeout=10)
        seen.append(event.updated_fields["n"])
    assert seen == list(range(seen[0], 41))  # contiguous: no gap, no duplicate
    sub.close()


async def test_a_change_the_snapshot_missed_is_delivered_though_older_than_its_read_time(
    lake: Lake, hub: ChangeHub
) -> None:
    """The read's operation time can be later than what the read saw.

    The loader reads the document, then writes it in the same session: the
    session's operation time is now past that write, which the snapshot does
    not show, and whose own change the stream delivers after registration.
    """
    watch = await hub.subscribe(doc_topic("m"))
    await lake.create({"_id": "m", "_type": "t", "n": 0})
    await watch.next(timeout=10)  # the creation reached the hub before the subscription
    watch.close()

    async def read_then_write(session: Any) -> Sequence[Mapping[str, Any]]:
        doc = await lake.get("m", session=session)
        await lake.patch("m", {"$set": {"n": 1}}, session=session)
        return [doc] if doc else []

    sub = await hub.subscribe(doc_topic("m"), read_then_write)
    await lake.patch("m", {"$set": {"n": 2}})
    events = await drain(sub, 3)
    assert events[0].kind == "snapshot" and events[0].document["n"] == 0
    assert [e.updated_fields["n"] for e in events[1:]] == [1, 2]
    with pytest.raises(TimeoutError):
        await sub.next(timeout=0.3)
    sub.close()


async def test_a_document_created_during_the_snapshot_read_is_delivered_on_a_quiet_stream(
    lake: Lake, hub: ChangeHub
) -> None:
    """No later change lifts the fence here: the stream's empty reads do."""

    async def read_then_spawn(session: Any) -> Sequence[Mapping[str, Any]]:
        children = await lake.find({"parent": "q"}, session=session)
        await lake.create({"_id": "q1", "_type": "t", "parent": "q"}, session=session)
        return children

    sub = await hub.subscribe("parent:q", read_then_spawn)
    snapshot = await sub.next(timeout=10)
    assert snapshot.kind == "snapshot" and snapshot.documents == ()
    spawned = await sub.next(timeout=10)
    assert (spawned.kind, spawned.document_id) == ("insert", "q1")
    sub.close()


def test_the_fence_drops_what_the_snapshot_shows_and_keeps_the_rest() -> None:
    def change(kind: str, doc_id: str, rev: str | None = None) -> ChangeEvent:
        return ChangeEvent(kind=kind, document_id=doc_id, rev=rev)

    fence = Fence({"shown": "r2", "shown-early": "r0"}, read_at=None, lift_at_round=0)
    fence.held = [
        change("update", "shown", "r1"),  # before the snapshot's revision: shown
        change("update", "shown-early", "r5"),  # its snapshot revision came before: new
        change("update", "shown", "r2"),  # the snapshot's own revision: shown
        change("insert", "absent-gone", "a1"),
        change("delete", "absent-gone"),  # absent from the snapshot: deleted before it
        change("update", "shown", "r3"),
        change("insert", "absent-new", "b1"),
    ]
    assert [(e.document_id, e.rev) for e in fence.unreflected()] == [
        ("shown-early", "r5"), ("shown", "r3"), ("absent-new", "b1"),
    ]  # fmt: skip


async def test_topics_route_by_parent(lake: Lake, hub: ChangeHub) -> None:
    sub = await hub.subscribe("parent:p1")
    await lake.create({"_id": "c1", "_type": "t", "parent": "p1"})
    await lake.create({"_id": "c2", "_type": "t", "parent": "p2"})
    await lake.create({"_id": "c3", "_type": "t", "parent": "p1"})
    events = await drain(sub, 2)
    assert [e.document_id for e in events] == ["c1", "c3"]
    sub.close()


async def test_overflowing_subscriber_is_cut_off_others_keep_receiving(
    lake: Lake, hub: ChangeHub
) -> None:
    await lake.create({"_id": "o", "_type": "t", "n": 0})
    slow = await hub.subscribe(doc_topic("o"), doc_snapshot(lake, "o"), queue_size=5)
    fast = await hub.subscribe(doc_topic("o"), doc_snapshot(lake, "o"), queue_size=500)
    assert (await fast.next(timeout=5)).kind == "snapshot"
    received: list[int] = []

    async def consume() -> None:
        async for event in fast:
            received.append(event.updated_fields["n"])
            if len(received) == 30:
                return

    consumer = asyncio.create_task(consume())
    for n in range(1, 31):
        await lake.patch("o", {"$set": {"n": n}})
    await asyncio.wait_for(consumer, 10)
    assert received == list(range(1, 31))
    assert slow.lagged
    events = [event async for event in slow]
    assert [e.kind for e in events] == ["resync"]
    assert hub.subscriber_count() == 1
    fast.close()


async def test_stream_resumes_after_interruption(lake: Lake, hub: ChangeHub) -> None:
    """Break the stream and its resume (the driver resumes once; then the hub reopens)."""
    await lake.create({"_id": "s", "_type": "t", "n": 0})
    sub = await hub.subscribe(doc_topic("s"), doc_snapshot(lake, "s"))
    assert (await sub.next(timeout=5)).document["n"] == 0
    await lake.client.admin.command(
        "configureFailPoint", "failCommand", mode={"times": 3},
        data={"failCommands": ["getMore", "aggregate"], "closeConnection": True},
    )  # fmt: skip
    try:
        for n in range(1, 6):
            await lake.patch("s", {"$set": {"n": n}})
        events = await drain(sub, 5)
    finally:
        await lake.client.admin.command("configureFailPoint", "failCommand", mode="off")
    assert [e.updated_fields["n"] for e in events] == [1, 2, 3, 4, 5]
    assert hub.reopens >= 1  # the second failure reached the hub, which reopened
    sub.close()


async def test_transaction_changes_arrive_after_commit_only(lake: Lake, hub: ChangeHub) -> None:
    sub = await hub.subscribe("*")

    async def two_writes(session: Any) -> None:
        await lake.create({"_id": "x1", "_type": "t"}, session=session)
        await lake.create({"_id": "x2", "_type": "t"}, session=session)

    async def aborted(session: Any) -> None:
        await lake.create({"_id": "x3", "_type": "t"}, session=session)
        raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        await lake.transaction(aborted)
    await lake.transaction(two_writes)
    events = await drain(sub, 2)
    assert sorted(e.document_id for e in events) == ["x1", "x2"]
    with pytest.raises(TimeoutError):
        await sub.next(timeout=0.3)
    sub.close()
