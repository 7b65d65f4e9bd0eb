"""Retention of finished families: which families may go, decided without I/O.

A family is a root instance and every instance that names it among its
ancestors (children, grandchildren, detached or not). It is purged as one
unit, and only once **every** member is finished: a detached grandchild
still running keeps its whole family, because deleting a child under a live
relative loses work. A root becomes due ``retention.days`` (of the root's
pinned definition, else ``KINFLOW_RETENTION_DAYS``; neither keeps it for
ever) after it finished.

The shell (``kinflow.engine.retention``) reads the documents and deletes; this
module only answers questions about documents it is handed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kinflow.timestamps import iso

PURGE_MARKER = "purgingSince"
"""Set on a root before any member is deleted; a root carrying it is finished by the next pass."""


def finished(member: Mapping[str, Any]) -> bool:
    """Whether an instance document is finished (completed or aborted).

    The one place that says so: a later status (``CANCELLED``) extends this
    test, and every purge decision follows.
    """
    return isinstance(member.get("completedAt"), str)


def retention_days(definition: Mapping[str, Any] | None, default: int | None) -> int | None:
    """Days a finished family of this root definition is kept; ``None`` keeps it for ever."""
    declared = (definition or {}).get("retention")
    if isinstance(declared, Mapping):
        days = declared.get("days")
        if isinstance(days, int) and not isinstance(days, bool) and days >= 1:
            return days
    return default


def cutoff(now: datetime, days: int) -> str:
    """Roots that finished at or before this moment are due (ISO text sorts like time)."""
    return iso(now - timedelta(days=days))


def is_root(member: Mapping[str, Any]) -> bool:
    return not member.get("ancestors")


def purgeable(root: Mapping[str, Any], members: Iterable[Mapping[str, Any]]) -> bool:
    """A family may be purged when its root and every member are finished."""
    return finished(root) and all(finished(m) for m in members)


@dataclass(frozen=True)
class PurgeFilter:
    """Which roots an explicit purge selects (``purgeInstances`` / ``kinflow purge``)."""

    finished_before: str
    definition: str | None = None
    root_ids: tuple[str, ...] | None = None

    def selects(self, root: Mapping[str, Any]) -> bool:
        done = root.get("completedAt")
        return (is_root(root) and isinstance(done, str) and done < self.finished_before
                and (self.definition is None or root.get("definition") == self.definition)
                and (self.root_ids is None or root.get("_id") in self.root_ids))


@dataclass
class PurgeCounts:
    """Roots and instances (roots included) purged, or that a dry run would purge."""

    dry_run: bool
    roots: int = 0
    instances: int = 0
    kept: int = 0  # selected roots whose family still has a live member
