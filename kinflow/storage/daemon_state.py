"""What a running embedded daemon looks like from outside: ``lake.json``, pid, port.

The state half of the embedded lake (``kinflow.storage.embedded`` starts and
stops the daemon): reading the state file a starter wrote, asking whether a
pid still runs, which pid answers on a port, and whether a port is free.
Every process on the data directory uses these to find and judge the daemon.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from pymongo import MongoClient
from pymongo.errors import PyMongoError

STATE_FILE = "lake.json"


def free_port() -> int:
    """A port nothing listens on now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    """Whether a daemon could listen on ``port`` now (it binds with ``SO_REUSEADDR`` too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True



def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (dead, not yet reaped by its parent) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, ValueError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] not in "ZX"
    return True



@dataclass(frozen=True)
class LakeState:
    """What ``lake.json`` says: the daemon's pid and port, and the process that started it."""

    pid: int
    port: int
    owner: int | None = None


def read_state(path: Path) -> LakeState | None:
    try:
        state = json.loads(path.read_text())
        owner = state.get("owner")
        return LakeState(int(state["pid"]), int(state["port"]),
                         int(owner) if owner is not None else None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def answering_pid(port: int, timeout: float = 1.0) -> int | None:
    """The pid the server on ``port`` reports (``serverStatus``), or None if none answers."""
    client: MongoClient[dict[str, object]] = MongoClient(
        uri_for(port), serverSelectionTimeoutMS=int(timeout * 1000),
        connectTimeoutMS=int(timeout * 1000),
    )
    try:
        pid = client.admin.command("serverStatus").get("pid")
        return int(pid) if isinstance(pid, int) else None
    except PyMongoError:
        return None
    finally:
        client.close()


def ping(uri: str, timeout: float = 0.5) -> bool:
    client: MongoClient[dict[str, object]] = MongoClient(
        uri, serverSelectionTimeoutMS=int(timeout * 1000), connectTimeoutMS=int(timeout * 1000)
    )
    try:
        client.admin.command("ping")
        return True
    except PyMongoError:
        return False
    finally:
        client.close()


def uri_for(port: int) -> str:
    return f"mongodb://127.0.0.1:{port}/?directConnection=true"

