"""What the benchmarks that start ``kinflow serve`` share: a free port, the lake's state file, RSS.

Imported as a sibling (``from _process import ...``) by scripts run as
``python bench/x.py``; it imports nothing of kinflow, so a benchmark measures
the server it starts, not code loaded in its own process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
from pathlib import Path


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _lake_state(data_dir: Path, key: str) -> int | None:
    try:
        return int(json.loads((data_dir / "lake.json").read_text())[key])
    except (OSError, ValueError, KeyError):
        return None


def lake_pid(data_dir: Path) -> int | None:
    """The embedded lake daemon's pid, from the state file kinflow writes beside it."""
    return _lake_state(data_dir, "pid")


def lake_port(data_dir: Path) -> int | None:
    """The embedded lake daemon's port, from the same state file."""
    return _lake_state(data_dir, "port")


def rss_kib(pid: int) -> int | None:
    """Resident set size from /proc (KiB), or None once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def stop_group(process: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """SIGTERM the server's process group, SIGKILL it if it is still there after ``grace``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
