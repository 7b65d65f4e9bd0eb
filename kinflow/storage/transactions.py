"""Run a callback in a MongoDB transaction, retrying bounded conflicts.

pymongo's own ``with_transaction`` retries for a fixed 120 s; a workflow
engine serving API calls wants a small, bounded number of attempts with
jittered backoff and then a typed refusal the caller can act on. The callback
receives the session and must be safe to run again from the start: it loads
what it needs inside the transaction on every attempt.

Retried: errors labelled ``TransientTransactionError`` (WriteConflict among
them) and a ``RevisionConflict`` raised by a fenced write inside the callback
(another commit won; a fresh load will see it). A commit whose outcome is
unknown (``UnknownTransactionCommitResult``) is re-committed.

Every attempt shares one deadline (the operation timeout). A lost connection
(the embedded daemon killed and restarting, say) does not use up the
conflict attempts: it is retried, and a commit whose outcome it made unknown
is re-committed, while time is left, then refused as ``lake-unavailable``.
So a verb in flight across a one-second restart commits once, late, rather
than failing while its effect may already have run.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pymongo
from pymongo.errors import ConnectionFailure, OperationFailure, PyMongoError

from kinflow.errors import ConcurrentModification, KinflowError, LakeUnavailable, RevisionConflict
from kinflow.storage.slots import NoSlot, TransactionSlots

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession
    from pymongo.asynchronous.mongo_client import AsyncMongoClient

T = TypeVar("T")

TRANSIENT = "TransientTransactionError"
UNKNOWN_COMMIT = "UnknownTransactionCommitResult"
WRITE_CONFLICT = 112
LOST_CAP = 0.5  # the longest pause between retries while the lake is unreachable


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, PyMongoError) and exc.has_error_label(TRANSIENT):
        return True
    return isinstance(exc, OperationFailure) and exc.code == WRITE_CONFLICT


async def backoff(attempt: int, base: float = 0.005, cap: float = 0.25) -> None:
    """Full-jitter exponential backoff."""
    await asyncio.sleep(random.uniform(0, min(cap, base * (2**attempt))))


async def run_transaction(
    client: AsyncMongoClient[Any],
    callback: Callable[[AsyncClientSession], Awaitable[T]],
    *,
    verb: str = "transaction",
    attempts: int = 12,
    deadline: float = 30.0,
    on_retry: Callable[[int, BaseException], None] | None = None,
    on_session: Callable[[AsyncClientSession], Awaitable[None]] | None = None,
    slots: TransactionSlots | None = None,
) -> T:
    """Run ``callback(session)`` inside a transaction; return its result after commit.

    ``on_session`` sees each session before its transaction starts (the session
    ledger records it, so a survivor can end the transaction should we die).
    ``slots`` caps this process's open transactions (``kinflow.storage.slots``);
    each attempt holds one slot, given back during the backoff.
    """
    last: BaseException | None = None
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    attempt = conflicts = 0
    while conflicts < attempts:
        left = end - loop.time()
        if left <= 0:
            break
        try:
            async with _slot(slots, left, verb):
                return await _attempt(client, callback, on_session, end - loop.time())
        except RevisionConflict as exc:
            last = _without_frames(exc)
            conflicts += 1
        except KinflowError:
            raise
        except PyMongoError as exc:
            if not _is_transient(exc) or exc.timeout:
                if isinstance(exc, ConnectionFailure) or exc.timeout:
                    raise _unavailable(exc, verb) from exc
                raise
            last = _without_frames(exc)
            conflicts += not isinstance(exc, ConnectionFailure)  # a lost lake is no conflict
        if on_retry is not None:
            on_retry(attempt, last)
        await backoff(attempt, cap=LOST_CAP if isinstance(last, ConnectionFailure) else 0.25)
        attempt += 1
    if isinstance(last, ConnectionFailure):
        raise _unavailable(last, verb) from last
    raise ConcurrentModification(
        f"{verb} kept conflicting with concurrent writes; try again",
        verb=verb,
        attempts=attempts,
        cause=type(last).__name__ if last else None,
    )


def _without_frames(exc: BaseException) -> BaseException:
    """The failure of a retried attempt, kept only for its kind and message.

    Its traceback holds the failed attempt's frames (the documents it read, the
    state it planned) in a cycle with this loop's frame, which only the cyclic
    collector frees: under conflicts or a lake restart that was garbage by the
    megabyte, raising the process's high-water mark.
    """
    exc.__context__ = exc.__cause__ = None
    return exc.with_traceback(None)


async def _attempt(
    client: AsyncMongoClient[Any],
    callback: Callable[[AsyncClientSession], Awaitable[T]],
    on_session: Callable[[AsyncClientSession], Awaitable[None]] | None,
    left: float,
) -> T:
    """One attempt: a session, the callback in its transaction, the commit."""
    with pymongo.timeout(max(left, 0.001)):
        async with client.start_session() as session:
            if on_session is not None:
                await on_session(session)
            await session.start_transaction()
            try:
                result = await callback(session)
            except BaseException:
                if session.in_transaction:
                    await _abort_quietly(session)
                raise
            await _commit(session)
            return result


@contextlib.asynccontextmanager
async def _slot(slots: TransactionSlots | None, within: float, verb: str
                ) -> AsyncIterator[None]:
    """A transaction slot for one attempt, or ``lake-unavailable`` when none comes free."""
    if slots is None:
        yield
        return
    try:
        async with slots.held(within):
            yield
    except NoSlot as exc:
        raise LakeUnavailable(f"the lake is busy: {exc}", verb=verb,
                              cause="transaction-slots") from None


def _unavailable(exc: PyMongoError, verb: str) -> LakeUnavailable:
    reason = str(exc).split(", Timeout:")[0].split(" (configured")[0][:300]
    return LakeUnavailable(f"the lake did not answer: {reason}", verb=verb,
                           cause=type(exc).__name__)  # fmt: skip


async def _commit(session: AsyncClientSession) -> None:
    """Commit; an unknown outcome is re-committed until known (the caller's deadline bounds it)."""
    attempt = 0
    while True:
        try:
            await session.commit_transaction()
            return
        except PyMongoError as exc:
            if not exc.has_error_label(UNKNOWN_COMMIT) or exc.timeout:
                raise
            await backoff(attempt, cap=LOST_CAP)
            attempt += 1


async def _abort_quietly(session: AsyncClientSession) -> None:
    try:
        await session.abort_transaction()
    except PyMongoError:
        pass  # the server drops the transaction anyway
