"""The session ledger: a process records its sessions; survivors end a dead one's."""

from __future__ import annotations

import subprocess

import pytest

from kinflow.storage import Lake
from kinflow.storage.database import side_name
from kinflow.storage.sessions import PROCESS_TYPE, SessionLedger

pytestmark = pytest.mark.lake


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


async def _records(lake: Lake) -> dict[str, dict[str, object]]:
    docs = await lake.find({"_type": PROCESS_TYPE}, dataset=side_name(lake.default_dataset,
                                                                         "engine"))
    return {str(d["_id"]): d for d in docs}


async def test_a_transaction_records_its_session_once_and_close_drops_the_record(
        lake: Lake) -> None:
    ledger = lake.sessions = SessionLedger(lake)

    async def write(session: object) -> None:
        await lake.create({"_id": "a", "_type": "t"}, session=session)  # type: ignore[arg-type]

    await lake.transaction(write)
    await lake.transaction(lambda session: lake.get("a", session=session))
    records = await _records(lake)
    assert list(records) == [ledger.id]
    assert len(records[ledger.id]["lsids"]) == 1  # type: ignore[arg-type]
    assert await SessionLedger(lake).reap() == 0  # alive: nothing ended
    await ledger.close()
    assert await _records(lake) == {}


async def test_dead_processes_are_reaped_live_ones_kept(lake: Lake) -> None:
    survivor = SessionLedger(lake, stale=30.0)
    side = side_name(lake.default_dataset, "engine")
    await lake.ensure_dataset(side)
    fresh, stale = "2999-01-01T00:00:00.000Z", "2000-01-01T00:00:00.000Z"
    for doc_id, host, pid, beat in [
        ("dead-here", survivor.host, _dead_pid(), fresh),  # same host, pid gone
        ("alive-elsewhere", "elsewhere", 1, fresh),  # another host, beating
        ("silent-elsewhere", "elsewhere", 1, stale),  # another host, no heartbeat
    ]:
        await lake.collection(side).insert_one({"_id": doc_id, "_type": PROCESS_TYPE,
                                                "host": host, "pid": pid, "heartbeatAt": beat,
                                                "lsids": []})
    assert await survivor.reap() == 2
    assert list(await _records(lake)) == ["alive-elsewhere"]
