"""Websockets per client address and per token are capped (kinflow/http/socket_caps.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from kinflow.http.app import create_app
from kinflow.http.socket_caps import TOO_MANY_SOCKETS
from tests.api.conftest import TOKENS, make_settings

pytestmark = pytest.mark.lake

CAP = 3


@pytest.fixture
def capped(lake_uri: str, database: str) -> Iterator[TestClient]:
    settings = make_settings(lake_uri, database, max_sockets_per_client=CAP, api_tokens=TOKENS)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _init(socket: object, token: str) -> dict[str, object]:
    socket.send_json({"type": "connection_init",  # type: ignore[attr-defined]
                      "payload": {"authorization": f"Bearer {token}"}})  # fmt: skip
    reply: dict[str, object] = socket.receive_json()  # type: ignore[attr-defined]
    return reply


def test_a_socket_past_the_address_cap_is_closed_4429_and_closing_frees_a_place(
    capped: TestClient,
) -> None:
    with ExitStack() as open_sockets:
        for _ in range(CAP):
            socket = open_sockets.enter_context(
                capped.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]))
            assert _init(socket, "view-token-for-tests")["type"] == "connection_ack"
        with capped.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as extra:
            with pytest.raises(WebSocketDisconnect) as closed:
                extra.receive_json()
            assert closed.value.code == TOO_MANY_SOCKETS
    for _ in range(CAP * 3):  # closed sockets give their places back, address and token
        with capped.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as again:
            assert _init(again, "view-token-for-tests")["type"] == "connection_ack"

