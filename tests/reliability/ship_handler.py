"""The ``ship`` effect of tests/reliability/orders.py: records each run, with its process.

Loaded by every kinflow process of a multi-process test through
``KINFLOW_EFFECT_HANDLERS``; each run appends ``<instance>:<effect key> <pid>``
to the file ``KINFLOW_TEST_EFFECT_LOG`` names (one short ``O_APPEND`` write,
so lines from several processes never interleave).
"""

from __future__ import annotations

import os
from typing import Any


def register(engine: Any) -> None:
    log = os.environ.get("KINFLOW_TEST_EFFECT_LOG", "")

    def ship(call: Any) -> None:
        if log:
            line = f"{call.instance_id}:{call.effect_key} {os.getpid()}\n".encode()
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    engine.register_handler("ship", ship)
