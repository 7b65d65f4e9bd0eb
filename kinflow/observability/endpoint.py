"""``/metrics``: the Prometheus text format, on the API's port or on its own.

On the API's port the route follows the API's token rules: with tokens
configured a scrape presents one (any role; a wrong one counts against the
address like any other); without tokens the API, and so the route, serves
127.0.0.1 only unless a proxy is in front. With ``KINFLOW_METRICS_PORT`` the
metrics are served there instead (on ``KINFLOW_HOST``, no token: keep that
port for the scraper), and ``/metrics`` on the API answers 404.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest, start_http_server
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from kinflow.http.credentials import client_host, refusal, request_token
from kinflow.http.throttle import FailureThrottle, TooManyAttempts
from kinflow.http.tokens import TokenTable, Unauthenticated, authenticate
from kinflow.observability import gauges
from kinflow.observability.metrics import REGISTRY
from kinflow.observability.switch import ON
from kinflow.settings import Settings

log = logging.getLogger("kinflow.observability")
WATCHED = "kinflow_metrics_watched"  # where the lifespan leaves the app's gauges.Watched


def route(settings: Settings, tokens: TokenTable, throttle: FailureThrottle
          ) -> Callable[[Request], Awaitable[Response]]:
    """The ``/metrics`` handler of an API app."""

    async def metrics(request: Request) -> Response:
        if tokens.enabled:
            try:
                authenticate(tokens, throttle, request_token(request.scope),
                             client_host(request.scope))
            except (Unauthenticated, TooManyAttempts) as error:
                return refusal(error)
        if not settings.metrics or settings.metrics_port:
            return PlainTextResponse("not found", status_code=404)
        watched = getattr(request.app.state, WATCHED, None)
        if watched is not None:
            await watched.refresh()
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return metrics


@contextlib.asynccontextmanager
async def serving(settings: Settings, connection: Any, hubs: Any, engine: Any,
                  state: Any) -> AsyncIterator[None]:
    """While the app runs: its figures watched, and the metrics port served if one is set."""
    if not ON.metrics:
        yield
        return
    watched = gauges.watch(connection, hubs, engine)
    setattr(state, WATCHED, watched)
    server: Any = None
    refresher: asyncio.Task[None] | None = None
    try:
        if settings.metrics_port:
            server, _ = start_http_server(settings.metrics_port, addr=settings.host,
                                               registry=REGISTRY)
            refresher = asyncio.create_task(_refresh_forever(watched), name="metrics-refresh")
            log.info("metrics on http://%s:%d/metrics", settings.host, settings.metrics_port)
        yield
    finally:
        gauges.unwatch(watched)
        if refresher is not None:
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher
        if server is not None:
            await asyncio.to_thread(server.shutdown)
            server.server_close()


async def _refresh_forever(watched: gauges.Watched) -> None:
    """The lake-side figures kept fresh for scrapes the API's loop does not see."""
    while True:
        await watched.refresh()
        await asyncio.sleep(gauges.REFRESH_SECONDS)
