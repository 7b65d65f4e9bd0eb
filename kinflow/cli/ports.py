"""Checks on the address ``kinflow serve`` and ``kinflow demo`` are about to listen on.

The port is tried before anything is printed or prepared: a demo whose port is
taken would otherwise print its tour and deploy the examples, then die in
uvicorn's start-up with ``address already in use`` and no hint of how to move.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from kinflow.errors import PortInUse


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_free(host: str, port: int) -> None:
    """``port-in-use`` when ``host:port`` cannot be bound (as uvicorn binds it, with
    SO_REUSEADDR, so a port left in TIME_WAIT by a stopped server still counts as free)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                return  # an unknown host or the like: uvicorn reports it in its own words
            if exc.errno == errno.EADDRINUSE:
                taken = "is in use by another process"
            else:
                taken = "is not allowed for this user"
            raise PortInUse(
                f"port {port} on {host} {taken}: stop what holds it, or choose another "
                f"port with KINFLOW_PORT=<port> (or --port)",
                host=host, port=port, setting="KINFLOW_PORT",
            ) from None
