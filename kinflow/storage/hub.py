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

The lake reads each changed document for the stream (``updateLookup``) only
while some subscriber needs documents: a subscriber of ids alone (the
engine's content reactions) subscribes with ``documents=False``, and while
only such subscribers listen the stream is opened without lookups (a daemon
read per update saved). When one that needs documents arrives, the event in
hand is read here and the stream reopens from it with lookups; it reopens
without them once none has needed them for ``LEAN_AFTER`` seconds.

Each subscriber has a bounded queue. One that falls behind is cut off: its
queue is replaced by a single ``resync`` event and it receives nothing more,
so a slow consumer never blocks the others. When the stream's history is lost
(server error 286) every subscriber gets ``resync``. Other stream errors
reopen it from the last resume token, with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pymongo.errors import OperationFailure, PyMongoError

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

    from kinflow.storage.lake import Lake

from kinflow.observability import work
from kinflow.storage.subscription import ChangeEvent, Fence, Subscription

log = logging.getLogger("kinflow.hub")

HISTORY_LOST = 286
LEAN_AFTER = 5.0  # seconds without a subscriber that needs documents before lookups stop
ALL = "*"

TopicFunction = Callable[[Mapping[str, Any]], Iterable[str]]
SnapshotLoader = Callable[["AsyncClientSession"], Awaitable[Sequence[Mapping[str, Any]]]]


def doc_topic(doc_id: str) -> str:
    return f"doc:{doc_id}"


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
        self._lean: set[Subscription] = set()  # subscribers that need no documents
        self._unwanted_since: float | None = None  # lookups on, nobody needing them since
        self._event_token: Mapping[str, Any] | None = None  # the last event's resume token
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
        documents: bool = True,
    ) -> Subscription:
        """Register for ``topic``; with ``snapshot``, deliver its result first.

        ``documents=False`` (a subscriber of ``*`` or ``doc:<id>`` that reads only
        ids, kinds and changed fields): while only such subscribers listen, the stream
        asks the lake for no changed document (no ``updateLookup``: a lake read per
        update saved), so their update events carry ``document=None``.
        """
        sub = Subscription(topic=topic, limit=queue_size or self.queue_size, _hub=self)
        if not documents:
            self._lean.add(sub)
        self._subscribers.setdefault(topic, set()).add(sub)
        if snapshot is None:
            sub.go_live(())
            return sub
        try:
            async with self.lake.client.start_session(causal_consistency=True) as session:
                docs = list(await snapshot(session))
                read_at = session.operation_time
        except BaseException:
            sub.close()
            raise
        sub.unless_cancelled()
        # two more empty reads: the second is sent after this read replied
        fence = Fence({d.get("_id"): d.get("_rev") for d in docs}, read_at,
                       lift_at_round=self.quiet_rounds + 2)  # fmt: skip
        snapshot_event = ChangeEvent(
            kind="snapshot",
            document=docs[0] if docs else None,
            document_id=docs[0].get("_id") if docs else None,
            documents=tuple(docs),
            cluster_time=read_at,
        )
        sub.go_live([snapshot_event], fence)
        return sub

    def _fencing(self, sub: Subscription, fenced: bool) -> None:
        if fenced:
            self._fenced.add(sub)
        else:
            self._fenced.discard(sub)

    def _forget(self, sub: Subscription) -> None:
        self._lean.discard(sub)
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

    def _switching(self, lookup: bool) -> bool:
        """Whether to reopen the stream from the last event read, with lookups or without.

        Lookups start as soon as a subscriber needs them; they stop once none has for
        ``LEAN_AFTER`` seconds (subscribers that come and go do not reopen it each time).
        It reopens from the last event's token: an empty read's token may name another
        collection (the embedded lake's), which the lake refuses to resume from; since
        that event, the reads were empty. Never without such a token.
        """
        if self._event_token is None:
            return False
        if not lookup:
            return self.wants_documents()
        if self.wants_documents():
            self._unwanted_since = None
            return False
        now = asyncio.get_running_loop().time()
        if self._unwanted_since is None:
            self._unwanted_since = now
        return now - self._unwanted_since >= LEAN_AFTER

    def wants_documents(self) -> bool:
        """Whether some subscriber needs changed documents (the stream looks them up)."""
        return self.subscriber_count() > len(self._lean)

    async def _looked_up(self, coll: Any, event: ChangeEvent) -> ChangeEvent:
        """An update event of a stream without lookups, with its document read now (what
        ``updateLookup`` returns too: the document as it is at the read)."""
        if event.kind != "update" or event.document is not None or event.document_id is None:
            return event
        document = await coll.find_one({"_id": event.document_id})
        return dataclasses.replace(event, document=document)

    def _quiet_round(self) -> None:
        """A read of the stream came back empty: fences waiting on it may lift."""
        self.quiet_rounds += 1
        for sub in list(self._fenced):
            sub.quiet_round(self.quiet_rounds)

    async def _run(self) -> None:
        attempt = 0
        while True:
            coll = self.lake.collection(self.dataset)  # the lake may have a new client now
            switch = False
            try:
                lookup, self._unwanted_since = self.wants_documents(), None
                options: dict[str, Any] = {"full_document": "updateLookup"} if lookup else {}
                if self.resume_token is not None:
                    options["resume_after"] = self.resume_token
                async with await coll.watch(**options) as stream:
                    self._opened.set()
                    attempt = 0
                    while stream.alive:
                        change = await stream.try_next()  # one read of the stream at most
                        self.resume_token = stream.resume_token
                        if change is not None:  # its own token, not the batch's
                            self._event_token = change.get("_id")
                        if change is None:
                            if stream.alive:  # an empty read, not a lost cursor
                                self._quiet_round()
                            if self._switching(lookup):
                                switch = True
                                break
                            continue
                        event = event_from_change(change)
                        if event is not None:
                            if not lookup and self.wants_documents():
                                # a subscriber that needs documents came: this event is
                                # looked up here, the next ones by the reopened stream
                                event = await self._looked_up(coll, event)
                            observed = self.delivered
                            self.dispatch(event)
                            work.change_seen(change, self.delivered - observed)
                            if self._switching(lookup):
                                switch = True
                                break
                        elif change.get("operationType") in ("drop", "invalidate"):
                            self.resume_token = self._event_token = None
                            self.resync_all()
                            break
            except asyncio.CancelledError:
                raise
            except OperationFailure as exc:
                if exc.code == HISTORY_LOST:
                    log.warning("change stream history lost; every subscriber must resync")
                    self.resume_token = self._event_token = None
                    self.resync_all()
                else:
                    log.warning("change stream failed (%s); reopening", exc)
                attempt += 1
            except PyMongoError as exc:
                log.warning("change stream interrupted (%s); reopening", exc)
                attempt += 1
            if switch:  # from the last event dispatched, with or without lookups
                self.resume_token = self._event_token
                continue
            self.reopens += 1
            await asyncio.sleep(random.uniform(0.05, min(5.0, 0.1 * 2**attempt)))
