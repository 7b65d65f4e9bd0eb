"""Ending the transactions of a dead process: a ledger of each process's server sessions.

A process killed inside a MongoDB transaction leaves it open on the server,
holding its writes: every later transaction on the same document conflicts
until the server gives up on it (``transactionLifetimeLimitSeconds``, 60 s;
on the embedded lake only once it has been idle that long *and* another
transaction command arrives). ``kinflow serve`` ends every session when it
starts the embedded lake itself, but on a lake it did not start (a
replica set, or a daemon another process started) nobody did, so an
instance stayed blocked for about a minute.

So every process records, beside the default dataset (``<dataset>.engine``,
``_type: kinflow.process``), the ids of the server sessions it runs
transactions on (pymongo pools them: a handful per process, each recorded
once) and refreshes a heartbeat while it lives. The heartbeat worker reaps
the records of dead processes (on its own host: the pid is gone; anywhere:
no heartbeat for ``stale`` seconds) with ``killSessions``, which aborts their
open transactions at once, and deletes them. A live process whose record was
reaped by mistake (stalled past ``stale``) only sees its transaction retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pymongo.errors import PyMongoError

from kinflow.storage.daemon_state import pid_alive
from kinflow.storage.database import side_name
from kinflow.storage.documents import utcnow
from kinflow.storage.indexes import IndexSpec
from kinflow.timestamps import iso

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession
    from pymongo.asynchronous.collection import AsyncCollection

    from kinflow.storage.database import LakeDatabase

log = logging.getLogger("kinflow.lake")
PROCESS_TYPE = "kinflow.process"
PROCESS_INDEXES = (IndexSpec("process_heartbeat", (("_type", 1), ("heartbeatAt", 1)),
                             partial={"_type": PROCESS_TYPE}),)


class SessionLedger:
    """This process's record of its server sessions, and the reaper of dead ones' records."""

    def __init__(self, lake: LakeDatabase, *, refresh: float = 5.0, stale: float = 30.0,
                 host: str | None = None, pid: int | None = None) -> None:
        self.lake = lake
        self.refresh = refresh
        self.stale = stale
        self.host = host or socket.gethostname()
        self.pid = pid or os.getpid()
        self.id = f"process.{self.host}.{self.pid}.{secrets.token_hex(4)}"
        self._lsids: list[dict[str, Any]] = []
        self._seen: set[bytes] = set()
        self._beat: asyncio.Task[None] | None = None
        self._ready = False

    def _collection(self) -> AsyncCollection[dict[str, Any]]:
        return self.lake.db[side_name(self.lake.default_dataset, "engine")]

    async def _ensure(self) -> None:
        if not self._ready:
            await self.lake.declare_indexes(PROCESS_INDEXES, kind="engine")
            await self.lake.ensure_dataset(side_name(self.lake.default_dataset, "engine"))
            self._ready = True

    async def note(self, session: AsyncClientSession) -> None:
        """Record the session before its transaction starts (once per pooled session)."""
        lsid = session.session_id
        key = bytes(lsid["id"])
        if key in self._seen:
            return
        await self._ensure()
        self._lsids.append(dict(lsid))
        await self._write()
        self._seen.add(key)
        if self._beat is None or self._beat.done():
            self._beat = asyncio.create_task(self._beating(), name="session-ledger")

    async def _write(self) -> None:
        await self._collection().update_one(
            {"_id": self.id},
            {"$set": {"_type": PROCESS_TYPE, "host": self.host, "pid": self.pid,
                      "heartbeatAt": iso(utcnow())},
             "$addToSet": {"lsids": {"$each": list(self._lsids)}}},
            upsert=True)

    async def _beating(self) -> None:
        while True:
            await asyncio.sleep(self.refresh)
            try:
                with self.lake.bounded("sessionHeartbeat"):
                    await self._write()
            except Exception as exc:  # the lake is down: the next beat tries again
                log.debug("session heartbeat failed: %s", exc)

    async def reap(self) -> int:
        """End the sessions of every dead process on record; returns how many processes."""
        await self._ensure()
        cutoff = iso(utcnow() - timedelta(seconds=self.stale))
        with self.lake.bounded("reapSessions"):
            records = await self._collection().find(
                {"_type": PROCESS_TYPE}, projection={"lsids": 1, "host": 1, "pid": 1,
                                                     "heartbeatAt": 1}).to_list(None)
        reaped = 0
        for record in records:
            if record["_id"] == self.id or not self._dead(record, cutoff):
                continue
            lsids = record.get("lsids") or []
            try:
                with self.lake.bounded("killSessions"):
                    if lsids:
                        await self.lake.client.admin.command("killSessions", lsids)
                    await self._collection().delete_one(
                        {"_id": record["_id"], "heartbeatAt": record.get("heartbeatAt")})
            except PyMongoError as exc:
                log.warning("could not end the sessions of %s: %s", record["_id"], exc)
                continue
            reaped += 1
            log.info("ended %d sessions of dead process %s", len(lsids), record["_id"])
        return reaped

    def _dead(self, record: dict[str, Any], cutoff: str) -> bool:
        beat = record.get("heartbeatAt")
        if not isinstance(beat, str) or beat < cutoff:
            return True
        pid = record.get("pid")
        return record.get("host") == self.host and isinstance(pid, int) and not pid_alive(pid)

    async def close(self) -> None:
        """Stop beating and drop the record (a clean exit leaves nothing to reap)."""
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._beat
        if self._seen:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await self._collection().delete_one({"_id": self.id})
