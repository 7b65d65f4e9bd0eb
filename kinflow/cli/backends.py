"""Where CLI commands run: on the lake directly, or against a running server.

Both backends offer the same coroutine methods and return plain JSON-shaped
views (the GraphQL API's shapes: ``WorkflowInstance``, ``OperationResult``),
so the commands and the renderer never care which one they talk to. Each lives
in its own module and is imported only when a command opens it: the server's
(``remote.py``) needs only the HTTP client, the lake's (``local.py``) the engine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, Protocol


class Backend(Protocol):
    remote: bool  # a server's (remote.py) rather than the lake's (local.py)

    async def deploy(self, definitions: list[Any]) -> dict[str, Any]: ...
    async def start(self, definition: str, fields: dict[str, Any],
                    instance_id: str | None) -> dict[str, Any]: ...  # fmt: skip
    async def fire(self, instance_id: str, activity: str, action: str,
                   params: dict[str, Any] | None,
                   key: str | None) -> dict[str, Any]: ...  # fmt: skip
    async def edit(self, instance_id: str, field: str, value: Any, mode: str) -> dict[str, Any]: ...
    async def abort(self, instance_id: str, reason: str | None) -> dict[str, Any]: ...
    async def cancel(self, instance_id: str, reason: str | None) -> dict[str, Any]: ...
    async def tick(self, instance_id: str) -> dict[str, Any]: ...
    async def instance(self, instance_id: str) -> dict[str, Any]: ...
    async def instances(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]: ...
    async def groq(self, query: str, params: dict[str, Any]) -> Any: ...


@asynccontextmanager
async def open_backend(url: str | None, token: str | None) -> AsyncIterator[Backend]:
    if url:
        import httpx

        from kinflow.cli.remote import RemoteBackend

        async with httpx.AsyncClient(timeout=30.0) as client:
            yield RemoteBackend(url, token, client)
        return
    from kinflow.cli.local import LocalBackend
    from kinflow.settings import Settings
    from kinflow.storage import open_lake

    settings = Settings()
    connection = await open_lake(settings)
    try:
        yield LocalBackend(connection, settings)
    finally:
        await connection.close()
