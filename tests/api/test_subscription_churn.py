"""Subscribe/complete churn leaves no subscriber registered once the socket closes.

A ``complete`` that lands while a subscription reads its snapshot cancels
the operation's task; that cancellation could be absorbed below kinflow, and
the task then waited for events for ever, still registered with the hub
(kinflow/storage/hub.py, ``_unless_cancelled``).
"""

from __future__ import annotations

import time

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data
from tests.api.test_mutations import KITCHEN, deploy, start

pytestmark = pytest.mark.lake

PAIRS = 1500


def _subscribers(client: TestClient) -> int:
    count: int = client.get("/healthz").json()["hub"]["subscribers"]
    return count


def test_churn_unregisters_every_subscription(client: TestClient) -> None:
    query = "subscription { instancesChanged { kind } }"
    assert _subscribers(client) == 0
    with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as socket:
        socket.send_json({"type": "connection_init"})
        assert socket.receive_json()["type"] == "connection_ack"
        for n in range(PAIRS):
            socket.send_json({"type": "subscribe", "id": str(n), "payload": {"query": query}})
            socket.send_json({"type": "complete", "id": str(n)})
        socket.send_json({"type": "ping"})
        while socket.receive_json()["type"] != "pong":
            pass
    left = _subscribers(client)
    for _ in range(100):  # a hang guard, not a timing: closes finish within moments
        if left == 0:
            break
        time.sleep(0.1)
        left = _subscribers(client)
    assert left == 0, f"{left} subscriptions stayed registered after the socket closed"



def test_snapshots_release_their_documents_once_sent(client: TestClient) -> None:
    """The snapshot gate's count returns to zero: each snapshot freed once its frame went out."""
    data(deploy(client, KITCHEN))
    for n in range(3):
        start(client, id=f"k-{n}")
    query = "subscription { instancesChanged { kind instance { id } } }"
    with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as socket:
        socket.send_json({"type": "connection_init"})
        assert socket.receive_json()["type"] == "connection_ack"
        for n in range(5):
            socket.send_json({"type": "subscribe", "id": str(n), "payload": {"query": query}})
        frames = [socket.receive_json() for _ in range(5 * 3)]
        assert {f["type"] for f in frames} == {"next"}
        for n in range(5):
            socket.send_json({"type": "complete", "id": str(n)})
    held = _held(client)
    for _ in range(100):  # a hang guard
        if held == 0:
            break
        time.sleep(0.1)
        held = _held(client)
    assert held == 0


def _held(client: TestClient) -> int:
    count: int = client.get("/healthz").json()["hub"]["snapshotDocuments"]
    return count
