"""The process the bulk kill test SIGKILLs: one ``fireCohort`` call, killed at a fault point.

Run as ``python -m tests.reliability.bulk_driver URI DATABASE POINT NTH PARENT_ID ACTION
KEY``. It fires ``task.ACTION`` on every live child of the parent's ``translate``
cohort under ``KEY``, ten rows a batch, and SIGKILLs itself the ``NTH`` time its
engine reaches ``POINT``: ``mid-bulk`` (batches committed and marked, the next not
begun) or ``before-propagation`` (a child's fire committed, its batch not yet
marked on the parent, other children's fires in flight). A driver that finishes
the call without dying exits 3, which the test reports.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace

from kinflow.core.context import Limits
from kinflow.engine import Engine
from tests.reliability.driver_process import KillAt
from tests.reliability.family import open_lake

NOT_KILLED = 3
BATCH = 10


async def main(uri: str, database: str, point: str, nth: int, parent_id: str, action: str,
               key: str) -> int:
    lake = open_lake(uri, database)
    engine = Engine(lake, faults=KillAt(point, nth),
                    limits=replace(Limits(), bulk_batch=BATCH))
    await engine.ensure_ready()
    print("ready", flush=True)
    result = await engine.fire_cohort(parent_id, "translate", "task", action,
                                      idempotency_key=key)
    print(f"not killed: {result}", flush=True)
    await lake.close()
    return NOT_KILLED


if __name__ == "__main__":
    uri_arg, db_arg, point_arg, nth_arg, parent_arg, action_arg, key_arg = sys.argv[1:]
    sys.exit(asyncio.run(main(uri_arg, db_arg, point_arg, int(nth_arg), parent_arg,
                              action_arg, key_arg)))
