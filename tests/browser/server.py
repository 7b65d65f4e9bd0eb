"""Serve the real app (which serves the inspector) for browser tests.

``serving()`` runs ``kinflow.http.app:create_app`` under uvicorn on 127.0.0.1 and
a free port, over a database of the test lake, and stops it on exit.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support import free_port, running

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def serving(lake_uri: str, database: str, tokens: str | None = None,
            log: Path | None = None, settings: dict[str, str] | None = None,
            ) -> Iterator[str]:  # fmt: skip
    """The app on ``http://127.0.0.1:<port>`` over ``database`` of the test lake.

    ``settings`` adds ``KINFLOW_*`` variables (e.g. ``KINFLOW_ALLOWED_ORIGINS``).
    """
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KINFLOW_")}
    env.update(KINFLOW_MONGODB_URI=lake_uri, KINFLOW_DATABASE=database,
               KINFLOW_OPERATION_TIMEOUT="20")  # fmt: skip
    if tokens:
        env["KINFLOW_API_TOKENS"] = tokens
    env.update(settings or {})
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "uvicorn", "kinflow.http.app:create_app", "--factory",
               "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    with (
        open(log or os.devnull, "wb") as out,
        running(command, cwd=ROOT, env=env, output=out, health_url=f"{base}/healthz", timeout=60),
    ):
        yield base
