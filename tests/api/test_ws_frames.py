"""A websocket frame that is not a protocol message closes the socket with 4400, logged once.

Valid JSON that is not a message object (``5``, ``[]``, ``null``) used to
raise inside strawberry's dispatch: a full traceback per frame, from a
socket that never authenticated (docs/security.md, "Websockets").
"""

from __future__ import annotations

import logging

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from kinflow.http.ws_quiet import MALFORMED_FRAME, frame_problem

pytestmark = pytest.mark.lake

FRAMES = ["5", "[]", "null", '"hello"', '{"type": 7}', '{"type": "subscribe", "id": {"a": 1}}',
          '{"type": "connection_init", "payload": [1]}']  # fmt: skip


@pytest.mark.parametrize("protocol", ["graphql-transport-ws", "graphql-ws"])
def test_a_malformed_first_frame_closes_4400_with_one_short_line(
    client: TestClient, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for frame in FRAMES:
        with client.websocket_connect("/graphql", subprotocols=[protocol]) as socket:
            socket.send_text(frame)
            with pytest.raises(WebSocketDisconnect) as closed:
                socket.receive_json()
            assert closed.value.code == MALFORMED_FRAME, frame
    assert not [r for r in caplog.records if r.exc_info], "no traceback for a malformed frame"
    lines = [r.getMessage() for r in caplog.records if "websocket closed (4400)" in r.getMessage()]
    assert len(lines) == len(FRAMES) and all(len(line) < 200 for line in lines)


def test_well_formed_frames_pass_the_check() -> None:
    assert frame_problem({"type": "connection_init", "payload": {"authToken": "x"}}) is None
    assert frame_problem({"type": "subscribe", "id": "1", "payload": {"query": "{a}"}}) is None
    assert frame_problem({"type": "ping"}) is None
    assert frame_problem({"type": "start", "id": "2"}) is None
    assert frame_problem({"type": "stop"}) == "a stop frame needs a string id"
