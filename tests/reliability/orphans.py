"""How long a client SIGKILLed inside a transaction blocks the instance it was writing.

``python -m tests.reliability.orphans URI DATABASE INSTANCE LEDGER`` is the
client: it opens a transaction that writes the instance, says ``ready`` and
waits to be killed. ``blocked_after_kill`` runs it, kills it, then drives the
heartbeat and tries to edit the instance until an edit commits: the time from
the kill to that commit is what a user waits. With ``ledger`` both sides keep
the session ledger (``kinflow.storage.sessions``) as every kinflow process
does, so the heartbeat ends the dead client's sessions; without it the
server has to reap the transaction itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time

from pymongo import AsyncMongoClient

from kinflow.core.errors import ConcurrentModification
from kinflow.engine import Engine
from kinflow.storage import Lake
from kinflow.storage.sessions import SessionLedger
from kinflow.worker import Worker
from tests.engine.definitions import counter
from tests.reliability.family import ROOT


def _lake(uri: str, database: str, *, ledger: bool, attempts: int = 12,
          timeout: float = 30.0, host: str | None = None) -> Lake:
    lake = Lake(AsyncMongoClient(uri, tz_aware=True), database, operation_timeout=timeout,
                transaction_attempts=attempts)
    if ledger:
        lake.sessions = SessionLedger(lake, host=host)
    return lake


async def hold(uri: str, database: str, instance: str, ledger: bool,
               host: str | None = None) -> None:
    """The client: write the instance inside a transaction and never commit.

    ``host`` names another host in its ledger record, as a client on another
    machine would: the survivor cannot see its pid and waits for its heartbeat
    to go stale.
    """
    lake = _lake(uri, database, ledger=ledger, timeout=3600.0, host=host)

    async def write_and_wait(session: object) -> None:
        await lake.update(instance, {"$set": {"heldBy": os.getpid()}}, session=session)  # type: ignore[arg-type]
        print("ready", flush=True)
        await asyncio.sleep(3600)

    await lake.transaction(write_and_wait)


async def blocked_after_kill(uri: str, database: str, *, ledger: bool,
                             limit: float = 120.0, other_host: bool = False) -> float:
    """Seconds from the client's SIGKILL until an edit of its instance commits."""
    lake = _lake(uri, database, ledger=ledger, attempts=3)
    try:
        engine = Engine(lake)
        await engine.ensure_ready()
        await engine.deploy([counter("held")])
        instance = (await engine.start_instance("held")).instance.id_
        client = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.reliability.orphans", uri, database, instance,
            "ledger" if ledger else "none", *(["elsewhere"] if other_host else []),
            cwd=ROOT, stdout=asyncio.subprocess.PIPE, start_new_session=True)
        assert client.stdout is not None
        try:
            line = await asyncio.wait_for(client.stdout.readline(), 30)
            assert line.strip() == b"ready", line
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(client.pid, signal.SIGKILL)
            await client.wait()
        killed = time.monotonic()
        worker = Worker(engine, worker_id="survivor", grace_seconds=0, retention_interval=3600)
        edits = 0
        while time.monotonic() - killed < limit:
            await worker.run_pass()
            try:
                await engine.edit_field(instance, "n", edits)
                return time.monotonic() - killed
            except ConcurrentModification:
                edits += 1
                await asyncio.sleep(0.2)
        raise AssertionError(f"the instance was still blocked {limit:.0f} s after the kill")
    finally:
        if lake.sessions is not None:
            await lake.sessions.close()
        await lake.close()


if __name__ == "__main__":
    asyncio.run(hold(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "ledger",
                     sys.argv[5] if len(sys.argv) > 5 else None))
