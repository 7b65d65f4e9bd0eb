"""The registry row documents of one dataset: read, written, assembled (the I/O half
of ``core/rows.py``).

Rows live in the dataset's ``rows`` side collection (``<dataset>.rows``), never
in the dataset itself, so GROQ's ``*`` and the instance listings do not see
them. A parent's rows are read in registry order through the
``(parent, seq)`` index; a commit writes its new rows and the rows it changed
in the parent's transaction, in one round trip each. Every write to a row is
a write to its parent too (the parent's ``rowCount``, history or
state changes with it, under the parent's ``_rev`` fence), so a parent's
``_rev`` names one exact set of rows: readers memoise assembled parents by
``(_id, _rev)``.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kinflow.core import rows as registry_rows
from kinflow.core.rows import RowWrites
from kinflow.core.state import Instance, SubworkflowEntry
from kinflow.storage.database import side_name
from kinflow.storage.indexes import IndexSpec
from kinflow.storage.lake import Lake

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

ROWS = "rows"
ROW_INDEXES = (IndexSpec("rows_parent", (("parent", 1), ("seq", 1))),)
_ASSEMBLED = 64  # assembled parents kept per store, by (_id, _rev)
_PARSE_OFF_LOOP = 512  # rows from which parsing leaves the event loop


class RowStore:
    """The row documents beside one dataset."""

    def __init__(self, lake: Lake, dataset: str) -> None:
        self.lake = lake
        self.collection = side_name(dataset, ROWS)
        self._assembled: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()

    async def prepare(self) -> None:
        await self.lake.declare_indexes(ROW_INDEXES, kind=ROWS)
        await self.lake.ensure_dataset(self.collection)

    # ------------------------------------------------------------ engine

    async def documents(self, parent_id: str, session: AsyncClientSession | None = None
                        ) -> list[dict[str, Any]]:
        """A parent's row documents, in registry order."""
        return await self.lake.find({"parent": parent_id}, dataset=self.collection,
                                    session=session, sort=[("seq", 1)])

    async def attach(self, state: Instance, session: AsyncClientSession | None = None
                     ) -> Instance:
        """Put a loaded instance's registry rows and whole history back (in place):
        in memory an instance is what it always was (core/rows.py)."""
        docs = await self.documents(state.id_, session)
        if len(docs) > _PARSE_OFF_LOOP:
            rows, bound = await asyncio.to_thread(_parse_rows, docs)
        else:
            rows, bound = _parse_rows(docs)
        state.subworkflows = rows
        state.history = registry_rows.merge_history(state.history, bound)
        return state

    async def write(self, writes: RowWrites, session: AsyncClientSession, now: datetime
                    ) -> None:
        """Insert the new rows and update the changed ones, in the caller's transaction."""
        if writes.inserts:
            await self.lake.create_many(writes.inserts, dataset=self.collection,
                                        session=session, now=now)
        if writes.updates:
            await self.lake.update_each(writes.updates, dataset=self.collection,
                                        session=session, now=now)

    # ------------------------------------------------------------ readers

    async def assemble(self, doc: dict[str, Any]) -> dict[str, Any]:
        """``doc`` as readers see it (rows and whole history), when it has rows."""
        if not registry_rows.has_rows(doc):
            return doc
        key = (str(doc.get("_id")), str(doc.get("_rev")))
        found = self._assembled.get(key)
        if found is not None:
            self._assembled.move_to_end(key)
            return found
        assembled = registry_rows.assemble(doc, await self.documents(str(doc["_id"])))
        self._assembled[key] = assembled
        while len(self._assembled) > _ASSEMBLED:
            self._assembled.popitem(last=False)
        return assembled

    async def assemble_many(self, docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return [await self.assemble(doc) for doc in docs]


def _parse_rows(docs: list[dict[str, Any]]
                ) -> tuple[list[SubworkflowEntry], list[dict[str, Any]]]:
    rows = [registry_rows.row_from_document(doc) for doc in docs]
    return rows, [entry for doc in docs for entry in doc.get("history") or []]
