"""API tokens, the actors they stand for, and what each role may do.

Tokens come from ``KINFLOW_API_TOKENS`` and/or a tokens file. With none
configured the API is open (every caller is the local ``admin`` actor) and
the CLI refuses to bind anything but loopback. With tokens, every HTTP
request and every websocket ``connection_init`` must present one.

Roles nest: ``viewer`` may query and subscribe; ``operator`` and ``admin``
may also call the mutations ``kinflow/schema/roles.py``'s table gives them.

Tokens are secrets of at least ``MIN_TOKEN_LENGTH`` characters, compared as
SHA-256 digests in constant time against every configured token, and failed
attempts are throttled per client address (``kinflow.http.throttle``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from kinflow.engine import Actor
from kinflow.errors import ConfigurationError, KinflowError
from kinflow.http.throttle import FailureThrottle
from kinflow.settings import Settings

ROLES = ("viewer", "operator", "admin")
_RANK = {role: rank for rank, role in enumerate(ROLES)}
OPEN_ACTOR = Actor.person("local", "admin")
MIN_TOKEN_LENGTH = 16


class Unauthenticated(KinflowError):
    """No token, or one that is not configured."""

    code = "unauthenticated"


class Forbidden(KinflowError):
    """The caller's roles do not allow this operation."""

    code = "forbidden"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenTable:
    """Token -> actor. Empty means the API runs open.

    Only digests are compared: equal lengths whatever the guess, so neither
    the comparison's time nor an early exit tells a caller how close it came.
    """

    def __init__(self, actors: Mapping[str, Actor]) -> None:
        self.actors: Mapping[str, Actor] = dict(actors)
        self._digests = tuple((_digest(token), actor) for token, actor in self.actors.items())

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def lookup(self, token: str | None) -> Actor:
        """The actor for ``token``; every configured token is compared, none skipped."""
        if not self.enabled:
            return OPEN_ACTOR
        if not token:
            raise Unauthenticated("a bearer token is required")
        probe = _digest(token)
        found: Actor | None = None
        for known, actor in self._digests:
            if hmac.compare_digest(known, probe):
                found = actor
        if found is None:
            raise Unauthenticated("the bearer token is not valid")
        return found


def authenticate(tokens: TokenTable, throttle: FailureThrottle, token: str | None,
                 host: str | None) -> Actor:  # fmt: skip
    """The caller's actor, counting a wrong token against its address.

    Raises ``TooManyAttempts`` while the address is locked out (before the
    token is even looked at) and ``Unauthenticated`` for a missing or unknown
    token; only a token that was presented and wrong counts as a failure.
    """
    if not tokens.enabled:
        return OPEN_ACTOR
    throttle.check(host)
    try:
        return tokens.lookup(token)
    except Unauthenticated:
        if token:
            throttle.failed(host)
        raise


def _actor(actor_id: Any, roles: Any, where: str) -> Actor:
    if not isinstance(actor_id, str) or not actor_id:
        raise ConfigurationError(f"{where}: an actor id is required", where=where)
    if isinstance(roles, str):
        roles = [roles]
    if not isinstance(roles, list) or not roles or not all(r in _RANK for r in roles):
        raise ConfigurationError(
            f"{where}: give each token at least one role among {', '.join(ROLES)}",
            where=where, roles=roles,
        )
    return Actor.person(actor_id, *roles)


def _from_mapping(data: Any, where: str) -> dict[str, Actor]:
    if not isinstance(data, dict):
        raise ConfigurationError(f"{where}: expected an object of token -> {{id, roles}}")
    out: dict[str, Actor] = {}
    for token, spec in data.items():
        if not isinstance(spec, dict):
            raise ConfigurationError(f"{where}: the entry of a token must be {{id, roles}}")
        actor = _actor(spec.get("id"), spec.get("roles", []), where)
        out[_strong(str(token), actor, where)] = actor
    return out


def _strong(token: str, actor: Actor, where: str) -> str:
    """``token`` itself, refused when short enough to guess (its text is never echoed)."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigurationError(
            f"{where}: the token of {actor.id!r} has {len(token)} characters; tokens need at "
            f"least {MIN_TOKEN_LENGTH} (generate one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`)",
            where=where, actor=actor.id, length=len(token), minimum=MIN_TOKEN_LENGTH,
        )
    return token


def parse_tokens(text: str, where: str = "KINFLOW_API_TOKENS") -> dict[str, Actor]:
    """Parse ``token=id:role|role,...`` or a JSON object."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            return _from_mapping(json.loads(text), where)
        except ValueError as exc:
            raise ConfigurationError(f"{where}: not valid JSON ({exc})") from exc
    out: dict[str, Actor] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        token, sep, rest = entry.partition("=")
        actor_id, _, roles = rest.partition(":")
        if not sep or not token:
            raise ConfigurationError(f"{where}: expected token=actor-id:role, got {entry!r}")
        actor = _actor(actor_id, [r for r in roles.split("|") if r], where)
        out[_strong(token, actor, where)] = actor
    return out


def load_tokens(settings: Settings) -> TokenTable:
    """Every configured token (environment, then the tokens file)."""
    actors = parse_tokens(settings.api_tokens or "")
    if settings.api_tokens_file is not None:
        path = settings.api_tokens_file
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigurationError(f"cannot read the tokens file {path}: {exc}") from exc
        actors.update(parse_tokens(text, where=str(path)))
    return TokenTable(actors)


def bearer(value: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value (or a bare token)."""
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() == "bearer":
        return token.strip() or None
    return None if token else scheme


def has_role(actor: Actor, role: str) -> bool:
    """Whether ``actor`` holds ``role`` or a role above it."""
    needed = _RANK[role]
    return any(_RANK.get(held, -1) >= needed for held in actor.roles)


def require(actor: Actor, role: str, operation: str) -> None:
    if not has_role(actor, role):
        raise Forbidden(
            f"{operation} needs the {role} role", operation=operation, role=role,
            actor=actor.id, roles=list(actor.roles),
        )
