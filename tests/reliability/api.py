"""The real app in this test's event loop: its lifespan, and httpx clients over ASGI.

No server socket: httpx's ASGI transport calls the app directly, so fifty
clients are fifty concurrent requests through the whole stack (auth,
limits, strawberry, the engine, the lake) without ports or threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette

from kinflow.http.app import create_app
from kinflow.settings import Settings

BASE = "http://127.0.0.1"  # a loopback Host: the app refuses other names without tokens


@contextlib.asynccontextmanager
async def serving(lake_uri: str, database: str, **overrides: Any) -> AsyncIterator[Starlette]:
    """The app with its lifespan running (no in-process worker unless asked)."""
    options: dict[str, Any] = {"worker": False, **overrides}
    app = create_app(Settings(mongodb_uri=lake_uri, database=database, operation_timeout=20.0,
                              **options))
    async with app.router.lifespan_context(app):
        yield app


def client(app: Starlette, token: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE,
                             headers=headers, timeout=60.0)


async def gql(http: httpx.AsyncClient, query: str, variables: dict[str, Any] | None = None
              ) -> tuple[int, dict[str, Any]]:
    """POST one operation; returns (HTTP status, body)."""
    response = await http.post("/graphql", json={"query": query, "variables": variables or {}})
    body: dict[str, Any] = response.json()
    return response.status_code, body


def codes(body: dict[str, Any]) -> list[str]:
    return [str((e.get("extensions") or {}).get("code")) for e in body.get("errors") or []]
