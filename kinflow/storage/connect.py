"""Open the lake the settings describe: a MongoDB URI, or the embedded daemon.

On the embedded lake every process also runs a keeper (``keeper.py``) that
notices the daemon dying and starts or follows a new one, and the lake gets
a restart gate (``restart_gate.py``) its planned restarts close.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import Any

from pymongo import AsyncMongoClient
from pymongo.errors import PyMongoError

from kinflow.errors import LakeUnavailable
from kinflow.observability import lake_events
from kinflow.settings import Settings
from kinflow.storage.embedded import EmbeddedLake
from kinflow.storage.indexes import content_indexes
from kinflow.storage.keeper import LakeKeeper
from kinflow.storage.lake import Lake
from kinflow.storage.memory_guard import MemoryGuard, cache_mib_for
from kinflow.storage.restart_gate import RestartGate
from kinflow.storage.sessions import SessionLedger
from kinflow.storage.slots import TransactionSlots


@dataclass
class LakeConnection:
    """A lake plus the embedded daemon behind it, if this process started one."""

    lake: Lake
    uri: str
    embedded: EmbeddedLake | None = None
    keeper: LakeKeeper | None = None
    guard: MemoryGuard | None = None

    async def close(self) -> None:
        """Close the client and stop a daemon this process owns, each step bounded."""
        if self.guard is not None:
            await self.guard.stop()
        if self.keeper is not None:
            await self.keeper.stop()
        if self.lake.sessions is not None:
            await self.lake.sessions.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):  # it ends sessions: a dead lake never answers
                await self.lake.close()
        if self.embedded is not None:
            await asyncio.to_thread(self.embedded.stop)


# The embedded daemon closes a connection that has sent nothing for 300 s, and
# pymongo's pool hands such a connection out without noticing: the next statement
# on it fails with "connection closed". The pool reuses its most recent
# connections first, so after a burst the others sit idle for minutes. Closing our
# own after a minute keeps every pooled connection one the daemon still serves.
EMBEDDED_MAX_IDLE_SECONDS = 60.0


def make_client(uri: str, settings: Settings, *, embedded: bool = False,
                max_idle_seconds: float = EMBEDDED_MAX_IDLE_SECONDS,
                ) -> AsyncMongoClient[dict[str, Any]]:
    """A client for the lake at ``uri``.

    On the embedded lake a pooled connection idle for ``max_idle_seconds`` is
    closed, not reused (see ``EMBEDDED_MAX_IDLE_SECONDS``). On MongoDB the URI
    decides (``maxIdleTimeMS``), as the driver's users expect.

    On the embedded lake, writes outside a transaction are sent as plain writes,
    not retryable ones. The daemon keeps a record of every retryable write (to
    replay its reply to a retry) in memory for 30 minutes, up to 10,000 of them,
    and scans them all on every such write, sorting them once full: under the
    live load the worker's lease writes filled it in about ten minutes, and from
    then on every statement waited behind that sort and throughput fell by half
    until the daemon restarted (docs/performance.md, "The slow phase"). The
    records buy nothing there: the daemon is on this machine, and the one thing
    that cuts a write short, a restart, forgets them anyway. Transactions keep
    their retries (pymongo always retries a commit once, and ``Lake.transaction``
    retries transient errors), and MongoDB keeps retryable writes.
    """
    options: dict[str, Any] = {"maxIdleTimeMS": int(max_idle_seconds * 1000)} if embedded else {}
    return AsyncMongoClient(
        uri,
        serverSelectionTimeoutMS=int(min(settings.operation_timeout, 10.0) * 1000),
        tz_aware=True,
        retryWrites=not embedded,
        event_listeners=lake_events.listeners(),  # round trips for metrics and traces
        **options,
    )


async def open_lake(settings: Settings, *, database: str | None = None) -> LakeConnection:
    """Connect (starting the embedded lake when no URI is set) and prepare the dataset."""
    embedded: EmbeddedLake | None = None
    uri = settings.mongodb_uri
    if not uri:
        embedded = EmbeddedLake(
            settings.data_dir,
            sync_on_commit=settings.embedded_sync_on_commit,
            test_commands=settings.embedded_test_commands,
            start_timeout=settings.embedded_start_timeout,
            cache_mib=cache_mib_for(settings.embedded_memory_mb),
        )
        # Started on this (the main) thread on purpose: the parent-death signal
        # fires when the *thread* that forked the daemon exits, and executor
        # threads come and go. Start-up blocks the loop for about half a second.
        uri = embedded.start()
    lake = Lake(
        make_client(uri, settings, embedded=embedded is not None),
        database or settings.database,
        default_dataset=settings.dataset,
        operation_timeout=settings.operation_timeout,
        transaction_attempts=settings.transaction_attempts,
        slots=transaction_slots(settings, embedded=embedded is not None),
        # past its budget the keeper restarts the embedded daemon, behind the restart gate
        gate=RestartGate() if embedded is not None else None,
        ledger=SessionLedger,  # a survivor can end our transactions if we die
    )
    lake.indexes.extend(content_indexes(settings.content_indexes))
    try:
        await lake.ensure_dataset()
    except BaseException as exc:
        await lake.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)
        if isinstance(exc, PyMongoError):
            raise LakeUnavailable(
                f"the lake at {_redacted(uri)} did not answer: {str(exc).split(' (configured')[0]}",
                uri=_redacted(uri),
            ) from exc
        raise
    keeper = guard = None
    if embedded is not None:
        keeper = LakeKeeper(embedded, lake,
                            lambda new_uri: make_client(new_uri, settings, embedded=True),
                            give_up_after=max(2 * settings.embedded_start_timeout, 10.0))
        keeper.start()
        guard = MemoryGuard(embedded, settings.embedded_memory_mb,
                            restart=keeper.restart_planned)
        guard.start()
    return LakeConnection(lake, uri, embedded, keeper, guard)


EMBEDDED_TRANSACTIONS = 4  # open transactions per process on the embedded lake (slots.py)


def transaction_slots(settings: Settings, *, embedded: bool) -> TransactionSlots | None:
    """The cap on this process's open transactions: ``KINFLOW_LAKE_TRANSACTIONS``, or
    by default a few on the embedded lake (more only stall it) and none on MongoDB."""
    limit = settings.lake_transactions or (EMBEDDED_TRANSACTIONS if embedded else 0)
    return TransactionSlots(limit) if limit else None


def _redacted(uri: str) -> str:
    """The URI without a password, for messages."""
    return re.sub(r"//([^:/@]+):[^@/]+@", r"//\1:***@", uri)
