"""Writes of the ``owing`` hint outside a commit, and datasets written before it.

A commit derives ``owing`` from the instance's repair flags (core/owing.py).
The few writes that change a flag by themselves (a large spawn's
materialisation clearing ``materialising``) go through ``clear_flag``, which
derives it from the flags it read, fenced on that read.

Before the four repair flags shared one index (core/owing.py), each had its
own, and the stored instances carry the flags without ``owing``. The
heartbeat now finds owed work through ``owing`` alone, so an instance left
owing by an older version would never be repaired. At start, while the old
indexes still exist (they are dropped when ``instance_owing`` is built), every
instance they hold gets its ``owing``. A dataset without any of the old
indexes is new or already folded: one ``listIndexes`` and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from kinflow.core.owing import FIELD, FLAGS, owing_of
from kinflow.core.state import INSTANCE_TYPE
from kinflow.engine.indexes import RETIRED_FLAG_INDEXES
from kinflow.errors import RevisionConflict
from kinflow.storage.lake import Lake

log = logging.getLogger("kinflow.engine")
_ATTEMPTS = 5  # a fenced write that lost a race reads the instance again
_PROJECTION = {"_rev": 1, FIELD: 1, **dict.fromkeys(FLAGS, 1)}


async def fold_repair_flags(lake: Lake, dataset: str) -> int:
    """Give every instance with a repair flag its ``owing``; returns how many changed."""
    coll = lake.collection(dataset)
    present = {index["name"] async for index in await coll.list_indexes()}
    if not present & set(RETIRED_FLAG_INDEXES):
        return 0
    folded = 0
    for flag in FLAGS:  # each query is served by that flag's old partial index
        for doc in await lake.find({"_type": INSTANCE_TYPE, flag: True}, dataset=dataset,
                                   projection=_PROJECTION):
            folded += max(0, await _write(lake, dataset, doc, {}))
    if folded:
        log.info("folded the repair flags of %d instances into %s", folded, FIELD)
    return folded


async def clear_flag(lake: Lake, dataset: str, doc_id: str, flag: str, *,
                     now: datetime | None = None,
                     written: Callable[[str, str], None] | None = None) -> bool:
    """Unset ``flag`` on an instance and derive its ``owing`` again; ``False`` when the
    instance is gone. ``written(fenced, rev)`` learns the ``_rev`` the write was fenced
    on and the one it gave: the document differs from its state at ``fenced`` by the
    flag alone (a process keeping that state keeps it valid, engine/materialise.py)."""
    found = await lake.find({"_id": doc_id}, dataset=dataset, projection=_PROJECTION)
    if not found:
        return False
    return await _write(lake, dataset, found[0], {flag: None}, now=now, written=written) >= 0


async def _write(lake: Lake, dataset: str, doc: dict[str, object], changes: dict[str, None],
                 *, now: datetime | None = None,
                 written: Callable[[str, str], None] | None = None) -> int:
    """Unset the flags in ``changes`` and set ``owing`` to match, fenced on ``_rev`` and
    read again after a lost race. 1: written, 0: nothing to change, -1: gone."""
    for _ in range(_ATTEMPTS):
        flags = {**doc, **changes}
        owed = owing_of(flags)
        unsets = {f: "" for f in changes if doc.get(f) is not None}
        if doc.get(FIELD) == owed and not unsets:
            return 0
        if owed is None:
            unsets[FIELD] = ""
        update: dict[str, object] = {"$unset": unsets} if unsets else {}
        if owed is not None:
            update["$set"] = {FIELD: owed}
        try:
            rev = await lake.update(str(doc["_id"]), update, expected_rev=str(doc["_rev"]),
                                    dataset=dataset, now=now)
            if written is not None:
                written(str(doc["_rev"]), rev)
            return 1
        except RevisionConflict:
            found = await lake.find({"_id": doc["_id"]}, dataset=dataset,
                                    projection=_PROJECTION)
            if not found:
                return -1
            doc = found[0]
    log.warning("could not write the repair flags of %s: it kept changing", doc["_id"])
    return 0
