"""Each run of an effect handler, recorded by whichever process ran it.

A run appends ``<instance>:<effect key> <pid>`` to a log shared by the processes of a test
(one short ``O_APPEND`` write, so lines from several processes never interleave); ``runs``
reads back how often each effect ran, and where. The holds' ``release-seat`` cleanup
(``cleanup_handler.py``) and the orders' ``ship`` effect (``ship_handler.py``) record here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def record(log: str | Path, call: Any) -> None:
    """Append this run of ``call``'s effect, with this process's pid."""
    line = f"{call.instance_id}:{call.effect_key} {os.getpid()}\n".encode()
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def runs(log: Path) -> dict[str, list[int]]:
    """Each effect (``<instance>:<effect key>``) with the pids that ran it, in order."""
    found: dict[str, list[int]] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            key, pid = line.rsplit(" ", 1)
            found.setdefault(key, []).append(int(pid))
    return found
