"""The lake's document bookkeeping, fenced writes and transactions, on a real server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kinflow.errors import ConcurrentModification, DocumentExists, InvalidInput, RevisionConflict
from kinflow.storage import Lake


async def test_create_sets_system_fields(lake: Lake) -> None:
    doc = await lake.create({"_id": "a", "_type": "article", "title": "x"})
    assert doc["_rev"] and doc["_createdAt"] == doc["_updatedAt"]
    assert doc["_createdAt"].endswith("Z")
    stored = await lake.get("a")
    assert stored is not None and stored["_rev"] == doc["_rev"] and stored["title"] == "x"


async def test_create_is_create_only(lake: Lake) -> None:
    await lake.create({"_id": "a", "_type": "article"})
    with pytest.raises(DocumentExists) as info:
        await lake.create({"_id": "a", "_type": "article", "title": "other"})
    assert info.value.details == {"id": "a"}
    stored = await lake.get("a")
    assert stored is not None and "title" not in stored


@pytest.mark.parametrize("bad", [{"_type": "t"}, {"_id": "", "_type": "t"}, {"_id": "x"}, []])
async def test_documents_need_id_and_type(lake: Lake, bad: Any) -> None:
    with pytest.raises(InvalidInput):
        await lake.create(bad)


async def test_fenced_replace_with_stale_rev_changes_nothing(lake: Lake) -> None:
    first = await lake.create({"_id": "a", "_type": "article", "n": 1})
    second = await lake.replace({**first, "n": 2}, expected_rev=first["_rev"])
    assert second["_rev"] != first["_rev"] and second["_createdAt"] == first["_createdAt"]
    with pytest.raises(RevisionConflict) as info:
        await lake.replace({**first, "n": 3}, expected_rev=first["_rev"])
    assert info.value.code == "revision-conflict"
    stored = await lake.get("a")
    assert stored is not None and stored["n"] == 2 and stored["_rev"] == second["_rev"]


async def test_fenced_patch(lake: Lake) -> None:
    first = await lake.create({"_id": "a", "_type": "article", "n": 1})
    patched = await lake.patch("a", {"$inc": {"n": 1}}, expected_rev=first["_rev"])
    assert patched["n"] == 2 and patched["_rev"] != first["_rev"]
    with pytest.raises(RevisionConflict):
        await lake.patch("a", {"$inc": {"n": 1}}, expected_rev=first["_rev"])
    with pytest.raises(RevisionConflict):
        await lake.patch("missing", {"$set": {"n": 1}})
    with pytest.raises(InvalidInput):
        await lake.patch("a", {"$set": {"_rev": "forged"}})
    stored = await lake.get("a")
    assert stored is not None and stored["n"] == 2


async def test_get_many_and_delete(lake: Lake) -> None:
    await lake.create_many([{"_id": f"d{i}", "_type": "t"} for i in range(5)])
    found = await lake.get_many(["d1", "d3", "nope"])
    assert sorted(found) == ["d1", "d3"]
    assert await lake.delete("d1") is True
    assert await lake.delete("d1") is False
    assert await lake.count({"_type": "t"}) == 4


async def test_transaction_commit_and_abort_visibility(lake: Lake) -> None:
    async def writes(session: Any) -> str:
        await lake.create({"_id": "t1", "_type": "t"}, session=session)
        await lake.create({"_id": "t2", "_type": "t"}, session=session)
        inside = await lake.get("t1")  # outside the session: not yet visible
        return "visible" if inside else "hidden"

    assert await lake.transaction(writes) == "hidden"
    assert sorted(await lake.get_many(["t1", "t2"])) == ["t1", "t2"]

    class Boom(Exception):
        pass

    async def fails(session: Any) -> None:
        await lake.create({"_id": "t3", "_type": "t"}, session=session)
        raise Boom()

    with pytest.raises(Boom):
        await lake.transaction(fails)
    assert await lake.get("t3") is None


async def test_concurrent_conflicting_transactions_both_land(lake: Lake) -> None:
    """Two transactions increment one counter; the loser conflicts, retries, and lands."""
    await lake.create({"_id": "counter", "_type": "t", "n": 0})
    both_read = asyncio.Barrier(2)
    attempts: list[int] = []

    async def increment(session: Any) -> None:
        attempts.append(1)
        doc = await lake.get("counter", session=session)
        assert doc is not None
        if len(attempts) <= 2:
            await both_read.wait()  # both transactions hold the same snapshot
        await lake.patch("counter", {"$set": {"n": doc["n"] + 1}}, session=session,
                         expected_rev=doc["_rev"])  # fmt: skip

    retries: list[BaseException] = []
    await asyncio.gather(
        lake.transaction(increment, on_retry=lambda _n, exc: retries.append(exc)),
        lake.transaction(increment, on_retry=lambda _n, exc: retries.append(exc)),
    )
    stored = await lake.get("counter")
    assert stored is not None and stored["n"] == 2
    assert len(retries) >= 1 and len(attempts) >= 3


async def test_exhausted_retries_become_concurrent_modification(lake: Lake) -> None:
    await lake.create({"_id": "c", "_type": "t", "n": 0})

    async def always_stale(session: Any) -> None:
        await lake.patch("c", {"$inc": {"n": 1}}, expected_rev="stale", session=session)

    with pytest.raises(ConcurrentModification) as info:
        await lake.transaction(always_stale, verb="fire_action", attempts=3)
    assert info.value.code == "concurrent-modification"
    assert info.value.details["verb"] == "fire_action"
    stored = await lake.get("c")
    assert stored is not None and stored["n"] == 0


async def test_transient_server_error_is_retried(lake: Lake) -> None:
    """A failpoint makes one commit fail with a transient label; the retry commits once."""
    await lake.client.admin.command(
        "configureFailPoint",
        "failCommand",
        mode={"times": 1},
        data={
            "failCommands": ["commitTransaction"],
            "errorCode": 112,
            "errorLabels": ["TransientTransactionError"],
        },
    )
    calls: list[int] = []

    async def insert(session: Any) -> None:
        calls.append(1)
        await lake.create({"_id": "once", "_type": "t"}, session=session)

    try:
        await lake.transaction(insert)
    finally:
        await lake.client.admin.command("configureFailPoint", "failCommand", mode="off")
    assert len(calls) == 2
    assert await lake.count({"_id": "once"}) == 1
