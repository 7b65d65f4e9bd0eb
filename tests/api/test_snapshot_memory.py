"""A live subscription holds none of its snapshot once the snapshot's frames went out.

The snapshot budget (kinflow/schema/snapshot_gate.py) counts a snapshot's
documents until its frames are sent, then frees them. A subscription that
still referenced its snapshot afterwards (the generator's loop variable, the
hub iterator's) kept up to a thousand documents each for as long as it stayed
open, outside the budget: two viewer sockets of 100 ``instancesChanged`` each
took the API past a gigabyte. The test counts the documents still alive in
the process while the subscriptions stay open.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest
from starlette.testclient import TestClient

from kinflow.core.state import INSTANCE_TYPE
from tests.api.conftest import data
from tests.api.test_mutations import KITCHEN, deploy, start

pytestmark = pytest.mark.lake

INSTANCES = 30
SUBSCRIPTIONS = 8


def _live_instance_documents(ids: set[str]) -> list[str]:
    """The ids of documents of ``ids`` alive in this process (the app runs in a thread of it)."""
    gc.collect()
    return [obj["_id"] for obj in gc.get_objects()
            if type(obj) is dict and obj.get("_type") == INSTANCE_TYPE
            and obj.get("_id") in ids]  # fmt: skip


def _held(client: TestClient) -> int:
    count: int = client.get("/healthz").json()["hub"]["snapshotDocuments"]
    return count


def _subscribe_all(socket: Any, query: str, frames: int) -> list[dict[str, Any]]:
    socket.send_json({"type": "connection_init"})
    assert socket.receive_json()["type"] == "connection_ack"
    for n in range(SUBSCRIPTIONS):
        socket.send_json({"type": "subscribe", "id": str(n), "payload": {"query": query}})
    received = [socket.receive_json() for _ in range(frames)]
    # the subscriptions asked for their next event once a ping after them is answered
    socket.send_json({"type": "ping"})
    while socket.receive_json()["type"] != "pong":
        pass
    return received


def test_open_instance_subscriptions_keep_no_snapshot_documents(client: TestClient) -> None:
    data(deploy(client, KITCHEN))
    ids = {start(client, id=f"snap-{n}")["instance"]["id"] for n in range(INSTANCES)}
    query = "subscription { instancesChanged { kind instance { id } } }"
    with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as socket:
        frames = _subscribe_all(socket, query, SUBSCRIPTIONS * INSTANCES)
        assert {f["type"] for f in frames} == {"next"}
        assert {f["payload"]["data"]["instancesChanged"]["instance"]["id"]
                for f in frames} == ids  # fmt: skip
        held = _held(client)
        for _ in range(100):  # a hang guard: the last frame's release follows it at once
            if held == 0:
                break
            time.sleep(0.1)
            held = _held(client)
        assert held == 0, "the snapshot budget still counts documents already sent"
        # every subscription is still open; the last document each sent may still be
        # referenced (by the frame machinery), and the hub's last change: no snapshot
        live = set(_live_instance_documents(ids))
        assert len(live) <= 2, f"open subscriptions hold {len(live)} of {INSTANCES} documents"
        # and the subscriptions still serve changes after their snapshot
        start(client, id="snap-late")
        late = [socket.receive_json() for _ in range(SUBSCRIPTIONS)]
        assert {f["payload"]["data"]["instancesChanged"]["instance"]["id"]
                for f in late} == {"snap-late"}  # fmt: skip

