"""Paged, filtered cohorts served by the summaries (core/cohort/tallies.py,
engine/cohort_pages.py, schema/cohort_page.py) against the embedded lake.

The chunk reads are counted by wrapping the lake's ``find``/``get_many`` (the documents of
the rows collection it returns), never by mocking pymongo.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from kinflow.core.cohort.chunks import CHUNK
from kinflow.core.cohort.registry import Row, api_row, count
from kinflow.engine import Engine
from kinflow.errors import InvalidInput
from kinflow.schema.bulk import CohortFilter
from kinflow.schema.cohort_page import CohortSource, counts_of, indexable, indexed
from kinflow.schema.instance_parts import ChildStatus
from tests.engine.cohort_defs import items, windowed
from tests.engine.outcome_defs import worker

pytestmark = pytest.mark.lake

N = 300
NAMES = [f"r{i:03d}" for i in range(N)]


class ChunkReads:
    """Counts the row chunks the lake hands the API (wraps ``Lake.find``/``get_many``)."""

    def __init__(self, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
        self.collection = engine.rows.collection
        self.chunks = 0
        lake = engine.rows.lake
        find, get_many = lake.find, lake.get_many

        async def counted_find(filter_: Any, **kwargs: Any) -> list[dict[str, Any]]:
            found = await find(filter_, **kwargs)
            if kwargs.get("dataset") == self.collection:
                self.chunks += len(found)
            return found

        async def counted_get_many(ids: Any, **kwargs: Any) -> dict[str, dict[str, Any]]:
            found = await get_many(ids, **kwargs)
            if kwargs.get("dataset") == self.collection:
                self.chunks += len(found)
            return found

        monkeypatch.setattr(lake, "find", counted_find)
        monkeypatch.setattr(lake, "get_many", counted_get_many)

    def take(self) -> int:
        n, self.chunks = self.chunks, 0
        return n


async def parent_doc(engine: Engine, parent_id: str) -> dict[str, Any]:
    doc = await engine.lake.get(parent_id)
    assert doc is not None
    return doc


async def every_row(engine: Engine, parent_id: str) -> list[Row]:
    """The cohort's rows read whole (the reference every page is checked against)."""
    instance = await engine.get_instance(parent_id)
    entry = instance.open_entry()
    key = entry.key_ if entry is not None else None
    return [api_row(parent_id, r, key) for r in instance.subworkflows]


async def source(engine: Engine, parent_id: str) -> CohortSource:
    found = await indexed(engine.rows, engine.limits,
                          await parent_doc(engine, parent_id), "translate")
    assert found is not None
    return found[0]


async def walk(src: CohortSource, first: int, where: CohortFilter | None = None,
               per_page: Callable[[], int] | None = None) -> tuple[list[str], list[int]]:
    keys: list[str] = []
    reads: list[int] = []
    after = None
    while True:
        page = await src.page(first, after, where)
        keys += [row.row_key for row in page.rows]
        if per_page is not None:
            reads.append(per_page())
        if not page.has_next:
            return keys, reads
        after = page.end_cursor


async def mixed_cohort(engine: Engine) -> str:
    """300 rows, 40 at a time: 8 succeeded, 3 failed, 2 aborted, the rest live or
    queued (every finish starts the next queued row)."""
    await engine.deploy([windowed(40), worker()])
    begun = await engine.start_instance("p", fields=items(*NAMES))
    parent_id = begun.instance.id_
    await engine.fire_action(parent_id, "go", "go")
    rows = await every_row(engine, parent_id)
    for i, row in enumerate(rows[:13]):
        if i < 8:
            await engine.fire_action(row.child_id, "task", "finish", params={"words": i})
        elif i < 11:
            await engine.fire_action(row.child_id, "task", "give-up")
        else:
            await engine.abort_instance(row.child_id, reason="not needed")
        await engine.driver.propagator.idle()  # a cohort this large is stamped in background
        doc = await parent_doc(engine, parent_id)
        entry = (doc.get("cohortRows") or [None])[0]
        assert counts_of(entry) == count(await every_row(engine, parent_id)), i
    return parent_id


@pytest.fixture
async def cohort(engine: Engine) -> str:
    return await mixed_cohort(engine)


async def test_the_summary_counts_right_after_every_stamp(engine: Engine, cohort: str) -> None:
    counts = counts_of((await parent_doc(engine, cohort))["cohortRows"][0])
    assert (counts.total, counts.done, counts.aborted, counts.failed, counts.active,
            counts.queued) == (N, 11, 2, 5, 40, N - 53)


async def test_pages_walk_every_row_exactly_once_in_order(
        engine: Engine, cohort: str, monkeypatch: pytest.MonkeyPatch) -> None:
    src = await source(engine, cohort)
    reads = ChunkReads(engine, monkeypatch)
    for first in (1, 64, 100, 299, 300, 1000):
        keys, per_page = await walk(src, first, per_page=reads.take)
        assert keys == NAMES, first
        # a page of n rows (and the one after it, for hasNextPage) spans ceil((n+1)/32)+1
        # chunks at most
        assert max(per_page) <= -(-(min(first, N) + 1) // CHUNK) + 1, (first, per_page)
    page = await src.page(100, None, None)
    assert await page.total_count() == N


async def test_a_page_of_100_reads_only_the_chunks_it_needs(
        engine: Engine, cohort: str, monkeypatch: pytest.MonkeyPatch) -> None:
    src = await source(engine, cohort)
    reads = ChunkReads(engine, monkeypatch)
    started = time.perf_counter()
    first = await src.page(100, None, None)
    unfiltered = reads.take()
    second = await src.page(100, first.end_cursor, None)
    middle = reads.take()
    done = await src.page(100, None, CohortFilter(status=[ChildStatus.DONE]))
    filtered = reads.take()
    elapsed = time.perf_counter() - started
    print(f"\nchunks read: first page {unfiltered}, second {middle}, done-filtered "
          f"{filtered} of {-(-N // CHUNK)}; three pages in {elapsed * 1000:.0f} ms")
    assert [r.row_key for r in first.rows] == NAMES[:100]
    assert [r.row_key for r in second.rows] == NAMES[100:200]
    assert unfiltered == 4 and middle == 4  # rows 0-100, then 100-200: 4 chunks each
    every = await every_row(engine, cohort)
    wanted = [i for i, r in enumerate(every) if r.status == "done"]
    assert [r.row_key for r in done.rows] == [NAMES[i] for i in wanted]
    assert filtered == len({i // CHUNK for i in wanted})  # only chunks holding DONE rows
    assert filtered < -(-N // CHUNK)


@pytest.mark.parametrize("where", [
    CohortFilter(status=[ChildStatus.QUEUED]),
    CohortFilter(status=[ChildStatus.DONE, ChildStatus.ABORTED]),
    CohortFilter(outcome=["failed"]),
    CohortFilter(status=[ChildStatus.DONE], outcome=["succeeded"]),
    CohortFilter(row_keys=["r005", "r150", "r299", "nope"]),
    CohortFilter(where="outputs.wordCount > 3"),
    CohortFilter(status=[ChildStatus.ACTIVE], where="rowKey >= 'r030'"),
], ids=["queued", "done-or-aborted", "failed", "done-succeeded", "row-keys", "groq",
        "active-groq"])
async def test_filtered_pages_return_exactly_the_matching_rows(
        engine: Engine, cohort: str, where: CohortFilter) -> None:
    src = await source(engine, cohort)
    spec = where.to_core()
    every = await every_row(engine, cohort)
    expected = [r.row_key for r in every
                if spec.matches({"status": r.status, "outcome": r.outcome,
                                 "rowKey": r.row_key, "stage": r.stage,
                                 "outputs": r.outputs})]
    assert expected  # every filter here selects something
    for first in (7, 100):
        keys, _ = await walk(src, first, where)
        assert keys == expected, first
    assert await (await src.page(5, None, where)).total_count() == len(expected)


async def test_a_foreign_cursor_is_invalid_input(engine: Engine, cohort: str) -> None:
    src = await source(engine, cohort)
    with pytest.raises(InvalidInput):
        await src.page(10, "not-a-cursor", None)


async def test_a_parent_stored_without_a_summary_is_read_whole_then_summarised(
        engine: Engine, cohort: str) -> None:
    await engine.lake.update(cohort, {"$unset": {"cohortRows": ""}})
    assert not indexable(await parent_doc(engine, cohort))
    rows = await every_row(engine, cohort)
    await engine.fire_action(rows[20].child_id, "task", "finish", params={"words": 1})
    await engine.driver.propagator.idle()
    doc = await parent_doc(engine, cohort)
    assert indexable(doc)
    assert counts_of(doc["cohortRows"][0]) == count(await every_row(engine, cohort))


async def test_redriven_rows_are_counted_and_paged_as_their_new_attempt(
        engine: Engine, cohort: str) -> None:
    result = await engine.redrive_cohort(cohort, "translate", idempotency_key="again")
    await engine.driver.propagator.idle()
    assert result.applied == 5  # 3 failed + 2 aborted
    every = await every_row(engine, cohort)
    doc = await parent_doc(engine, cohort)
    assert counts_of(doc["cohortRows"][0]) == count(every)
    src = await source(engine, cohort)
    again = [r.row_key for r in every if r.attempt == 2]
    assert len(again) == 5
    keys, _ = await walk(src, 50, CohortFilter(where="attempt == 2"))
    assert keys == again
