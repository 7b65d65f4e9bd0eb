"""The snapshot gate: later snapshots wait while others hold the budget, then are refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kinflow.errors import TooManyStreams
from kinflow.schema.snapshot_gate import READS_AT_ONCE, SnapshotGate


def _loader(count: int) -> Any:
    async def load(session: Any) -> list[int]:
        return list(range(count))

    return load


async def test_a_snapshot_waits_while_the_budget_is_held_and_runs_once_freed() -> None:
    gate = SnapshotGate(max_documents=10, wait=5.0)
    first = await gate.read(_loader(10), None)
    assert gate.held == 10
    second = asyncio.ensure_future(gate.read(_loader(3), None))
    await asyncio.sleep(0.05)
    assert not second.done(), "admitted while the budget was full"
    gate.release(len(first))
    assert len(await second) == 3 and gate.held == 3


async def test_a_snapshot_not_admitted_in_time_is_too_many_streams() -> None:
    gate = SnapshotGate(max_documents=5, wait=0.1)
    await gate.read(_loader(5), None)
    with pytest.raises(TooManyStreams) as refused:
        await gate.read(_loader(1), None)
    assert refused.value.details["limit"] == "snapshot-documents"
    assert gate.held == 5


async def test_reads_in_progress_are_bounded_whatever_their_size() -> None:
    gate = SnapshotGate(max_documents=1000, wait=5.0)
    release = asyncio.Event()
    started = 0

    async def slow(session: Any) -> list[int]:
        nonlocal started
        started += 1
        await release.wait()
        return [1]

    reads = [asyncio.ensure_future(gate.read(slow, None)) for _ in range(READS_AT_ONCE + 3)]
    await asyncio.sleep(0.05)
    assert started == READS_AT_ONCE
    release.set()
    await asyncio.gather(*reads)
    assert started == READS_AT_ONCE + 3 and gate.held == READS_AT_ONCE + 3


async def test_a_failed_read_holds_nothing() -> None:
    gate = SnapshotGate(max_documents=5, wait=1.0)

    async def broken(session: Any) -> list[int]:
        raise RuntimeError("lake gone")

    with pytest.raises(RuntimeError):
        await gate.read(broken, None)
    assert gate.held == 0
    assert len(await gate.read(_loader(2), None)) == 2
