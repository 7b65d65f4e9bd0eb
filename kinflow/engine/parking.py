"""Parked instances: heartbeat items that keep failing with a permanent refusal.

An instance whose heartbeat item fails with a refusal that no retry can fix
(``cascade-limit`` from a definition whose transitions loop, say) would
otherwise be retried, at full cost, on every pass. The heartbeat parks it
instead: a ``kinflow.parked`` document in ``<dataset>.engine`` with the
refusal and a back-off (doubling from ``base`` up to ``cap``) before the
next attempt. A ``tick`` of the instance un-parks it (the engine's tick
verb deletes the document), and so does an attempt that succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kinflow.core.errors import EffectClaimed, InjectedFault, InstanceNotFound
from kinflow.errors import (
    ConcurrentModification,
    DocumentExists,
    KinflowError,
    LakeUnavailable,
    RevisionConflict,
)
from kinflow.storage.database import side_name
from kinflow.storage.indexes import IndexSpec
from kinflow.storage.lake import Lake
from kinflow.timestamps import iso

PARKED_TYPE = "kinflow.parked"
PARKED_INDEXES = (IndexSpec("parked_until", (("_type", 1), ("until", 1)),
                            partial={"_type": PARKED_TYPE}),)
PARKED_LIMIT = 10_000  # parked documents one pass reads (the rest are retried, not lost)
TRANSIENT = (ConcurrentModification, LakeUnavailable, RevisionConflict, DocumentExists,
             InjectedFault, InstanceNotFound, EffectClaimed)


def permanent(exc: BaseException) -> bool:
    """Whether a heartbeat failure is a refusal a retry cannot fix (so it parks)."""
    return isinstance(exc, KinflowError) and not isinstance(exc, TRANSIENT)


def parked_id(instance_id: str) -> str:
    return f"parked.{instance_id}"


@dataclass(frozen=True)
class Parked:
    """One parked instance as stored: why, since when, until when, how many failures."""

    instance: str
    kind: str
    code: str
    message: str
    details: dict[str, Any]
    parked_at: str
    until: str
    failures: int

    @classmethod
    def of(cls, doc: dict[str, Any]) -> Parked:
        return cls(instance=str(doc.get("instance")), kind=str(doc.get("kind")),
                   code=str(doc.get("code")), message=str(doc.get("message")),
                   details=dict(doc.get("details") or {}), parked_at=str(doc.get("parkedAt")),
                   until=str(doc.get("until")), failures=int(doc.get("failures") or 1))


def backoff(failures: int, base: float, cap: float) -> float:
    """Seconds before the next attempt after ``failures`` failures in a row."""
    return float(min(cap, base * 2 ** min(max(failures - 1, 0), 32)))


class Parking:
    """The parked instances of one dataset."""

    def __init__(self, lake: Lake, dataset: str, *, base: float = 60.0,
                 cap: float = 3600.0) -> None:
        self.lake = lake
        self.collection = side_name(dataset, "engine")
        self.base = base
        self.cap = cap

    async def all(self) -> dict[str, Parked]:
        docs = await self.lake.find({"_type": PARKED_TYPE}, dataset=self.collection,
                                    limit=PARKED_LIMIT)
        return {p.instance: p for p in map(Parked.of, docs)}

    async def listed(self, ids: list[str] | None = None, limit: int = 100) -> list[Parked]:
        """Parked instances, most recently parked first; ``ids`` narrows to those."""
        query: dict[str, Any] = {"_type": PARKED_TYPE}
        if ids is not None:
            query["_id"] = {"$in": [parked_id(i) for i in ids]}
        docs = await self.lake.find(query, dataset=self.collection, limit=limit)
        return sorted(map(Parked.of, docs), key=lambda p: p.parked_at, reverse=True)

    async def get(self, instance_id: str) -> Parked | None:
        doc = await self.lake.get(parked_id(instance_id), dataset=self.collection)
        return Parked.of(doc) if doc else None

    async def park(self, instance_id: str, kind: str, error: KinflowError, now: datetime,
                   failures: int = 1) -> Parked:
        """Record (or renew) the parking of ``instance_id`` after its ``failures``-th failure."""
        until = now + timedelta(seconds=backoff(failures, self.base, self.cap))
        doc = {"_id": parked_id(instance_id), "_type": PARKED_TYPE, "instance": instance_id,
               "kind": kind, "code": error.code, "message": error.message[:1000],
               "details": _safe(error.details), "parkedAt": iso(now), "until": iso(until),
               "failures": failures}
        await self.lake.replace(doc, expected_rev=None, dataset=self.collection)
        return Parked.of(doc)

    async def unpark(self, instance_id: str) -> bool:
        return await self.lake.delete(parked_id(instance_id), dataset=self.collection)


async def unpark(lake: Lake, dataset: str, instance_id: str) -> bool:
    """Delete the instance's parking, if any (the engine's tick calls this)."""
    return await lake.delete(parked_id(instance_id), dataset=side_name(dataset, "engine"))


def _safe(details: dict[str, Any]) -> dict[str, Any]:
    """Details kept only where they are plain JSON scalars (a refusal's are)."""
    return {str(k): v for k, v in details.items()
            if isinstance(v, str | int | float | bool) or v is None}
