"""How kinflow's clients talk to each kind of lake (kinflow/storage/connect.py)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from pymongo.asynchronous.client_session import AsyncClientSession

from kinflow.storage.connect import make_client, open_lake
from tests.lake.test_memory_guard import _settings
from tests.reliability.fault_proxy import FaultPlan, FaultProxy

pytestmark = pytest.mark.lake


def test_a_mongodb_lake_keeps_retryable_writes(data_dir: Path) -> None:
    client = make_client("mongodb://db.invalid:27017/", _settings(data_dir))  # never dialled
    assert client.options.retry_writes is True


@pytest.mark.skipif(bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")), reason="embedded lake only")
async def test_the_embedded_lake_gets_plain_writes_and_transactions_still_commit(
    data_dir: Path,
) -> None:
    """The daemon scans its retryable-write records on every such write: kinflow sends none."""
    connection = await open_lake(_settings(data_dir))
    lake = connection.lake
    try:
        assert lake.client.options.retry_writes is False
        await lake.collection().insert_one({"_id": "plain", "n": 1})

        async def bump(session: AsyncClientSession) -> None:
            await lake.collection().update_one({"_id": "plain"}, {"$inc": {"n": 1}},
                                               session=session)

        await lake.transaction(bump)
        assert (await lake.collection().find_one({"_id": "plain"}) or {}).get("n") == 2
    finally:
        await connection.close()


@pytest.mark.skipif(bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")), reason="embedded lake only")
async def test_a_connection_the_lake_dropped_for_idleness_is_never_reused(
    lake_uri: str, data_dir: Path,
) -> None:
    """After a burst the pool keeps connections nobody uses; once the lake has closed
    them, the next burst must not send its plain writes down them (a client that kept
    them, ``max_idle_seconds=60``, fails here with "connection closed"). The relay
    closes them after 1.5 s of silence, as the daemon does after 300 s."""
    proxy = FaultProxy(int(lake_uri.rsplit(":", 1)[1].split("/")[0]), FaultPlan(idle=1.5),
                       seed=0)
    proxy.enabled = False  # no armed faults: the idle cut alone
    port = await proxy.start()
    uri = f"mongodb://127.0.0.1:{port}/?directConnection=true"
    client = make_client(uri, _settings(data_dir), embedded=True, max_idle_seconds=0.5)
    notes = client["kinflow_idle"]["notes"]
    try:
        for burst in range(3):
            await asyncio.gather(*(notes.insert_one({"burst": burst, "n": n}) for n in range(6)))
            await asyncio.sleep(2.0)  # every pooled connection outlives the lake's patience
        assert await notes.count_documents({}) == 18
    finally:
        await client.drop_database("kinflow_idle")
        await client.close()
        await proxy.stop()
