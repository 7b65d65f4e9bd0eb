"""Stopping within a bound: a kinflow process is gone within 10 s of SIGTERM.

A clean stop ends subscriptions, lets the worker finish its item, closes the
lake client and stops a daemon this process owns; each step is bounded, but
a lake that stopped answering can still stretch them. So the first SIGTERM
or SIGINT also arms a watchdog thread: if the process is still here
``EXIT_AFTER`` seconds later it says so and exits at once (the embedded
daemon it owns dies with it by its parent-death signal; every commit is
synced, so nothing acknowledged is lost). A second signal stops waiting
for open connections (``kinflow serve``) or exits at once (``kinflow worker``).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from types import FrameType

import uvicorn

from kinflow.cli import heap

log = logging.getLogger("kinflow")
EXIT_AFTER = 9.0  # seconds from the first signal to the watchdog's exit
GRACEFUL_SECONDS = 2  # uvicorn's wait for open connections, out of that budget

_armed = threading.Event()


def arm_watchdog(seconds: float = EXIT_AFTER) -> None:
    """Exit the process ``seconds`` from now unless it has exited by then (idempotent)."""
    if _armed.is_set():
        return
    _armed.set()

    def expire() -> None:
        message = f"kinflow: still stopping {seconds:.0f} s after the stop signal; exiting now\n"
        log.error(message.strip())
        sys.stderr.write(message)
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


class BoundedServer(uvicorn.Server):
    """uvicorn's server, with the watchdog armed by the first stop signal.

    uvicorn treats a second SIGTERM like the first (only a second SIGINT
    forces the exit); here any second signal stops the wait for connections.
    """

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:
            self.force_exit = True
        arm_watchdog()
        super().handle_exit(sig, frame)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.should_exit:  # started: what start-up built stays (cli/heap.py)
            heap.settle()


def serve(config: uvicorn.Config) -> bool:
    """Run the server until it is stopped; False when it never started."""
    server = BoundedServer(config)
    server.run()
    return server.started
