"""The heartbeat's leases, kept in the engine's side collection ``<dataset>.engine``.

A lease (``_type: kinflow.lease``, one per item, taken with a conditional
write and an expiry) lets several workers share the heartbeat's work. It is
engine bookkeeping, not content: it lives beside the dataset, so GROQ's
``*`` and the instance listings never see it. The first version kept leases
in the content dataset; ``prepare_engine_side`` moves any left there (at
every start, idempotently).
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta

from kinflow.errors import DocumentExists, RevisionConflict
from kinflow.storage.database import side_name
from kinflow.storage.indexes import IndexSpec
from kinflow.storage.lake import Lake
from kinflow.timestamps import iso

LEASE_TYPE = "kinflow.lease"
LEASE_INDEXES = (IndexSpec("lease_expiry", (("_type", 1), ("expiresAt", 1)),
                           partial={"_type": LEASE_TYPE}),)
_MIGRATION_BATCH = 500


async def prepare_engine_side(lake: Lake, dataset: str) -> int:
    """Create ``<dataset>.engine`` with its indexes and move old leases into it.

    Returns how many lease documents were moved out of the content dataset.
    Each batch is copied (existing ids skipped) before it is deleted, so a
    crash between the two only leaves copies the next start deletes.
    """
    await lake.declare_indexes(LEASE_INDEXES, kind="engine")
    side = side_name(dataset, "engine")
    await lake.ensure_dataset(side)
    moved = 0
    while True:
        found = await lake.find({"_type": LEASE_TYPE}, dataset=dataset, limit=_MIGRATION_BATCH)
        if not found:
            return moved
        await lake.create_missing(found, dataset=side)
        for doc in found:
            if await lake.delete(doc["_id"], match={"_type": LEASE_TYPE}, dataset=dataset):
                moved += 1


class Leases:
    """One worker's leases over one dataset's side collection."""

    def __init__(self, lake: Lake, dataset: str, holder: str, seconds: float) -> None:
        self.lake = lake
        self.collection = side_name(dataset, "engine")
        self.holder = holder
        self.seconds = seconds

    async def acquire(self, lease_id: str, now: datetime) -> bool:
        """Create the lease, or take over an expired one; ``False`` while another holds it.

        A document of another type at a lease id (none is written there by
        kinflow) is taken over like an expired lease, and deleted on release.
        """
        expires = iso(now + timedelta(seconds=self.seconds))
        body = {"_type": LEASE_TYPE, "holder": self.holder, "expiresAt": expires}
        try:
            await self.lake.create({"_id": lease_id, **body}, dataset=self.collection)
            return True
        except DocumentExists:
            pass
        try:
            await self.lake.update(lease_id, {"$set": body},
                                   match={"$or": [{"_type": LEASE_TYPE,
                                                   "expiresAt": {"$lte": iso(now)}},
                                                  {"_type": {"$ne": LEASE_TYPE}}]},
                                   dataset=self.collection)
            return True
        except RevisionConflict:
            return False

    async def release(self, lease_id: str) -> None:
        with contextlib.suppress(Exception):
            await self.lake.delete(lease_id, match={"holder": self.holder},
                                   dataset=self.collection)
