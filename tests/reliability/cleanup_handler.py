"""The ``release-seat`` cleanup of seat-booking.json for the kill test: records each run.

Every run appends ``<instance>:<effect key> <pid>`` to a log (one ``O_APPEND``
write), so the audit can tell how often each hold's cleanup ran and in which
process: the driver (which may be SIGKILLed between running the handler and
reporting it) or the test's own heartbeat.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

EFFECT = "release-seat"


def register(engine: Any, log: Path) -> None:
    def release_seat(call: Any) -> None:
        line = f"{call.instance_id}:{call.effect_key} {os.getpid()}\n".encode()
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    engine.register_handler(EFFECT, release_seat)


def runs(log: Path) -> dict[str, list[int]]:
    """Each effect (``<instance>:<effect key>``) with the pids that ran it, in order."""
    found: dict[str, list[int]] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            key, pid = line.rsplit(" ", 1)
            found.setdefault(key, []).append(int(pid))
    return found
