"""Serve the real app with the inspector for browser tests.

``app()`` is a uvicorn factory: ``kinflow.app.create_app`` with settings from
``KINFLOW_*`` variables, plus the inspector's routes when the app does not
serve ``/inspector`` itself yet. ``serving()`` runs it in a uvicorn process
on 127.0.0.1 and a free port, and stops it on exit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.routing import Mount, Route

from kinflow.app import create_app
from kinflow.inspector import inspector_routes
from kinflow.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def app() -> Starlette:
    built = create_app(Settings())
    served = {r.path for r in built.router.routes if isinstance(r, Route | Mount)}
    if "/inspector" not in served:
        built.router.routes.extend(inspector_routes())
    return built


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(lake_uri: str, database: str, tokens: str | None = None,
            log: Path | None = None) -> Iterator[str]:  # fmt: skip
    """The app on ``http://127.0.0.1:<port>`` over ``database`` of the test lake."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KINFLOW_")}
    env.update(KINFLOW_MONGODB_URI=lake_uri, KINFLOW_DATABASE=database,
               KINFLOW_OPERATION_TIMEOUT="20")  # fmt: skip
    if tokens:
        env["KINFLOW_API_TOKENS"] = tokens
    out = open(log, "wb") if log is not None else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "tests.browser.server:app", "--factory",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2):
                    break
            except (OSError, urllib.error.URLError):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("the inspector's test server did not come up") from None
                time.sleep(0.1)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if out is not subprocess.DEVNULL:
            out.close()
