"""What benchmarks that start ``kinflow serve`` share: launching it, a port, lake state, RSS, CPU.

Imported as a sibling (``from _process import ...``) by scripts run as
``python bench/<name>.py``; it imports nothing of kinflow, so a benchmark measures
the server it starts, not code loaded in its own process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
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


def launch_serve(data_dir: Path, port: int, extra_env: dict[str, str] | None = None
                 ) -> subprocess.Popen[bytes]:
    """``kinflow serve`` as a user starts it: default settings but the data directory, the
    address, 127.0.0.1 and ``extra_env`` (no ``KINFLOW_*`` of the caller's environment leaks
    in); in a session of its own, so ``stop_group`` stops it with its lake daemon; output to
    ``serve.log`` in the data directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KINFLOW_")}
    env.update({"KINFLOW_DATA_DIR": str(data_dir), "KINFLOW_HOST": "127.0.0.1",
                "KINFLOW_PORT": str(port), **(extra_env or {})})
    kinflow = str(Path(sys.executable).with_name("kinflow"))
    with (data_dir / "serve.log").open("wb") as log:
        return subprocess.Popen([kinflow, "serve"], env=env, cwd=data_dir, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(base: str, process: subprocess.Popen[bytes], seconds: float = 90.0) -> None:
    """Until ``/healthz`` answers 200; SystemExit if the server exits or never gets there."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"kinflow serve exited with {process.returncode}")
        with contextlib.suppress(OSError), \
                urllib.request.urlopen(f"{base}/healthz", timeout=2) as answer:  # fmt: skip
            if answer.status == 200:
                return
        time.sleep(0.25)
    raise SystemExit("kinflow serve did not become healthy")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a process so far (0 when it is gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_group(process: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """SIGTERM the server's process group, SIGKILL it if it is still there after ``grace``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
