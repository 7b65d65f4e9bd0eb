"""``kinflow tail``: instance changes as they commit, like ``kubectl get -w``.

On the lake it follows the change hub directly; with ``--url`` it runs the
``instancesChanged`` subscription over the server's websocket
(``graphql-transport-ws``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from kinflow.engine.state import INSTANCE_TYPE
from kinflow.errors import ServerUnreachable
from kinflow.schema.hubs import instance_topics, parent_topic
from kinflow.settings import Settings
from kinflow.storage import ALL, ChangeHub, open_lake


def status_of(doc: Mapping[str, Any]) -> str:
    if doc.get("abortedAt"):
        return "ABORTED"
    return "COMPLETED" if doc.get("completedAt") else "ACTIVE"


def event_line(at: str, kind: str, view: Mapping[str, Any]) -> str:
    return (
        f"{at}  {kind:<9} {view['id']}  {view['definition']}  "
        f"stage={view['currentStage']}  {view['status']}"
    )


async def local_events(parent: str | None) -> AsyncIterator[str]:
    connection = await open_lake(Settings())
    hub = ChangeHub(connection.lake, topic_functions=[instance_topics])
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
            yield event_line(str(doc.get("_updatedAt", "")), event.kind, view)
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
                    yield event_line(data["at"], data["kind"], data["instance"])
                elif message.get("type") in ("error", "complete"):
                    yield f"subscription ended: {message.get('payload')}"
                    return
    except (OSError, WebSocketException) as exc:
        raise ServerUnreachable(f"cannot reach {ws_url}: {exc}", url=ws_url) from exc
