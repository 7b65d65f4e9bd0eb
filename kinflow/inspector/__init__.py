"""The live inspector: a static page served at ``/inspector``.

The page (plain ES modules and CSS under ``static/``, no build step) talks to
``/graphql`` on the same origin: queries and mutations over HTTP, live
updates over a ``graphql-transport-ws`` websocket. It keeps an API token in
the browser's session storage and sends it as ``Authorization: Bearer`` and
in the websocket's ``connection_init`` payload.

Add the routes to an app with ``routes.extend(inspector_routes())``.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import BaseRoute, Mount, Route

from kinflow.http.static_files import INSPECTOR_POLICY, HeaderedStaticFiles

STATIC_DIR = Path(__file__).parent / "static"


async def _to_page(request: Request) -> RedirectResponse:
    """``/inspector`` -> ``/inspector/`` so the page's relative asset URLs resolve."""
    target = request.url.path + "/"
    if request.url.query:
        target += "?" + request.url.query
    return RedirectResponse(target, status_code=307)


def inspector_routes(prefix: str = "/inspector") -> list[BaseRoute]:
    """The page at ``prefix`` (redirected to ``prefix/``) and its assets below it."""
    # no build step hashes the names, so a browser must revalidate every file
    files = HeaderedStaticFiles(directory=STATIC_DIR, html=True, cache_control="no-cache",
                                policy=INSPECTOR_POLICY)
    return [
        Route(prefix, _to_page, methods=["GET", "HEAD"]),
        Mount(prefix, app=files, name="inspector"),
    ]


__all__ = ["STATIC_DIR", "inspector_routes"]
