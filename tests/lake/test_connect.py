"""How kinflow's clients talk to each kind of lake (kinflow/storage/connect.py)."""

from __future__ import annotations

import asyncio
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


HELLOS = (b"hello\x00", b"isMaster\x00", b"ismaster\x00")


class IdleCuttingProxy:
    """A TCP relay to the lake that drops a client connection silent for ``idle`` seconds,
    as the embedded daemon does after 300 s (so the test need not wait five minutes).

    Only connections that have carried a command other than ``hello`` are cut: the
    driver's monitor waits on a held ``hello`` without sending, which the daemon, busy
    answering it, never counts as idle."""

    def __init__(self, target_port: int, idle: float) -> None:
        self.target_port, self.idle = target_port, idle
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _relay(self, client_in: asyncio.StreamReader,
                     client_out: asyncio.StreamWriter) -> None:
        lake_in, lake_out = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def requests() -> None:
            commands = False
            while True:
                try:
                    async with asyncio.timeout(self.idle if commands else None):
                        data = await client_in.read(65536)
                except TimeoutError:
                    return
                if not data:
                    return
                commands = commands or not any(hello in data for hello in HELLOS)
                lake_out.write(data)
                await lake_out.drain()

        async def replies() -> None:
            while data := await lake_in.read(65536):
                client_out.write(data)
                await client_out.drain()

        relay = asyncio.ensure_future(replies())
        try:
            await requests()
        finally:
            relay.cancel()
            for writer in (client_out, lake_out):
                writer.close()


@pytest.mark.skipif(bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")), reason="embedded lake only")
async def test_a_connection_the_lake_dropped_for_idleness_is_never_reused(
    lake_uri: str, data_dir: Path,
) -> None:
    """After a burst the pool keeps connections nobody uses; once the lake has closed
    them, the next burst must not send its plain writes down them (a client that kept
    them, ``max_idle_seconds=60``, fails here with "connection closed")."""
    proxy = IdleCuttingProxy(int(lake_uri.rsplit(":", 1)[1].split("/")[0]), idle=1.5)
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
