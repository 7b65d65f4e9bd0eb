"""The change hub: one change stream per process and dataset, many subscribers.

Opening a change stream per GraphQL subscription does not scale, so each
process watches a dataset once and routes every change to the subscribers of
its *topics*. Every change belongs to ``*`` and ``doc:<_id>``; callers add
topic functions for keys they need (the engine adds ``parent:<id>``).

How a subscription starts without a gap or a duplicate: the subscriber is
registered first and buffers whatever the stream delivers, then its snapshot
is read in a causally consistent session. The session's operation time ``U``
bounds the read from above only (the lake reports the last cluster time it
minted when it replied, which may be a write the read did not see), so a
change at or before ``U`` cannot be judged by its time. The fence holds such
changes until the stream has passed the read: a change after ``U`` arrives,
or the stream comes back empty twice from reads sent after the snapshot's.
By then every change the snapshot reflects that the stream delivers after
registration is held, so each is judged by document, not by time: for a
document in the snapshot, every change up to and including the one that wrote
the snapshot's ``_rev``; for one absent from it, every change up to and
including its last delete. The rest are delivered in stream order after the
snapshot, then live changes. (The one imprecision: a document created and
deleted again between the read and ``U``, a few milliseconds, is not shown,
which leaves the subscriber's view of it, absent, correct.)

Each subscriber has a bounded queue. One that falls behind is cut off: its
queue is replaced by a single ``resync`` event and it receives nothing more,
so a slow consumer never blocks the others. When the stream's history is lost
(server error 286) every subscriber gets ``resync``. Other stream errors
reopen it from the last resume token, with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pymongo.errors import OperationFailure, PyMongoError

if TYPE_CHECKING:
    from bson.timestamp import Timestamp
    from pymongo.asynchronous.client_session import AsyncClientSession

    from kinflow.storage.lake import Lake

log = logging.getLogger("kinflow.hub")

HISTORY_LOST = 286
ALL = "*"

TopicFunction = Callable[[Mapping[str, Any]], Iterable[str]]
SnapshotLoader = Callable[["AsyncClientSession"], Awaitable[Sequence[Mapping[str, Any]]]]


def doc_topic(doc_id: str) -> str:
    return f"doc:{doc_id}"


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


def event_from_change(change: Mapping[str, Any]) -> ChangeEvent | None:
    kind = change.get("operationType")
    if kind not in ("insert", "update", "replace", "delete"):
        return None
    key = change.get("documentKey") or {}
    document = change.get("fullDocument")
    updated = (change.get("updateDescription") or {}).get("updatedFields")
    if kind == "update":
        rev = (updated or {}).get("_rev")
    else:
        rev = document.get("_rev") if document else None
    return ChangeEvent(
        kind=str(kind),
        document_id=key.get("_id"),
        document=document,
        updated_fields=updated,
        cluster_time=change.get("clusterTime"),
        rev=rev,
    )


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
    _hub: ChangeHub = field(repr=False)
    _queue: deque[ChangeEvent] = field(default_factory=deque, repr=False)
    _buffer: list[ChangeEvent] | None = field(default_factory=list, repr=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _fence: _Fence | None = field(default=None, repr=False)
    closed: bool = False
    lagged: bool = False

    def offer(self, event: ChangeEvent) -> None:
        if self.closed:
            return
        if self._buffer is not None:
            self._buffer.append(event)
            if len(self._buffer) > self.limit:
                self.cut_off()
            return
        if self._fence is not None:
            if not self._fence.is_after_read(event):
                self._fence.held.append(event)
                if len(self._fence.held) > self.limit:
                    self.cut_off()
                return
            self._lift_fence()
        self._enqueue(event)

    def _enqueue(self, event: ChangeEvent) -> None:
        if self.closed:
            return
        if len(self._queue) >= self.limit:
            self.cut_off()
            return
        self._queue.append(event)
        self._wake.set()

    def _lift_fence(self) -> None:
        """The stream has passed the snapshot read: deliver what it did not reflect."""
        fence, self._fence = self._fence, None
        if fence is None:
            return
        self._hub._fenced.discard(self)
        for event in fence.unreflected():
            self._enqueue(event)

    def quiet_round(self, rounds: int) -> None:
        if self._fence is not None and rounds >= self._fence.lift_at_round:
            self._lift_fence()

    def cut_off(self) -> None:
        """Drop everything queued and tell the consumer to resubscribe."""
        self.lagged = True
        self._buffer = None
        self._queue.clear()
        self._queue.append(RESYNC)
        self.closed = True
        self._wake.set()
        self._hub._forget(self)

    def _go_live(self, first: Sequence[ChangeEvent], fence: _Fence | None = None) -> None:
        if self.closed:
            return
        buffered, self._buffer = self._buffer or [], None
        self._queue.extend(first)
        if fence is not None:
            self._fence = fence
            self._hub._fenced.add(self)
        for event in buffered:
            self.offer(event)
        self._wake.set()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._wake.set()
            self._hub._forget(self)

    def pending(self) -> int:
        return len(self._queue)

    def __aiter__(self) -> AsyncIterator[ChangeEvent]:
        return self

    async def __anext__(self) -> ChangeEvent:
        while True:
            if self._queue:
                return self._queue.popleft()
            if self.closed:
                raise StopAsyncIteration
            _unless_cancelled(self)
            self._wake.clear()
            await self._wake.wait()

    async def next(self, timeout: float | None = None) -> ChangeEvent:
        """The next event, or ``TimeoutError`` after ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            return await self.__anext__()


class ChangeHub:
    """Watches one dataset and fans its changes out to subscribers by topic."""

    def __init__(
        self,
        lake: Lake,
        dataset: str | None = None,
        *,
        queue_size: int = 1000,
        topic_functions: Iterable[TopicFunction] = (),
    ) -> None:
        self.lake = lake
        self.dataset = dataset or lake.default_dataset
        self.queue_size = queue_size
        self.topic_functions: list[TopicFunction] = list(topic_functions)
        self._subscribers: dict[str, set[Subscription]] = {}
        self._fenced: set[Subscription] = set()
        self._task: asyncio.Task[None] | None = None
        self._opened = asyncio.Event()
        self.resume_token: Mapping[str, Any] | None = None
        self.reopens = 0
        self.delivered = 0
        self.quiet_rounds = 0  # reads of the stream that came back empty

    # -- lifecycle -------------------------------------------------------

    async def start(self, timeout: float = 10.0) -> None:
        """Open the change stream; return once it is established.

        The hub only watches: it never creates the dataset (a caller's name
        must not become a collection), so the caller makes sure it exists.
        On failure or timeout the stream task is stopped, never left retrying.
        """
        if self._task is not None:
            return
        self._task = asyncio.create_task(self._run(), name=f"change-hub:{self.dataset}")
        try:
            async with asyncio.timeout(timeout):
                await self._opened.wait()
        except BaseException:
            await self.stop()
            raise

    async def stop(self, timeout: float = 5.0) -> bool:
        """Close the stream and end every subscription; False if closing outlasted ``timeout``.

        Bounded so a shutdown never waits on a lake that stopped answering:
        a stream still closing after ``timeout`` is left to the client's close.
        """
        task, self._task = self._task, None
        closed = True
        if task is not None:
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=timeout)
            if done:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    task.result()
            else:
                closed = False
                log.warning("the change stream on %s did not close within %.1f s",
                            self.dataset, timeout)  # fmt: skip
        for sub in [s for subs in self._subscribers.values() for s in subs]:
            sub.close()
        self._subscribers.clear()
        return closed

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subscribers.values())

    # -- subscribing -----------------------------------------------------

    async def subscribe(
        self,
        topic: str,
        snapshot: SnapshotLoader | None = None,
        *,
        queue_size: int | None = None,
    ) -> Subscription:
        """Register for ``topic``; with ``snapshot``, deliver its result first."""
        sub = Subscription(topic=topic, limit=queue_size or self.queue_size, _hub=self)
        self._subscribers.setdefault(topic, set()).add(sub)
        if snapshot is None:
            sub._go_live(())
            return sub
        try:
            async with self.lake.client.start_session(causal_consistency=True) as session:
                docs = list(await snapshot(session))
                read_at = session.operation_time
        except BaseException:
            sub.close()
            raise
        _unless_cancelled(sub)
        # two more empty reads: the second is sent after this read replied
        fence = _Fence({d.get("_id"): d.get("_rev") for d in docs}, read_at,
                       lift_at_round=self.quiet_rounds + 2)  # fmt: skip
        snapshot_event = ChangeEvent(
            kind="snapshot",
            document=docs[0] if docs else None,
            document_id=docs[0].get("_id") if docs else None,
            documents=tuple(docs),
            cluster_time=read_at,
        )
        sub._go_live([snapshot_event], fence)
        return sub

    def _forget(self, sub: Subscription) -> None:
        self._fenced.discard(sub)
        subs = self._subscribers.get(sub.topic)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subscribers[sub.topic]

    def resync_all(self) -> None:
        for sub in [s for subs in self._subscribers.values() for s in subs]:
            sub.cut_off()

    # -- the stream ------------------------------------------------------

    def topics_of(self, event: ChangeEvent) -> set[str]:
        topics = {ALL}
        if event.document_id is not None:
            topics.add(doc_topic(str(event.document_id)))
        if event.document is not None:
            for fn in self.topic_functions:
                topics.update(fn(event.document))
        return topics

    def dispatch(self, event: ChangeEvent) -> None:
        for topic in self.topics_of(event):
            for sub in list(self._subscribers.get(topic, ())):
                sub.offer(event)
                self.delivered += 1

    def _quiet_round(self) -> None:
        """A read of the stream came back empty: fences waiting on it may lift."""
        self.quiet_rounds += 1
        for sub in list(self._fenced):
            sub.quiet_round(self.quiet_rounds)

    async def _run(self) -> None:
        attempt = 0
        while True:
            coll = self.lake.collection(self.dataset)  # the lake may have a new client now
            try:
                options: dict[str, Any] = {"full_document": "updateLookup"}
                if self.resume_token is not None:
                    options["resume_after"] = self.resume_token
                async with await coll.watch(**options) as stream:
                    self._opened.set()
                    attempt = 0
                    while stream.alive:
                        change = await stream.try_next()  # one read of the stream at most
                        self.resume_token = stream.resume_token
                        if change is None:
                            if stream.alive:  # an empty read, not a lost cursor
                                self._quiet_round()
                            continue
                        event = event_from_change(change)
                        if event is not None:
                            self.dispatch(event)
                        elif change.get("operationType") in ("drop", "invalidate"):
                            self.resume_token = None
                            self.resync_all()
                            break
            except asyncio.CancelledError:
                raise
            except OperationFailure as exc:
                if exc.code == HISTORY_LOST:
                    log.warning("change stream history lost; every subscriber must resync")
                    self.resume_token = None
                    self.resync_all()
                else:
                    log.warning("change stream failed (%s); reopening", exc)
                attempt += 1
            except PyMongoError as exc:
                log.warning("change stream interrupted (%s); reopening", exc)
                attempt += 1
            self.reopens += 1
            await asyncio.sleep(random.uniform(0.05, min(5.0, 0.1 * 2**attempt)))


@dataclass
class _Fence:
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
