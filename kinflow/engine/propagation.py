"""Single-flight propagation rounds: one parent evaluation at a time per process.

When a child's commit changes what its parent's ``$subworkflows`` row reads,
the child's document says so (``propagateTo`` + a token, written in the
child's own transaction) and the runner asks this module for a *round* on the
parent: one commit that stamps every owed row at once, then the parent's
cascade, then the same upward. A round on a cohort parent costs in proportion
to the cohort (the parent document holds every row), so per process at most
one round per parent runs at a time: a request that arrives while one runs
marks the parent dirty and is served by exactly one more round, which picks
up every stamp owed by then. N concurrent completions therefore cost a few
rounds, not N.

Correctness across processes does not depend on this: the owed-stamp marker
is durable and the heartbeat runs rounds for any parent still owed one.

With ``wait=True`` a requester waits for the round that covers its request
(the reference's contract: a verb on a child returns after the parent reacted);
with ``wait=False`` it returns at once and the round runs in the background.
In the background, rounds on one parent are paced: after a round that took
``t`` seconds the next starts no sooner than ``pace * t`` later, so rounds
take a bounded share of the process however large the parent grows, and
each round absorbs every completion that arrived meanwhile. The number of
rounds over a cohort's life then stays roughly constant as the cohort grows,
instead of one round per child.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class _Flight:
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


class Propagator:
    """Coalesces propagation rounds per parent id."""

    def __init__(self, run_round: Callable[[str], Awaitable[None]], *, wait: bool = True,
                 pace: float = 2.0):
        self._run_round = run_round
        self.wait = wait
        self.pace = pace
        self._flights: dict[str, _Flight] = {}
        self.rounds = 0  # rounds run (the bench reports parent commits from the lake)

    async def request(self, parent_id: str) -> None:
        """Ask for a round on ``parent_id`` that starts after this call."""
        flight = self._flights.setdefault(parent_id, _Flight())
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        flight.waiters.append(future)
        if flight.task is None:
            flight.task = asyncio.create_task(self._fly(parent_id, flight))
        if self.wait:
            await future
        else:
            future.add_done_callback(_retrieve)

    async def _fly(self, parent_id: str, flight: _Flight) -> None:
        try:
            while flight.waiters:
                waiters, flight.waiters = flight.waiters, []
                self.rounds += 1
                started = time.monotonic()
                try:
                    await self._run_round(parent_id)
                except Exception as exc:  # the heartbeat repairs; the waiters learn of it
                    log.warning("propagation round on %s failed: %s", parent_id, exc)
                    for future in waiters:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for future in waiters:
                    if not future.done():
                        future.set_result(None)
                if not self.wait and flight.waiters:
                    await asyncio.sleep((time.monotonic() - started) * self.pace)
        finally:
            flight.task = None
            if not flight.waiters:
                self._flights.pop(parent_id, None)

    async def idle(self) -> None:
        """Wait until no round is running or owed in this process."""
        while True:
            tasks = [f.task for f in self._flights.values() if f.task is not None]
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # mark it retrieved: a background failure is logged above
