"""A cap on the transactions one process keeps open on the lake at once.

Why: on the embedded lake an open transaction keeps its storage cursors where
its last statement left them until it commits, and a positioned cursor pins
the page under it. The newest page of the documents table holds the
documents every workflow is writing, so it grows fastest; when it must be
evicted, the storage engine waits until no cursor pins it, and every reader
of that page waits meanwhile. With a dozen transactions open (each one
waiting between its statements for the API to plan) some cursor always pins
it, and the whole lake stalls for up to a second, every few seconds, under
load (measured: docs/performance.md, "The stalls"). A handful of open
transactions keeps the daemon as busy as a dozen, since it executes one
statement at a time anyway, and lets those evictions through.

The cap is per process and per task: a transaction started while the task
(or a task it started) already holds a slot does not take a second one, so a
nested transaction can never wait for a slot its own caller holds. A slot is
held for one attempt only and given back during the backoff between
attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator

_HOLDING: contextvars.ContextVar[bool] = contextvars.ContextVar("kinflow_txn_slot",
                                                                 default=False)


class NoSlot(Exception):
    """No slot came free within the caller's deadline."""


class TransactionSlots:
    """At most ``limit`` transactions of this process open at once."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a transaction cap is at least 1")
        self.limit = limit
        self._free = asyncio.Semaphore(limit)
        self.waited = 0  # attempts that found every slot taken (for benchmarks)

    @contextlib.asynccontextmanager
    async def held(self, within: float) -> AsyncIterator[None]:
        """Hold a slot for the body; ``NoSlot`` when none is free within ``within`` seconds."""
        if _HOLDING.get():
            yield
            return
        if self._free.locked():
            self.waited += 1
        try:
            async with asyncio.timeout(within):
                await self._free.acquire()
        except TimeoutError:
            raise NoSlot(f"no transaction slot came free within {within:.1f} s") from None
        token = _HOLDING.set(True)
        try:
            yield
        finally:
            _HOLDING.reset(token)
            self._free.release()
