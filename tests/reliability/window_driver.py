"""The process the window kill test SIGKILLs: it finishes children until a fault point fires.

Run as ``python -m tests.reliability.window_driver URI DATABASE POINT CHILD_ID...``.
Its engine's fault points do not raise: the armed one sends SIGKILL to this
very process, so it dies exactly there (for ``before-propagation``: the
child's finish is committed, the parent has not been told). Each child named
is finished in turn; the first commit that reaches the point ends the run.
A driver that finishes them all without dying exits 3, which the test reports.
"""

from __future__ import annotations

import asyncio
import sys

from kinflow.engine import Engine
from tests.reliability.driver_process import KillAt
from tests.reliability.family import open_lake

NOT_KILLED = 3


async def main(uri: str, database: str, point: str, children: list[str]) -> int:
    lake = open_lake(uri, database)
    engine = Engine(lake, faults=KillAt(point))
    await engine.ensure_ready()
    print("ready", flush=True)
    for child_id in children:
        await engine.fire_action(child_id, "task", "finish")
        print(f"finished {child_id}", flush=True)
    await lake.close()
    return NOT_KILLED


if __name__ == "__main__":
    uri_arg, db_arg, point_arg, *child_args = sys.argv[1:]
    sys.exit(asyncio.run(main(uri_arg, db_arg, point_arg, child_args)))
