"""Create-or-replace writes in batches: the lake's side of ``putDocuments`` and ``lake import``.

A batch costs the lake three round trips whatever its size: one read of the
stored versions of its ids (system fields only), one ``insert_many`` of the
documents that are new, one ``bulk_write`` of the replacements. New documents
are the fast path: the embedded lake inserts about ten times faster than it
replaces or upserts, so a batch never upserts.

Each document keeps the semantics of a single put: created with fresh system
fields, or replaced keeping its ``_createdAt``; ``fenced`` batches also
compare a ``_rev`` the caller sent with the stored one (a missing document or
a different revision is ``revision-conflict``), as ``putDocument`` does.
Callers that want a batch to be all or nothing run it in a transaction
(``Lake.transaction``): every refusal is raised before the first write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import bson
import pymongo
from bson.errors import InvalidDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError

from kinflow.errors import InvalidInput, KinflowError, RevisionConflict
from kinflow.storage.documents import stamp_created, stamp_replaced, utcnow

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

    from kinflow.storage.lake import Document, Lake

BATCH_SIZE = 1000
"""Documents per batch: one transaction of at most three round trips."""

STORED_FIELDS = {"_id": 1, "_type": 1, "_rev": 1, "_createdAt": 1}
"""What a batch reads of the stored documents it may replace."""

Vet = Callable[[int, "Document"], None]
"""Called with a document's index and the stored version it would replace; raises to refuse."""


@dataclass(frozen=True, slots=True)
class BatchWritten:
    """What one batch wrote: documents created and documents replaced."""

    created: int
    replaced: int


class Refused(Exception):
    """Carries a refusal out of a transaction without the retry a ``revision-conflict``
    raised inside one gets (a stale ``_rev`` is the caller's conflict, never retried)."""

    def __init__(self, error: KinflowError) -> None:
        super().__init__(error.message)
        self.error = error


def check_storable(doc: dict[str, Any]) -> None:
    """Refuse a document the lake cannot store (an integer past 64 bits, a key BSON
    refuses) before a batch is written, rather than failing the batch's write."""
    try:
        bson.encode(doc)
    except OverflowError as exc:
        raise InvalidInput("a value holds an integer outside the 64-bit range a document "
                           "can store") from exc
    except InvalidDocument as exc:
        raise InvalidInput(f"the lake cannot store this document: {exc}") from exc


async def put_batch(
    lake: Lake,
    docs: Sequence[dict[str, Any]],
    *,
    dataset: str,
    session: AsyncClientSession | None = None,
    fenced: bool = False,
    vet: Vet | None = None,
    first: int = 0,
    now: datetime | None = None,
) -> BatchWritten:
    """Create or replace ``docs`` (checked already, distinct ``_id``s) by ``_id``.

    ``first`` is the caller's index of ``docs[0]``: refusals name ``index`` in
    the caller's numbering. A stale ``_rev`` of a ``fenced`` batch is raised as
    ``Refused(RevisionConflict)``; a document inserted concurrently between the
    read and the insert is a ``RevisionConflict`` (a transaction retries it).
    """
    if not docs:
        return BatchWritten(0, 0)
    moment = now or utcnow()
    ids = [doc["_id"] for doc in docs]
    found = await lake.find({"_id": {"$in": ids}}, dataset=dataset, session=session,
                            projection=STORED_FIELDS)  # fmt: skip
    stored = {doc["_id"]: doc for doc in found}
    fresh: list[dict[str, Any]] = []
    replacing: list[pymongo.ReplaceOne[dict[str, Any]]] = []
    for offset, doc in enumerate(docs):
        index = first + offset
        current = stored.get(doc["_id"])
        expected = doc.get("_rev") if fenced else None
        if isinstance(expected, str) and (current is None or current.get("_rev") != expected):
            raise Refused(RevisionConflict(
                f"document {doc['_id']!r} changed since it was loaded", id=doc["_id"],
                expected_rev=expected, index=index))  # fmt: skip
        if current is None:
            fresh.append(stamp_created(doc, moment))
            continue
        if vet is not None:
            vet(index, current)
        body = stamp_replaced(doc, current.get("_createdAt"), moment)
        replacing.append(pymongo.ReplaceOne({"_id": doc["_id"]}, body))
    coll = lake.collection(dataset)
    try:
        async with lake.operation("put"):
            if fresh:
                await coll.insert_many(fresh, session=session, ordered=True)
            if replacing:
                await coll.bulk_write(replacing, session=session, ordered=True)
    except (DuplicateKeyError, BulkWriteError) as exc:
        if isinstance(exc, BulkWriteError) and not _duplicates_only(exc):
            raise
        raise RevisionConflict("a document of the batch was created meanwhile") from exc
    return BatchWritten(len(fresh), len(replacing))


def _duplicates_only(exc: BulkWriteError) -> bool:
    errors = exc.details.get("writeErrors", [])
    return bool(errors) and all(e.get("code") == 11000 for e in errors)
