"""Several real kinflow processes on one data directory: start, probe, kill, stop.

Every process runs in a session of its own (so a kill never reaches the
test), logs to ``<data_dir>/<name>.log`` and is stopped by the test: SIGTERM,
timed (it must be gone within 10 s), then SIGKILL for anything left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.reliability.family import ROOT
from tests.reliability.orders import HANDLER
from tests.support import free_port

STOP_LIMIT = 10.0


def health(base: str, timeout: float = 5.0) -> tuple[int | None, dict[str, Any]]:
    """``/healthz``'s status and body; (None, {}) when nothing answers."""
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
    except (OSError, ValueError):
        return None, {}


@dataclass
class Proc:
    name: str
    process: subprocess.Popen[bytes]
    base: str | None = None  # an API's URL

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class Fleet:
    """The kinflow processes of one test, all on ``data_dir``."""

    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)
    killed: set[int] = field(default_factory=set)
    stop_seconds: dict[str, float] = field(default_factory=dict)

    def _env(self) -> dict[str, str]:
        env = {**os.environ, "KINFLOW_DATA_DIR": str(self.data_dir), "KINFLOW_HOST": "127.0.0.1",
               "KINFLOW_EFFECT_HANDLERS": str(HANDLER), "KINFLOW_WORKER_INTERVAL": "0.3",
               "KINFLOW_TEST_EFFECT_LOG": str(self.effect_log), "PYTHONPATH": str(ROOT),
               **self.env}
        for name in ("KINFLOW_MONGODB_URI", "KINFLOW_API_TOKENS", "KINFLOW_API_TOKENS_FILE"):
            env.pop(name, None)
        return env

    @property
    def effect_log(self) -> Path:
        return self.data_dir / "effects.log"

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with (self.data_dir / f"{name}.log").open("ab") as log:
            return subprocess.Popen([sys.executable, "-m", "kinflow.cli", *args], env=env,
                                    cwd=self.data_dir, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # fmt: skip

    def api(self, name: str, *, worker: bool) -> Proc:
        port = free_port()
        env = {**self._env(), "KINFLOW_PORT": str(port)}
        args = ["serve"] if worker else ["serve", "--no-worker"]
        proc = Proc(name, self._spawn(name, args, env), f"http://127.0.0.1:{port}")
        self.procs.append(proc)
        self.wait_healthy(proc)
        return proc

    def worker(self, name: str, timeout: float = 90.0) -> Proc:
        """A ``kinflow worker``, once it says it is running."""
        proc = Proc(name, self._spawn(name, ["worker"], self._env()))
        self.procs.append(proc)
        began = time.monotonic()
        while "running (stop with Ctrl-C)" not in self.log_tail(name):
            assert proc.alive(), f"{name} exited: {self.log_tail(name)}"
            assert time.monotonic() - began < timeout, f"{name} never said it was running"
            time.sleep(0.1)
        return proc

    def wait_healthy(self, proc: Proc, timeout: float = 90.0) -> float:
        """Seconds until ``proc``'s ``/healthz`` answers 200."""
        assert proc.base is not None
        began = time.monotonic()
        while health(proc.base, timeout=2.0)[0] != 200:
            assert proc.alive(), f"{proc.name} exited: {self.log_tail(proc.name)}"
            assert time.monotonic() - began < timeout, f"{proc.name} never became healthy"
            time.sleep(0.1)
        return time.monotonic() - began

    def state(self) -> dict[str, int]:
        return {k: int(v) for k, v in json.loads((self.data_dir / "lake.json").read_text())
                .items() if v is not None}

    def wait_lake(self, other_than: int, timeout: float = 60.0) -> dict[str, int]:
        """``lake.json`` once it names a live daemon other than ``other_than``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                state = self.state()
                if state["pid"] != other_than and _alive(state["pid"]):
                    return state
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.1)
        raise AssertionError("no process started the lake again")

    def kill(self, proc: Proc) -> None:
        self.killed.add(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.process.wait(10)

    def kill_daemon(self) -> int:
        pid = self.state()["pid"]
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop_all(self) -> None:
        """SIGTERM every live process at once; record how long each took to exit."""
        live = [p for p in self.procs if p.alive()]
        began = time.monotonic()
        for proc in live:
            os.killpg(proc.pid, signal.SIGTERM)
        while live and time.monotonic() - began < STOP_LIMIT + 20:
            for proc in [p for p in live if not p.alive()]:
                self.stop_seconds[proc.name] = time.monotonic() - began
                live.remove(proc)
            time.sleep(0.05)
        for proc in live:  # still there: a failure the test reports
            self.stop_seconds[proc.name] = time.monotonic() - began
            os.killpg(proc.pid, signal.SIGKILL)
            proc.process.wait(10)

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.alive():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.process.wait(10)
        try:
            os.kill(self.state()["pid"], signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass

    def log_tail(self, name: str, chars: int = 3000) -> str:
        try:
            return (self.data_dir / f"{name}.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def logs_mention(self, text: str) -> list[str]:
        return [p.name for p in self.procs if text in self.log_tail(p.name, 10**7)]


def _alive(pid: int) -> bool:
    from kinflow.storage.embedded import pid_alive

    return pid_alive(pid)
