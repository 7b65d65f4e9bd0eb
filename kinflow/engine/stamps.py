"""Owed stamps of a group commit: one small document per parent, beside the dataset.

A child whose commit changes what its parent's row reads owes the parent a
stamp (docs/subworkflows.md#propagation-and-why-it-scales). A commit of its
own says so on the child (``propagateTo`` + ``propagateToken``), and the round
that honours it clears them: a second write of every child, which on the
embedded lake costs what a child's own update costs (every index of the
dataset, the oplog, the change stream).

In a group commit (``engine/group.py``) the members that owe one parent a
stamp say so together instead: one document ``{parent, children}`` in
``<dataset>.stamps``, inserted in the group's transaction, so it exists
exactly when their writes do. The child documents carry no hint. A hop that
observes a parent's children (``Driver._gather_children``) reads the parent's
stamp documents in its own transaction, reads those children there as it
reads the hinted ones, and deletes the documents in the same transaction,
so the stamp and the end of the debt commit together or not at all.

Nothing else writes a stamp document, so honouring one needs no token: a
child that changes again after the round's snapshot commits a new document
(or hint) of its own, which the next round reads. The heartbeat finds
documents older than its grace period as it finds stale hints
(``Worker._parents``), and a round on a parent that is gone drops them.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from kinflow.core.cohort.observe import OBSERVATION_FIELDS
from kinflow.engine.ids import random_token
from kinflow.observability import engine as observing
from kinflow.storage.database import side_name
from kinflow.storage.indexes import IndexSpec
from kinflow.storage.lake import Lake

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

STAMPS = "stamps"
STAMP_TYPE = "kinflow.stamps"
STAMP_INDEXES = (IndexSpec("stamps_parent", (("parent", 1),)),)
Owed = dict[str, list[tuple[str, str | None]]]  # parent -> (child, its commit's trace)


class Stamps:
    """The stamp documents beside one dataset."""

    def __init__(self, lake: Lake, dataset: str) -> None:
        self.lake = lake
        self.dataset = dataset
        self.collection = side_name(dataset, STAMPS)

    async def prepare(self) -> None:
        await self.lake.declare_indexes(STAMP_INDEXES, kind=STAMPS)
        await self.lake.ensure_dataset(self.collection)

    async def owe(self, owed: Owed, session: AsyncClientSession, now: datetime) -> None:
        """One document per parent naming the children that owe it a stamp (and, traced,
        each one's commit trace), in the caller's transaction (one statement)."""
        if not owed:
            return
        await self.lake.create_many(
            [_document(parent, children) for parent, children in owed.items()],
            dataset=self.collection, session=session, now=now)

    async def take(self, parent_id: str, session: AsyncClientSession) -> dict[str, str | None]:
        """The children ``parent_id``'s stamp documents name, with their commits' traces;
        the documents are deleted in the caller's transaction (its commit honours them)."""
        found = await self.lake.find({"parent": parent_id}, dataset=self.collection,
                                     session=session, projection={"children": 1, "traces": 1})
        if not found:
            return {}
        children: dict[str, str | None] = {}
        for doc in found:
            traces = doc.get("traces") or {}
            for child in doc.get("children") or ():
                children[str(child)] = traces.get(child) or children.get(str(child))
        async with self.lake.operation("delete"):
            await self.lake.collection(self.collection).delete_many(
                {"_id": {"$in": [doc["_id"] for doc in found]}}, session=session)
        return children

    async def children(self, parent_id: str, known: list[dict[str, Any]],
                       session: AsyncClientSession) -> list[dict[str, Any]]:
        """The children the parent's stamp documents name and ``known`` does not hold,
        read for observation in the caller's transaction; the documents are deleted
        there (``take``). A child that is gone is not read: the hop's check for missing
        children resolves its row."""
        have = {doc["_id"] for doc in known}
        wanted = {child: trace for child, trace in (await self.take(parent_id, session)).items()
                  if child not in have}
        if not wanted:
            return []
        found = await self.lake.find({"_id": {"$in": list(wanted)}}, dataset=self.dataset,
                                     session=session, projection=OBSERVATION_FIELDS)
        for doc in found:  # traced: the commit that owed it, for the hop's span to link
            trace = wanted.get(str(doc["_id"]))
            if trace is not None:
                doc[observing.PROPAGATE_TRACE] = trace
        return found

    async def parents(self) -> list[dict[str, Any]]:
        """Every stamp document's parent and when it was written (the heartbeat's look;
        the documents are few: each lives until its parent's next round)."""
        return await self.lake.find({}, dataset=self.collection,
                                    projection={"parent": 1, "_updatedAt": 1})

    async def owed_to(self, parent_id: str) -> list[dict[str, Any]]:
        return await self.lake.find({"parent": parent_id}, dataset=self.collection,
                                    projection={"_updatedAt": 1})

    async def drop(self, parent_id: str) -> None:
        """Forget the stamps owed to a parent that is gone."""
        async with self.lake.operation("delete"):
            await self.lake.collection(self.collection).delete_many({"parent": parent_id})


def _document(parent: str, children: list[tuple[str, str | None]]) -> dict[str, Any]:
    document: dict[str, Any] = {"_id": f"stamps.{random_token()}", "_type": STAMP_TYPE,
                                "parent": parent, "children": [c for c, _ in children]}
    traces = {child: trace for child, trace in children if trace is not None}
    if traces:
        document["traces"] = traces
    return document

