"""Websockets open at once, counted per client address and per token.

Each socket may run ``KINFLOW_MAX_SUBSCRIPTIONS_PER_CONNECTION`` operations;
without a bound on sockets one client multiplies that at will. Addresses
are keyed as the failure throttle keys them (IPv6 per /64, every loopback
alias as one client), so an address is counted when the socket connects and
a token when its ``connection_init`` authenticates. A socket past the
address cap is closed with 4429 before it speaks; one past its token's cap
is refused at ``connection_init`` with ``too-many-sockets``. With no tokens
configured only addresses count.
"""

from __future__ import annotations

from collections import Counter

from kinflow.errors import KinflowError
from kinflow.http.throttle import client_key

#: the close code for a socket past a cap (4429: "too many requests")
TOO_MANY_SOCKETS = 4429


class TooManySockets(KinflowError):
    """The client address or the token already has ``KINFLOW_MAX_SOCKETS_PER_CLIENT`` sockets."""

    code = "too-many-sockets"


class SocketCaps:
    """Counts of open websockets per client address and per token (one per API process)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._clients: Counter[str] = Counter()
        self._tokens: Counter[str] = Counter()

    def open_client(self, host: str | None) -> str:
        """Count a socket from ``host``; its key, for :meth:`close_client`."""
        key = client_key(host)
        self._take(self._clients, key, "client")
        return key

    def open_token(self, actor_id: str) -> None:
        """Count an authenticated socket for the token of ``actor_id``."""
        self._take(self._tokens, actor_id, "token")

    def close_client(self, key: str) -> None:
        self._give(self._clients, key)

    def close_token(self, actor_id: str) -> None:
        self._give(self._tokens, actor_id)

    def open_sockets(self) -> int:
        return sum(self._clients.values())

    def _take(self, counts: Counter[str], key: str, kind: str) -> None:
        if counts[key] >= self.limit:
            raise TooManySockets(f"this {kind} already has {self.limit} websockets open",
                                 per=kind, limit=self.limit)  # fmt: skip
        counts[key] += 1

    @staticmethod
    def _give(counts: Counter[str], key: str) -> None:
        counts[key] -= 1
        if counts[key] <= 0:
            del counts[key]
