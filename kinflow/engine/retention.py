"""Purging finished families from the lake (the I/O half of ``kinflow.core.retention``).

A purge marks the root first (``purgingSince``), then deletes the members in
batches (with their registry rows in ``<dataset>.rows`` and their parkings in
``<dataset>.engine``), the root last. Every step is idempotent, so a purge a
crash interrupted is finished by the next one: marked roots are looked up
first (by index) and completed before any new family is chosen. Between the
crash and that pass, what is left is a finished root carrying the marker
and some of its finished members: nothing in it looks live, and nothing in
it can change (every member is terminal).

Who calls it: the heartbeat (``Worker``) for retention, ``purgeInstances``
and ``kinflow purge`` for an explicit purge.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import Any

from kinflow.core.definitions import DEFINITION_TYPE
from kinflow.core.errors import InstanceNotFound
from kinflow.core.retention import (
    HOLD,
    PURGE_MARKER,
    PurgeCounts,
    PurgeFilter,
    cutoff,
    family_verdict,
    is_root,
    purgeable,
    retention_days,
)
from kinflow.core.state import INSTANCE_TYPE
from kinflow.engine.faults import Faults
from kinflow.engine.parking import PARKED_TYPE
from kinflow.errors import InvalidInput, KinflowError, RevisionConflict
from kinflow.gdr import format_gdr
from kinflow.storage.database import side_name
from kinflow.storage.indexes import IndexSpec
from kinflow.storage.lake import Lake
from kinflow.timestamps import iso

log = logging.getLogger("kinflow.retention")
_INSTANCE = {"_type": INSTANCE_TYPE}
# only the roots being purged: an entry per instance cost every instance write
RETENTION_INDEXES = (IndexSpec("instance_purging_now", ((PURGE_MARKER, 1),),
                               partial={**_INSTANCE, PURGE_MARKER: {"$gt": ""}},
                               replaces=("instance_purging",)),)
_PAGE = 2000  # candidate roots read per query (the embedded lake reads every match anyway)
_RECHECK_KEPT = 600.0  # seconds before retention looks again at a family it kept (a live member)
_KEPT_MEMORY = 100_000
_ROOT_FIELDS = {"_id": 1, "definition": 1, "pinnedVersion": 1, "completedAt": 1,
                "ancestors": 1, PURGE_MARKER: 1, HOLD: 1}
_NOT_HELD = {HOLD: {"$exists": False}}


class FamilyBeingPurged(KinflowError):
    """``holdFamily`` on a family whose purge has already begun (its root is marked)."""

    code = "family-being-purged"


class Purger:
    """Finds and purges finished families of one dataset."""

    def __init__(self, lake: Lake, dataset: str, *, faults: Faults | None = None,
                 batch: int = 200) -> None:
        self.lake = lake
        self.dataset = dataset
        self.faults = faults or Faults()
        self.batch = batch
        self._ready = False
        self.recheck_kept = _RECHECK_KEPT
        self._kept: dict[str, float] = {}  # root id -> when retention may look at it again

    async def ensure_ready(self) -> None:
        if not self._ready:
            await self.lake.declare_indexes(RETENTION_INDEXES)
            await self.lake.ensure_dataset(self.dataset)
            self._ready = True

    # ------------------------------------------------------------ selection

    async def _definitions(self) -> list[dict[str, Any]]:
        return await self.lake.find({"_type": DEFINITION_TYPE}, dataset=self.dataset,
                                    projection={"name": 1, "version": 1, "retention": 1})

    async def _finished_roots(self, definition: str, before: str, *,
                              inclusive: bool) -> AsyncIterator[dict[str, Any]]:
        """Roots of ``definition`` finished before ``before``, oldest first, page by page.

        One indexed range per page (``definition``, ``completedAt``); children
        of the same definition are read and skipped here.
        """
        after, seen = "", set[str]()
        while True:
            bound = {"$lte" if inclusive else "$lt": before}
            page = await self.lake.find(
                {**_INSTANCE, "definition": definition,
                 "completedAt": {"$gte" if after else "$gt": after, **bound}},
                dataset=self.dataset, projection=_ROOT_FIELDS, sort=[("completedAt", 1)],
                limit=_PAGE + len(seen))  # fmt: skip
            fresh = [doc for doc in page if doc["_id"] not in seen]
            for doc in fresh:
                if is_root(doc):
                    yield doc
            if len(page) < _PAGE + len(seen) or not fresh:
                return
            last = fresh[-1]["completedAt"]
            seen = {doc["_id"] for doc in page if doc["completedAt"] == last}
            after = last

    async def members(self, root_id: str) -> list[dict[str, Any]]:
        """Every instance naming the root among its ancestors (by index)."""
        return await self.lake.find(
            {**_INSTANCE, "ancestors.id": format_gdr(self.dataset, root_id)},
            dataset=self.dataset, projection={"_id": 1, "completedAt": 1, "abortedAt": 1})

    # ------------------------------------------------------------ purging

    async def finish_interrupted(self, now: datetime, counts: PurgeCounts) -> None:
        """Complete every purge a crash left after its marker."""
        marked = await self.lake.find({**_INSTANCE, PURGE_MARKER: {"$gt": ""}},
                                      dataset=self.dataset, projection=_ROOT_FIELDS)
        for root in marked:
            members = await self.members(root["_id"])
            if not purgeable(root, members):  # cannot happen unless a live orphan joined
                log.warning("family %s has a live member again: purge abandoned", root["_id"])
                await self.lake.update(root["_id"], {"$unset": {PURGE_MARKER: ""}},
                                       dataset=self.dataset)
                continue
            await self._purge(root["_id"], members, now, counts)

    async def _purge(self, root_id: str, members: list[dict[str, Any]], now: datetime,
                     counts: PurgeCounts) -> bool:
        """Mark the root, delete the members in batches, then the root; idempotent."""
        try:
            await self.lake.update(root_id, {"$set": {PURGE_MARKER: iso(now)}},
                                   match={"completedAt": {"$type": "string"}, **_NOT_HELD},
                                   dataset=self.dataset)
        except RevisionConflict:  # gone meanwhile (another purger), not finished, or held
            return False
        self.faults.check("purge-after-marker")
        ids = [str(m["_id"]) for m in members]
        for start in range(0, len(ids), self.batch):
            await self._delete(ids[start:start + self.batch])
            self.faults.check("purge-mid-family")
        await self._delete([root_id])
        counts.roots += 1
        counts.instances += 1 + len(ids)
        return True

    async def _delete(self, ids: list[str]) -> None:
        """Rows and parkings first, the instances last (a retry finds them again)."""
        with self.lake.bounded("purge"):
            await self.lake.collection(side_name(self.dataset, "rows")).delete_many(
                {"parent": {"$in": ids}})
            await self.lake.collection(side_name(self.dataset, "engine")).delete_many(
                {"_type": PARKED_TYPE, "instance": {"$in": ids}})
            await self.lake.collection(self.dataset).delete_many({**_INSTANCE,
                                                                  "_id": {"$in": ids}})

    async def _consider(self, root: Mapping[str, Any], now: datetime, counts: PurgeCounts,
                        before: str, *, inclusive: bool) -> None:
        """Purge the family (or count it, on a dry run) if its last member finished by
        ``before`` and it is not held; otherwise count it as kept or held."""
        if root.get(HOLD) is not None:
            counts.held += 1
            return
        members = await self.members(str(root["_id"]))
        verdict = family_verdict(root, members, before, inclusive=inclusive)
        if verdict != "purge":
            counts.kept += 1
            return
        if counts.dry_run:
            counts.roots += 1
            counts.instances += 1 + len(members)
            return
        await self._purge(str(root["_id"]), members, now, counts)

    # ------------------------------------------------------------ entry points

    async def retention_pass(self, now: datetime, default_days: int | None, *,
                             limit: int = 50) -> PurgeCounts:
        """Purge up to ``limit`` families whose root's retention has run out."""
        await self.ensure_ready()
        counts = PurgeCounts(dry_run=False)
        await self.finish_interrupted(now, counts)
        by_name: dict[str, dict[int, int | None]] = {}
        for doc in await self._definitions():
            by_name.setdefault(str(doc.get("name")), {})[int(doc.get("version") or 0)] = \
                retention_days(doc, default_days)
        for name, versions in sorted(by_name.items()):
            kept = [days for days in versions.values() if days is not None]
            if not kept:
                continue
            async for root in self._finished_roots(name, cutoff(now, min(kept)), inclusive=True):
                days = versions.get(int(root.get("pinnedVersion") or 0), default_days)
                if days is None or str(root["completedAt"]) > cutoff(now, days):
                    continue
                if counts.roots >= limit or counts.kept >= limit * 10:
                    return counts  # the rest next time: a pass stays bounded
                if self._kept.get(str(root["_id"]), 0.0) > time.monotonic():
                    continue  # a live member kept it a moment ago: newer roots get their turn
                passed_over = counts.kept + counts.held
                await self._consider(root, now, counts, cutoff(now, days), inclusive=True)
                if counts.kept + counts.held > passed_over:
                    self._remember_kept(str(root["_id"]))
        return counts

    def _remember_kept(self, root_id: str) -> None:
        if len(self._kept) >= _KEPT_MEMORY:
            self._kept.clear()
        self._kept[root_id] = time.monotonic() + self.recheck_kept

    async def purge(self, where: PurgeFilter, now: datetime, *, dry_run: bool = True
                    ) -> PurgeCounts:
        """Purge (or count, on a dry run) every finished family ``where`` selects."""
        await self.ensure_ready()
        counts = PurgeCounts(dry_run=dry_run)
        if not dry_run:
            await self.finish_interrupted(now, PurgeCounts(dry_run=False))
        if where.root_ids is not None:
            found = await self.lake.get_many(list(where.root_ids), dataset=self.dataset)
            roots = [doc for doc in found.values()
                     if doc.get("_type") == INSTANCE_TYPE and where.selects(doc)]
            for root in sorted(roots, key=lambda d: str(d["completedAt"])):
                await self._consider(root, now, counts, where.finished_before, inclusive=False)
            return counts
        names = sorted({str(d.get("name")) for d in await self._definitions()})
        for name in names if where.definition is None else [where.definition]:
            async for root in self._finished_roots(name, where.finished_before,
                                                   inclusive=False):
                if where.selects(root):
                    await self._consider(root, now, counts, where.finished_before,
                                         inclusive=False)
        return counts

    # ------------------------------------------------------------ holds

    async def hold(self, root_id: str, reason: str, by: str, now: datetime) -> dict[str, Any]:
        """Keep the family of ``root_id`` whatever its age, until :meth:`release`; the root."""
        await self._root(root_id)
        hold = {"reason": reason, "by": by, "at": iso(now)}
        try:
            await self.lake.update(root_id, {"$set": {HOLD: hold}},
                                   match={PURGE_MARKER: {"$exists": False}},
                                   dataset=self.dataset)  # fmt: skip
        except RevisionConflict as exc:
            raise FamilyBeingPurged(f"the family of {root_id!r} is already being purged",
                                    rootId=root_id) from exc  # fmt: skip
        return await self._root(root_id)

    async def release(self, root_id: str) -> dict[str, Any]:
        """Lift a hold (a family without one is left as it is); the root."""
        await self._root(root_id)
        await self.lake.update(root_id, {"$unset": {HOLD: ""}}, dataset=self.dataset)
        return await self._root(root_id)

    async def _root(self, root_id: str) -> dict[str, Any]:
        root = await self.lake.get(root_id, dataset=self.dataset)
        if root is None or root.get("_type") != INSTANCE_TYPE:
            raise InstanceNotFound(f"no instance {root_id!r}", instanceId=root_id)
        if not is_root(root):
            raise InvalidInput("a hold is set on a family's root instance, not on a member",
                               argument="rootId", instanceId=root_id)  # fmt: skip
        return root

