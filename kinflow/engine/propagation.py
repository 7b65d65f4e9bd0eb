"""Single-flight propagation rounds: one parent evaluation at a time per process.

When a child's commit changes what its parent's ``$subworkflows`` row reads,
the child's document says so (``propagateTo`` + a token, written in the
child's own transaction) and the shell (``driving``) asks this module for a
*round* on the parent: one commit that stamps every owed row at once, then the parent's
cascade, then the same upward. A round on a cohort parent costs in proportion
to the cohort (the parent document holds every row), so per process at most
one round per parent runs at a time: a request that arrives while one runs
marks the parent dirty and is served by exactly one more round, which picks
up every stamp owed by then. N concurrent completions therefore cost a few
rounds, not N.

Correctness across processes does not depend on this: the owed-stamp marker
is durable and the heartbeat runs rounds for any parent still owed one.

Whether a requester waits is decided per parent (``mode="auto"``, the
default): while the parent's cohort is small (at most ``INLINE_LIVE_ROWS``
live rows when a round first saw it large; a parent not seen yet counts as
small) the requester waits for the round that covers its request (the
reference's contract: a verb on a child returns after the parent reacted, so
a frontend sees the parent move in the child's own response). Beyond that it
returns at once and the parent reacts in background rounds. ``"inline"`` and
``"background"`` force one behaviour (tests and comparisons). In the
background, rounds on one parent are paced: after a round that took ``t``
seconds the next starts no sooner than ``pace * t`` later (or as soon as the
requests stop for ``QUIET_SECONDS``: the burst is over), so rounds take a
bounded share of the process however large the parent grows, and each round
absorbs every completion that arrived meanwhile. The number of rounds over a
cohort's life then stays roughly constant as the cohort grows, instead of one
round per child.

A window is the exception to pacing (``Reaction.refill``): while a cohort of
the parent has queued rows, only the parent's round starts them, so every
moment the pace holds a round back is a moment its freed places stay empty.
Once as many requests as half the smallest such window arrived, the next
round starts at once; rounds stay large (half a window each) and the window
refills while the other half still works.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

INLINE_LIVE_ROWS = 32  # cohorts up to this many live rows propagate inline in "auto" mode
_REMEMBERED = 4096  # parents whose cohort size this process remembers
QUIET_SECONDS = 0.25  # no request for this long ends a round's pacing early
MODES = ("auto", "inline", "background")


@dataclass(frozen=True, slots=True)
class Reaction:
    """What a round reports about its parent."""

    live: int  # the parent's live rows after the round (0: none, or the parent is gone)
    refill: int | None = None  # a window waits for places: this many requests end the pace


@dataclass
class _Flight:
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    refill: int | None = None
    enough: asyncio.Event = field(default_factory=asyncio.Event)  # refill requests arrived


class Propagator:
    """Coalesces propagation rounds per parent id."""

    def __init__(self, run_round: Callable[[str], Awaitable[Reaction]], *,
                 mode: str = "auto", pace: float = 2.0):
        """``run_round(parent_id)`` runs one round and says what it left."""
        if mode not in MODES:
            raise ValueError(f"propagation mode must be one of {MODES}, not {mode!r}")
        self._run_round = run_round
        self.mode = mode
        self.pace = pace
        self._flights: dict[str, _Flight] = {}
        self._live: dict[str, int] = {}  # parent id -> live rows its last round saw
        self.rounds = 0  # rounds run (the bench reports parent commits from the lake)

    def waits_for(self, parent_id: str) -> bool:
        """Whether a request on ``parent_id`` returns only after the round that covers it."""
        if self.mode != "auto":
            return self.mode == "inline"
        return parent_id not in self._live

    async def request(self, parent_id: str) -> None:
        """Ask for a round on ``parent_id`` that starts after this call."""
        flight = self._flights.setdefault(parent_id, _Flight())
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        flight.waiters.append(future)
        if flight.refill is not None and len(flight.waiters) >= flight.refill:
            flight.enough.set()
        if flight.task is None:
            flight.task = asyncio.create_task(self._fly(parent_id, flight))
        if self.waits_for(parent_id):
            await future
        else:
            future.add_done_callback(_retrieve)

    def _remember(self, parent_id: str, live: int | None) -> None:
        """Note the parent's live rows; a large cohort stays in background until it ends.

        The tail of a large cohort keeps the background: a round still costs in
        proportion to the parent's whole registry, so waiting on it per child
        would make the last 32 children of 10,000 cost 32 full rounds.
        """
        known = self._live.pop(parent_id, None)
        if not live or (known is None and live <= INLINE_LIVE_ROWS):
            return  # small, finished or gone: the default (wait) applies
        if len(self._live) >= _REMEMBERED:
            self._live.pop(next(iter(self._live)))
        self._live[parent_id] = live

    async def _fly(self, parent_id: str, flight: _Flight) -> None:
        try:
            while flight.waiters:
                waiters, flight.waiters = flight.waiters, []
                self.rounds += 1
                started = time.monotonic()
                try:
                    reaction = await self._run_round(parent_id)
                    self._remember(parent_id, reaction.live)
                    flight.refill = reaction.refill
                except Exception as exc:  # the heartbeat repairs; the waiters learn of it
                    log.warning("propagation round on %s failed: %s", parent_id, exc)
                    for future in waiters:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for future in waiters:
                    if not future.done():
                        future.set_result(None)
                if flight.waiters and not self.waits_for(parent_id):
                    await self._paced(flight, (time.monotonic() - started) * self.pace)
        finally:
            flight.task = None
            if not flight.waiters:
                self._flights.pop(parent_id, None)

    async def _paced(self, flight: _Flight, seconds: float) -> None:
        """Wait ``seconds`` before the next round, or less once the requests stop.

        While children keep completing, the next round waits its full pace and then
        absorbs all of them. When no request arrived for ``QUIET_SECONDS`` the burst
        is over, and the round that stamps its last children starts at once instead
        of after a pause as long as two rounds. A window waiting for places ends the
        pause once ``refill`` requests arrived.
        """
        deadline = time.monotonic() + seconds
        flight.enough.clear()
        while (left := deadline - time.monotonic()) > 0:
            before = len(flight.waiters)
            if flight.refill is not None and before >= flight.refill:
                return
            try:
                await asyncio.wait_for(flight.enough.wait(), min(QUIET_SECONDS, left))
                return  # half a window finished: start the next ones now
            except TimeoutError:
                pass
            if len(flight.waiters) == before:
                return

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
