"""A browser leaving is not an error: no traceback when a websocket closes mid-send.

Reloading the inspector or GraphiQL closes the page's websocket while a
subscription may be sending its next event. Strawberry's graphql-transport-ws
handler then logs "Exception in worker task" with a ``WebSocketDisconnected``
traceback for what is a normal goodbye; this handler logs one debug line
instead and leaves every other exception to strawberry's logging.
"""

from __future__ import annotations

import logging
from typing import Any

from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)

log = logging.getLogger("kinflow.api")


class QuietTransportWSHandler(BaseGraphQLTransportWSHandler[Any, Any]):
    """Strawberry's handler, quiet about a client that went away."""

    async def handle_task_exception(self, error: Exception) -> None:
        if isinstance(error, WebSocketDisconnected):
            log.debug("a websocket closed while an event was being sent to it")
            return
        await super().handle_task_exception(error)
