"""One subscriber of the change hub: its queue and its states, with their transitions in one place.

A subscription is in exactly one state:

* ``BUFFERING``: registered while its snapshot is read; every change the
  stream delivers is kept, unjudged;
* ``FENCED``: the snapshot is queued; changes the snapshot may already
  reflect (at or before the read's operation time) are held until the stream
  has passed the read, then judged by document (``Fence``);
* ``LIVE``: every change is queued as it comes;
* ``CLOSED``: closed by its consumer or the hub, or cut off for falling
  behind (then its queue holds one ``resync``); nothing more is delivered.

``MOVES`` lists the transitions; ``Subscription._move`` is the only place the
state changes, and it keeps the hub's books (fenced subscribers, registered
ones) in step. How the fence judges changes is the hub's contract
(``kinflow.storage.hub``).
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kinflow.observability import work

if TYPE_CHECKING:
    from bson.timestamp import Timestamp


@dataclass(frozen=True)
class ChangeEvent:
    """One committed change (or ``snapshot``/``resync``) as a subscriber sees it."""

    kind: str  # snapshot | insert | update | replace | delete | resync
    document_id: str | None = None
    document: Mapping[str, Any] | None = None
    documents: tuple[Mapping[str, Any], ...] = ()
    updated_fields: Mapping[str, Any] | None = None
    cluster_time: Timestamp | None = None
    rev: str | None = None


RESYNC = ChangeEvent(kind="resync")


class State(enum.Enum):
    BUFFERING = "buffering"
    FENCED = "fenced"
    LIVE = "live"
    CLOSED = "closed"


MOVES: dict[State, frozenset[State]] = {
    State.BUFFERING: frozenset({State.FENCED, State.LIVE, State.CLOSED}),
    State.FENCED: frozenset({State.LIVE, State.CLOSED}),
    State.LIVE: frozenset({State.CLOSED}),
    State.CLOSED: frozenset(),
}


class Registry(Protocol):
    """What a subscription tells its hub: that it is fenced or not, and that it is gone."""

    def _fencing(self, sub: Subscription, fenced: bool) -> None: ...

    def _forget(self, sub: Subscription) -> None: ...


def _unless_cancelled(sub: Subscription) -> None:
    """Close ``sub`` and re-raise a cancellation that something below swallowed.

    A cancellation that lands in the snapshot's read can be absorbed below
    kinflow: the task then runs on with its cancellation still requested
    (``Task.cancelling()``) and would wait for events for ever, registered.
    Subscribe/complete churn left hundreds of such subscribers behind after
    their socket closed; checking before every wait ends them.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        sub.close()
        raise asyncio.CancelledError


@dataclass(eq=False)
class Subscription:
    """A subscriber's bounded queue; iterate it to receive events."""

    topic: str
    limit: int
    _hub: Registry = field(repr=False)
    state: State = State.BUFFERING
    lagged: bool = False  # cut off for falling behind
    _queue: deque[ChangeEvent] = field(default_factory=deque, repr=False)
    _buffer: list[ChangeEvent] = field(default_factory=list, repr=False)  # BUFFERING
    _fence: Fence | None = field(default=None, repr=False)  # FENCED
    _wake: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def closed(self) -> bool:
        return self.state is State.CLOSED

    def _move(self, to: State) -> None:
        """Change state (one of ``MOVES``) and keep the hub's books in step."""
        if to not in MOVES[self.state]:
            raise RuntimeError(f"a {self.state.value} subscription cannot become {to.value}")
        before, self.state = self.state, to
        if before is State.FENCED:
            self._fence = None
            self._hub._fencing(self, False)
        if to is State.FENCED:
            self._hub._fencing(self, True)
        if to is State.CLOSED:
            self._buffer = []
            self._hub._forget(self)
        self._wake.set()

    def offer(self, event: ChangeEvent) -> None:
        if self.state is State.CLOSED:
            return
        if self.state is State.BUFFERING:
            self._buffer.append(event)
            if len(self._buffer) > self.limit:
                self.cut_off()
            return
        if self._fence is not None:  # FENCED
            if not self._fence.is_after_read(event):
                self._fence.held.append(event)
                if len(self._fence.held) > self.limit:
                    self.cut_off()
                return
            self._lift_fence()
        self._enqueue(event)

    def _enqueue(self, event: ChangeEvent) -> None:
        if self.state is State.CLOSED:
            return
        if len(self._queue) >= self.limit:
            self.cut_off()
            return
        self._queue.append(event)
        self._wake.set()

    def _lift_fence(self) -> None:
        """The stream has passed the snapshot read: deliver what it did not reflect."""
        fence = self._fence
        if fence is None:
            return
        self._move(State.LIVE)
        for event in fence.unreflected():
            self._enqueue(event)

    def quiet_round(self, rounds: int) -> None:
        if self._fence is not None and rounds >= self._fence.lift_at_round:
            self._lift_fence()

    def go_live(self, first: Sequence[ChangeEvent], fence: Fence | None = None) -> None:
        """Queue ``first`` (the snapshot), then judge what was buffered meanwhile."""
        if self.state is State.CLOSED:
            return
        buffered, self._buffer = self._buffer, []
        self._queue.extend(first)
        if fence is not None:
            self._fence = fence
            self._move(State.FENCED)
        else:
            self._move(State.LIVE)
        for event in buffered:
            self.offer(event)
        self._wake.set()

    def cut_off(self) -> None:
        """Drop everything queued and tell the consumer to resubscribe."""
        if self.state is State.CLOSED:
            return
        self.lagged = True
        work.resynced()
        self._queue.clear()
        self._queue.append(RESYNC)
        self._move(State.CLOSED)

    def close(self) -> None:
        if self.state is not State.CLOSED:
            self._move(State.CLOSED)

    def unless_cancelled(self) -> None:
        """Close and re-raise when this task's cancellation was swallowed below."""
        _unless_cancelled(self)

    def pending(self) -> int:
        return len(self._queue)

    def __aiter__(self) -> AsyncIterator[ChangeEvent]:
        return self

    async def __anext__(self) -> ChangeEvent:
        while True:
            if self._queue:
                return self._queue.popleft()
            if self.state is State.CLOSED:
                raise StopAsyncIteration
            _unless_cancelled(self)
            self._wake.clear()
            await self._wake.wait()

    async def next(self, timeout: float | None = None) -> ChangeEvent:
        """The next event, or ``TimeoutError`` after ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            return await self.__anext__()


@dataclass
class Fence:
    """Holds the changes a snapshot may reflect until they can be judged.

    The stream delivers changes in cluster-time order, so once one change
    after the read's upper bound passes, every later one is after it too and
    the fence lifts.
    """

    snapshot_rev: dict[Any, Any]
    read_at: Timestamp | None
    lift_at_round: int
    held: list[ChangeEvent] = field(default_factory=list)

    def is_after_read(self, event: ChangeEvent) -> bool:
        return (
            self.read_at is None or event.cluster_time is None or event.cluster_time > self.read_at
        )

    def unreflected(self) -> list[ChangeEvent]:
        """The held changes in order, less those the snapshot already shows."""
        last_reflected: dict[Any, int] = {}
        for index, event in enumerate(self.held):
            doc_id = event.document_id
            if doc_id in self.snapshot_rev:
                rev = self.snapshot_rev[doc_id]
                if rev is not None and event.rev == rev:
                    last_reflected[doc_id] = index
            elif event.kind == "delete":
                last_reflected[doc_id] = index
        return [
            event
            for index, event in enumerate(self.held)
            if index > last_reflected.get(event.document_id, -1)
        ]
