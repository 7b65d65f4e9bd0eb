"""The embedded daemon's memory budget: it reaches the daemon, and past it the daemon is restarted.

SecantusDB leaks memory on every transaction (see kinflow/storage/memory_guard.py);
the budget is enforced by restarting the daemon. Memory figures belong to
bench/lake_memory.py and docs/performance.md: these tests check the wiring
(setting -> config file; budget passed -> daemon stopped by its owner only,
started again on the same port by the keeper, data and writes intact).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from pydantic import ValidationError
from pymongo.errors import AutoReconnect

from kinflow.errors import LakeUnavailable
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import open_lake
from kinflow.storage.embedded import EmbeddedLake, pid_alive
from kinflow.storage.memory_guard import MemoryGuard, cache_mib_for, rss_mib

EMBEDDED_ONLY = pytest.mark.skipif(bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")),
                                   reason="embedded lake only")
pytestmark = pytest.mark.lake


def _settings(data_dir: Path, **extra: object) -> Settings:
    return Settings(_env_file=None, mongodb_uri=None, data_dir=data_dir,
                    database="memguard", embedded_sync_on_commit=False, **extra)


def test_the_budget_is_zero_or_at_least_512() -> None:
    assert Settings(_env_file=None, embedded_memory_mb=0).embedded_memory_mb == 0
    assert Settings(_env_file=None).embedded_memory_mb == 1024
    with pytest.raises(ValidationError):
        Settings(_env_file=None, embedded_memory_mb=300)
    assert [cache_mib_for(b) for b in (0, 512, 1024, 4096)] == [256, 256, 256, 1024]


@EMBEDDED_ONLY
async def test_the_budget_sets_the_daemon_cache(data_dir: Path) -> None:
    connection = await open_lake(_settings(data_dir, embedded_memory_mb=4096))
    try:
        config = (data_dir / "secantusd.toml").read_text()
        assert 'cache_size = "1024M"' in config and "[oplog]" in config
        assert connection.guard is not None and connection.guard.budget_mib == 4096
    finally:
        await connection.close()


async def _until(condition: object, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


@EMBEDDED_ONLY
async def test_past_its_budget_the_daemon_restarts_on_its_port_and_writes_go_on(
    data_dir: Path,
) -> None:
    connection = await open_lake(_settings(data_dir))
    guard, keeper, embedded = connection.guard, connection.keeper, connection.embedded
    assert guard is not None and keeper is not None and embedded is not None
    try:
        lake = connection.lake
        await lake.create({"_id": "before", "_type": "note"})
        first_pid, port = embedded.pid, embedded.port
        assert first_pid is not None and (rss_mib(first_pid) or 0) > 0

        # a process that merely uses the daemon never stops it, whatever its budget
        guest = EmbeddedLake(data_dir)
        guest.start()
        assert not guest.owned and not MemoryGuard(guest, budget_mib=1).check()
        assert pid_alive(first_pid)

        writes = {"done": 0, "refused": 0}
        writing = True

        async def keep_writing() -> None:  # transactions in flight across the restart
            n = 0
            while writing:
                n += 1

                async def upsert(session: object, n: int = n) -> None:
                    await lake.replace({"_id": f"w{n % 5}", "_type": "note", "n": n},
                                       expected_rev=None, session=session)

                try:
                    await lake.transaction(upsert, verb="putDocument")
                    writes["done"] += 1
                except LakeUnavailable:
                    writes["refused"] += 1

        writer = asyncio.create_task(keep_writing())
        guard.budget_mib = 1  # every daemon is past this: the next look stops it
        await _until(lambda: guard.recycles >= 1)
        guard.budget_mib = 1 << 20
        await _until(lambda: embedded.pid != first_pid and keeper.up)
        assert embedded.port == port and embedded.owned and not pid_alive(first_pid)
        done = writes["done"]
        await _until(lambda: writes["done"] > done + 3)  # writes go on after the restart
        writing = False
        await writer
        assert writes["refused"] == 0, writes

        async def write(session: object) -> None:
            await lake.create({"_id": "after", "_type": "note"}, session=session)

        await lake.transaction(write)
        assert await lake.get("before") is not None and await lake.get("after") is not None
        assert keeper.status.restarts >= 1
        print(f"daemon {first_pid} -> {embedded.pid} on port {port}; {writes['done']} "
              "transactions across the restart, none refused; "
              f"RSS now {rss_mib(embedded.pid or 0) or 0:.0f} MiB")
    finally:
        await connection.close()


async def test_a_transaction_cut_off_by_a_restart_is_retried_not_refused(lake: Lake) -> None:
    """A statement whose connection a restarting daemon closed is retried by the transaction.

    pymongo labels such an error TransientTransactionError; the lake used to
    turn it into lake-unavailable inside the callback, so the transaction never
    retried and the caller was refused (8 of 1,000 rewrites across 20 restarts
    in bench/lake_memory.py).
    """
    attempts = 0

    async def write(session: object) -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            cut = AutoReconnect("127.0.0.1:1: connection is already closed")
            cut._add_error_label("TransientTransactionError")
            with lake.bounded("putDocument"):
                raise cut
        stored = await lake.replace({"_id": "cut", "_type": "note"}, expected_rev=None,
                                    session=session)
        return str(stored["_rev"])

    rev = await lake.transaction(write, verb="putDocument")
    assert attempts == 2 and (await lake.get("cut") or {}).get("_rev") == rev
