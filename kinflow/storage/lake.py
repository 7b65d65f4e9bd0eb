"""The lake: datasets of documents in one MongoDB database.

A dataset is one collection. Content documents, workflow definitions and
instances all live there side by side, so GROQ's ``*`` sees them all. The lake
knows nothing of workflows: it stores documents, maintains their system
fields, fences writes on ``_rev`` and runs transactions.

Every collection and index is created up front (``ensure_dataset``): a
collection created implicitly inside a transaction blocks other writers on
the embedded server. Indexes are declared as data (``IndexSpec``) so the
engine can add its own without the lake learning what they mean.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import pymongo
from pymongo import AsyncMongoClient
from pymongo.errors import ConnectionFailure, DuplicateKeyError, InvalidOperation, PyMongoError

from kinflow.errors import DocumentExists, InvalidInput, LakeUnavailable, RevisionConflict
from kinflow.gdr import check_dataset
from kinflow.groq.budget import Budget
from kinflow.groq.store import query_collection
from kinflow.storage.documents import (
    check_new_document,
    iso,
    new_rev,
    stamp_created,
    stamp_replaced,
    utcnow,
)
from kinflow.storage.indexes import BASE_INDEXES, IndexSpec
from kinflow.storage.transactions import run_transaction

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase

T = TypeVar("T")
Document = dict[str, Any]


def unavailable(exc: BaseException, verb: str) -> LakeUnavailable | None:
    """The typed refusal for an error that means the lake did not answer, else None.

    A lost connection, no server to select, a deadline that passed (the
    operation timeout), or the client being swapped for a restarted daemon's:
    the caller may retry later. Anything else is a real error and stays one.
    """
    closed = isinstance(exc, InvalidOperation) and "after close" in str(exc)
    if closed or isinstance(exc, ConnectionFailure) or (
        isinstance(exc, PyMongoError) and exc.timeout
    ):
        reason = str(exc).split(", Timeout:")[0].split(" (configured")[0][:300]
        return LakeUnavailable(f"the lake did not answer: {reason}", verb=verb,
                               cause=type(exc).__name__)  # fmt: skip
    return None


@dataclass
class Lake:
    """Async access to one lake database over ``AsyncMongoClient``."""

    client: AsyncMongoClient[Document]
    database: str
    default_dataset: str = "production"
    operation_timeout: float = 30.0
    transaction_attempts: int = 12
    indexes: list[IndexSpec] = field(default_factory=lambda: list(BASE_INDEXES))
    _ready: set[str] = field(default_factory=set, repr=False)

    # -- datasets --------------------------------------------------------

    @property
    def db(self) -> AsyncDatabase[Document]:
        return self.client[self.database]

    def collection(self, dataset: str | None = None) -> AsyncCollection[Document]:
        return self.db[check_dataset(dataset or self.default_dataset)]

    async def ensure_dataset(self, dataset: str | None = None) -> AsyncCollection[Document]:
        """Create the collection and every declared index, idempotently."""
        name = check_dataset(dataset or self.default_dataset)
        coll = self.db[name]
        if name in self._ready:
            return coll
        with pymongo.timeout(self.operation_timeout):
            try:
                if name not in await self.db.list_collection_names(filter={"name": name}):
                    await self.db.create_collection(name)
            except PyMongoError as exc:
                if "already exists" not in str(exc):
                    raise
            await coll.create_indexes([spec.model() for spec in self.indexes])
        self._ready.add(name)
        return coll

    async def declare_indexes(self, specs: Iterable[IndexSpec]) -> None:
        """Add indexes (from the engine, say) and build them on every ready dataset."""
        known = {spec.name for spec in self.indexes}
        added = [spec for spec in specs if spec.name not in known]
        if not added:
            return
        self.indexes.extend(added)
        with self.bounded("declareIndexes"):
            for name in sorted(self._ready):
                await self.db[name].create_indexes([spec.model() for spec in added])

    async def ping(self, timeout: float = 5.0) -> bool:
        try:
            with pymongo.timeout(min(self.operation_timeout, timeout)):
                await self.client.admin.command("ping")
            return True
        except PyMongoError:
            return False

    @contextlib.contextmanager
    def bounded(self, verb: str) -> Iterator[None]:
        """One operation under the operation timeout; a lake that did not answer is typed."""
        try:
            with pymongo.timeout(self.operation_timeout):
                yield
        except PyMongoError as exc:
            if exc.has_error_label("TransientTransactionError"):
                raise  # a statement of a transaction: Lake.transaction retries it in its deadline
            refusal = unavailable(exc, verb)
            if refusal is not None:
                raise refusal from exc
            raise

    async def use_client(self, client: AsyncMongoClient[Document]) -> None:
        """Talk to another server from now on (the embedded daemon moved port)."""
        old, self.client = self.client, client
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5.0):
                await old.close()

    # -- reads -----------------------------------------------------------

    async def get(
        self, doc_id: str, *, dataset: str | None = None, session: AsyncClientSession | None = None
    ) -> Document | None:
        with self.bounded("get"):
            return await self.collection(dataset).find_one({"_id": doc_id}, session=session)

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
        with self.bounded("get"):
            cursor = self.collection(dataset).find({"_id": {"$in": list(ids)}}, session=session)
            return {doc["_id"]: doc async for doc in cursor}

    async def find(
        self,
        filter_: Mapping[str, Any],
        *,
        dataset: str | None = None,
        session: AsyncClientSession | None = None,
        sort: Sequence[tuple[str, int]] | None = None,
        limit: int = 0,
        projection: Mapping[str, Any] | None = None,
    ) -> list[Document]:
        with self.bounded("find"):
            cursor = self.collection(dataset).find(
                dict(filter_), projection=projection, session=session, limit=limit
            )
            if sort:
                cursor = cursor.sort(list(sort))
            return await cursor.to_list(None)

    async def count(
        self, filter_: Mapping[str, Any], *, dataset: str | None = None,
        session: AsyncClientSession | None = None,
    ) -> int:  # fmt: skip
        with self.bounded("count"):
            return await self.collection(dataset).count_documents(dict(filter_), session=session)

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
            with self.bounded("create"):
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
            with self.bounded("create"):
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
        one existing document does not stop the rest. Returns how many were inserted.
        """
        moment = now or utcnow()
        stored = [stamp_created(check_new_document(dict(d)), moment) for d in docs]
        if not stored:
            return 0
        try:
            with self.bounded("create"):
                result = await self.collection(dataset).insert_many(
                    stored, session=session, ordered=False)
        except pymongo.errors.BulkWriteError as exc:
            if not _only_duplicates(exc):
                raise
            return int(exc.details.get("nInserted", 0))
        return len(result.inserted_ids)

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
        with self.bounded("replace"):
            if expected_rev is None:
                current = await coll.find_one({"_id": doc_id}, {"_createdAt": 1}, session=session)
                created = current.get("_createdAt") if current else None
                stored = stamp_replaced(body, created, now or utcnow())
                await coll.replace_one({"_id": doc_id}, stored, upsert=True, session=session)
                return stored
            current = await coll.find_one({"_id": doc_id, "_rev": expected_rev},
                                          {"_createdAt": 1}, session=session)  # fmt: skip
            if current is None:
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
        with self.bounded("update"):
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
        with self.bounded("update"):
            result = await self.collection(dataset).update_many(
                dict(filter_), ops, session=session)
        return result.matched_count

    async def groq(
        self,
        query: str,
        *,
        params: Mapping[str, Any] | None = None,
        now: datetime | None = None,
        budget: Budget | None = None,
        dataset: str | None = None,
    ) -> Any:
        """Evaluate a GROQ query over one dataset (pushed down as a prefilter, then checked)."""
        return await query_collection(self.collection(dataset), query, params=params,
                                      now=now, budget=budget)  # fmt: skip

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
        with self.bounded("delete"):
            result = await self.collection(dataset).delete_one(query, session=session)
        if expected_rev is not None and result.deleted_count == 0:
            raise RevisionConflict(f"document {doc_id!r} changed since it was loaded",
                                   id=doc_id, expected_rev=expected_rev)  # fmt: skip
        return result.deleted_count == 1

    # -- transactions ----------------------------------------------------

    async def transaction(
        self,
        callback: Callable[[AsyncClientSession], Awaitable[T]],
        *,
        verb: str = "transaction",
        attempts: int | None = None,
        on_retry: Callable[[int, BaseException], None] | None = None,
    ) -> T:
        """Run ``callback(session)`` in a transaction with bounded retries."""
        try:
            return await run_transaction(
                self.client,
                callback,
                verb=verb,
                attempts=attempts or self.transaction_attempts,
                deadline=self.operation_timeout,
                on_retry=on_retry,
            )
        except PyMongoError as exc:
            refusal = unavailable(exc, verb)
            if refusal is not None:
                raise refusal from exc
            raise

    async def close(self) -> None:
        await self.client.close()


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
