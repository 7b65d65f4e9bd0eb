"""A page of one cohort's rows, read chunk by chunk by id (the I/O half of
``core/cohort/tallies.py``).

The embedded lake decodes every document a ``find`` matches before it applies
``limit``, and evaluates any predicate beyond the index by decoding the
document (measured in docs/subworkflows.md: a
status filter evaluated by the lake over a 10,000-row cohort's chunk
summaries took a second, more than reading every chunk). So a page never asks
the lake to search: the parent's summary names the chunks that hold a row of
the cohort (of the wanted status/outcome pairs, for a filter), and the page
fetches those by ``_id``, a few at a time, from the cursor's place on,
doubling the batch only while the page is not full.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kinflow.core.cohort.chunks import CHUNK, chunk_id
from kinflow.core.cohort.tallies import candidate_chunks, total
from kinflow.core.state import SubworkflowEntry

if TYPE_CHECKING:
    from kinflow.engine.rowstore import RowStore

Matcher = Callable[[SubworkflowEntry], bool]
#: runs a batch's matching somewhere else (a GROQ ``where`` runs off the event loop)
Offload = Callable[[Callable[[], bool]], Awaitable[bool]]


@dataclass(slots=True)
class RowPage:
    """Rows of a page with their registry places; how much the lake was asked."""

    rows: list[tuple[int, SubworkflowEntry]] = field(default_factory=list)
    has_next: bool = False
    chunks_read: int = 0  # chunk documents the API received
    queries: int = 0


async def read_page(store: RowStore, parent_id: str, entry: dict[str, Any], *, first: int,
                    after: int | None, match: Matcher | None = None,
                    tallies: Collection[str] | None = None,
                    offload: Offload | None = None) -> RowPage:
    """Up to ``first`` rows of the cohort ``entry`` (a parent summary entry) after
    registry place ``after``, in registry order, that ``match``; ``tallies`` (the
    ``status:outcome`` pairs a matching row can have; ``None``: any) chooses the
    chunks worth reading. ``offload`` runs each batch's matching (a GROQ filter: CPU
    work) away from the event loop."""
    page = RowPage()
    if tallies is not None and not tallies:
        return page
    start = max(int(entry["first"]), -1 if after is None else after + 1)
    end = int(entry["last"])
    chunks = candidate_chunks(entry, tallies, start)
    batch = -(-(start % CHUNK + first + 1) // CHUNK)  # what a contiguous page spans
    while chunks:
        wanted, chunks = chunks[:batch], chunks[batch:]
        ids = [chunk_id(parent_id, c) for c in wanted]
        docs = await store.lake.get_many(ids, dataset=store.collection)
        page.queries += 1
        page.chunks_read += len(docs)

        def collect(ids: list[str] = ids, docs: dict[str, Any] = docs) -> bool:
            for doc_id in ids:
                doc = docs.get(doc_id)
                if doc is not None and _collect(page, doc, entry, start, end, first, match):
                    return True
            return False

        full = await offload(collect) if offload is not None and match is not None \
            else collect()
        if full:
            page.has_next = True
            return page
        batch *= 2
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
                         match: Matcher, tallies: Collection[str] | None,
                         offload: Offload | None = None) -> int:
    """How many rows of the cohort ``match``: the one count that reads rows (a filter on
    row keys, stage or a GROQ ``where``); status/outcome counts come from the summary."""
    found = await read_page(store, parent_id, entry, first=total(entry),
                            after=None, match=match, tallies=tallies, offload=offload)
    return len(found.rows)
