"""``Cohort.page`` and the counts of a cohort, served without reading every row.

A cohort the ``cohort`` query answers comes with a ``CohortSource``: the
parent's per-cohort summary (``core/cohort/tallies.py``) gives its counts and
the total of a status/outcome filter; a page reads only the chunks it needs
(``engine/cohort_pages.py``). A cohort built from rows already in memory (a
subscription's event, a mutation's answer) pages over those rows instead.

A cursor is opaque: base64 of ``{"row": <registry place>}`` for indexed
cohorts, ``{"at": <position>}`` for in-memory ones.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kinflow import groq
from kinflow.core.cohort import selection, tallies
from kinflow.core.cohort.registry import Row, api_row
from kinflow.core.context import Limits
from kinflow.core.state import SubworkflowEntry
from kinflow.engine import cohort_pages
from kinflow.engine.registry_cache import row_view
from kinflow.errors import InvalidInput
from kinflow.groq import pool
from kinflow.schema.bulk import CohortFilter

if TYPE_CHECKING:
    from kinflow.engine.rowstore import RowStore

T = TypeVar("T")

MAX_FIRST = 1000
"""The largest page a caller may ask for."""


@dataclass(slots=True)
class RowsPage:
    """One page: its rows, whether more follow, its end cursor, and how to count every
    row the filter selects (called only when ``totalCount`` is selected)."""

    rows: list[Row]
    has_next: bool
    end_cursor: str | None
    counter: Callable[[], Awaitable[int]]

    async def total_count(self) -> int:
        return await self.counter()


# ---------------------------------------------------------------- cursors


def encode(kind: str, value: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({kind: value}).encode()).decode()


def decode(cursor: str | None, kind: str) -> int | None:
    """The place a cursor of ``kind`` names; ``invalid-input`` for anything else."""
    if cursor is None:
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except ValueError:
        value = None
    place = value.get(kind) if isinstance(value, dict) else None
    if not isinstance(place, int) or isinstance(place, bool) or place < -1:
        raise InvalidInput("after is not a cursor of this cohort's pages", field="after",
                           reason="cursor")
    return place


def check_first(first: int) -> int:
    if not 1 <= first <= MAX_FIRST:
        raise InvalidInput(f"first must be between 1 and {MAX_FIRST}", field="first",
                           value=first, reason="range")
    return first


# ---------------------------------------------------------------- filters


def spec_of(where: CohortFilter | None) -> selection.CohortFilter | None:
    """The pure filter of a ``CohortFilter`` input (schema/bulk.py)."""
    return where.to_core() if where is not None else None


def filter_tallies(entry: dict[str, Any], spec: selection.CohortFilter | None
                   ) -> set[str] | None:
    """The ``status:outcome`` pairs of the cohort a row ``spec`` selects can have
    (``None``: the filter says nothing about them)."""
    if spec is None or (spec.status is None and spec.outcome is None):
        return None
    found = set()
    for key in entry.get("counts", {}):
        status, outcome = tallies.split(key)
        if spec.status is not None and status not in spec.status:
            continue
        if spec.outcome is not None and outcome not in spec.outcome:
            continue
        found.add(key)
    return found


counts_of = tallies.counts
"""The Cohort counts from a parent's summary entry (the core's reading; kept for callers)."""


def counted_by_summary(spec: selection.CohortFilter | None) -> bool:
    return spec is None or (spec.row_keys is None and spec.stage is None and spec.where is None)


# ---------------------------------------------------------------- sources


@dataclass(slots=True)
class CohortSource:
    """One indexed cohort: its parent, its summary entry and the parent's row store."""

    store: RowStore
    parent_id: str
    entry: dict[str, Any]
    open_key: str | None
    limits: Limits
    _all: list[Row] | None = field(default=None)

    def row(self, entry: SubworkflowEntry) -> Row:
        return api_row(self.parent_id, entry, self.open_key, row_view(entry, self.open_key))

    def matcher(self, spec: selection.CohortFilter | None, budget: groq.Budget | None = None
                ) -> cohort_pages.Matcher | None:
        if spec is None:
            return None
        tree = spec.check(self.limits)
        return lambda row: spec.matches(row_view(row, self.open_key), tree, budget=budget)

    async def page(self, first: int, after: str | None, where: CohortFilter | None,
                   caller: str | None = None) -> RowsPage:
        check_first(first)
        spec = spec_of(where)
        budget = self.limits.groq_budget()  # one for the call: every row, the page, the count
        match = self.matcher(spec, budget)
        offload = filtering(spec, budget, caller)
        pairs = filter_tallies(self.entry, spec)
        found = await cohort_pages.read_page(self.store, self.parent_id, self.entry,
                                             first=first, after=decode(after, "row"),
                                             match=match, tallies=pairs, offload=offload)
        end = encode("row", found.rows[-1][0]) if found.rows else after

        async def counter() -> int:
            if after is None and not found.has_next:  # this page holds every match
                return len(found.rows)
            if counted_by_summary(spec):
                return (tallies.total(self.entry) if spec is None else
                        tallies.count_where(self.entry, spec.status, spec.outcome))
            assert match is not None
            return await cohort_pages.count_matching(self.store, self.parent_id, self.entry,
                                                     match, pairs, offload)

        return RowsPage([self.row(r) for _, r in found.rows], found.has_next, end, counter)

    async def rows(self) -> list[Row]:
        """Every row of the cohort (``Cohort.rows``: what a caller selecting it asks for)."""
        if self._all is None:
            found = await cohort_pages.read_page(
                self.store, self.parent_id, self.entry,
                first=max(1, tallies.total(self.entry)), after=None)
            self._all = [self.row(r) for _, r in found.rows]
        return self._all


async def page_of_rows(rows: list[Row], first: int, after: str | None,
                       where: CohortFilter | None,
                       limits: Limits, caller: str | None = None) -> RowsPage:
    """``Cohort.page`` over rows already in memory."""
    check_first(first)
    spec = spec_of(where)
    tree = spec.check(limits) if spec is not None else None
    place = decode(after, "at")
    start = 0 if place is None else place + 1
    budget = limits.groq_budget()

    def choose() -> list[tuple[int, Row]]:
        return [(i, r) for i, r in enumerate(rows) if selection.matches_row(spec, r, tree, budget)]

    offload = filtering(spec, budget, caller)
    chosen = await offload(choose) if offload is not None else choose()
    after_start = [(i, r) for i, r in chosen if i >= start]
    page = after_start[:first]
    end = encode("at", page[-1][0]) if page else after

    async def counter() -> int:
        return len(chosen)

    return RowsPage([r for _, r in page], len(after_start) > first, end, counter)


def filtering(spec: selection.CohortFilter | None, budget: groq.Budget, caller: str | None
              ) -> Callable[[Callable[[], T]], Awaitable[T]] | None:
    """Where a filter's rows are matched: a GROQ ``where`` (CPU work under ``budget``, one
    for the whole call) in ``caller``'s lane of the evaluation threads; anything else on
    the event loop (``None``)."""
    if spec is None or spec.where is None:
        return None
    return lambda fn: pool.off_loop(fn, budget, caller)


def open_key_of(parent: dict[str, Any]) -> str | None:
    """The key of the parent's open stage visit (``Instance.open_entry``, on the raw doc)."""
    for entry in reversed(parent.get("stages") or []):
        if entry.get("name") == parent.get("currentStage") and entry.get("exitedAt") is None:
            key = entry.get("_key")
            return key if isinstance(key, str) else None
    return None


def indexable(parent: dict[str, Any]) -> bool:
    """Whether the parent's summary covers its registry (written by every commit that
    wrote rows since summaries exist; an older parent is read whole)."""
    summary = parent.get("cohortRows")
    if isinstance(summary, list):
        return all(isinstance(e, dict) and "chunks" in e and tallies.current(e)
                   for e in summary)
    return not parent.get("rowCount")


async def indexed(store: RowStore, limits: Limits, parent: dict[str, Any], activity: str
                  ) -> tuple[CohortSource, Row] | None:
    """The source of the cohort ``activity`` means and its last row (what the window
    and the cohort's visit are read from: one chunk); ``None`` if it never spawned."""
    open_key = open_key_of(parent)
    entry = tallies.find(parent.get("cohortRows"), activity, open_key)
    if entry is None:
        return None
    source = CohortSource(store, str(parent["_id"]), entry, open_key, limits)
    last = await cohort_pages.read_page(store, source.parent_id, entry, first=1,
                                        after=int(entry["last"]) - 1)
    if not last.rows:  # the summary names a row the chunks do not hold: read whole
        return None
    return source, source.row(last.rows[0][1])


def spawned(parent: dict[str, Any], activity: str) -> bool:
    """Whether the parent's summary has a cohort of ``activity`` (in any visit)."""
    return tallies.find(parent.get("cohortRows"), activity, None) is not None
