"""The lake: datasets of documents in one MongoDB database.

A dataset is one collection. Content documents, workflow definitions and
instances all live there side by side, so GROQ's ``*`` sees them all. The lake
knows nothing of workflows: it stores documents, maintains their system
fields, fences writes on ``_rev`` and runs transactions.

The datasets, timeouts and transactions are ``LakeDatabase``'s
(``kinflow.storage.database``); this module adds the document reads and writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pymongo
from pymongo.errors import DuplicateKeyError

from kinflow.errors import DocumentExists, InvalidInput, RevisionConflict
from kinflow.groq.budget import Budget
from kinflow.groq.store import query_collection
from kinflow.storage.database import Document, LakeDatabase, unavailable
from kinflow.storage.documents import (
    check_new_document,
    iso,
    new_rev,
    stamp_created,
    stamp_replaced,
    utcnow,
)

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

__all__ = ["Document", "Lake", "unavailable"]


class Lake(LakeDatabase):
    """A lake database with its documents: reads, fenced writes, GROQ."""

    # -- reads -----------------------------------------------------------

    async def get(
        self, doc_id: str, *, dataset: str | None = None, session: AsyncClientSession | None = None
    ) -> Document | None:
        return await self.read(
            "get", lambda: self.collection(dataset).find_one({"_id": doc_id}, session=session),
            session=session)

    async def get_many(
        self,
        ids: Sequence[str],
        *,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
    ) -> dict[str, Document]:
        """Documents by id in one round trip; missing ids are absent from the result."""
        if not ids:
            return {}
        async def run() -> dict[str, Document]:  # the collection of the client in use now
            cursor = self.collection(dataset).find({"_id": {"$in": list(ids)}}, session=session)
            return {doc["_id"]: doc async for doc in cursor}

        return await self.read("get", run, session=session)

    async def find(
        self,
        filter_: Mapping[str, Any],
        *,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        sort: Sequence[tuple[str, int]] | None = None,
        limit: int = 0,
        projection: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> list[Document]:
        """``timeout``: this read's own deadline in place of the operation timeout."""
        async def run() -> list[Document]:  # the collection of the client in use now
            cursor = self.collection(dataset).find(dict(filter_), projection=projection,
                                                   session=session, limit=limit)
            if sort:
                cursor = cursor.sort(list(sort))
            return await cursor.to_list(None)

        return await self.read("find", run, session=session, timeout=timeout)

    async def count(
        self, filter_: Mapping[str, Any], *, dataset: str | None = None,
        session: AsyncClientSession | None = None,
    ) -> int:  # fmt: skip
        return await self.read(
            "count", lambda: self.collection(dataset).count_documents(dict(filter_),
                                                                      session=session),
            session=session)

    # -- writes ----------------------------------------------------------

    async def create(
        self,
        doc: Mapping[str, Any],
        *,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        now: datetime | None = None,
    ) -> Document:
        """Insert a new document; an existing ``_id`` raises ``DocumentExists``."""
        stored = stamp_created(check_new_document(dict(doc)), now or utcnow())
        try:
            async with self.operation("create"):
                await self.collection(dataset).insert_one(stored, session=session)
        except DuplicateKeyError as exc:
            raise DocumentExists(f"document {stored['_id']!r} already exists",
                                 id=stored["_id"]) from exc  # fmt: skip
        return stored

    async def create_many(
        self,
        docs: Sequence[Mapping[str, Any]],
        *,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        now: datetime | None = None,
    ) -> list[Document]:
        moment = now or utcnow()
        stored = [stamp_created(check_new_document(dict(d)), moment) for d in docs]
        if not stored:
            return []
        try:
            async with self.operation("create"):
                await self.collection(dataset).insert_many(stored, session=session, ordered=True)
        except (DuplicateKeyError, pymongo.errors.BulkWriteError) as exc:
            if isinstance(exc, pymongo.errors.BulkWriteError) and not _only_duplicates(exc):
                raise
            raise DocumentExists("a document in the batch already exists") from exc
        return stored

    async def create_missing(
        self,
        docs: Sequence[Mapping[str, Any]],
        *,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        now: datetime | None = None,
    ) -> int:
        """Insert the documents not stored yet; an existing ``_id`` is skipped, not refused.

        For idempotent batches (children a crash left uncreated): unordered, so
        one existing document does not stop the rest; cut by a planned restart of the
        daemon, it runs again once the daemon is back. Returns how many the last
        attempt inserted.
        """
        moment = now or utcnow()
        stored = [stamp_created(check_new_document(dict(d)), moment) for d in docs]
        if not stored:
            return 0

        async def run() -> int:
            try:
                result = await self.collection(dataset).insert_many(
                    stored, session=session, ordered=False)
            except pymongo.errors.BulkWriteError as exc:
                if not _only_duplicates(exc):
                    raise
                return int(exc.details.get("nInserted", 0))
            return len(result.inserted_ids)

        return await self.repeatable("create", run, session=session)

    async def replace(
        self,
        doc: Mapping[str, Any],
        *,
        expected_rev: str | None,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        now: datetime | None = None,
    ) -> Document:
        """Replace a document; fenced on ``expected_rev`` unless it is None (upsert)."""
        body = check_new_document(dict(doc))
        doc_id = body["_id"]
        coll = self.collection(dataset)
        async with self.operation("replace"):
            if expected_rev is None:
                current = await coll.find_one({"_id": doc_id}, {"_createdAt": 1}, session=session)
                created = current.get("_createdAt") if current else None
                stored = stamp_replaced(body, created, now or utcnow())
                await coll.replace_one({"_id": doc_id}, stored, upsert=True, session=session)
                return stored
            # by _id alone, the _rev compared here: with a second field in a find the
            # embedded lake scans the whole collection (the replace_one below is
            # fenced on _rev by the lake itself, and its update path has no such cost)
            current = await coll.find_one({"_id": doc_id}, {"_createdAt": 1, "_rev": 1},
                                          session=session)
            if current is None or current.get("_rev") != expected_rev:
                raise RevisionConflict(f"document {doc_id!r} changed since it was loaded",
                                       id=doc_id, expected_rev=expected_rev)  # fmt: skip
            stored = stamp_replaced(body, current.get("_createdAt"), now or utcnow())
            result = await coll.replace_one({"_id": doc_id, "_rev": expected_rev}, stored,
                                            session=session)  # fmt: skip
        if result.matched_count != 1:
            raise RevisionConflict(f"document {doc_id!r} changed since it was loaded",
                                   id=doc_id, expected_rev=expected_rev)  # fmt: skip
        return stored

    async def update(
        self,
        doc_id: str,
        update: Mapping[str, Any],
        *,
        expected_rev: str | None = None,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        array_filters: Sequence[Mapping[str, Any]] | None = None,
        now: datetime | None = None,
        match: Mapping[str, Any] | None = None,
    ) -> str:
        """Apply MongoDB update operators to one document; return its new ``_rev``.

        ``update`` holds operators (``$set``, ``$unset``, ``$push`` ...); the lake
        adds its own ``_rev``/``_updatedAt``. With ``expected_rev`` the write is
        fenced; ``match`` adds conditions. A miss raises ``RevisionConflict``.
        """
        rev = new_rev()
        ops = _stamped_operators(update, rev, now)
        query: dict[str, Any] = {"_id": doc_id, **(match or {})}
        if expected_rev is not None:
            query["_rev"] = expected_rev
        coll = self.collection(dataset)
        async with self.operation("update"):
            result = await coll.update_one(
                query,
                ops,
                session=session,
                array_filters=list(array_filters) if array_filters else None,
            )
            if result.matched_count != 1:
                raise RevisionConflict(
                    f"document {doc_id!r} is missing or changed since it was loaded",
                    id=doc_id,
                    expected_rev=expected_rev,
                )
        return rev

    async def update_each(
        self,
        updates: Sequence[tuple[str, Mapping[str, Any], Sequence[Mapping[str, Any]] | None]],
        *,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        now: datetime | None = None,
    ) -> list[str]:
        """Several ``update`` calls by ``_id`` (``(id, operators, array_filters)``) in one
        round trip and one statement of the lake; returns each document's new ``_rev``.
        A document missing raises ``RevisionConflict`` (the ones before it are written:
        for transactions, which then abort)."""
        revs = [new_rev() for _ in updates]
        ops = [pymongo.UpdateOne({"_id": doc_id}, _stamped_operators(update, rev, now),
                                 array_filters=list(filters) if filters else None)
               for (doc_id, update, filters), rev in zip(updates, revs, strict=True)]
        if not ops:
            return []
        async with self.operation("update"):
            result = await self.collection(dataset).bulk_write(ops, session=session,
                                                               ordered=True)
        if result.matched_count != len(ops):
            raise RevisionConflict("a document of a batched update is missing",
                                   ids=[doc_id for doc_id, _, _ in updates])
        return revs

    async def update_many(
        self,
        filter_: Mapping[str, Any],
        update: Mapping[str, Any],
        *,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        now: datetime | None = None,
    ) -> int:
        """Apply update operators to every matching document; return how many matched.

        Each gets a new ``_rev`` and ``_updatedAt`` like ``update`` gives one
        document, so a writer fenced on a ``_rev`` it loaded before misses.
        """
        ops = _stamped_operators(update, new_rev(), now)
        async with self.operation("update"):
            result = await self.collection(dataset).update_many(
                dict(filter_), ops, session=session)
        return result.matched_count

    async def put_many(
        self,
        docs: Sequence[Mapping[str, Any]],
        *,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        now: datetime | None = None,
    ) -> None:
        """Create or replace several whole documents by ``_id``, in one round trip
        (unfenced: for documents only their owner writes, under its own fence)."""
        if not docs:
            return
        moment = now or utcnow()
        ops = [pymongo.ReplaceOne({"_id": stored["_id"]}, stored, upsert=True)
               for stored in (stamp_created(check_new_document(dict(d)), moment) for d in docs)]
        async with self.operation("put"):
            await self.collection(dataset).bulk_write(ops, session=session, ordered=True)

    async def groq(
        self,
        query: str,
        *,
        params: Mapping[str, Any] | None = None,
        now: datetime | None = None,
        budget: Budget | None = None,
        dataset: str | None = None,
        caller: str | None = None,
    ) -> Any:
        """Evaluate a GROQ query over one dataset (pushed down as a prefilter, then checked);
        ``caller`` names the API caller it runs for (``None``: the engine)."""
        coll = self.collection(dataset)
        if self.gate is None:
            return await query_collection(coll, query, params=params, now=now, budget=budget,
                                          caller=caller)  # fmt: skip
        async with self.gate.passage(self.operation_timeout, "groq"):
            return await query_collection(coll, query, params=params, now=now, budget=budget,
                                          caller=caller)  # fmt: skip

    async def patch(
        self,
        doc_id: str,
        update: Mapping[str, Any],
        *,
        expected_rev: str | None = None,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        array_filters: Sequence[Mapping[str, Any]] | None = None,
        now: datetime | None = None,
        match: Mapping[str, Any] | None = None,
    ) -> Document:
        """``update`` and read the document back.

        Two round trips, not ``find_one_and_update``: the embedded server's
        findAndModify is ~20x slower. Inside a transaction the read sees exactly
        this write; outside one it may also see a later write.
        """
        await self.update(doc_id, update, expected_rev=expected_rev, dataset=dataset,
                          session=session, array_filters=array_filters, now=now,
                          match=match)  # fmt: skip
        doc = await self.get(doc_id, dataset=dataset, session=session)
        if doc is None:
            raise RevisionConflict(f"document {doc_id!r} vanished after a patch", id=doc_id)
        return doc

    async def delete(
        self,
        doc_id: str,
        *,
        expected_rev: str | None = None,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        match: Mapping[str, Any] | None = None,
    ) -> bool:
        """Delete one document; ``expected_rev`` fences it, ``match`` adds conditions."""
        query: dict[str, Any] = {"_id": doc_id, **(match or {})}
        if expected_rev is not None:
            query["_rev"] = expected_rev
        async with self.operation("delete"):
            result = await self.collection(dataset).delete_one(query, session=session)
        if expected_rev is not None and result.deleted_count == 0:
            raise RevisionConflict(f"document {doc_id!r} changed since it was loaded",
                                   id=doc_id, expected_rev=expected_rev)  # fmt: skip
        return result.deleted_count == 1


def _stamped_operators(update: Mapping[str, Any], rev: str, now: datetime | None
                       ) -> dict[str, dict[str, Any]]:
    """Checked update operators plus the lake's own ``_rev``/``_updatedAt``."""
    if not update or any(not k.startswith("$") or not isinstance(v, Mapping)
                         for k, v in update.items()):
        raise InvalidInput("a patch needs update operators such as $set", update=list(update))
    ops = {k: dict(v) for k, v in update.items()}
    touched = {path for op in ops.values() for path in op}
    if touched & {"_id", "_rev", "_createdAt", "_updatedAt"}:
        raise InvalidInput("system fields are maintained by the lake", fields=sorted(touched))
    ops.setdefault("$set", {}).update({"_rev": rev, "_updatedAt": iso(now or utcnow())})
    return ops


def _only_duplicates(exc: pymongo.errors.BulkWriteError) -> bool:
    errors = exc.details.get("writeErrors", [])
    return bool(errors) and all(e.get("code") == 11000 for e in errors)
