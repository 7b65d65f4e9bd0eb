"""The restart gate: operations wait while it is closed, a closing waits for those in flight,
a transaction's own statements never wait, and a wait past its bound is ``lake-unavailable``."""

from __future__ import annotations

import asyncio

import pytest

from kinflow.errors import LakeUnavailable
from kinflow.storage.restart_gate import RestartGate


async def test_operations_wait_while_closed_and_go_on_when_it_opens() -> None:
    gate = RestartGate()
    assert await gate.close(drain=1.0) and gate.closed and gate.restart_explains()
    passed: list[str] = []

    async def operation() -> None:
        async with gate.passage(10.0, "get"):
            passed.append("get")

    waiting = asyncio.create_task(operation())
    await asyncio.sleep(0.05)
    assert passed == [] and gate.waited == 1
    gate.reopen()
    await waiting
    assert passed == ["get"] and not gate.closed and gate.restart_explains()  # just ended


async def test_closing_drains_the_operations_in_flight_first() -> None:
    gate = RestartGate()
    release = asyncio.Event()
    entered = asyncio.Event()

    async def long_operation() -> None:
        async with gate.passage(10.0, "find"):
            entered.set()
            await release.wait()

    task = asyncio.create_task(long_operation())
    await entered.wait()
    closing = asyncio.create_task(gate.close(drain=10.0))
    await asyncio.sleep(0.05)
    assert not closing.done()  # still draining
    release.set()
    assert await closing and gate.undrained == 0
    await task
    gate.reopen()


async def test_a_drain_that_does_not_end_gives_up_and_says_so() -> None:
    gate = RestartGate()
    async with gate.passage(10.0, "find"):
        assert not await gate.close(drain=0.05)
    assert gate.undrained == 1
    gate.reopen()


async def test_statements_of_a_passed_transaction_and_its_tasks_never_wait() -> None:
    gate = RestartGate()
    async with gate.passage(10.0, "transaction"):
        closing = asyncio.create_task(gate.close(drain=10.0))
        await asyncio.sleep(0)
        assert gate.closed

        async def statement() -> str:
            async with gate.passage(0.01, "update"):
                return "done"

        assert await statement() == "done"
        assert await asyncio.gather(statement(), statement()) == ["done", "done"]
        assert gate.waited == 0
    assert await closing
    gate.reopen()


async def test_a_task_started_inside_a_passage_waits_once_the_passage_ended() -> None:
    gate = RestartGate()
    started: list[asyncio.Task[None]] = []
    go = asyncio.Event()

    async def later() -> None:
        await go.wait()
        async with gate.passage(0.05, "get"):
            pass

    async with gate.passage(10.0, "transaction"):
        started.append(asyncio.create_task(later()))
    await gate.close(drain=1.0)
    go.set()
    with pytest.raises(LakeUnavailable) as refused:
        await started[0]
    assert refused.value.details == {"verb": "get", "cause": "planned-restart"}
    gate.reopen()


async def test_a_wait_past_its_bound_is_lake_unavailable() -> None:
    gate = RestartGate()
    await gate.close(drain=1.0)
    with pytest.raises(LakeUnavailable) as refused:
        async with gate.passage(0.05, "count"):
            pass
    assert refused.value.code == "lake-unavailable"
    assert refused.value.details["cause"] == "planned-restart"


async def test_a_long_passage_is_counted_while_it_lasts() -> None:
    gate = RestartGate()
    async with gate.passage(600.0, "find", long=True):
        assert gate.long_inflight == 1
        async with gate.passage(10.0, "get"):  # inside it: not another long one
            assert gate.long_inflight == 1
    async with gate.passage(10.0, "get"):
        assert gate.long_inflight == 0
    assert gate.long_inflight == 0


async def test_a_wait_lasts_as_long_as_the_restart_may() -> None:
    gate = RestartGate()
    assert await gate.close(drain=1.0, bound=0.3)
    with pytest.raises(LakeUnavailable):  # 0.05 s of its own, then the restart's 0.3 s
        await gate.wait_open(0.05, "get")
    gate.reopen()
    assert await gate.close(drain=1.0, bound=30.0)
    waiting = asyncio.create_task(gate.wait_open(0.01, "get"))
    await asyncio.sleep(0.1)
    assert not waiting.done()  # past its own 0.01 s: the restart may take 30
    gate.reopen()
    await waiting
