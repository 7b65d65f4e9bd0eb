"""The instances owing a repair, read once and shared by the heartbeat's flag kinds.

Five kinds of a heartbeat pass follow a repair flag (``materialising``,
``owesRegistration``, ``owesBulk``, ``owesAborts``, ``owesCancels``), and one
index holds all of them (``instance_owing``, core/owing.py). Owing instances
are few, so one read of every one of them serves the five: each kind keeps
those holding its flag, and another flag's instances never crowd it out. A
flag set after the read waits for the next pass; one cleared meanwhile is
caught by the kind's still-owed check, which reads the instance again by
``_id``. On the embedded lake each such query costs the daemon about 3 ms
to plan over the dataset's indexes, so a pass saves four of them.
"""

from __future__ import annotations

from typing import Any

from kinflow.core.owing import ANY_OWED, FIELD, holds
from kinflow.core.state import INSTANCE_TYPE
from kinflow.storage.lake import Lake


class OwingRead:
    """The owing instances of a dataset, read on first use and kept."""

    def __init__(self, lake: Lake, dataset: str) -> None:
        self.lake, self.dataset = lake, dataset
        self.found: list[dict[str, Any]] | None = None

    async def holding(self, flag: str) -> list[dict[str, Any]]:
        """The owing instances (id, ``_updatedAt``, flags) that hold ``flag``."""
        if self.found is None:
            self.found = await self.lake.find(
                {"_type": INSTANCE_TYPE, **ANY_OWED}, dataset=self.dataset,
                projection={"_id": 1, "_updatedAt": 1, FIELD: 1})
        return [doc for doc in self.found if holds(doc.get(FIELD), flag)]
