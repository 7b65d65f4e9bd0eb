"""The ``ship`` effect of tests/reliability/orders.py: records each run, with its process.

Loaded by every kinflow process of a multi-process test through
``KINFLOW_EFFECT_HANDLERS`` (with the repository on ``PYTHONPATH``); each run is
recorded (``effect_log.py``) in the file ``KINFLOW_TEST_EFFECT_LOG`` names.
"""

from __future__ import annotations

import os
from typing import Any

from tests.reliability.effect_log import record


def register(engine: Any) -> None:
    log = os.environ.get("KINFLOW_TEST_EFFECT_LOG", "")

    def ship(call: Any) -> None:
        if log:
            record(log, call)

    engine.register_handler("ship", ship)
