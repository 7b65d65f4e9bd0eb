"""A page of one cohort's rows, read chunk range by chunk range (the I/O half of
``core/cohort_index.py``).

The embedded lake decodes every document a ``find`` matches before it applies
``limit`` (reference/embedded-lake.md), so a page never asks for "the
parent's chunks, limit n": it asks for an explicit chunk range
(``{parent, chunk: {$gte: a, $lt: b}}``, the ``(parent, chunk)`` index),
starting where the cursor's row lies and widening (doubling) only while the
page is not full. A filter on status or outcome also asks the lake for the
chunks whose summary (``cohorts``, written with the chunk) counts a candidate
row, so the API receives and parses only chunks that can contribute.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kinflow.core import cohort_index
from kinflow.core.rows import CHUNK
from kinflow.core.state import SubworkflowEntry

if TYPE_CHECKING:
    from kinflow.engine.rowstore import RowStore

Matcher = Callable[[SubworkflowEntry], bool]


@dataclass(slots=True)
class RowPage:
    """Rows of a page with their registry places; how much the lake was asked."""

    rows: list[tuple[int, SubworkflowEntry]] = field(default_factory=list)
    has_next: bool = False
    chunks_read: int = 0  # chunk documents the API received
    queries: int = 0


def chunk_filter(parent_id: str, entry: dict[str, Any], lo: int, hi: int,
                 tallies: Collection[str] | None) -> dict[str, Any]:
    """The lake filter for chunks ``lo <= chunk < hi`` of the cohort ``entry`` that may
    hold a row counted under one of ``tallies`` (``None``: any row)."""
    query: dict[str, Any] = {"parent": parent_id, "chunk": {"$gte": lo, "$lt": hi}}
    if tallies is None:
        return query
    wanted = [{f"counts.{name}": {"$gt": 0}} for name in sorted(tallies)]
    query["$or"] = [
        {"cohorts": {"$exists": False}},  # written before summaries: read it
        {"cohorts": {"$elemMatch": {"activity": entry["activity"],
                                    "stageEntry": entry["stageEntry"], "$or": wanted}}},
    ]
    return query


async def read_page(store: RowStore, parent_id: str, entry: dict[str, Any], *, first: int,
                    after: int | None, match: Matcher | None = None,
                    tallies: Collection[str] | None = None) -> RowPage:
    """Up to ``first`` rows of the cohort ``entry`` (a parent summary entry) after
    registry place ``after``, in registry order, that ``match``; ``tallies`` (the
    ``status:outcome`` pairs a matching row can have) lets the lake skip chunks."""
    page = RowPage()
    if tallies is not None and not tallies:
        return page
    start = max(int(entry["first"]), -1 if after is None else after + 1)
    end = int(entry["last"])
    chunk, last_chunk = start // CHUNK, end // CHUNK
    span = -(-(start % CHUNK + first + 1) // CHUNK)  # the chunks a contiguous page needs
    while chunk <= last_chunk:
        hi = min(last_chunk + 1, chunk + span)
        docs = await store.lake.find(chunk_filter(parent_id, entry, chunk, hi, tallies),
                                     dataset=store.collection, sort=[("chunk", 1)])
        page.queries += 1
        page.chunks_read += len(docs)
        for doc in docs:
            if _collect(page, doc, entry, start, end, first, match):
                page.has_next = True
                return page
        chunk, span = hi, span * 2
    return page


def _collect(page: RowPage, doc: dict[str, Any], entry: dict[str, Any], start: int,
             end: int, first: int, match: Matcher | None) -> bool:
    """Add the chunk's matching rows; whether a row beyond the page was found."""
    base = int(doc.get("chunk", 0)) * CHUNK
    for place, raw in enumerate(doc.get("rows") or [], base):
        if place < start or place > end:
            continue
        if raw.get("activity") != entry["activity"] or \
                raw.get("stageEntry") != entry["stageEntry"]:
            continue
        row = SubworkflowEntry.model_validate(raw)
        if match is not None and not match(row):
            continue
        if len(page.rows) == first:
            return True
        page.rows.append((place, row))
    return False


async def count_matching(store: RowStore, parent_id: str, entry: dict[str, Any],
                         match: Matcher, tallies: Collection[str] | None) -> int:
    """How many rows of the cohort ``match``: the one count that reads rows (a filter on
    row keys, stage or a GROQ ``where``); status/outcome counts come from the summary."""
    found = await read_page(store, parent_id, entry, first=cohort_index.total(entry),
                            after=None, match=match, tallies=tallies)
    return len(found.rows)
