"""Raw lake throughput on the embedded server: the ceiling the engine works under.

Prints single-document inserts/s, fenced updates/s and 3-write transactions/s
with 1 and with 8 concurrent tasks, all measured in one run on one daemon.
Each cell runs for ``--seconds`` (default 3).

    python bench/lake.py [--seconds 3] [--uri mongodb://...]
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from _harness import measure, print_rates, rate

from kinflow.errors import RevisionConflict
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client


async def run(uri: str, seconds: float) -> list[tuple[str, float, float]]:
    settings = Settings(mongodb_uri=uri)
    lake = Lake(make_client(uri, settings), f"bench_{uuid.uuid4().hex[:8]}")
    await lake.ensure_dataset()
    run_id = uuid.uuid4().hex[:6]
    revs: dict[str, str] = {}

    async def insert(task: int) -> None:
        await lake.create({"_id": f"i-{run_id}-{task}-{time.perf_counter_ns()}", "_type": "b"})

    async def fenced_update(task: int) -> None:
        doc_id = f"u-{task}"
        if doc_id not in revs:
            revs[doc_id] = (await lake.create({"_id": doc_id, "_type": "b", "n": 0}))["_rev"]
        try:
            revs[doc_id] = await lake.update(doc_id, {"$inc": {"n": 1}}, expected_rev=revs[doc_id])
        except RevisionConflict:
            revs[doc_id] = ((await lake.get(doc_id)) or {})["_rev"]

    async def transaction(task: int) -> None:
        run_doc = f"run-{run_id}-{task}"

        async def body(session: Any) -> None:
            stamp = f"{task}-{time.perf_counter_ns()}"
            await lake.create({"_id": f"step-{stamp}", "_type": "b"}, session=session)
            await lake.collection().update_one(
                {"_id": run_doc}, {"$inc": {"n": 1}, "$setOnInsert": {"_type": "b"}},
                upsert=True, session=session,
            )  # fmt: skip
            await lake.create({"_id": f"event-{stamp}", "_type": "b"}, session=session)

        await lake.transaction(body)

    rows = []
    for name, op in [("single inserts/s", insert), ("fenced updates/s", fenced_update),
                     ("3-write transactions/s", transaction)]:  # fmt: skip
        one = await rate(op, 1, seconds)
        eight = await rate(op, 8, seconds)
        rows.append((name, one, eight))
    await lake.client.drop_database(lake.database)
    await lake.close()
    return rows


def main() -> None:
    where, rows = measure(__doc__, run)
    print_rates(f"lake throughput ({where}, sync-on-commit)", rows)


if __name__ == "__main__":
    main()
