"""How kinflow's clients talk to each kind of lake (kinflow/storage/connect.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pymongo.asynchronous.client_session import AsyncClientSession

from kinflow.storage.connect import make_client, open_lake
from tests.lake.test_memory_guard import _settings

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
