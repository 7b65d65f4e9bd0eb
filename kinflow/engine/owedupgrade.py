"""Upgrade a dataset written before ``owed``: fold stored hints, drop the old indexes.

Until ``owed`` (core/owed.py) each repair hint had an index of its own, and
instances carried the hints without the folded array, so the heartbeat's
queries (which now read only ``owed``) would not see work such an instance
still owes. At every start (``Engine.ensure_ready``), while any of those
retired indexes exists, each instance they list gets its ``owed`` computed
from its hints (fenced on its ``_rev``: a concurrent writer wins and the
instance is read again), then the retired indexes are dropped, which is what
marks the dataset done. Idempotent, and one ``listIndexes`` once done.
"""

from __future__ import annotations

import contextlib
from typing import Any

from pymongo.errors import OperationFailure

from kinflow.core import owed
from kinflow.engine.indexes import INSTANCES, RETIRED_INDEXES
from kinflow.errors import RevisionConflict
from kinflow.storage.lake import Lake

# each served by its retired index while it exists
_HINTS: tuple[dict[str, Any], ...] = (
    {"nextEvaluationAt": {"$gt": ""}}, {"effectsDueAt": {"$gt": ""}}, {"owesAborts": True},
    {"materialising": True}, {"propagateTo": {"$gt": ""}},
)
_FIELDS = {"_rev": 1, "owed": 1, "nextEvaluationAt": 1, "completedAt": 1, "effectsDueAt": 1,
           "owesAborts": 1, "materialising": 1, "propagateTo": 1}
_ATTEMPTS = 5


async def upgrade_owed(lake: Lake, dataset: str) -> int:
    """Fold the hints of instances written before ``owed``; returns how many were written."""
    coll = lake.collection(dataset)
    with lake.bounded("listIndexes"):
        present = {index["name"] async for index in await coll.list_indexes()}
    retired = [name for name in RETIRED_INDEXES if name in present]
    if not retired:
        return 0
    folded, done = 0, set()
    for hint in _HINTS:
        for document in await lake.find({**INSTANCES, **hint}, dataset=dataset,
                                        projection=_FIELDS):
            if document["_id"] not in done:
                done.add(document["_id"])
                folded += await _fold(lake, dataset, document)
    for name in retired:
        with lake.bounded("dropIndex"), contextlib.suppress(OperationFailure):
            await coll.drop_index(name)  # another process may have dropped it first
    return folded


async def _fold(lake: Lake, dataset: str, document: dict[str, Any]) -> int:
    """Write ``owed`` on one instance if its hints call for another value."""
    for _ in range(_ATTEMPTS):
        wanted = owed.of_document(document)
        if document.get(owed.FIELD) == wanted:
            return 0
        update = ({"$set": {owed.FIELD: wanted}} if wanted is not None
                  else {"$unset": {owed.FIELD: ""}})
        try:
            await lake.update(document["_id"], update, expected_rev=document.get("_rev"),
                              dataset=dataset)
            return 1
        except RevisionConflict:  # written meanwhile: judge the new version
            fresh = await lake.find({"_id": document["_id"]}, dataset=dataset,
                                    projection=_FIELDS, limit=1)
            if not fresh:
                return 0
            document = fresh[0]
    return 0
