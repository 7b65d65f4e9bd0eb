"""Starting real server processes in tests: a free port, readiness, a clean stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@contextmanager
def running(
    command: list[str],
    *,
    health_url: str,
    env: Mapping[str, str],
    cwd: Path | None = None,
    output: IO[Any] | int = subprocess.DEVNULL,
    timeout: float = 120.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` in its own process group until ``health_url`` answers 200.

    On exit the whole group gets SIGTERM (SIGKILL after 30 s), so a wrapper
    such as ``make`` and the server it starts both stop.
    """
    process = subprocess.Popen(
        command, cwd=cwd, env=dict(env), stdout=output, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        while not healthy(health_url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{' '.join(command)} did not come up")
            time.sleep(0.1)
        yield process
    finally:
        _stop_group(process)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
