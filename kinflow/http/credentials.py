"""Reading an HTTP request's credentials the way the GraphQL view will read it.

Every decision here is taken on the *decoded* request: query-string names
are percent-decoded exactly as Starlette (and so strawberry) decodes them,
then compared without case or punctuation, so no spelling of ``query`` can
reach the view as "just the GraphiQL page". Refusals are JSON in GraphQL's
error shape with the error's code and details.
"""

from __future__ import annotations

import math
import re
from urllib.parse import parse_qsl

from starlette.responses import JSONResponse
from starlette.types import Scope

from kinflow.errors import KinflowError
from kinflow.http.throttle import TooManyAttempts
from kinflow.http.tokens import Unauthenticated, bearer

# Request parameters that make a GraphQL operation (GET query string or body fields).
_OPERATION_PARAMS = frozenset({"query", "operationname", "variables", "extensions"})
_NOT_LETTERS = re.compile(r"[^0-9a-z]")


def _header_values(scope: Scope, name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope.get("headers") or []
            if key.lower() == name]  # fmt: skip


def _operation_param(name: str) -> bool:
    return _NOT_LETTERS.sub("", name.casefold()) in _OPERATION_PARAMS


def ide_page_request(scope: Scope) -> bool:
    """A browser asking for the GraphiQL page itself: a GET for HTML naming no operation.

    Parameter names are decoded first (``%71uery`` is ``query``) and compared
    in any case, with or without punctuation; a request this accepts carries
    nothing the view could execute.
    """
    if scope.get("type") != "http" or scope.get("method") != "GET":
        return False
    if not any("text/html" in accept for accept in _header_values(scope, b"accept")):
        return False
    query_string = scope.get("query_string", b"").decode("latin-1")
    names = (name for name, _value in parse_qsl(query_string, keep_blank_values=True))
    return not any(_operation_param(name) for name in names)


def request_token(scope: Scope) -> str | None:
    """The bearer token of the request; more than one ``Authorization`` header is refused."""
    values = _header_values(scope, b"authorization")
    if len(values) > 1:
        raise Unauthenticated("send one Authorization header", headers=len(values))
    return bearer(values[0]) if values else None


def client_host(scope: Scope) -> str | None:
    """The peer address (a proxy's own address when kinflow runs behind one)."""
    client = scope.get("client")
    return str(client[0]) if client else None


def refusal(error: KinflowError) -> JSONResponse:
    """401 for ``unauthenticated``, 429 with ``Retry-After`` for ``too-many-attempts``."""
    body = {"data": None, "errors": [{"message": error.message,
                                      "extensions": {"code": error.code,
                                                     "details": error.details}}]}  # fmt: skip
    if isinstance(error, TooManyAttempts):
        retry_after = str(math.ceil(float(error.details.get("retryAfter", 1))))
        return JSONResponse(body, status_code=429, headers={"Retry-After": retry_after})
    return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})
