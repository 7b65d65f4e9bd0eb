"""Stop work nobody waits for: cancel a resolver's coroutine when its HTTP client leaves.

Starlette does not cancel a request handler when the client disconnects, so a
heavy GROQ query would run on for a client that hung up. Once the body is
read, the next ASGI ``receive`` only answers ``http.disconnect``: a watcher
waits for it and cancels the work, and cancelling the work cancels the
query's budget (``kinflow.groq.store.off_loop``). Over a websocket the
transport already cancels an operation when its client completes it or goes
away, so nothing is watched there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from starlette.requests import Request

from kinflow.groq import GroqCancelled

T = TypeVar("T")


async def unless_disconnected(request: Any, work: Awaitable[T]) -> T:
    """Await ``work``; cancel it if the HTTP client behind ``request`` goes away first."""
    if not isinstance(request, Request):
        return await work
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task.done() or watcher.exception() is not None:  # no disconnect seen: keep on
            return await task
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise GroqCancelled("the client went away before the result was ready")
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return
