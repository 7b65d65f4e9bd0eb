"""The change hub asks the lake for changed documents only while a subscriber needs them."""

from __future__ import annotations

import pytest

from kinflow.storage import ChangeEvent, ChangeHub, Lake, Subscription, doc_topic
from kinflow.storage import hub as hub_module


def n_of(event: ChangeEvent) -> object:
    assert event.updated_fields is not None
    return event.updated_fields["n"]


async def drain(sub: Subscription, count: int) -> list[ChangeEvent]:
    return [await sub.next(timeout=10) for _ in range(count)]


async def test_lean_subscribers_get_events_without_documents(lake: Lake, hub: ChangeHub
                                                            ) -> None:
    lean = await hub.subscribe("*", documents=False)
    await lake.create({"_id": "a", "_type": "t", "n": 0})
    for n in range(1, 4):
        await lake.patch("a", {"$set": {"n": n}})
    events = await drain(lean, 4)
    assert [e.kind for e in events] == ["insert", "update", "update", "update"]
    assert events[0].document is not None and events[0].document["n"] == 0  # inserts carry it
    assert all(e.document is None for e in events[1:])
    assert not hub.wants_documents()
    lean.close()


async def test_a_subscriber_that_needs_documents_gets_every_one_in_order(
    lake: Lake, hub: ChangeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_module, "LEAN_AFTER", 0.0)
    lean = await hub.subscribe("*", documents=False)
    await lake.create({"_id": "b", "_type": "t", "n": 0})
    assert (await lean.next(timeout=10)).kind == "insert"
    full = await hub.subscribe(doc_topic("b"))
    for n in range(1, 21):
        await lake.patch("b", {"$set": {"n": n}})
    got = await drain(full, 20)
    assert [n_of(e) for e in got] == list(range(1, 21))
    assert all(e.document is not None for e in got)
    # the lean subscriber saw each change once, in order, across the reopen
    seen = await drain(lean, 20)
    assert [n_of(e) for e in seen] == list(range(1, 21))
    full.close()
    # nobody needs documents any more: the stream drops its lookups, nothing lost
    for n in range(21, 31):
        await lake.patch("b", {"$set": {"n": n}})
    seen = await drain(lean, 10)
    assert [n_of(e) for e in seen] == list(range(21, 31))
    assert seen[-1].document is None
    lean.close()
