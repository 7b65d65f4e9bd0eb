"""Change hubs per dataset, with the topics subscriptions route on.

One change stream per process and dataset (the storage hub does the fan-out).
The default dataset's hub starts with the app and stays; another dataset's
hub is opened by its first subscriber and closed when its last one leaves
(each subscription holds a *lease*). Every open stream holds a lake
connection, so their number is capped per process (``max_hub_streams``): a
subscription past the cap is refused with ``too-many-streams``, and one naming
a dataset that does not exist with ``dataset-not-found``; neither ever creates
a collection. Instance documents get three extra topics so a subscription only
sees the changes it is about:

* ``parent:<id>``: every direct child of instance ``<id>``;
* ``family:<id>``: instance ``<id>`` itself and its direct children (a
  cohort view needs both the parent's registry and the children);
* ``root:<id>``: every descendant of root instance ``<id>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kinflow.core import readmodel
from kinflow.core.state import INSTANCE_TYPE
from kinflow.errors import LakeUnavailable, TooManyStreams
from kinflow.gdr import document_id
from kinflow.storage import ChangeHub, Lake
from kinflow.storage.datasets import Datasets

log = logging.getLogger("kinflow.hub")


def parent_topic(instance_id: str) -> str:
    return f"parent:{instance_id}"


def family_topic(instance_id: str) -> str:
    return f"family:{instance_id}"


def root_topic(instance_id: str) -> str:
    return f"root:{instance_id}"


def _bare(gdr: str | None) -> str | None:
    if gdr is None:
        return None
    try:
        return document_id(gdr)
    except Exception:  # a malformed ref routes nowhere
        return None


def instance_topics(document: Mapping[str, Any]) -> Iterable[str]:
    """The lineage topics of an instance document (nothing for other documents)."""
    if document.get("_type") != INSTANCE_TYPE:
        return ()
    topics = []
    own = document.get("_id")
    if isinstance(own, str):
        topics.append(family_topic(own))
    lineage = readmodel.ancestor_gdrs(document)
    if lineage:
        parent = _bare(readmodel.parent_gdr(document))
        if parent is not None:
            topics += [parent_topic(parent), family_topic(parent)]
        root = _bare(lineage[0])
        if root is not None:
            topics.append(root_topic(root))
    return topics


@dataclass(eq=False)
class _Entry:
    """One dataset's hub, its start-up and how many leases hold it."""

    hub: ChangeHub
    pinned: bool
    refs: int = 0
    retired: bool = False
    started: asyncio.Task[None] | None = field(default=None, repr=False)


class Hubs:
    """Hubs by dataset: leased by subscriptions, capped, all stopped together."""

    def __init__(
        self,
        lake: Lake,
        *,
        queue_size: int,
        max_streams: int = 16,
        datasets: Datasets | None = None,
        stop_timeout: float = 5.0,
    ) -> None:
        self.lake = lake
        self.queue_size = queue_size
        self.max_streams = max_streams
        self.datasets = datasets or Datasets(lake)
        self.stop_timeout = stop_timeout
        self._entries: dict[str, _Entry] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._stopped = False

    # -- leases ----------------------------------------------------------

    async def get(self, dataset: str | None = None) -> ChangeHub:
        """A hub kept for the life of the process (the app's default hub, the worker's)."""
        entry = self._acquire(await self.datasets.require(dataset), pinned=True)
        await self._ready(entry)
        return entry.hub

    @contextlib.asynccontextmanager
    async def lease(self, dataset: str | None = None) -> AsyncIterator[ChangeHub]:
        """The running hub of ``dataset`` while the block runs; the last leaver closes it."""
        entry = self._acquire(await self.datasets.require(dataset))
        try:
            await self._ready(entry)
            yield entry.hub
        finally:
            self._release(entry)

    def _acquire(self, name: str, *, pinned: bool = False) -> _Entry:
        if self._stopped:
            raise LakeUnavailable("the server is shutting down; subscriptions are closed",
                                  dataset=name)  # fmt: skip
        entry = self._entries.get(name)
        if entry is None:
            if self.stream_count() >= self.max_streams:
                raise TooManyStreams(
                    f"this server already holds {self.max_streams} change streams (one per "
                    "watched dataset); try again when a subscription on another dataset ends",
                    limit=self.max_streams, dataset=name,
                )  # fmt: skip
            hub = ChangeHub(self.lake, name, queue_size=self.queue_size,
                            topic_functions=[instance_topics])  # fmt: skip
            entry = _Entry(hub, pinned=name == self.lake.default_dataset)
            entry.started = asyncio.create_task(hub.start(), name=f"hub-start:{name}")
            self._entries[name] = entry
        entry.pinned = entry.pinned or pinned
        entry.refs += 1
        return entry

    async def _ready(self, entry: _Entry) -> None:
        """Wait for the shared start-up (a waiter's cancellation never cancels it)."""
        assert entry.started is not None
        try:
            await asyncio.shield(entry.started)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the waiter itself is being cancelled
            raise LakeUnavailable(  # the hub was closed (shutdown) while it started
                f"the change stream on dataset {entry.hub.dataset!r} was closed",
                dataset=entry.hub.dataset,
            ) from None
        except Exception as exc:
            self._start_failed(entry)
            if isinstance(exc, TimeoutError):
                raise LakeUnavailable(
                    f"the change stream on dataset {entry.hub.dataset!r} did not open",
                    dataset=entry.hub.dataset,
                ) from exc
            raise

    def _start_failed(self, entry: _Entry) -> None:
        """A failed hub is dropped at once, so the next subscriber starts a fresh one."""
        entry.pinned = False
        self._retire(entry)

    def _release(self, entry: _Entry) -> None:
        entry.refs -= 1
        if entry.refs <= 0 and not entry.pinned:
            self._retire(entry)

    def _retire(self, entry: _Entry) -> None:
        """Forget the hub now and close its stream in the background (counted until closed)."""
        if entry.retired:
            return
        entry.retired = True
        if self._entries.get(entry.hub.dataset) is entry:
            del self._entries[entry.hub.dataset]
        task = asyncio.create_task(self._close(entry), name=f"hub-close:{entry.hub.dataset}")
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, entry: _Entry) -> None:
        started = entry.started
        if started is not None and not started.done():
            started.cancel()
            await asyncio.wait({started}, timeout=self.stop_timeout)
        await entry.hub.stop(timeout=self.stop_timeout)

    # -- what is open ----------------------------------------------------

    @property
    def default(self) -> ChangeHub | None:
        entry = self._entries.get(self.lake.default_dataset)
        return entry.hub if entry is not None else None

    def stream_count(self) -> int:
        """Change streams open or still closing (each may hold a lake connection)."""
        return len(self._entries) + len(self._closing)

    def datasets_watched(self) -> list[str]:
        return sorted(self._entries)

    def subscriber_count(self) -> int:
        return sum(e.hub.subscriber_count() for e in self._entries.values())

    async def stop(self) -> None:
        """Close every stream at once, each bounded; later leases are refused."""
        self._stopped = True
        entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            entry.pinned = False
            self._retire(entry)
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)
