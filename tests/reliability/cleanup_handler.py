"""The ``release-seat`` cleanup of seat-booking.json for the kill test: records each run.

Every run is recorded in a log (``effect_log.py``), so the audit can tell how often
each hold's cleanup ran and in which process: the driver (which may be SIGKILLed
between running the handler and reporting it) or the test's own heartbeat.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.reliability.effect_log import record

EFFECT = "release-seat"


def register(engine: Any, log: Path) -> None:
    def release_seat(call: Any) -> None:
        record(log, call)

    engine.register_handler(EFFECT, release_seat)
