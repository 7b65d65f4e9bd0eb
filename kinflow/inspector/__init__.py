"""The live inspector: a static page served at ``/inspector``.

The page (plain ES modules and CSS under ``static/``, no build step) talks to
``/graphql`` on the same origin: queries and mutations over HTTP, live
updates over a ``graphql-transport-ws`` websocket. It keeps an API token in
the browser's session storage and sends it as ``Authorization: Bearer`` and
in the websocket's ``connection_init`` payload.

Add the routes to an app with ``routes.extend(inspector_routes())``.
"""

from __future__ import annotations

import os
from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import PathLike, StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).parent / "static"


class _InspectorFiles(StaticFiles):
    """Static files that a browser must revalidate (the page has no build step to hash names)."""

    def file_response(
        self, full_path: PathLike, stat_result: os.stat_result, scope: Scope,
        status_code: int = 200,
    ) -> Response:  # fmt: skip
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response


async def _to_page(request: Request) -> RedirectResponse:
    """``/inspector`` -> ``/inspector/`` so the page's relative asset URLs resolve."""
    target = request.url.path + "/"
    if request.url.query:
        target += "?" + request.url.query
    return RedirectResponse(target, status_code=307)


def inspector_routes(prefix: str = "/inspector") -> list[BaseRoute]:
    """The page at ``prefix`` (redirected to ``prefix/``) and its assets below it."""
    return [
        Route(prefix, _to_page, methods=["GET", "HEAD"]),
        Mount(prefix, app=_InspectorFiles(directory=STATIC_DIR, html=True), name="inspector"),
    ]


__all__ = ["STATIC_DIR", "inspector_routes"]
