"""Retention of finished families: which families may go, decided without I/O.

A family is a root instance and every instance that names it among its
ancestors (children, grandchildren, detached or not). It is purged as one
unit, and only once **every** member is finished: a detached grandchild
still running keeps its whole family, because deleting a child under a live
relative loses work. An active, held or recent member keeps the whole
family: it becomes due ``retention.days`` (of the root's pinned definition,
else ``KINFLOW_RETENTION_DAYS``; neither keeps it for ever) after its
**last** member finished, and never while its root carries a hold
(``holdFamily``, docs/retention.md).

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


HOLD = "retentionHold"
"""Set on a root by ``holdFamily``: ``{reason, by, at}``; the family is kept whatever its age."""


def held(root: Mapping[str, Any]) -> bool:
    return isinstance(root.get(HOLD), Mapping)


def purgeable(root: Mapping[str, Any], members: Iterable[Mapping[str, Any]]) -> bool:
    """A family may be purged when its root and every member are finished."""
    return finished(root) and all(finished(m) for m in members)


def last_finished(root: Mapping[str, Any], members: Iterable[Mapping[str, Any]]) -> str | None:
    """When the family's last member finished; ``None`` while any member is live."""
    moments = [root.get("completedAt"), *(m.get("completedAt") for m in members)]
    if not all(isinstance(at, str) for at in moments):
        return None
    return max(str(at) for at in moments)


def family_verdict(root: Mapping[str, Any], members: Iterable[Mapping[str, Any]],
                   before: str, *, inclusive: bool) -> str:
    """``"purge"``, ``"live"`` (a member is not finished), ``"recent"`` (the last member
    finished after ``before``) or ``"held"``: the one rule retention and explicit purges share."""
    if held(root):
        return "held"
    members = list(members)
    last = last_finished(root, members)
    if last is None:
        return "live"
    due = last <= before if inclusive else last < before
    return "purge" if due else "recent"


@dataclass(frozen=True)
class PurgeFilter:
    """Which roots an explicit purge selects (``purgeInstances`` / ``kinflow purge``)."""

    finished_before: str
    definition: str | None = None
    root_ids: tuple[str, ...] | None = None

    def selects(self, root: Mapping[str, Any]) -> bool:
        """The root's own test; the family's (its last member) is ``family_verdict``'s."""
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
    kept: int = 0  # selected roots whose family has a live or recently finished member
    held: int = 0  # selected roots whose family is on hold
