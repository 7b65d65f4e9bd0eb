"""What the API's readers keep between requests about registry rows (process-wide).

Every subscriber of a family assembles the same parent revision, and a
10,000-row parent parsed once per subscriber was the fan-out's main cost, so
rows are kept here, in the shell, not in the pure core:

* ``registry_rows``: a parent's ``Row`` list, memoised at its newest ``_rev``
  (a parent's ``_rev`` names one exact registry), bounded by rows, not
  parents, since one big parent's registry is thousands of rows;
* ``row_view``: a stored row's ``$subworkflows`` object, kept per row object
  for exactly as long as the row lives (a weak reference forgets it), so the
  memory held is that of the rows in use.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any

from kinflow.core.cohort import registry
from kinflow.core.cohort.registry import Row
from kinflow.core.state import SubworkflowEntry

Doc = dict[str, Any]
ROWS_KEPT = 10_000
"""Rows the cache holds at most (a parent without rows counts as one; the newest entry is
always kept). One entry per parent, its newest revision seen: keeping each revision of a
parent made its revisions copies of its rows (each row about 1 KB)."""


class RegistryCache:
    """Parents' registry rows by ``(_id, _rev)``, the newest revision of each, LRU by rows."""

    def __init__(self, limit: int = ROWS_KEPT) -> None:
        self.limit = limit
        self.held = 0  # rows the entries weigh together
        self._entries: OrderedDict[str, tuple[str, list[Row]]] = OrderedDict()

    def rows(self, parent: Doc) -> list[Row]:
        rev = parent.get("_rev")
        if not isinstance(rev, str):
            return registry.registry_rows(parent)
        parent_id = str(parent.get("_id"))
        kept = self._entries.get(parent_id)
        if kept is not None and kept[0] == rev:
            self._entries.move_to_end(parent_id)
            return kept[1]
        rows = registry.registry_rows(parent)
        if kept is not None:
            self.held -= _weight(kept[1])
        self._entries[parent_id] = (rev, rows)
        self._entries.move_to_end(parent_id)
        self.held += _weight(rows)
        while self.held > self.limit and len(self._entries) > 1:
            self.held -= _weight(self._entries.popitem(last=False)[1][1])
        return rows


def _weight(rows: list[Row]) -> int:
    """What an entry counts against the limit: its rows, and one for a parent without."""
    return max(1, len(rows))


class RowViews:
    """``$subworkflows`` objects per row object and open visit, alive as long as the row."""

    def __init__(self) -> None:
        self._views: dict[int, tuple[weakref.ref[SubworkflowEntry],
                                     dict[str | None, dict[str, Any]]]] = {}

    def view(self, row: SubworkflowEntry, open_key: str | None) -> dict[str, Any]:
        key = id(row)
        kept = self._views.get(key)
        if kept is not None and kept[0]() is row:
            views = kept[1]
            found = views.get(open_key)
            if found is None:
                found = views[open_key] = registry.row_view(row, open_key)
            return found
        found = registry.row_view(row, open_key)
        self._views[key] = (weakref.ref(row, self._forgetter(key)), {open_key: found})
        return found

    def _forgetter(self, key: int) -> Any:
        def forget(ref: weakref.ref[SubworkflowEntry]) -> None:
            kept = self._views.get(key)
            if kept is not None and kept[0] is ref:
                del self._views[key]
        return forget


CACHE = RegistryCache()
VIEWS = RowViews()


def registry_rows(parent: Doc) -> list[Row]:
    """Every row of ``parent``'s registry, in stored order, shared by every reader of its
    revision (treat them as read-only)."""
    return CACHE.rows(parent)


def row_view(row: SubworkflowEntry, open_key: str | None) -> dict[str, Any]:
    """The row's ``$subworkflows`` object, built once per row object and open visit."""
    return VIEWS.view(row, open_key)
