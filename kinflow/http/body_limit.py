"""The request-size limit: an ASGI middleware that refuses HTTP bodies over a byte budget.

Neither uvicorn nor strawberry bounds a request body, so without this a
20 MB POST is read into memory and parsed. A declared ``Content-Length``
over the limit is refused before a byte is read; a body without one (chunked)
is read up to the limit and refused as soon as it goes over. Refusals are
HTTP 413 with the API's error shape and code ``request-too-large``.
Websockets pass through untouched (their frames are bounded by the server).
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CODE = "request-too-large"


async def _refuse(send: Send, limit: int, received: int | None) -> None:
    details: dict[str, int] = {"limit": limit}
    if received is not None:
        details["received"] = received
    body = json.dumps({"data": None, "errors": [{
        "message": f"the request body exceeds {limit} bytes",
        "extensions": {"code": CODE, "details": details}}]}).encode()
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or []:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class RequestSizeLimit:
    """Wrap an ASGI app so no HTTP request body larger than ``max_bytes`` reaches it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _refuse(send, self.max_bytes, declared)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([], message, receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _refuse(send, self.max_bytes, None)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(chunks, None, receive), send)


def _replay(chunks: list[bytes], pending: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that hands over the buffered body once, then the real channel."""
    first: list[Message] = [{"type": "http.request", "body": b"".join(chunks),
                             "more_body": False}] if pending is None else [pending]

    async def replay() -> Message:
        if first:
            return first.pop()
        return await receive()

    return replay
