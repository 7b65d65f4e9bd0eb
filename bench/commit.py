"""Engine commit rate next to the lake's raw one-document transaction rate.

Measured in one run on one embedded daemon (or ``--uri``):

* raw: a transaction that loads one document and replaces it fenced on its
  ``_rev`` (the storage work of one engine commit, nothing else);
* raw, instance-sized: the same transaction on a document shaped like an
  instance and growing by two history rows per commit, as the engine's does
  (separates the engine's CPU from the storage's per-byte cost);
* engine: ``fire_action`` of an action with one op that neither finishes its
  activity nor moves the stage (one commit per call: load, parse, plan,
  cascade check, fenced write).

Both run with 1 task on one document/instance and with 8 tasks on 8
documents/instances, so no cell measures contention. The ratio is the
engine's overhead over what the storage allows.

    python bench/commit.py [--seconds 3] [--uri mongodb://...]
"""

from __future__ import annotations

import uuid
from typing import Any

from _harness import measure, print_rates, rate

from kinflow.engine import Engine
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client

DEFINITION = {
    "name": "bench-counter",
    "title": "Bench counter",
    "initialStage": "counting",
    "fields": [{"name": "n", "type": "number", "initialValue": {"type": "literal", "value": 0}}],
    "stages": [
        {"name": "counting",
         "activities": [{"name": "count", "actions": [
             {"name": "bump", "ops": [{"type": "field.inc", "target": "n"}]},
             {"name": "stop", "status": "done"}]}],
         "transitions": [{"name": "finish", "to": "done"}]},
        {"name": "done"},
    ],
}


async def run(uri: str, seconds: float) -> list[tuple[str, float, float]]:
    settings = Settings(mongodb_uri=uri)
    lake = Lake(make_client(uri, settings), f"bench_{uuid.uuid4().hex[:8]}")
    engine = Engine(lake)
    await engine.ensure_ready()
    await engine.deploy([DEFINITION])
    instances = [(await engine.start_instance("bench-counter")).instance.id_ for _ in range(8)]
    for task in range(8):
        await lake.create({"_id": f"raw-{task}", "_type": "bench", "n": 0})

    async def raw(task: int) -> None:
        async def body(session: Any) -> None:
            doc = await lake.get(f"raw-{task}", session=session)
            assert doc is not None
            await lake.replace({**doc, "n": doc["n"] + 1}, expected_rev=doc["_rev"],
                               session=session)

        await lake.transaction(body, verb="bench")

    template = (await engine.get_instance(instances[0])).to_document()
    for task in range(8):
        await lake.create({**template, "_id": f"sized-{task}", "_type": "bench"})

    async def raw_sized(task: int) -> None:
        """Same storage work on a document shaped and growing like an instance."""
        async def body(session: Any) -> None:
            doc = await lake.get(f"sized-{task}", session=session)
            assert doc is not None
            rows = [dict(row, _key=uuid.uuid4().hex[:12]) for row in template["history"][:2]]
            await lake.replace({**doc, "history": [*doc["history"], *rows]},
                               expected_rev=doc["_rev"], session=session)

        await lake.transaction(body, verb="bench")

    async def fire(task: int) -> None:
        await engine.fire_action(instances[task], "count", "bump")

    rows = []
    for name, op in [("raw one-document transactions/s", raw),
                     ("engine fire_action commits/s", fire),
                     ("raw transactions on an instance-sized, growing document/s", raw_sized)]:
        rows.append((name, await rate(op, 1, seconds), await rate(op, 8, seconds)))
    await lake.client.drop_database(lake.database)
    await lake.close()
    return rows


def main() -> None:
    where, rows = measure(__doc__, run)
    (_, raw1, raw8), (_, eng1, eng8), (_, big1, big8) = rows
    print_rates(
        f"engine commits vs raw transactions ({where})",
        rows,
        [("engine / raw", eng1 / raw1, eng8 / raw8),
         ("engine / raw on an instance-sized document", eng1 / big1, eng8 / big8)],
    )  # fmt: skip


if __name__ == "__main__":
    main()
