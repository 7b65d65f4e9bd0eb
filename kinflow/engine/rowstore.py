"""The registry chunks of one dataset: read, written, assembled (the I/O half of
``core/cohort/chunks.py``).

Chunks live in the dataset's ``rows`` side collection (``<dataset>.rows``),
never in the dataset itself, so GROQ's ``*`` and the instance listings do not
see them. A parent's chunks are read in order through the ``(parent, chunk)``
index; a commit writes the chunks it touched, whole, in the parent's
transaction and in one round trip. Every chunk write comes with a write to
the parent (under the parent's ``_rev`` fence, which it renews), so a
parent's ``_rev`` names one exact registry: readers memoise a parent's chunks
by ``(_id, _rev)``.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kinflow.core.cohort import chunks as registry_rows
from kinflow.core.cohort import sparse
from kinflow.core.cohort.chunks import RowWrites
from kinflow.core.state import Instance, SubworkflowEntry
from kinflow.storage.database import side_name
from kinflow.storage.indexes import IndexSpec
from kinflow.storage.lake import Lake

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

ROWS = "rows"
ROW_INDEXES = (IndexSpec("rows_parent", (("parent", 1), ("chunk", 1))),)
_ASSEMBLED = 64  # parents whose chunks are kept per store, by (_id, _rev)
_ASSEMBLED_CHUNKS = 640  # and the chunk documents they hold together (the newest always kept)
_PARSE_OFF_LOOP = 512  # rows from which parsing leaves the event loop


class RowStore:
    """The row documents beside one dataset."""

    def __init__(self, lake: Lake, dataset: str) -> None:
        self.lake = lake
        self.collection = side_name(dataset, ROWS)
        self._chunks: OrderedDict[tuple[str, str], list[dict[str, Any]]] = OrderedDict()
        self._reading: dict[tuple[str, str], asyncio.Future[list[dict[str, Any]]]] = {}
        self._held = 0  # chunk documents in ``_chunks``

    async def prepare(self) -> None:
        await self.lake.declare_indexes(ROW_INDEXES, kind=ROWS)
        await self.lake.ensure_dataset(self.collection)

    # ------------------------------------------------------------ engine

    async def documents(self, parent_id: str, session: AsyncClientSession | None = None
                        ) -> list[dict[str, Any]]:
        """A parent's registry chunks, in order."""
        return await self.lake.find({"parent": parent_id}, dataset=self.collection,
                                    session=session, sort=[("chunk", 1)])

    async def attach(self, state: Instance, session: AsyncClientSession | None = None
                     ) -> Instance:
        """Put a loaded instance's registry rows and whole history back (in place):
        in memory an instance is what it always was (core/cohort/chunks.py)."""
        docs = await self.documents(state.id_, session)
        rows, bound = registry_rows.rows_of_chunks(docs)
        if len(rows) > _PARSE_OFF_LOOP:
            state.subworkflows = await asyncio.to_thread(_parse_rows, rows)
        else:
            state.subworkflows = _parse_rows(rows)
        state.history = registry_rows.merge_history(state.history, bound)
        return state

    async def chunks(self, parent_id: str, numbers: list[int],
                     session: AsyncClientSession | None = None) -> list[dict[str, Any]]:
        """Chunks ``numbers`` of a parent's registry, by ``_id`` (those that exist)."""
        ids = [registry_rows.chunk_id(parent_id, n) for n in numbers]
        found = await self.lake.get_many(ids, dataset=self.collection, session=session)
        return [found[i] for i in ids if i in found]

    async def key_chunks(self, parent_id: str, keys: tuple[str, ...],
                         session: AsyncClientSession | None = None) -> list[int]:
        """The chunks of a parent's registry holding a row with one of ``keys``: a query
        over the parent's chunk documents (by its ``(parent, chunk)`` index) that returns
        their numbers only, so no row is read into the commit."""
        if not keys:
            return []
        found = await self.lake.find({"parent": parent_id, "rows.rowKey": {"$in": list(keys)}},
                                     dataset=self.collection, session=session,
                                     projection={"chunk": 1})
        return sorted(int(doc["chunk"]) for doc in found)

    async def hold(self, state: Instance, numbers: set[int],
                   session: AsyncClientSession | None = None) -> None:
        """Read chunks ``numbers`` of a sparse parent into its rows (core/cohort/sparse.py)."""
        rows = sparse.rows_of(state)
        wanted = sorted(n for n in numbers if n not in rows.held and 0 <= n < rows.chunk_count())
        if not wanted:
            return
        docs = await self.chunks(state.id_, wanted, session)
        parsed = [(int(d["chunk"]), _parse_rows(list(d.get("rows") or [])),
                   list(d.get("history") or [])) for d in docs]
        for number, held, bound in parsed:
            rows.add(number, held, bound)
        for number in wanted:  # a chunk the summary names but the lake lacks: empty
            if number not in rows.held:
                rows.add(number, [], [])

    async def write(self, writes: RowWrites, session: AsyncClientSession, now: datetime
                    ) -> None:
        """Write the touched chunks whole, in the caller's transaction."""
        await self.lake.put_many(writes.chunks, dataset=self.collection, session=session,
                                 now=now)

    # ------------------------------------------------------------ readers

    async def assemble(self, doc: dict[str, Any], session: AsyncClientSession | None = None
                       ) -> dict[str, Any]:
        """``doc`` as readers see it (rows and whole history), when it has rows.

        The chunks read for a parent are memoised by its ``(_id, _rev)`` (the same
        registry in every snapshot that has that ``_rev``); the document itself is
        always the one given. ``session`` reads them in a caller's snapshot.
        """
        if not registry_rows.has_rows(doc):
            return doc
        key = (str(doc.get("_id")), str(doc.get("_rev")))
        chunks = self._chunks.get(key)
        if chunks is not None:
            self._chunks.move_to_end(key)
        elif session is not None:  # the caller's snapshot: its own read
            chunks = self._keep(key, await self.documents(key[0], session))
        else:
            chunks = await asyncio.shield(self._read_once(key))
        return registry_rows.assemble(doc, chunks)

    def _read_once(self, key: tuple[str, str]) -> asyncio.Future[list[dict[str, Any]]]:
        """One read of a parent's chunks however many callers want them at once.

        Every subscriber of a family receives the parent's change at the same
        moment and assembles it: without this, 10 subscribers of one parent sent
        10 identical reads per change, half of the API's time at 1,000
        subscribers. Callers await it shielded, so one leaving does not cancel
        the others' read.
        """
        flight = self._reading.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self.documents(key[0]))
            self._reading[key] = flight
            flight.add_done_callback(lambda done: self._landed(key, done))
        return flight

    def _landed(self, key: tuple[str, str], done: asyncio.Future[list[dict[str, Any]]]) -> None:
        self._reading.pop(key, None)
        if not done.cancelled() and done.exception() is None:
            self._keep(key, done.result())

    def _keep(self, key: tuple[str, str], chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        old = self._chunks.pop(key, None)
        self._held += len(chunks) - (len(old) if old is not None else 0)
        self._chunks[key] = chunks
        while len(self._chunks) > 1 and (len(self._chunks) > _ASSEMBLED
                                         or self._held > _ASSEMBLED_CHUNKS):
            self._held -= len(self._chunks.popitem(last=False)[1])
        return chunks


def _parse_rows(rows: list[dict[str, Any]]) -> list[SubworkflowEntry]:
    return [SubworkflowEntry.model_validate(row) for row in rows]
