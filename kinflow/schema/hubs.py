"""Change hubs per dataset, with the topics subscriptions route on.

One change stream per process and dataset (the storage hub does the fan-out).
The default dataset's hub starts with the app; another dataset's hub starts
the first time a subscription names it. Instance documents get three extra
topics so a subscription only sees the changes it is about:

* ``parent:<id>``: every direct child of instance ``<id>``;
* ``family:<id>``: instance ``<id>`` itself and its direct children (a
  cohort view needs both the parent's registry and the children);
* ``root:<id>``: every descendant of root instance ``<id>``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from kinflow.engine.state import INSTANCE_TYPE
from kinflow.storage import ChangeHub, Lake
from kinflow.storage.gdr import document_id


def parent_topic(instance_id: str) -> str:
    return f"parent:{instance_id}"


def family_topic(instance_id: str) -> str:
    return f"family:{instance_id}"


def root_topic(instance_id: str) -> str:
    return f"root:{instance_id}"


def _bare(ref: Any) -> str | None:
    if isinstance(ref, Mapping) and isinstance(ref.get("id"), str):
        try:
            return document_id(ref["id"])
        except Exception:  # a malformed ref routes nowhere
            return None
    return None


def instance_topics(document: Mapping[str, Any]) -> Iterable[str]:
    """The lineage topics of an instance document (nothing for other documents)."""
    if document.get("_type") != INSTANCE_TYPE:
        return ()
    topics = []
    own = document.get("_id")
    if isinstance(own, str):
        topics.append(family_topic(own))
    ancestors = document.get("ancestors") or []
    if ancestors:
        parent = _bare(ancestors[-1])
        if parent is not None:
            topics += [parent_topic(parent), family_topic(parent)]
        root = _bare(ancestors[0])
        if root is not None:
            topics.append(root_topic(root))
    return topics


class Hubs:
    """Lazily started hubs, one per dataset, all stopped together."""

    def __init__(self, lake: Lake, *, queue_size: int) -> None:
        self.lake = lake
        self.queue_size = queue_size
        self._hubs: dict[str, ChangeHub] = {}
        self._lock = asyncio.Lock()

    async def get(self, dataset: str | None = None) -> ChangeHub:
        name = dataset or self.lake.default_dataset
        hub = self._hubs.get(name)
        if hub is not None:
            return hub
        async with self._lock:
            hub = self._hubs.get(name)
            if hub is None:
                hub = ChangeHub(self.lake, name, queue_size=self.queue_size,
                                topic_functions=[instance_topics])  # fmt: skip
                await hub.start()
                self._hubs[name] = hub
        return hub

    @property
    def default(self) -> ChangeHub | None:
        return self._hubs.get(self.lake.default_dataset)

    def subscriber_count(self) -> int:
        return sum(h.subscriber_count() for h in self._hubs.values())

    async def stop(self) -> None:
        hubs, self._hubs = list(self._hubs.values()), {}
        for hub in hubs:
            await hub.stop()
