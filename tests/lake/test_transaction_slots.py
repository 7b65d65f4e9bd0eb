"""The cap on open transactions (kinflow.storage.slots), on the embedded lake.

A process keeps at most ``limit`` transactions open at once; a transaction
started inside one that holds a slot does not wait for a second; a slot that
never comes free within the deadline is a typed ``lake-unavailable``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kinflow.errors import LakeUnavailable
from kinflow.storage import Lake
from kinflow.storage.slots import TransactionSlots


async def test_no_more_transactions_open_than_the_cap(lake: Lake) -> None:
    lake.slots = TransactionSlots(2)
    open_now = peak = 0

    async def work(session: Any) -> None:
        nonlocal open_now, peak
        open_now += 1
        peak = max(peak, open_now)
        await lake.collection().find_one({}, session=session)
        await asyncio.sleep(0.02)
        open_now -= 1

    await asyncio.gather(*(lake.transaction(work) for _ in range(10)))
    assert peak == 2
    assert lake.slots.waited > 0


async def test_a_transaction_inside_a_transaction_takes_no_second_slot(lake: Lake) -> None:
    lake.slots = TransactionSlots(1)

    async def inner(session: Any) -> str:
        await lake.collection().insert_one({"_id": "inner"}, session=session)
        return "inner"

    async def outer(session: Any) -> str:
        await lake.collection().insert_one({"_id": "outer"}, session=session)
        # with one slot, this would wait for ever if it needed a slot of its own
        return await asyncio.wait_for(lake.transaction(inner), timeout=5)

    assert await lake.transaction(outer) == "inner"
    assert {d["_id"] async for d in lake.collection().find({})} == {"inner", "outer"}


async def test_a_slot_that_never_comes_free_is_lake_unavailable(lake: Lake) -> None:
    lake.slots = TransactionSlots(1)
    lake.operation_timeout = 0.3
    release = asyncio.Event()

    async def hold(session: Any) -> None:
        await release.wait()

    holder = asyncio.create_task(lake.transaction(hold))
    await asyncio.sleep(0.05)
    with pytest.raises(LakeUnavailable) as refused:
        await lake.transaction(hold)
    assert refused.value.details["cause"] == "transaction-slots"
    release.set()
    await holder


async def test_a_failed_attempt_gives_its_slot_back(lake: Lake) -> None:
    lake.slots = TransactionSlots(1)

    async def boom(session: Any) -> None:
        raise ValueError("planned")

    for _ in range(3):
        with pytest.raises(ValueError):
            await lake.transaction(boom)
    assert await lake.transaction(lambda session: asyncio.sleep(0, "ok")) == "ok"
