"""The Starlette application factory.

``create_app`` builds the ASGI app: ``/graphql`` (HTTP and websocket, both
``graphql-transport-ws`` and ``graphql-ws``; GraphiQL for a browser) and
``/healthz``. Its lifespan opens the lake (starting the embedded daemon when
no MongoDB URI is configured), the change hub and the engine, keeps them on
``app.state``, and on shutdown ends every subscription before closing the
lake. Run it with ``uvicorn kinflow.http.app:create_app --factory`` or
``kinflow serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from cross_web import AsyncHTTPRequestAdapter
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http import GraphQLRequestData
from strawberry.types import ExecutionResult, SubscriptionExecutionResult

from kinflow import __version__
from kinflow.engine import Actor, Engine
from kinflow.engine.leases import prepare_engine_side
from kinflow.graphiql import graphiql_routes, local_page, page_response_headers
from kinflow.http.body_limit import RequestSizeLimit
from kinflow.http.credentials import client_host, ide_page_request, refusal, request_token
from kinflow.http.guards import guard_middleware
from kinflow.http.shutdown import stop_bounded
from kinflow.http.socket_caps import TOO_MANY_SOCKETS, SocketCaps, TooManySockets
from kinflow.http.throttle import FailureThrottle, TooManyAttempts
from kinflow.http.tokens import TokenTable, Unauthenticated, authenticate, bearer, load_tokens
from kinflow.http.transport import TransportView
from kinflow.http.ws_quiet import QuietTransportWSHandler
from kinflow.inspector import inspector_routes
from kinflow.observability import configure as observe
from kinflow.observability import endpoint as metrics_endpoint
from kinflow.plugins import build_engine
from kinflow.schema import build_schema
from kinflow.schema.context import Context, Services
from kinflow.schema.hubs import Hubs
from kinflow.settings import Settings
from kinflow.storage import open_lake
from kinflow.storage.datasets import Datasets, parse_dataset_list
from kinflow.worker import Worker

log = logging.getLogger("kinflow.api")
ANONYMOUS = Actor.person("anonymous")
_ACTOR = "kinflow.actor"  # the scope key __call__ leaves the authenticated actor under
_SOCKET_TOKEN = "kinflow.socket-token"  # the token a websocket's connection_init counted


async def healthz(request: Request) -> JSONResponse:
    """200 when the lake answers, 503 otherwise (at once while the embedded daemon is down)."""
    connection = request.app.state.lake_connection
    keeper = connection.keeper  # None unless on the embedded lake
    reachable = (keeper is None or keeper.up) and await connection.lake.ping(timeout=2.0)
    hub = request.app.state.hub
    body = {
        "status": "ok" if reachable else "degraded",
        "version": __version__,
        "lake": {
            "reachable": reachable,
            "embedded": connection.embedded is not None,
            "database": connection.lake.database,
            "dataset": connection.lake.default_dataset,
            **({"daemon": keeper.report()} if keeper is not None else {}),
        },
        "hub": {
            "running": bool(hub is not None and hub.running),
            "streams": request.app.state.hubs.stream_count(),
            "subscribers": request.app.state.hubs.subscriber_count(),
            "snapshotDocuments": request.app.state.services.snapshots.held,
        },
    }
    return JSONResponse(body, status_code=200 if reachable else 503)


class GraphQLApp(TransportView):
    """Strawberry's ASGI view with kinflow's context and token checks."""

    graphql_transport_ws_handler_class = QuietTransportWSHandler  # a page reload is no error

    def __init__(self, services: Services | None, settings: Settings) -> None:
        super().__init__(
            build_schema(settings),
            graphql_ide="graphiql" if settings.graphiql else None,
            subscription_protocols=("graphql-transport-ws", "graphql-ws"),
            connection_init_wait_timeout=timedelta(seconds=30),
            max_subscriptions_per_connection=settings.max_subscriptions_per_connection,
            allowed_origins=settings.allowed_origins,
            max_query_tokens=settings.max_query_tokens,
        )
        self.services = services
        self.throttle = FailureThrottle(settings.auth_max_failures, settings.auth_failure_window,
                                        settings.auth_throttle_clients)  # fmt: skip
        self.sockets = SocketCaps(settings.max_sockets_per_client)

    async def render_graphql_ide(self, request: Request) -> Response:
        """Strawberry's GraphiQL page, loading its assets from kinflow (works offline)."""
        page = local_page(self.graphql_ide_html)
        return HTMLResponse(page, headers=page_response_headers(page))

    def _services(self) -> Services:
        if self.services is None:
            raise RuntimeError("the app's lifespan has not started")
        return self.services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._socket(scope, receive, send)
            return
        if scope["type"] == "http":
            tokens = self._services().tokens
            if tokens.enabled and not ide_page_request(scope):  # the page alone needs no token
                try:
                    token = request_token(scope)
                    scope[_ACTOR] = authenticate(tokens, self.throttle, token, client_host(scope))
                except (Unauthenticated, TooManyAttempts) as error:
                    await refusal(error)(scope, receive, send)
                    return
        try:
            await super().__call__(scope, receive, send)
        except Unauthenticated as error:  # execute_operation refused an anonymous caller
            await refusal(error)(scope, receive, send)

    async def _socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A websocket, counted against its address's and its token's caps while open."""
        try:
            key = self.sockets.open_client(client_host(scope))
        except TooManySockets as error:
            socket = WebSocket(scope, receive, send)
            offered = [p for p in scope.get("subprotocols") or () if p in self.protocols]
            await socket.accept(subprotocol=offered[0] if offered else None)
            await socket.close(code=TOO_MANY_SOCKETS, reason=error.message[:120])
            return
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.sockets.close_client(key)
            if scope.get(_SOCKET_TOKEN) is not None:
                self.sockets.close_token(scope[_SOCKET_TOKEN])

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        services = self._services()
        context = Context(services=services, request=request, response=response,
                          websocket=isinstance(request, WebSocket))  # fmt: skip
        if services.tokens.enabled:  # a websocket gets its actor from connection_init
            context.actor = request.scope.get(_ACTOR, ANONYMOUS)
        return context

    async def execute_operation(
        self, request: Request, request_adapter: AsyncHTTPRequestAdapter,
        request_data: GraphQLRequestData | list[GraphQLRequestData], context: Context,
        root_value: None, sub_response: Response,
    ) -> ExecutionResult | list[ExecutionResult] | SubscriptionExecutionResult:  # fmt: skip
        """Every HTTP operation passes here: none runs for an anonymous caller under tokens.

        ``__call__`` lets only the GraphiQL page through without a token; should
        anything else ever slip past it, it still executes nothing.
        """
        if self._services().tokens.enabled and context.actor is ANONYMOUS:
            raise Unauthenticated("a bearer token is required")
        return await super().execute_operation(
            request=request, request_adapter=request_adapter, request_data=request_data,
            context=context, root_value=root_value, sub_response=sub_response,
        )

    async def on_ws_connect(self, context: Context) -> Any:
        """Authenticate the websocket from ``connection_init`` (or its handshake header)."""
        tokens = self._services().tokens
        params = context.connection_params or {}
        raw = params.get("authorization") or params.get("Authorization") or params.get("token")
        token = bearer(raw) if isinstance(raw, str) else None
        host = None
        try:
            if context.request is not None:
                host = client_host(context.request.scope)
                if token is None and tokens.enabled:
                    token = request_token(context.request.scope)
            context.actor = authenticate(tokens, self.throttle, token, host)
            if tokens.enabled and context.request is not None:
                self.sockets.open_token(context.actor.id)
                context.request.scope[_SOCKET_TOKEN] = context.actor.id
        except (Unauthenticated, TooManyAttempts, TooManySockets) as error:
            raise ConnectionRejectionError({"message": error.message, "extensions": {
                "code": error.code, "details": error.details}}) from error
        return None


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings()
    tokens: TokenTable = load_tokens(settings)  # a bad token config fails at start-up
    observe(settings, os.environ)  # metrics, and tracing from OTEL_* (docs/observability.md)
    graphql = GraphQLApp(None, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        connection = await open_lake(settings)
        stop_worker = asyncio.Event()
        worker_task: asyncio.Task[None] | None = None
        datasets = Datasets(connection.lake, parse_dataset_list(settings.extra_datasets))
        hubs = Hubs(connection.lake, queue_size=settings.hub_queue_size,
                    max_streams=settings.max_hub_streams, datasets=datasets)  # fmt: skip
        try:
            engine: Engine = build_engine(connection.lake, settings)
            await engine.ensure_ready()
            await prepare_engine_side(connection.lake, engine.dataset)  # leases out of content
            await datasets.prepare()
            hub = await hubs.get()
            graphql.services = Services(settings=settings, lake=connection.lake, engine=engine,
                                        hubs=hubs, tokens=tokens)  # fmt: skip
            app.state.settings = settings
            app.state.lake_connection = connection
            app.state.lake = connection.lake
            app.state.hub = hub
            app.state.hubs = hubs
            app.state.engine = engine
            app.state.services = graphql.services
            if not tokens.enabled:
                log.warning("no API tokens configured: the API is open to every local caller")
            if settings.worker:
                worker = Worker(engine, hub=hub, interval=settings.worker_interval,
                                retention_days=settings.retention_days,
                                concurrency=settings.worker_concurrency)
                worker_task = asyncio.create_task(worker.run(stop_worker), name="worker")
            async with metrics_endpoint.serving(settings, connection, hubs, engine, app.state):
                yield
        finally:
            stop_worker.set()
            # every subscription ends and every stream closes at once, each bounded
            await stop_bounded(hubs, worker_task, grace=2.0)  # within serve's 10 s
            await connection.close()

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/metrics", metrics_endpoint.route(settings, tokens, graphql.throttle)),
            Route("/graphql", graphql),  # other methods: a typed method-not-allowed
            WebSocketRoute("/graphql", graphql),
            *inspector_routes(),
            *graphiql_routes(),
        ],
        lifespan=lifespan,
        middleware=[*guard_middleware(settings, tokens.enabled),
                    Middleware(RequestSizeLimit, max_bytes=settings.max_request_bytes)],
    )
