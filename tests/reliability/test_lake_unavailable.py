"""A lake that does not answer is ``lake-unavailable``, within the operation timeout.

Before: a read or write against a dead lake raised pymongo's own
``ServerSelectionTimeoutError`` (an ``internal-error`` for API clients), and
a transaction retried a network failure up to 12 times, each attempt with a
full operation timeout of its own. Now every lake call, and the error shaping
for whatever reaches the API past it, types it; a transaction's attempts
share one deadline. The keeper tests run against a real daemon: killed, it
is started again on its port and the same client carries on; when it cannot
be started again the keeper gives up with a clear error.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from graphql import GraphQLError
from pymongo.errors import ServerSelectionTimeoutError

from kinflow.errors import ConfigurationError, LakeUnavailable
from kinflow.schema.errors import shape_error
from kinflow.settings import Settings
from kinflow.storage import keeper as keeper_module
from kinflow.storage.connect import make_client
from kinflow.storage.embedded import EmbeddedLake
from kinflow.storage.keeper import LakeKeeper
from kinflow.storage.lake import Lake
from tests.support import free_port

pytestmark = [
    pytest.mark.lake,  # starts a daemon of its own
    pytest.mark.skipif(bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")),
                       reason="embedded lake only"),
]
TIMEOUT = 1.5


def dead_lake() -> Lake:
    uri = f"mongodb://127.0.0.1:{free_port()}/?directConnection=true"
    settings = Settings(mongodb_uri=uri, operation_timeout=TIMEOUT)
    return Lake(make_client(uri, settings), "kinflow", operation_timeout=TIMEOUT)


async def test_every_lake_call_on_a_dead_lake_is_lake_unavailable_in_time() -> None:
    lake = dead_lake()

    async def write(session: Any) -> None:
        await lake.create({"_id": "x", "_type": "note"}, session=session)

    calls = {
        "get": lambda: lake.get("x"),
        "find": lambda: lake.find({"_type": "note"}),
        "count": lambda: lake.count({}),
        "create": lambda: lake.create({"_id": "x", "_type": "note"}),
        "update": lambda: lake.update("x", {"$set": {"a": 1}}),
        "delete": lambda: lake.delete("x"),
        "transaction": lambda: lake.transaction(write, verb="write"),
    }
    try:
        for name, call in calls.items():
            began = time.monotonic()
            with pytest.raises(LakeUnavailable) as refused:
                await call()
            took = time.monotonic() - began
            print(f"{name}: lake-unavailable after {took:.2f} s")
            assert refused.value.code == "lake-unavailable"
            assert took < TIMEOUT + 3, f"{name} waited {took:.1f} s"
    finally:
        await lake.close()


def test_a_raw_connection_failure_reaching_the_api_is_typed() -> None:
    raw = ServerSelectionTimeoutError("127.0.0.1:1: [Errno 111] Connection refused")
    shaped = shape_error(GraphQLError("boom", original_error=raw))
    assert shaped.extensions is not None
    assert shaped.extensions["code"] == "lake-unavailable"


async def test_the_keeper_restarts_a_killed_daemon_on_its_port(tmp_path: Path) -> None:
    embedded = EmbeddedLake(tmp_path / "data")  # synced commits: the kill loses nothing
    uri = embedded.start()
    settings = Settings(mongodb_uri=uri, operation_timeout=10.0)
    lake = Lake(make_client(uri, settings), "kinflow", operation_timeout=10.0)
    keeper = LakeKeeper(embedded, lake, lambda u: make_client(u, settings), interval=0.1)
    try:
        await lake.create({"_id": "before", "_type": "note"})
        keeper.start()
        port, old = embedded.port, embedded.pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        began = time.monotonic()
        while keeper.up:  # as soon as the daemon it started has exited
            assert time.monotonic() - began < 5, "the keeper never noticed"
            await asyncio.sleep(0.01)
        while embedded.pid == old or not keeper.up:
            assert time.monotonic() - began < 30, "the keeper never restarted the daemon"
            await asyncio.sleep(0.05)
        print(f"daemon restarted in {time.monotonic() - began:.2f} s")
        assert embedded.port == port and embedded.owned and embedded.pid != old
        assert keeper.report()["restarts"] == 1
        await lake.create({"_id": "after", "_type": "note"})  # the same client carries on
        assert {d["_id"] for d in await lake.find({"_type": "note"})} == {"before", "after"}
    finally:
        await keeper.stop()
        await lake.close()
        embedded.stop()


async def test_a_keeper_that_cannot_restart_the_daemon_gives_up_clearly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    embedded = EmbeddedLake(tmp_path / "data", sync_on_commit=False)
    uri = embedded.start()
    settings = Settings(mongodb_uri=uri, operation_timeout=5.0)
    lake = Lake(make_client(uri, settings), "kinflow", operation_timeout=5.0)
    stopped = asyncio.Event()

    def cannot(port: int) -> Any:
        raise ConfigurationError("the embedded lake needs the 'embedded' extra")

    keeper = LakeKeeper(embedded, lake, lambda u: make_client(u, settings), interval=0.1,
                        give_up_after=1.0, on_fatal=stopped.set)
    monkeypatch.setattr(embedded, "launch", cannot)
    monkeypatch.setattr(keeper_module, "fatal_error", None)
    try:
        keeper.start()
        assert embedded.pid is not None
        os.kill(embedded.pid, signal.SIGKILL)
        await asyncio.wait_for(stopped.wait(), 20)
        assert keeper.report()["state"] == "failed"
        assert keeper_module.fatal_error is not None
        assert "could not be restarted" in keeper_module.fatal_error
        assert "embedded' extra" in keeper_module.fatal_error
    finally:
        await keeper.stop()
        await lake.close()
        embedded.stop()


async def test_when_the_port_is_taken_the_lake_moves_and_the_others_follow(
        tmp_path: Path) -> None:
    """The owner restarts the daemon on a new port; another process follows ``lake.json``."""
    data = tmp_path / "data"
    owner = EmbeddedLake(data)
    uri = owner.start()
    follower = EmbeddedLake(data)
    assert follower.start() == uri and not follower.owned  # reused through lake.json
    settings = Settings(mongodb_uri=uri, operation_timeout=10.0)
    lakes = [Lake(make_client(uri, settings), "kinflow", operation_timeout=10.0)
             for _ in range(2)]
    keepers = [LakeKeeper(e, lake, lambda u: make_client(u, settings), interval=0.1)
               for e, lake in zip((owner, follower), lakes, strict=True)]
    port, pid = owner.port, owner.pid
    assert port is not None and pid is not None
    squatter = socket.socket()
    try:
        await lakes[1].create({"_id": "before", "_type": "note"})
        for keeper in keepers:
            keeper.start()
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        while owner.process_running():
            assert time.monotonic() - killed < 5
            await asyncio.sleep(0.01)
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))  # something else takes the port meanwhile
        squatter.listen()
        began = time.monotonic()
        while follower.port == port or not keepers[1].up:
            assert time.monotonic() - began < 60, "the follower never moved"
            await asyncio.sleep(0.05)
        print(f"moved from port {port} to {owner.port} in {time.monotonic() - began:.2f} s")
        assert owner.owned and owner.port == follower.port != port
        assert keepers[1].report()["follows"] >= 1
        await lakes[1].create({"_id": "after", "_type": "note"})  # on its new client
        assert {d["_id"] for d in await lakes[0].find({"_type": "note"})} == {"before", "after"}
    finally:
        squatter.close()
        for keeper in keepers:
            await keeper.stop()
        for lake in lakes:
            await lake.close()
        owner.stop()
