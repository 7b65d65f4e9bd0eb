"""The process the registration kill test SIGKILLs: it registers a cohort's rows, and dies.

Run as ``python -m tests.reliability.registration_driver URI DATABASE PARENT_ID BATCH MODE
ARG``. It runs the parent's registration from its checkpoint (the batches after the
spawn, ``engine/registration.py``) and SIGKILLs itself: with ``MODE`` ``point`` the
``ARG``-th time it reaches ``mid-registration`` (batches committed, the next not
begun); with ``MODE`` ``after`` ``ARG`` seconds after it started registering, wherever
it is (reading a batch, inside a commit, between commits). A driver that finishes
without dying exits 3, which the test reports.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import replace

from kinflow.core.context import Limits
from kinflow.engine import Engine
from tests.reliability.driver_process import KillAt
from tests.reliability.family import open_lake

NOT_KILLED = 3


async def main(uri: str, database: str, parent_id: str, batch: int, mode: str, arg: str
               ) -> int:
    lake = open_lake(uri, database)
    faults = KillAt("mid-registration", int(arg)) if mode == "point" else None
    engine = Engine(lake, faults=faults,
                    limits=replace(Limits(), registration_batch=batch))
    await engine.ensure_ready()
    print("ready", flush=True)
    if mode == "after":
        def die() -> None:
            print("killing after a delay", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.get_running_loop().call_later(float(arg), die)
    batches = await engine.maintenance.finish_registration(parent_id)
    print(f"not killed: {batches} batches", flush=True)
    await lake.close()
    return NOT_KILLED


if __name__ == "__main__":
    uri_arg, db_arg, parent_arg, batch_arg, mode_arg, arg_arg = sys.argv[1:]
    sys.exit(asyncio.run(main(uri_arg, db_arg, parent_arg, int(batch_arg), mode_arg,
                              arg_arg)))
