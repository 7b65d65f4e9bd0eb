"""Who may address the API: a Host allow-list (DNS rebinding) and CORS for browser origins.

Without tokens the API trusts every caller that reaches it, which is safe
only because it binds loopback. A web page can still reach loopback through
DNS rebinding: its own name, re-pointed at 127.0.0.1, makes the browser send
same-origin requests carrying ``Host: attacker.example``. So every HTTP
request and websocket handshake must name a loopback host (``127.0.0.1``,
``localhost``, ``[::1]``, any port) or one listed in ``KINFLOW_ALLOWED_HOSTS``;
others get HTTP 421 ``host-not-allowed`` and a websocket is refused before it
is accepted. With tokens configured a rebinding page has nothing to send, so
the list applies only when ``KINFLOW_ALLOWED_HOSTS`` is set.

CORS answers browsers on other origins: only those in
``KINFLOW_ALLOWED_ORIGINS`` may read responses and send ``Authorization``
and ``Content-Type`` (preflights included); nothing is allowed by default,
and a refused preflight gets ``origin-not-allowed`` as JSON. Websocket
handshakes are checked against the same list by strawberry's view.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send
from strawberry.http.websocket_origin import normalize_allowed_origins

from kinflow.errors import ConfigurationError, KinflowError
from kinflow.settings import Settings

log = logging.getLogger("kinflow.api")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
CORS_METHODS = ("GET", "POST")
CORS_HEADERS = ("Authorization", "Content-Type")
_LOGGED_HOSTS_MAX = 64


class HostNotAllowed(KinflowError):
    """A request addressed a host name this server does not answer for (DNS rebinding guard)."""

    code = "host-not-allowed"


class OriginNotAllowed(KinflowError):
    """A CORS preflight from an origin, or for a method or header, that is not allowed."""

    code = "origin-not-allowed"


def error_body(error: KinflowError) -> dict[str, Any]:
    """The API's error shape for a refusal made outside GraphQL execution."""
    return {"data": None, "errors": [{"message": error.message, "extensions": {
        "code": error.code, "details": error.details}}]}


def host_name(value: str) -> str | None:
    """The name in a ``Host`` header or a configured entry, lowercased, without its port.

    ``[::1]:8080`` gives ``::1``; a bare IPv6 address (only valid as a
    configured entry) is kept whole. ``None`` for a malformed value.
    """
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        rest = text[end + 1:]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return text[1:end] or None
    if text.count(":") > 1:
        return text
    name, colon, port = text.partition(":")
    if colon and not port.isdigit():
        return None
    return name.rstrip(".") or None


def allowed_host_names(configured: Iterable[str]) -> frozenset[str]:
    names = set(LOOPBACK_HOSTS)
    for entry in configured:
        name = host_name(entry)
        if name is None:
            raise ConfigurationError(f"KINFLOW_ALLOWED_HOSTS: {entry!r} is not a host name",
                                     entry=entry)  # fmt: skip
        names.add(name)
    return frozenset(names)


class HostAllowList:
    """Refuse HTTP requests and websocket handshakes whose ``Host`` is not an allowed name."""

    def __init__(self, app: ASGIApp, names: frozenset[str]) -> None:
        self.app = app
        self.names = names
        self._logged: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("host", "")
        if host_name(header) in self.names:
            await self.app(scope, receive, send)
            return
        self._log(header)
        refusal = HostNotAllowed(
            f"this server does not answer for host {header!r}; add the name to "
            "KINFLOW_ALLOWED_HOSTS if it is yours", host=header)  # fmt: skip
        if scope["type"] == "http":
            await _json(refusal, 421)(scope, receive, send)
        else:
            await _deny_websocket(refusal, scope, receive, send)

    def _log(self, header: str) -> None:
        if header in self._logged or len(self._logged) >= _LOGGED_HOSTS_MAX:
            return
        self._logged.add(header)
        log.warning("refused a request for host %r (not in KINFLOW_ALLOWED_HOSTS)", header)


def _json(error: KinflowError, status: int) -> Response:
    return JSONResponse(error_body(error), status_code=status)


async def _deny_websocket(error: KinflowError, scope: Scope, receive: Receive, send: Send
                          ) -> None:
    """Refuse a handshake before accepting it: HTTP 421 with the JSON body when the server
    can send one, else a plain close (the server answers 403)."""
    await receive()  # websocket.connect
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps(error_body(error)).encode()
    await send({"type": "websocket.http.response.start", "status": 421, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "websocket.http.response.body", "body": body})


class JsonCORS(CORSMiddleware):
    """Starlette's CORS, with a refused preflight answered in the API's error shape."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        refused = [part.strip() for part in bytes(response.body).decode()
                   .removeprefix("Disallowed CORS ").split(",")]  # fmt: skip
        error = OriginNotAllowed(
            f"cross-origin request refused ({', '.join(refused)}); allowed origins are listed "
            "in KINFLOW_ALLOWED_ORIGINS", origin=request_headers.get("origin"),
            method=request_headers.get("access-control-request-method"), refused=refused)
        headers = {name: value for name, value in response.headers.items()
                   if name.lower().startswith("access-control-") or name.lower() == "vary"}
        return JSONResponse(error_body(error), status_code=403, headers=headers)


def guard_middleware(settings: Settings, tokens_enabled: bool) -> list[Middleware]:
    """The Host allow-list (when it applies) and CORS, outermost first."""
    origins = sorted(normalize_allowed_origins(settings.allowed_origins))
    if "*" in origins and not tokens_enabled:
        raise ConfigurationError(
            "KINFLOW_ALLOWED_ORIGINS='*' without API tokens would let every web page drive "
            "the API; list the origins, or configure tokens", setting="allowed_origins")
    middleware = []
    if not tokens_enabled or settings.allowed_hosts:
        middleware.append(Middleware(HostAllowList,
                                     names=allowed_host_names(settings.allowed_hosts)))
    middleware.append(Middleware(JsonCORS, allow_origins=origins, allow_methods=CORS_METHODS,
                                 allow_headers=CORS_HEADERS, allow_credentials=False,
                                 allow_private_network=True))  # listed origins, any network
    return middleware
