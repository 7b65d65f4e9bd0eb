"""Websocket frames that are not the protocol's, and goodbyes, logged as one line each.

Reloading the inspector or GraphiQL closes the page's websocket while a
subscription may be sending its next event. Strawberry's graphql-transport-ws
handler then logs "Exception in worker task" with a ``WebSocketDisconnected``
traceback for what is a normal goodbye; this handler logs one debug line
instead and leaves every other exception to strawberry's logging.

A frame that is valid JSON but not a message object (``5``, ``[]``,
``null``, a ``type`` that is not a string, a ``subscribe`` without a string
``id``) reached strawberry's dispatch and raised there, one traceback per
frame from an unauthenticated socket. Both protocols' handlers now check the
frame's shape first and close the socket with 4400 and one short log line.
"""

from __future__ import annotations

import logging
from typing import Any

from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)

log = logging.getLogger("kinflow.api")

#: the close code both protocols use for a frame that is not one of theirs
MALFORMED_FRAME = 4400

#: message types whose ``id`` must be a string (an operation's key)
_NEEDS_ID = frozenset({"subscribe", "complete", "start", "stop"})


def frame_problem(message: Any) -> str | None:
    """Why a parsed websocket frame is not a protocol message, else ``None``."""
    if not isinstance(message, dict):
        return f"a frame must be a JSON object, not {type(message).__name__}"
    kind = message.get("type")
    if not isinstance(kind, str):
        return "a frame's type must be a string"
    if kind in _NEEDS_ID and not isinstance(message.get("id"), str):
        return f"a {kind[:32]} frame needs a string id"
    payload = message.get("payload")
    if payload is not None and not isinstance(payload, dict):
        return f"a {kind[:32]} frame's payload must be an object"
    return None


async def refuse_frame(websocket: Any, problem: str) -> None:
    """Close the socket with 4400, logging one line (no traceback, no frame content)."""
    log.info("websocket closed (%d): %s", MALFORMED_FRAME, problem)
    await websocket.close(code=MALFORMED_FRAME, reason=problem[:120])


class CheckedFrames:
    """A protocol handler mixin: a malformed frame is refused before the protocol's dispatch."""

    websocket: Any

    async def handle_message(self, message: Any) -> None:
        problem = frame_problem(message)
        if problem is not None:
            await refuse_frame(self.websocket, problem)
            return
        await super().handle_message(message)  # type: ignore[misc]


class QuietTransportWSHandler(CheckedFrames, BaseGraphQLTransportWSHandler[Any, Any]):
    """Strawberry's handler, quiet about a client that went away."""

    async def handle_task_exception(self, error: Exception) -> None:
        if isinstance(error, WebSocketDisconnected):
            log.debug("a websocket closed while an event was being sent to it")
            return
        await super().handle_task_exception(error)
