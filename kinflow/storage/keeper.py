"""Keeping the embedded lake alive: every process on a data directory watches its daemon.

One daemon serves every kinflow process on a data directory (``lake.json``
names it). When it dies (``kill -9``, the out-of-memory killer, or its owner
killed, which takes it along), each process notices within ``interval``:

* the process that started it (the *owner*) starts it again on the same port
  (the daemon binds with ``SO_REUSEADDR``), so every client in every process
  reconnects by itself and nothing else has to change;
* the others wait ``takeover_after`` seconds while the owner is alive, then
  start one themselves: the first to open the data directory wins (the
  WiredTiger lock and the port decide), becomes the owner and records itself
  in ``lake.json``; the rest follow it, switching client if it has a new port;
* a process that cannot get a daemon answering within ``give_up_after``
  seconds says why and calls ``on_fatal`` (by default it sends itself
  SIGTERM, so it stops cleanly and its command exits non-zero).

Meanwhile ``status`` says the lake is down (``/healthz`` answers 503) and
lake calls fail as ``lake-unavailable`` within the operation timeout.

A restart the owner plans (the memory guard's, ``restart_planned``) is not a
death: the lake's restart gate (``restart_gate.py``) holds new operations
back and lets those in flight finish before the daemon is stopped, and opens
again once the new daemon answers, so callers only wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kinflow.errors import ConfigurationError
from kinflow.storage.embedded import (
    EmbeddedLake,
    LakeState,
    _free_port,
    _Locked,
    _PortTaken,
    pid_alive,
    port_free,
    uri_for,
)

if TYPE_CHECKING:
    from pymongo import AsyncMongoClient

    from kinflow.storage.lake import Lake

log = logging.getLogger("kinflow.lake")

fatal_error: str | None = None  # set when a keeper gave up; commands exit non-zero on it


def _signal_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


@dataclass
class KeeperStatus:
    """What ``/healthz`` reports about the daemon."""

    state: str = "up"  # up | down | restarting | failed
    down_since: float | None = None
    restarts: int = 0  # daemons this process started after the first
    planned: int = 0  # of those, restarts this process chose (the memory guard's)
    follows: int = 0  # times this process moved to a daemon another one started
    last_error: str | None = None


class LakeKeeper:
    """Watches one embedded daemon from one process, and brings it back when it dies."""

    def __init__(
        self,
        embedded: EmbeddedLake,
        lake: Lake,
        client_factory: Callable[[str], AsyncMongoClient[Any]],
        *,
        interval: float = 0.5,
        takeover_after: float = 5.0,
        give_up_after: float = 60.0,
        on_fatal: Callable[[], None] = _signal_self,
        drain: float = 5.0,
        stop_timeout: float = 10.0,
    ) -> None:
        self.embedded = embedded
        self.lake = lake
        self.client_factory = client_factory
        self.interval = interval
        self.takeover_after = takeover_after
        self.give_up_after = give_up_after
        self.on_fatal = on_fatal
        self.drain = drain
        self.stop_timeout = stop_timeout
        self._planned = False
        self.status = KeeperStatus()
        self._task: asyncio.Task[None] | None = None
        self._port_taken = 0

    # -- lifecycle -------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="lake-keeper")

    async def stop(self) -> None:
        task, self._task = self._task, None
        self.embedded.cancel_waits()  # a restart waiting in a thread would delay the exit
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=5.0)

    @property
    def up(self) -> bool:
        """The daemon is up as far as this process can tell right now (no round trip)."""
        return self.status.state == "up" and self._daemon_alive()

    def report(self) -> dict[str, Any]:
        """The daemon as this process sees it (for ``/healthz``)."""
        down = self.status.down_since
        return {
            "state": self.status.state,
            "owner": self.embedded.owned,
            "port": self.embedded.port,
            "pid": self.embedded.pid,
            "restarts": self.status.restarts,
            "plannedRestarts": self.status.planned,
            "follows": self.status.follows,
            "downSeconds": round(time.monotonic() - down, 1) if down is not None else None,
            "lastError": self.status.last_error,
            **({"gate": self.lake.gate.report()} if self.lake.gate is not None else {}),
        }

    async def _run(self) -> None:
        while True:
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failing check must not end the watch
                log.exception("checking the embedded lake failed")
                self.status.last_error = f"{type(exc).__name__}: {exc}"
            if self.status.state == "failed":
                return
            await asyncio.sleep(self.interval)

    # -- one look --------------------------------------------------------

    async def check(self) -> None:
        """Look at the daemon once; start or follow a new one when it is gone."""
        if self._planned:
            return  # restart_planned is bringing it back
        state = self.embedded.state()
        if self._daemon_alive():
            if (not self.embedded.owned and state is not None and state.pid != self.embedded.pid
                    and pid_alive(state.pid)):
                await self._follow(state)  # another process moved the lake
            self._mark_up()
            return
        self._mark_down(state)
        if state is not None and state.pid != self.embedded.pid and pid_alive(state.pid):
            await self._follow(state)  # someone already started a new daemon
            self._mark_up()
            return
        if not self.embedded.owned and self._owner_alive(state) and self._down_for() < \
                self.takeover_after:
            return  # the owner is alive: its keeper restarts the daemon
        await self._restart(state)

    def _daemon_alive(self) -> bool:
        pid = self.embedded.pid
        if self.embedded.owned:
            return self.embedded.process_running()
        return pid is not None and pid_alive(pid)

    @staticmethod
    def _owner_alive(state: LakeState | None) -> bool:
        return state is not None and state.owner is not None and pid_alive(state.owner)

    def _down_for(self) -> float:
        since = self.status.down_since
        return 0.0 if since is None else time.monotonic() - since

    def _mark_down(self, state: LakeState | None) -> None:
        if self.status.down_since is None:
            self.status.down_since = time.monotonic()
            self.status.state = "down"
            if self.embedded.owned:
                plan = "restarting it"
            elif self._owner_alive(state):
                plan = "waiting for its owner to restart it"
            else:
                plan = "its owner is gone too: taking it over"
            log.error("the embedded lake (pid %s, port %s) is gone; %s", self.embedded.pid,
                      self.embedded.port, plan)  # fmt: skip

    def _mark_up(self) -> None:
        if self.status.down_since is not None:
            log.warning("the embedded lake is back (pid %s, port %s) after %.1f s",
                        self.embedded.pid, self.embedded.port, self._down_for())  # fmt: skip
        self.status.down_since = None
        self.status.state = "up"
        self._port_taken = 0

    # -- bringing it back ------------------------------------------------

    async def _follow(self, state: LakeState) -> None:
        moved = state.port != self.embedded.port
        self.embedded.follow(state)
        self.status.follows += 1
        if moved:
            await self.lake.use_client(self.client_factory(uri_for(state.port)))
        log.warning("following the embedded lake another process started (pid %s, port %s)",
                    state.pid, state.port)  # fmt: skip

    async def _restart(self, state: LakeState | None) -> None:
        old_port = self.embedded.port
        port = old_port or (state.port if state is not None else None)
        if port is None or self._port_taken >= 2 or not port_free(port):
            port = _free_port()  # the old port is held by something that is not our lake
        self.status.state = "restarting"
        try:
            # forked here, on the loop's (main) thread: the daemon's parent-death
            # signal is bound to the thread that starts it
            process, port = self.embedded.launch(port)
            await asyncio.to_thread(self.embedded.wait_ready, process, port)
        except (_Locked, _PortTaken) as exc:
            # another process won the start: follow it once lake.json names it
            self._port_taken += isinstance(exc, _PortTaken)
            self.status.state = "down"
            self._give_up_if_late(f"the lake's port or data directory stayed held ({exc!r})")
            return
        except ConfigurationError as exc:
            self.status.state = "down"
            self.status.last_error = exc.message
            log.error("could not restart the embedded lake: %s", exc.message)
            self._give_up_if_late(exc.message)
            return
        self.embedded.record(process, port)
        self.status.restarts += 1
        if port != old_port:
            await self.lake.use_client(self.client_factory(uri_for(port)))
        log.warning("started the embedded lake again (pid %s, port %s)", process.pid, port)
        self._mark_up()

    async def restart_planned(self) -> bool:
        """Stop the daemon this process owns and start it again, unseen by callers.

        The restart gate closes first (operations arriving now wait) and the
        operations already past it get up to ``drain`` seconds to finish; then
        the daemon is stopped (SIGTERM: it checkpoints and exits) and started
        again on its port, and the gate opens. Returns False when this process
        does not own the daemon, a restart is already running, or a long operation
        is in flight (the restart waits for it to end).
        """
        if not self.embedded.owned or self._planned or self.status.state != "up":
            return False
        gate = self.lake.gate
        if gate is not None and gate.long_inflight:
            return False  # a long read runs: cut, it would only run again (restart_gate.py)
        self._planned = True
        bound = self.drain + self.stop_timeout + self.embedded.start_timeout
        try:
            drained = await gate.close(self.drain, bound) if gate is not None else True
            if not drained:
                log.warning("restarting the embedded lake with operations still in flight "
                            "after %.1f s", self.drain)  # fmt: skip
            self.status.state = "restarting"
            self.status.down_since = time.monotonic()
            await asyncio.to_thread(self.embedded.terminate, self.stop_timeout)
            await self._restart(self.embedded.state())
            if self.status.state == "up":
                self.status.planned += 1
        finally:
            self._planned = False
            if gate is not None:
                gate.reopen()
        return True

    def _give_up_if_late(self, reason: str) -> None:
        global fatal_error
        if self._down_for() < self.give_up_after:
            return
        fatal_error = (f"the embedded lake died and could not be restarted within "
                       f"{self.give_up_after:.0f} s: {reason}")  # fmt: skip
        self.status.state = "failed"
        log.critical("%s; stopping this process", fatal_error)
        with contextlib.suppress(Exception):
            self.on_fatal()
