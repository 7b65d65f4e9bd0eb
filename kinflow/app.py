"""The Starlette application factory.

``create_app`` builds the ASGI app; its lifespan opens the lake (starting the
embedded daemon when no MongoDB URI is configured) and the change hub, keeps
them on ``app.state``, and closes both on shutdown. Run it with
``uvicorn kinflow.app:create_app --factory`` or ``kinflow serve``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from kinflow import __version__
from kinflow.settings import Settings
from kinflow.storage import ChangeHub, open_lake


async def healthz(request: Request) -> JSONResponse:
    """200 when the lake answers, 503 otherwise."""
    connection = request.app.state.lake_connection
    reachable = await connection.lake.ping()
    body = {
        "status": "ok" if reachable else "degraded",
        "version": __version__,
        "lake": {
            "reachable": reachable,
            "embedded": connection.embedded is not None,
            "database": connection.lake.database,
            "dataset": connection.lake.default_dataset,
        },
        "hub": {"running": request.app.state.hub.running},
    }
    return JSONResponse(body, status_code=200 if reachable else 503)


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        connection = await open_lake(settings)
        hub = ChangeHub(connection.lake, queue_size=settings.hub_queue_size)
        try:
            await hub.start()
            app.state.settings = settings
            app.state.lake_connection = connection
            app.state.lake = connection.lake
            app.state.hub = hub
            yield
        finally:
            await hub.stop()
            await connection.close()

    return Starlette(routes=[Route("/healthz", healthz)], lifespan=lifespan)
