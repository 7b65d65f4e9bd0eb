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

The lake sends only the changes some subscriber may want. A subscriber may
name id prefixes it never needs (``skip``: the engine's content reactions
skip the engine's own documents); while every subscriber skips a prefix, the
stream asks the lake to leave out the changes of documents whose ids start
with it (a ``$match`` on the stream: no reply, decode or dispatch for them).
A skip is a hint, not a filter per subscriber: a subscriber still receives
such changes while another one wants them. The lake moves the stream's resume
token past what it left out, so a restart resumes from there, not from the
last change delivered. When a subscriber that wants what the stream leaves
out arrives, the stream reopens without that filter at once, from the token
it held when the subscriber registered (before any change the subscriber must
see; no change is dispatched between the two); a filter that could narrow
waits ``LEAN_AFTER`` seconds, like the lookups. The lake answers a read as
soon as anything is written, left out or not, so a filtered stream's empty
reads are sent ``FILTERED_PACE`` apart (a change it delivers may wait that
long; an unfiltered stream is not paced). A resume token the lake
refuses (the embedded lake names the database's command namespace in the
token of a read whose last entry was a command, such as an index build) gives
way to the newest one known to resume: the last change's own, or the one the
stream opened at (nothing was dispatched since either, so nobody sees a change
twice).

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
REFUSED_TOKEN = frozenset({13, 260})  # the embedded lake's cross-namespace refusal; mongod's
FILTERED_PACE = 0.1  # seconds between the empty reads of a stream that leaves changes out
LEAN_AFTER = 5.0  # seconds without a subscriber that needs documents before lookups stop
ALL = "*"

TopicFunction = Callable[[Mapping[str, Any]], Iterable[str]]
SnapshotLoader = Callable[["AsyncClientSession"], Awaitable[Sequence[Mapping[str, Any]]]]


def doc_topic(doc_id: str) -> str:
    return f"doc:{doc_id}"


def skip_stage(prefixes: Iterable[str]) -> dict[str, Any]:
    """A change-stream ``$match`` leaving out the changes of ids starting with ``prefixes``
    (each as an index-friendly string range; changes without a document key pass)."""
    ranges = [{"documentKey._id": {"$gte": p, "$lt": p[:-1] + chr(ord(p[-1]) + 1)}}
              for p in sorted(prefixes) if p]
    return {"$match": {"$nor": ranges}}


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
        self._skips: dict[Subscription, frozenset[str]] = {}  # id prefixes each never needs
        self._stream_skip: frozenset[str] | None = None  # what the open stream leaves out
        self._widen_at: Mapping[str, Any] | None = None  # reopen unfiltered from this token
        self._widen_pending = False
        self._unwanted_since: float | None = None  # lookups on, nobody needing them since
        # a token the lake resumes this stream from: the last change's own, or the one
        # the stream opened at (both name the dataset), whichever is newer
        self._safe_token: Mapping[str, Any] | None = None
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
        skip: Iterable[str] = (),
    ) -> Subscription:
        """Register for ``topic``; with ``snapshot``, deliver its result first.

        ``documents=False`` (a subscriber of ``*`` or ``doc:<id>`` that reads only
        ids, kinds and changed fields): while only such subscribers listen, the stream
        asks the lake for no changed document (no ``updateLookup``: a lake read per
        update saved), so their update events carry ``document=None``.

        ``skip``: id prefixes whose changes this subscriber never needs; while every
        subscriber skips one, the lake leaves its changes out of the stream. The
        subscriber may still receive them (when another subscriber wants them).
        """
        sub = Subscription(topic=topic, limit=queue_size or self.queue_size, _hub=self)
        if not documents:
            self._lean.add(sub)
        skipped = frozenset(skip)
        if skipped:
            self._skips[sub] = skipped
        if self._stream_skip and not self._stream_skip <= skipped and not self._widen_pending:
            # it wants what the open stream leaves out: reopen from the token held now
            # (the stream's reads so far delivered nothing it must see)
            self._widen_pending, self._widen_at = True, self.resume_token
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
        self._skips.pop(sub, None)
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

    def _switching(self, lookup: bool, skip: frozenset[str]) -> bool:
        """Whether to reopen the stream from its resume token, with lookups or without,
        with another filter.

        Lookups start as soon as a subscriber needs them (a wider filter too, from the
        token held when its subscriber came: ``subscribe``); lookups stop, and a filter
        narrows, once that has been possible for ``LEAN_AFTER`` seconds (subscribers
        that come and go do not reopen it each time).
        """
        if self._widen_pending:
            return True
        wanted = self.wants_documents()
        if wanted and not lookup:
            return True
        if wanted == lookup and self.skipped() == skip:
            self._unwanted_since = None
            return False
        now = asyncio.get_running_loop().time()
        if self._unwanted_since is None:
            self._unwanted_since = now
        return now - self._unwanted_since >= LEAN_AFTER

    def wants_documents(self) -> bool:
        """Whether some subscriber needs changed documents (the stream looks them up)."""
        return self.subscriber_count() > len(self._lean)

    def skipped(self) -> frozenset[str]:
        """The id prefixes every subscriber skips (the stream leaves their changes out)."""
        count = self.subscriber_count()
        if count == 0 or len(self._skips) < count:
            return frozenset()
        return frozenset.intersection(*self._skips.values())

    async def _looked_up(self, coll: Any, event: ChangeEvent) -> ChangeEvent:
        """An update event of a stream without lookups, with its document read now (what
        ``updateLookup`` returns too: the document as it is at the read)."""
        if event.kind != "update" or event.document is not None or event.document_id is None:
            return event
        document = await coll.find_one({"_id": event.document_id})
        return dataclasses.replace(event, document=document)

    async def _pace(self, read_at: float) -> None:
        """After an empty read of a filtered stream, wait until ``FILTERED_PACE`` has
        passed since it was sent: the lake answers a read as soon as anything is
        written, so every change it leaves out would cost a read of its own."""
        wait = read_at + FILTERED_PACE - asyncio.get_running_loop().time()
        if wait > 0 and not self._widen_pending:
            await asyncio.sleep(wait)

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
                skip = self.skipped()
                # from here a subscriber that wants what ``skip`` leaves out widens it
                self._stream_skip, self._widen_pending, self._widen_at = skip, False, None
                options: dict[str, Any] = {"full_document": "updateLookup"} if lookup else {}
                if self.resume_token is not None:
                    options["resume_after"] = self.resume_token
                pipeline = [skip_stage(skip)] if skip else []
                async with await coll.watch(pipeline, **options) as stream:
                    self.resume_token = self._safe_token = stream.resume_token
                    self._opened.set()
                    attempt = 0
                    while stream.alive:
                        read_at = asyncio.get_running_loop().time()
                        change = await stream.try_next()  # one read of the stream at most
                        self.resume_token = stream.resume_token
                        if self._widen_pending:  # the change in hand is read again, unfiltered
                            switch = True
                            break
                        if change is None:
                            if stream.alive:  # an empty read, not a lost cursor
                                self._quiet_round()
                            if self._switching(lookup, skip):
                                switch = True
                                break
                            if skip:
                                await self._pace(read_at)
                            continue
                        self._safe_token = change.get("_id")  # its own, not the batch's
                        event = event_from_change(change)
                        if event is not None:
                            if not lookup and self.wants_documents():
                                # a subscriber that needs documents came: this event is
                                # looked up here, the next ones by the reopened stream
                                event = await self._looked_up(coll, event)
                            observed = self.delivered
                            self.dispatch(event)
                            work.change_seen(change, self.delivered - observed)
                            if self._switching(lookup, skip):
                                switch = True
                                break
                        elif change.get("operationType") in ("drop", "invalidate"):
                            self.resume_token = self._safe_token = None
                            self.resync_all()
                            break
            except asyncio.CancelledError:
                raise
            except OperationFailure as exc:
                if exc.code == HISTORY_LOST:
                    log.warning("change stream history lost; every subscriber must resync")
                    self.resume_token = self._safe_token = None
                    self.resync_all()
                elif exc.code in REFUSED_TOKEN and self.resume_token != self._safe_token:
                    log.info("the lake refused the change stream's resume token (%s); "
                             "resuming from an earlier one", exc)  # fmt: skip
                    self.resume_token = self._safe_token
                    if self.resume_token is None:  # nothing known to resume from
                        self.resync_all()
                else:
                    log.warning("change stream failed (%s); reopening", exc)
                attempt += 1
            except PyMongoError as exc:
                log.warning("change stream interrupted (%s); reopening", exc)
                attempt += 1
            finally:
                self._stream_skip = None
            if switch:  # with or without lookups, another filter
                if self._widen_pending:  # from the token held when the wider subscriber came
                    self.resume_token = self._widen_at
                continue
            self.reopens += 1
            await asyncio.sleep(random.uniform(0.05, min(5.0, 0.1 * 2**attempt)))
