"""Readers of a parent's registry share one chunk read per revision (engine/rowstore.py).

Every subscriber of a family assembles the parent's change at the same moment;
they must get the same rows from one read, and a new revision must be read
again. Reads are counted with ``test_cohort_pages.ChunkReads`` (it wraps
``Lake.find``, never pymongo): these parents have one chunk, so chunks read are
reads made.
"""

from __future__ import annotations

import asyncio

import pytest

from kinflow.engine import Engine
from tests.engine.cohort_defs import child, items, parent
from tests.engine.test_cohort_pages import ChunkReads

pytestmark = pytest.mark.lake


async def test_concurrent_readers_of_one_revision_share_one_read(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    await engine.deploy([parent(), child()])
    p = (await engine.start_instance("p", fields=items("a", "b", "c"))).instance
    p = (await engine.fire_action(p.id_, "go", "go")).instance
    doc = await engine.lake.get(p.id_)
    assert doc is not None and doc.get("rowCount") == 3
    reads = ChunkReads(engine, monkeypatch)

    assembled = await asyncio.gather(*(engine.assemble(dict(doc)) for _ in range(10)))
    assert reads.chunks == 1
    keys = [[row["rowKey"] for row in a["subworkflows"]] for a in assembled]
    assert keys == [["a", "b", "c"]] * 10
    assert (await engine.assemble(dict(doc)))["subworkflows"] == assembled[0]["subworkflows"]
    assert reads.chunks == 1  # kept for the revision

    first = {r.rowKey: r.child_id for r in p.subworkflows}
    await engine.fire_action(first["a"], "task", "finish")
    moved = await engine.lake.get(p.id_)
    assert moved is not None and moved["_rev"] != doc["_rev"]
    again = await asyncio.gather(*(engine.assemble(dict(moved)) for _ in range(5)))
    assert reads.chunks == 2  # a new revision, one more read
    assert [r.get("outcome") for r in again[0]["subworkflows"]] == ["succeeded", None, None]
    assert all(a["subworkflows"] == again[0]["subworkflows"] for a in again)


async def test_a_reader_that_leaves_does_not_cancel_the_others_read(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    await engine.deploy([parent(), child()])
    p = (await engine.start_instance("p", fields=items("a", "b"))).instance
    p = (await engine.fire_action(p.id_, "go", "go")).instance
    doc = await engine.lake.get(p.id_)
    assert doc is not None
    reads = ChunkReads(engine, monkeypatch)

    leaving = asyncio.create_task(engine.assemble(dict(doc)))
    staying = asyncio.create_task(engine.assemble(dict(doc)))
    await asyncio.sleep(0)
    leaving.cancel()
    got = await staying
    assert [row["rowKey"] for row in got["subworkflows"]] == ["a", "b"]
    assert leaving.cancelled() and reads.chunks == 1
