"""The socket caps' counting: per token, per address, loopback aliases as one client."""

from __future__ import annotations

import pytest

from kinflow.http.socket_caps import SocketCaps, TooManySockets


def test_the_token_cap_counts_authenticated_sockets() -> None:
    caps = SocketCaps(limit=2)
    caps.open_token("vera")
    caps.open_token("vera")
    with pytest.raises(TooManySockets) as refused:
        caps.open_token("vera")
    assert refused.value.code == "too-many-sockets" and refused.value.details["per"] == "token"
    caps.open_token("otto")  # another token is not affected
    caps.close_token("vera")
    caps.open_token("vera")


def test_every_loopback_alias_is_one_client() -> None:
    caps = SocketCaps(limit=2)
    first = caps.open_client("127.0.0.1")
    caps.open_client("127.5.5.5")
    with pytest.raises(TooManySockets):
        caps.open_client("::1")
    caps.open_client("192.0.2.1")  # another address is not affected
    caps.close_client(first)
    caps.open_client("::1")
    assert caps.open_sockets() == 3
