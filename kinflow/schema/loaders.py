"""Batched lake reads for one request (DataLoaders).

A page of a thousand instances that each ask for their parent, their
children or a registry row's child would otherwise cost a thousand reads.
Each loader gathers the keys asked for in one event-loop tick and answers
them with one query. HTTP requests get caching loaders; websocket
connections live for hours, so theirs batch but never cache.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from strawberry.dataloader import DataLoader

from kinflow.core import readmodel
from kinflow.core.state import INSTANCE_TYPE
from kinflow.gdr import document_id, format_gdr
from kinflow.storage import Lake

Doc = dict[str, Any]


@dataclass
class Loaders:
    """The per-request loaders over one dataset."""

    lake: Lake
    dataset: str
    cache: bool = True
    documents: DataLoader[str, Doc | None] = field(init=False)
    children: DataLoader[str, list[Doc]] = field(init=False)

    def __post_init__(self) -> None:
        self.documents = DataLoader(load_fn=self._load_documents, cache=self.cache)
        self.children = DataLoader(load_fn=self._load_children, cache=self.cache)

    async def _load_documents(self, ids: Sequence[str]) -> list[Doc | None]:
        found = await self.lake.get_many(list(dict.fromkeys(ids)), dataset=self.dataset)
        return [found.get(i) for i in ids]

    async def _load_children(self, parent_ids: Sequence[str]) -> list[list[Doc]]:
        """Direct children of each parent: one query over every parent's GDR."""
        gdrs = {format_gdr(self.dataset, pid): pid for pid in parent_ids}
        found = await self.lake.find(
            {"_type": INSTANCE_TYPE, **readmodel.children_of_any_filter(gdrs)},
            dataset=self.dataset,
            sort=[("_id", 1)],
        )
        by_parent: dict[str, list[Doc]] = defaultdict(list)
        for doc in found:
            parent = readmodel.parent_gdr(doc)
            if parent in gdrs:
                by_parent[gdrs[parent]].append(doc)
        return [by_parent.get(pid, []) for pid in parent_ids]

    async def instance(self, instance_id: str) -> Doc | None:
        doc = await self.documents.load(instance_id)
        if doc is None or doc.get("_type") != INSTANCE_TYPE:
            return None
        return doc


def parent_id(doc: Doc) -> str | None:
    """The bare id of an instance's direct parent (the last ancestor), if any."""
    parent = readmodel.parent_gdr(doc)
    return document_id(parent) if parent is not None else None
