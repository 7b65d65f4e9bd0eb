"""One lake database: its datasets and indexes, bounded operations, transactions.

The connection half of the lake (``kinflow.storage.lake`` adds the document
reads and writes): which database and collections, the operation timeout
every call runs under, and the typing of errors that mean the lake did not
answer (``LakeUnavailable``) as opposed to real errors.

Every collection and index is created up front (``ensure_dataset``): a
collection created implicitly inside a transaction blocks other writers on
the embedded server. Indexes are declared as data (``IndexSpec``) so the
engine can add its own without the lake learning what they mean.

**Side collections.** The engine's own bookkeeping (registry rows of
cohorts, leases, ...) lives beside a dataset, never in it, so GROQ's ``*``
and the instance listings only ever see definitions, instances and content.
A side collection is named ``<dataset>.<kind>`` (``side_name``): a dataset
name cannot hold a dot, so no caller can name one as a dataset, and the
lake's document verbs accept it wherever they take a dataset. Each kind has
its own indexes (``declare_indexes(..., kind=)``), created with it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import pymongo
from pymongo import AsyncMongoClient
from pymongo.errors import ConnectionFailure, InvalidOperation, PyMongoError

from kinflow.errors import InvalidInput, LakeUnavailable
from kinflow.gdr import check_dataset
from kinflow.storage.indexes import BASE_INDEXES, IndexSpec
from kinflow.storage.restart_gate import RestartGate
from kinflow.storage.slots import TransactionSlots
from kinflow.storage.transactions import run_transaction

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase

    from kinflow.storage.sessions import SessionLedger

T = TypeVar("T")
RETRY_PAUSE = 0.05  # seconds between tries of an operation a planned restart cut off
_HANDLES = 64  # collection handles kept at most (names are checked dataset and side names)
Document = dict[str, Any]
SIDE_KINDS = frozenset({"rows", "engine", "stamps"})
"""The kinds of side collection: ``rows`` (cohort registry rows), ``engine`` (leases and
other engine bookkeeping), ``stamps`` (stamps the children of a group commit owe their
parents, engine/stamps.py)."""


def side_name(dataset: str, kind: str) -> str:
    """The side collection of ``kind`` beside ``dataset``."""
    if kind not in SIDE_KINDS:
        raise ValueError(f"unknown side collection kind {kind!r}")
    return f"{check_dataset(dataset)}.{kind}"


def check_collection(name: str) -> tuple[str, str | None]:
    """``(dataset, kind)`` of a dataset name or a side collection name."""
    dataset, dot, kind = name.partition(".")
    if dot and kind not in SIDE_KINDS:
        raise ValueError(f"unknown side collection {name!r}")
    return check_dataset(dataset), kind if dot else None


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
class LakeDatabase:
    """Async access to one lake database over ``AsyncMongoClient`` (no documents yet)."""

    client: AsyncMongoClient[Document]
    database: str
    default_dataset: str = "production"
    operation_timeout: float = 30.0
    transaction_attempts: int = 12
    indexes: list[IndexSpec] = field(default_factory=lambda: list(BASE_INDEXES))
    side_indexes: dict[str, list[IndexSpec]] = field(default_factory=dict)
    slots: TransactionSlots | None = None  # open transactions at most (kinflow.storage.slots)
    gate: RestartGate | None = None  # planned restarts wait here (kinflow.storage.restart_gate)
    ledger: InitVar[Callable[[LakeDatabase], SessionLedger] | None] = None
    """Builds this process's session ledger over the lake (kinflow.storage.sessions);
    ``None``: no ledger (a tool's short-lived connection)."""
    sessions: SessionLedger | None = field(default=None, init=False)
    _ready: set[str] = field(default_factory=set, repr=False)
    # collection handles by name, for the client in use (pymongo builds a database and a
    # collection object per lookup: ~12 µs, a few times per child fire)
    _handles: dict[str, AsyncCollection[Document]] = field(default_factory=dict, repr=False)

    def __post_init__(self, ledger: Callable[[LakeDatabase], SessionLedger] | None) -> None:
        self.sessions = ledger(self) if ledger is not None else None

    # -- datasets --------------------------------------------------------

    @property
    def db(self) -> AsyncDatabase[Document]:
        return self.client[self.database]

    def collection(self, dataset: str | None = None) -> AsyncCollection[Document]:
        name = dataset or self.default_dataset
        found = self._handles.get(name)
        if (found is not None and found.database.client is self.client
                and found.database.name == self.database):
            return found
        check_collection(name)
        if len(self._handles) >= _HANDLES:
            self._handles.clear()
        found = self._handles[name] = self.db[name]
        return found

    def _specs(self, name: str) -> list[IndexSpec]:
        kind = check_collection(name)[1]
        return self.indexes if kind is None else self.side_indexes.get(kind, [])

    async def ensure_dataset(self, dataset: str | None = None) -> AsyncCollection[Document]:
        """Create the collection (a dataset or a side collection) and every index
        declared for it, idempotently."""
        name = dataset or self.default_dataset
        check_collection(name)
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
            await _build_indexes(coll, self._specs(name))
        self._ready.add(name)
        return coll

    async def declare_indexes(self, specs: Iterable[IndexSpec], *, kind: str | None = None
                              ) -> None:
        """Add indexes (from the engine, say) and build them on every ready dataset,
        or with ``kind`` on every ready side collection of that kind."""
        if kind is None:
            declared = self.indexes
        else:
            side_name("x", kind)  # a known kind
            declared = self.side_indexes.setdefault(kind, [])
        known = {spec.name for spec in declared}
        added = [spec for spec in specs if spec.name not in known]
        if not added:
            return
        declared.extend(added)
        with self.bounded("declareIndexes"):
            for name in sorted(self._ready):
                if check_collection(name)[1] == kind:
                    await _build_indexes(self.db[name], added)

    async def ping(self, timeout: float = 5.0) -> bool:
        try:
            with pymongo.timeout(min(self.operation_timeout, timeout)):
                await self.client.admin.command("ping")
            return True
        except PyMongoError:
            return False

    @contextlib.contextmanager
    def bounded(self, verb: str, timeout: float | None = None) -> Iterator[None]:
        """One operation under the operation timeout (or ``timeout``); a lake that did not
        answer is typed."""
        try:
            with pymongo.timeout(timeout or self.operation_timeout):
                yield
        except PyMongoError as exc:
            if exc.has_error_label("TransientTransactionError"):
                raise  # a statement of a transaction: Lake.transaction retries it in its deadline
            refusal = unavailable(exc, verb)
            if refusal is not None:
                raise refusal from exc
            raise
        except OverflowError as exc:  # BSON encoding: an integer past 64 bits in the input
            raise InvalidInput("a value holds an integer outside the 64-bit range a document "
                               "can store", operation=verb) from exc

    @contextlib.asynccontextmanager
    async def operation(self, verb: str, timeout: float | None = None) -> AsyncIterator[None]:
        """``bounded``, after waiting out a planned restart of the daemon (``restart_gate``)."""
        if self.gate is None:
            with self.bounded(verb, timeout):
                yield
            return
        async with self.gate.passage(timeout or self.operation_timeout, verb,
                                     long=self._long(timeout)):
            with self.bounded(verb, timeout):
                yield

    async def read(self, verb: str, run: Callable[[], Awaitable[T]], *,
                   session: AsyncClientSession | None = None, timeout: float | None = None
                   ) -> T:
        """Run a read as one operation; outside a transaction, a read that lost its
        connection to a planned restart is run again once the daemon is back, within
        the operation timeout (a read has no effect to apply twice)."""
        return await self.repeatable(verb, run, session=session, timeout=timeout)

    async def repeatable(self, verb: str, run: Callable[[], Awaitable[T]], *,
                         session: AsyncClientSession | None = None,
                         timeout: float | None = None) -> T:
        """Run an operation that may run twice to no further effect (a read, an insert that
        skips the ids it finds stored) as ``read`` runs a read: cut by a planned restart,
        it runs again once the daemon is back. Such a write can outlast the restart's
        drain (a batch of children), and its caller has nothing better to do than retry."""
        if session is not None or self.gate is None:
            async with self.operation(verb, timeout):
                return await run()
        loop = asyncio.get_running_loop()
        end = loop.time() + (timeout or self.operation_timeout)
        while True:
            try:
                async with self.gate.passage(end - loop.time(), verb, long=self._long(timeout)):
                    with self.bounded(verb, timeout):
                        return await run()
            except LakeUnavailable:
                if not self._restart_explains(end - loop.time()):
                    raise
            await asyncio.sleep(RETRY_PAUSE)

    def _long(self, timeout: float | None) -> bool:
        """An operation given longer than the operation timeout (it postpones restarts)."""
        return timeout is not None and timeout > self.operation_timeout

    def _restart_explains(self, left: float) -> bool:
        """Time is left and a planned restart explains the lost lake: worth another try."""
        return left > RETRY_PAUSE and self.gate is not None and self.gate.restart_explains()

    async def use_client(self, client: AsyncMongoClient[Document]) -> None:
        """Talk to another server from now on (the embedded daemon moved port)."""
        old, self.client = self.client, client
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5.0):
                await old.close()

    # -- transactions ----------------------------------------------------

    async def transaction(
        self,
        callback: Callable[[AsyncClientSession], Awaitable[T]],
        *,
        verb: str = "transaction",
        attempts: int | None = None,
        on_retry: Callable[[int, BaseException], None] | None = None,
    ) -> T:
        """Run ``callback(session)`` in a transaction with bounded retries.

        It passes the restart gate first; one that lost the lake to a planned
        restart is run again from the start once the daemon is back, all
        within one operation timeout (the callback reloads what it reads, and a
        verb's idempotency key keeps a committed effect from applying twice).
        """
        if self.gate is None:
            return await self._transaction(callback, verb=verb, attempts=attempts,
                                           on_retry=on_retry, deadline=self.operation_timeout)
        loop = asyncio.get_running_loop()
        end = loop.time() + self.operation_timeout
        while True:
            try:
                async with self.gate.passage(end - loop.time(), verb):
                    return await self._transaction(callback, verb=verb, attempts=attempts,
                                                   on_retry=on_retry,
                                                   deadline=end - loop.time())
            except LakeUnavailable:
                if not self._restart_explains(end - loop.time()):
                    raise
            await asyncio.sleep(RETRY_PAUSE)

    async def _transaction(
        self,
        callback: Callable[[AsyncClientSession], Awaitable[T]],
        *,
        verb: str,
        attempts: int | None,
        on_retry: Callable[[int, BaseException], None] | None,
        deadline: float,
    ) -> T:
        try:
            return await run_transaction(
                self.client,
                callback,
                verb=verb,
                attempts=attempts or self.transaction_attempts,
                deadline=deadline,
                on_retry=on_retry,
                on_session=self.sessions.note if self.sessions is not None else None,
                slots=self.slots,
            )
        except PyMongoError as exc:
            refusal = unavailable(exc, verb)
            if refusal is not None:
                raise refusal from exc
            raise
        except OverflowError as exc:  # BSON encoding: an integer past 64 bits in the input
            raise InvalidInput("a value holds an integer outside the 64-bit range a document "
                               "can store", operation=verb) from exc

    async def close(self) -> None:
        await self.client.close()


async def _build_indexes(coll: AsyncCollection[Document], specs: list[IndexSpec]) -> None:
    """Create ``specs`` on ``coll``, first dropping the older indexes they replace."""
    if not specs:
        return
    retired = {old for spec in specs for old in spec.replaces}
    if retired:
        present = {index["name"] async for index in await coll.list_indexes()}
        for old in sorted(retired & present):
            await coll.drop_index(old)
    await coll.create_indexes([spec.model() for spec in specs])
