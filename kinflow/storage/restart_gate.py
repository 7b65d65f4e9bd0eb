"""A gate lake operations pass through, closed while kinflow restarts the daemon it owns.

Why: the memory guard restarts the embedded daemon on purpose, every few
minutes under load. Killing it under calls in flight would hand those calls
a lost connection (``lake-unavailable``) for a restart the process itself
chose. So a planned restart first *closes* the gate: new operations wait at
it, and the restart waits (a few seconds at most) for the operations already
past it to finish. Only then is the daemon stopped and started again; the
gate reopens and the waiting operations go on. Clients see a slower call,
not an error. See docs/reliability.md, "Planned restarts".

The gate is re-entrant per task: a statement of a transaction that already
passed (and the tasks it starts) never waits, so a transaction can never wait
for a gate its own passage keeps from draining.

Two bounds keep the promise when the daemon holds much data. A *long*
operation (one given a deadline past the operation timeout: a spawn's first
registration batch reading every document of a type) postpones a planned
restart instead of being cut: killing it would only make it run again and
grow the daemon the same way. And a wait at a closed gate lasts as long as
the restart may (``close(bound=...)``: drain, stop and start), not just the
waiting call's own timeout: a daemon holding a million documents takes about
10 s to start on a 2-core machine, longer under load.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncIterator

from kinflow.errors import LakeUnavailable

_PASSAGE: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "kinflow_lake_passage", default=None)

RECENT = 5.0  # seconds after a planned restart in which a lost connection is put down to it


class RestartGate:
    """Holds lake operations back while a planned restart of the daemon runs."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._inflight = 0
        self._live: set[object] = set()
        self.restarts = 0  # planned restarts begun
        self.waited = 0  # operations that found the gate closed
        self.undrained = 0  # restarts that began with operations still in flight
        self.long_inflight = 0  # long operations past the gate: a restart waits for them
        self._ended_at: float | None = None
        self._restart_until = 0.0  # monotonic time by which a running restart ends

    @property
    def closed(self) -> bool:
        return not self._open.is_set()

    def restart_explains(self) -> bool:
        """A planned restart is running or ended moments ago: a lost connection is its doing."""
        ended = self._ended_at
        return self.closed or (ended is not None and time.monotonic() - ended < RECENT)

    async def wait_open(self, within: float, verb: str) -> None:
        """Wait until the gate is open; ``lake-unavailable`` when it stays closed ``within`` s
        and past the time the running restart may take."""
        if self._open.is_set():
            return
        within = max(within, self._restart_until - time.monotonic())
        try:
            async with asyncio.timeout(max(within, 0.0)):
                await self._open.wait()
        except TimeoutError:
            raise LakeUnavailable(
                f"the lake was restarting and did not come back within {within:.1f} s",
                verb=verb, cause="planned-restart") from None

    @contextlib.asynccontextmanager
    async def passage(self, within: float, verb: str, *, long: bool = False
                      ) -> AsyncIterator[None]:
        """Pass the gate for one operation (or one transaction with its statements);
        a ``long`` one postpones planned restarts until it ends."""
        if _PASSAGE.get() in self._live:
            yield  # already inside: a statement of a transaction that passed
            return
        if self.closed:
            self.waited += 1
            await self.wait_open(within, verb)
        token = object()
        self._live.add(token)
        self._inflight += 1
        self.long_inflight += long
        self._idle.clear()
        reset = _PASSAGE.set(token)
        try:
            yield
        finally:
            _PASSAGE.reset(reset)
            self._live.discard(token)
            self._inflight -= 1
            self.long_inflight -= long
            if self._inflight == 0:
                self._idle.set()

    async def close(self, drain: float, bound: float = 0.0) -> bool:
        """Close the gate and wait up to ``drain`` s for operations in flight; True if none are.
        ``bound``: the seconds the restart may take from now (waiting calls wait that long)."""
        self._open.clear()
        self._restart_until = time.monotonic() + bound
        self.restarts += 1
        try:
            async with asyncio.timeout(drain):
                await self._idle.wait()
            return True
        except TimeoutError:
            self.undrained += 1
            return False

    def reopen(self) -> None:
        """Let the waiting operations go on."""
        self._ended_at = time.monotonic()
        self._restart_until = 0.0
        self._open.set()

    def report(self) -> dict[str, int | bool]:
        return {"closed": self.closed, "plannedRestarts": self.restarts,
                "waited": self.waited, "undrained": self.undrained}
