"""``kinflow tail``: instance changes as they commit, like ``kubectl get -w``.

On the lake it follows the change hub directly; with ``--url`` it runs the
``instancesChanged`` subscription over the server's websocket
(``graphql-transport-ws``). Both modes print the same lines through
``Lines``: one per change of an instance's stage or status (a commit that
moves neither, such as the parent stamping a finished child, prints
nothing), named ``changed``, ``completed`` or ``aborted``, and no snapshot
of what existed before the tail started.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from typing import Any

from kinflow.core.readmodel import instance_status
from kinflow.core.state import INSTANCE_TYPE
from kinflow.errors import ServerUnreachable
from kinflow.schema.hubs import instance_topics, parent_topic
from kinflow.settings import Settings
from kinflow.storage import ALL, ChangeHub, open_lake


def status_of(doc: Mapping[str, Any]) -> str:
    """The read model's status as the API's enum name (what the remote mode prints)."""
    return instance_status(doc).upper()


def event_line(at: str, kind: str, view: Mapping[str, Any]) -> str:
    return (
        f"{at}  {kind:<9} {view['id']}  {view['definition']}  "
        f"stage={view['currentStage']}  {view['status']}"
    )


class Lines:
    """Turns instance states into tail lines, one per change of stage or status."""

    def __init__(self, remember: int = 100_000) -> None:
        self.seen: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
        self.remember = remember

    def _state(self, view: Mapping[str, Any]) -> tuple[Any, Any] | None:
        state = (view["currentStage"], view["status"])
        before = self.seen.pop(view["id"], None)
        self.seen[view["id"]] = state
        if len(self.seen) > self.remember:
            self.seen.popitem(last=False)
        return before

    def known(self, view: Mapping[str, Any]) -> None:
        """An instance as it was when the tail started (printed by neither mode)."""
        self._state(view)

    def line(self, at: str, view: Mapping[str, Any]) -> str | None:
        before = self._state(view)
        if before == (view["currentStage"], view["status"]):
            return None
        finished = view["status"] != "ACTIVE" and (before is None or before[1] != view["status"])
        return event_line(at, str(view["status"]).lower() if finished else "changed", view)


async def local_events(parent: str | None) -> AsyncIterator[str]:
    connection = await open_lake(Settings())
    hub = ChangeHub(connection.lake, topic_functions=[instance_topics])
    lines = Lines()
    try:
        await hub.start()
        subscription = await hub.subscribe(parent_topic(parent) if parent else ALL)
        async for event in subscription:
            if event.kind == "resync":
                yield "-- fell behind; some events were skipped --"
                subscription = await hub.subscribe(parent_topic(parent) if parent else ALL)
                continue
            doc = event.document
            if not doc or doc.get("_type") != INSTANCE_TYPE:
                continue
            view = {
                "id": doc["_id"],
                "definition": doc.get("definition"),
                "currentStage": doc.get("currentStage"),
                "status": status_of(doc),
            }
            line = lines.line(str(doc.get("_updatedAt", "")), view)
            if line is not None:
                yield line
    finally:
        await hub.stop()
        await connection.close()


SUBSCRIPTION = """subscription($w: InstanceFilter) { instancesChanged(where: $w) {
  kind at instance { id definition currentStage status } } }"""


async def remote_events(url: str, token: str | None, parent: str | None) -> AsyncIterator[str]:
    from websockets.asyncio.client import connect
    from websockets.exceptions import WebSocketException

    ws_url = url.rstrip("/").replace("http://", "ws://").replace("https://", "wss://")
    if not ws_url.endswith("/graphql"):
        ws_url += "/graphql"
    init: dict[str, Any] = {"type": "connection_init"}
    if token:
        init["payload"] = {"Authorization": f"Bearer {token}"}
    try:
        async with connect(ws_url, subprotocols=["graphql-transport-ws"]) as socket:  # type: ignore[list-item]
            await socket.send(json.dumps(init))
            await socket.recv()  # connection_ack
            variables = {"w": {"parentId": parent} if parent else None}
            lines = Lines()
            await socket.send(json.dumps({"id": "1", "type": "subscribe",
                                          "payload": {"query": SUBSCRIPTION,
                                                      "variables": variables}}))  # fmt: skip
            async for raw in socket:
                message = json.loads(raw)
                if message.get("type") == "next":
                    payload = message["payload"]
                    if payload.get("errors"):
                        yield f"error: {payload['errors'][0].get('message')}"
                        continue
                    data = payload["data"]["instancesChanged"]
                    if data["kind"] == "snapshot":
                        lines.known(data["instance"])
                        continue
                    line = lines.line(data["at"], data["instance"])
                    if line is not None:
                        yield line
                elif message.get("type") in ("error", "complete"):
                    yield f"subscription ended: {message.get('payload')}"
                    return
    except (OSError, WebSocketException) as exc:
        raise ServerUnreachable(f"cannot reach {ws_url}: {exc}", url=ws_url) from exc
