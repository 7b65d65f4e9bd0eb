"""``kinflow demo`` and ``kinflow serve`` on a taken port: one clear error naming the port and
KINFLOW_PORT, exit 1, before anything else is printed (no tour, no deploy, no "listening")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def kinflow(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kinflow.cli", *args], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.mark.parametrize("command", ["demo", "serve"])
def test_a_taken_port_is_refused_before_anything_is_printed(
    cli_env: str, taken_port: int, command: str
) -> None:
    env = {**os.environ, "KINFLOW_PORT": str(taken_port), "KINFLOW_WORKER": "false"}
    done = kinflow([command], env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == ""  # no tour, no deployed definitions
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"error port-in-use: port {taken_port} on 127.0.0.1 is in use")
    assert "KINFLOW_PORT" in lines[0]
    assert "listening" not in done.stderr and "Traceback" not in done.stderr


def test_the_port_option_is_checked_too(cli_env: str, taken_port: int) -> None:
    done = kinflow(["demo", "--port", str(taken_port)], dict(os.environ))
    assert done.returncode == 1 and done.stdout == "", done.stdout + done.stderr
    assert f"port {taken_port}" in done.stderr
