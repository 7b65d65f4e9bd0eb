"""What one child fire's commit costs the embedded lake, by the shape of its round trips.

A child ``fireAction`` of the cohort benchmark commits as: find the child,
``update`` by ``_id``, ``commitTransaction`` -- three round trips in one
transaction, fenced by the transaction's snapshot. This replays that exact
write (captured from a real engine fire on a real child document) on copies
of the child, with ``--tasks`` concurrent callers on distinct documents, in
five shapes:

* ``txn``: find + update by ``_id`` + commit, in a transaction (the engine's);
* ``txn, _rev filter``: the same with the update's filter fenced on ``_rev``
  too (the engine's shape before: the embedded lake then tries every index
  before its ``_id`` point lookup);
* ``txn-fam``: one ``findAndModify`` by ``_id`` returning the document before
  (its ``_rev`` would fence the plan) + commit: a round trip fewer, but the
  embedded lake spends about 100 times the CPU on it;
* ``plain``: find + update fenced on ``_rev``, no transaction (the update is
  atomic and fenced by itself; a miss is the same conflict);
* ``update only``: the fenced update alone (the state already in memory).

Printed per shape: commits/s, and the lake daemon's CPU milliseconds per
commit (from ``/proc``), which is what limits the cohort benchmark on a
2-core machine (docs/performance.md).

``--watch`` keeps a change stream on the dataset open meanwhile and drains
it, as a ``kinflow serve`` process's change hub does: ``lookup`` asks for
every changed document whole (``updateLookup``, what the hub asks for),
``plain`` for the change events alone; the default is no stream.

    PYTHONPATH=. python bench/commit_shapes.py [--seconds 5] [--tasks 8]
        [--watch none|plain|lookup]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import os
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _cohort_definitions import CHILD, PARENT
from _harness import engine_on_a_fresh_database
from _spy_summary import start_recording, stop_recording
from pymongo import monitoring

from kinflow.storage import Lake
from kinflow.storage.embedded import EmbeddedLake


class Capture(monitoring.CommandListener):
    """Keeps the first ``update`` command an engine fire sends."""

    def __init__(self) -> None:
        self.on = False
        self.update: dict[str, Any] | None = None

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.on and self.update is None and event.command_name == "update":
            self.update = copy.deepcopy(dict(event.command["updates"][0]))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run(uri: str, pid: int, seconds: float, tasks: int, spy: Path | None,
              watch: str) -> None:
    capture = Capture()
    monitoring.register(capture)
    async with engine_on_a_fresh_database(uri, [CHILD, PARENT]) as engine:
        lake = engine.lake
        client = lake.client
        for n in range(2):
            await lake.create({"_id": f"item-{n}", "_type": "bench-item"})
        await engine.start_instance("bench-parent")
        children = await engine.query(
            "*[_type == 'kinflow.instance' && definition == 'bench-child']._id")
        template = await lake.get(children[0])
        assert template is not None
        capture.on = True
        await engine.fire_action(children[1], "task", "finish")
        capture.on = False
        assert capture.update is not None
        ops = capture.update["u"]
        coll = lake.collection()
        docs = []
        for n in range(tasks * 4000):
            doc = dict(template)
            doc["_id"], doc["_rev"] = f"instance.shape{n:06d}", "r0"
            docs.append(doc)
        for start in range(0, len(docs), 1000):
            await coll.insert_many(docs[start:start + 1000])
        print(f"child document {len(str(template)):,} chars; the fire's update: "
              f"{sorted(ops)} ({len(str(ops)):,} chars)")

        async def txn(doc_id: str) -> None:
            async with client.start_session() as session:
                async with await session.start_transaction():
                    await coll.find_one({"_id": doc_id}, session=session)
                    result = await coll.update_one({"_id": doc_id}, _fresh(ops),
                                                   session=session)
                    assert result.matched_count == 1

        async def txn_rev(doc_id: str) -> None:
            async with client.start_session() as session:
                async with await session.start_transaction():
                    await coll.find_one({"_id": doc_id}, session=session)
                    result = await coll.update_one({"_id": doc_id, "_rev": "r0"},
                                                   _fresh(ops), session=session)
                    assert result.matched_count == 1

        async def txn_fam(doc_id: str) -> None:
            async with client.start_session() as session:
                async with await session.start_transaction():
                    before = await coll.find_one_and_update(
                        {"_id": doc_id}, _fresh(ops), projection={"_rev": 1},
                        session=session)
                    assert before is not None and before["_rev"] == "r0"

        async def plain(doc_id: str) -> None:
            await coll.find_one({"_id": doc_id})
            result = await coll.update_one({"_id": doc_id, "_rev": "r0"}, _fresh(ops))
            assert result.matched_count == 1

        async def update_only(doc_id: str) -> None:
            result = await coll.update_one({"_id": doc_id, "_rev": "r0"}, _fresh(ops))
            assert result.matched_count == 1

        queue = iter(d["_id"] for d in docs)
        print(f"{tasks} concurrent callers, {seconds:.0f} s per shape "
              f"(load {os.getloadavg()[0]:.2f})")
        watcher = None
        if watch != "none":
            opened = asyncio.Event()
            watcher = asyncio.create_task(drain_changes(lake, watch == "lookup", opened))
            await asyncio.wait_for(opened.wait(), 30)
            print(f"a change stream is open and drained ({watch})")
        for label, shape in (("txn: find + update + commit", txn),
                             ("txn-rev: the same, _rev filter", txn_rev),
                             ("txn-fam: findAndModify + commit", txn_fam),
                             ("plain: find + update", plain),
                             ("update only", update_only)):
            await measure(label, shape, queue, pid, seconds, tasks, spy)
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


async def drain_changes(lake: Lake, lookup: bool, opened: asyncio.Event) -> None:
    """Read every change of the dataset, as the change hub does, until cancelled."""
    options: dict[str, Any] = {"full_document": "updateLookup"} if lookup else {}
    async with await lake.collection().watch(**options) as stream:
        opened.set()
        async for _ in stream:
            pass


def _fresh(ops: dict[str, Any]) -> dict[str, Any]:
    """The captured operators with a new ``_rev`` (the fence stays on ``r0``: each
    document is written once)."""
    fresh = copy.deepcopy(ops)
    fresh.setdefault("$set", {})["_rev"] = uuid.uuid4().hex
    return fresh


async def measure(label: str, shape: Callable[[str], Awaitable[None]], ids: Any, pid: int,
                  seconds: float, tasks: int, spy: Path | None) -> None:
    done = [0]
    recorder = None
    if spy is not None:
        recorder = start_recording(pid, spy / f"shape-{label.split(':')[0].replace(' ', '-')}.txt")
    stop = time.perf_counter() + seconds

    async def loop() -> None:
        while time.perf_counter() < stop:
            await shape(next(ids))
            done[0] += 1

    cpu, began = cpu_seconds(pid), time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(tasks)))
    elapsed, lake_cpu = time.perf_counter() - began, cpu_seconds(pid) - cpu
    if recorder is not None:
        stop_recording(recorder)
    print(f"  {label:30s} {done[0] / elapsed:7.0f} commits/s   lake CPU "
          f"{lake_cpu * 1000 / done[0]:5.2f} ms per commit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--watch", choices=("none", "plain", "lookup"), default="none")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="sample the lake daemon during each shape into DIR")
    args = parser.parse_args()
    daemon = EmbeddedLake(Path(tempfile.mkdtemp(prefix="kinflow-shapes-")))
    uri = daemon.start()
    try:
        assert daemon.pid is not None
        asyncio.run(run(uri, daemon.pid, args.seconds, args.tasks, args.py_spy, args.watch))
    finally:
        daemon.stop()


if __name__ == "__main__":
    main()
