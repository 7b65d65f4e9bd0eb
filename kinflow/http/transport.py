"""How ``/graphql`` speaks HTTP and websockets, beyond what strawberry's view does.

* Every transport failure (a body that is not JSON, no query, the wrong
  content type or method, a mutation over GET) is answered in the API's error
  shape with a typed code, instead of strawberry's ``text/plain`` reasons.
* A subscription over HTTP is refused (``subscription-needs-websocket``):
  strawberry would execute it like a query, which fails half-way.
* The legacy ``graphql-ws`` websocket protocol runs queries and mutations as
  well as subscriptions, as ``graphql-transport-ws`` does. Strawberry's
  handler for it runs subscriptions only and refuses everything else.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from graphql import GraphQLError, OperationType, get_operation_ast, parse
from starlette.responses import JSONResponse, Response
from strawberry.asgi import GraphQL
from strawberry.exceptions import MissingQueryError
from strawberry.http import GraphQLRequestData
from strawberry.http.parse_content_type import parse_content_type
from strawberry.schema.base import BaseSchema
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.types.graphql import OperationType as StrawberryOperationType
from strawberry.types.unset import UNSET

from kinflow.errors import KinflowError
from kinflow.http.guards import error_body
from kinflow.http.ws_quiet import CheckedFrames
from kinflow.schema.context import Context

JSON_TYPE = "application/json"


class TransportError(KinflowError):
    """A request ``/graphql`` cannot run at all; answered with ``status`` before execution."""

    code = "request-invalid"
    status: ClassVar[int] = 400
    headers: ClassVar[dict[str, str]] = {}


class RequestInvalid(TransportError):
    """The request's GraphQL parameters are malformed (``details.reason`` says which)."""


class InvalidJson(TransportError):
    """The body (or a ``variables``/``extensions`` query parameter) is not JSON."""

    code = "invalid-json"


class UnsupportedContentType(TransportError):
    code = "unsupported-content-type"
    status = 415


class QueryMissing(TransportError):
    code = "query-missing"


class MethodNotAllowed(TransportError):
    code = "method-not-allowed"
    status = 405
    headers = {"Allow": "GET, POST"}


class MutationNeedsPost(TransportError):
    code = "mutation-needs-post"
    status = 405
    headers = {"Allow": "POST"}


class SubscriptionNeedsWebsocket(TransportError):
    """Subscriptions stream: they run over a websocket on ``/graphql``, never over HTTP."""

    code = "subscription-needs-websocket"


class GraphiqlDisabled(TransportError):
    code = "graphiql-disabled"
    status = 404


def transport_error(failure: HTTPException, method: str) -> TransportError:
    """The typed refusal for one of strawberry's ``HTTPException``s (by cause, then status)."""
    cause = failure.__cause__
    if isinstance(cause, json.JSONDecodeError):
        return InvalidJson("the request body is not valid JSON", reason=str(cause))
    if isinstance(cause, MissingQueryError):
        return QueryMissing("the request has no GraphQL query")
    if isinstance(cause, InvalidOperationTypeError):
        if cause.operation_type is StrawberryOperationType.SUBSCRIPTION:
            return _needs_websocket()
        if cause.operation_type is StrawberryOperationType.MUTATION:
            return MutationNeedsPost("mutations run over POST, not GET", method=method)
    if isinstance(cause, CannotGetOperationTypeError):
        return RequestInvalid(failure.reason, reason="operation-not-found",
                              operationName=cause.operation_name)  # fmt: skip
    if failure.status_code == 405:
        return MethodNotAllowed(f"/graphql answers GET and POST, not {method}", method=method)
    if failure.status_code == 404:
        return GraphiqlDisabled("GraphiQL is turned off (KINFLOW_GRAPHIQL=false)")
    return RequestInvalid(failure.reason, reason=failure.reason)


def _needs_websocket() -> SubscriptionNeedsWebsocket:
    return SubscriptionNeedsWebsocket(
        "subscriptions run over a websocket on /graphql (graphql-transport-ws or graphql-ws), "
        "not over HTTP", transports=["graphql-transport-ws", "graphql-ws"])


def media_type(header: str) -> str:
    """A ``Content-Type`` header's media type, as ``parse_content_type`` reads it."""
    if '"' in header:  # a quoted parameter may hold a ";": the email parser's rules
        return parse_content_type(header)[0]
    return header.split(";", 1)[0].strip()


def refusal_response(error: TransportError) -> Response:
    return JSONResponse(error_body(error), status_code=error.status, headers=error.headers)


def is_subscription(query: str | None, operation_name: str | None, max_tokens: int) -> bool:
    """Whether the operation to run is a subscription (parsed only if the word occurs).

    A document that does not parse, or names no operation to run, is left to
    strawberry, which reports it the usual way.
    """
    if not isinstance(query, str) or "subscription" not in query:
        return False
    try:
        document = parse(query, no_location=True, max_tokens=max_tokens)
    except GraphQLError:
        return False
    operation = get_operation_ast(document, operation_name)
    return operation is not None and operation.operation is OperationType.SUBSCRIPTION


class _AnyOperation:
    """A schema whose ``subscribe`` runs any operation, for the legacy protocol's handler."""

    def __init__(self, schema: BaseSchema) -> None:
        self._schema = schema

    async def subscribe(self, query: str | None, variable_values: dict[str, Any] | None = None,
                        context_value: Any = None, root_value: Any = None,
                        operation_name: str | None = None) -> Any:  # fmt: skip
        # ``stream`` yields one result for a query or mutation, then ends
        return await self._schema.stream(
            query, variable_values=variable_values, context_value=context_value,
            root_value=root_value, operation_name=operation_name)


class LegacyProtocolHandler(CheckedFrames, BaseGraphQLWSHandler[Context, None]):
    """``graphql-ws`` (subscriptions-transport-ws) running queries and mutations too.

    A query or mutation sent with ``start`` gets one ``data`` message and then
    ``complete``. Authentication and roles are the same as on the other
    protocol: the actor comes from ``connection_init``, the resolvers check it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.schema = _AnyOperation(self.schema)  # type: ignore[assignment]


class TransportView(GraphQL[Context, None]):
    """Strawberry's ASGI view with typed transport refusals and both websocket protocols."""

    graphql_ws_handler_class = LegacyProtocolHandler

    def __init__(self, schema: BaseSchema, *, max_query_tokens: int, **options: Any) -> None:
        super().__init__(schema, **options)
        self.max_query_tokens = max_query_tokens

    async def run(self, request: Any, context: Any = UNSET, root_value: Any = UNSET) -> Any:
        """The one place strawberry's ``HTTPException``s become typed JSON refusals."""
        try:
            return await super().run(request, context, root_value)
        except HTTPException as failure:
            return refusal_response(transport_error(failure, request.method))
        except TransportError as refusal:
            return refusal_response(refusal)

    async def parse_http_body(self, request: AsyncHTTPRequestAdapter
                              ) -> GraphQLRequestData | list[GraphQLRequestData]:
        parsed: GraphQLRequestData | list[GraphQLRequestData] | None = None
        if request.method == "POST":
            content_type = media_type(request.content_type or "")
            if content_type != JSON_TYPE:
                raise UnsupportedContentType(
                    f"POST /graphql takes {JSON_TYPE}, not {content_type or 'no content type'}",
                    contentType=content_type or None, expected=JSON_TYPE)
            parsed = await self._one_operation(request)
        if parsed is None:
            parsed = await super().parse_http_body(request)
        operations = parsed if isinstance(parsed, list) else [parsed]
        if any(is_subscription(data.query, data.operation_name, self.max_query_tokens)
               for data in operations):  # fmt: skip
            raise _needs_websocket()
        return parsed

    async def _one_operation(self, request: AsyncHTTPRequestAdapter) -> GraphQLRequestData | None:
        """A JSON POST's one operation, read as strawberry reads it; ``None`` for what only
        strawberry's own parsing answers (a batch, a streamed response, a malformed body)."""
        if self._get_stream_transport_from_headers(request.headers) is not None:
            return None
        try:
            data = json.loads(await request.get_body())
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        query, variables, extensions = (data.get("query"), data.get("variables"),
                                        data.get("extensions"))
        if not (isinstance(query, str | None) and isinstance(variables, dict | None)
                and isinstance(extensions, dict | None)):
            return None
        return GraphQLRequestData(query=query, variables=variables,
                                  operation_name=data.get("operationName"),
                                  extensions=extensions, protocol="http")

