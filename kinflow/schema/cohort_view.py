"""The GraphQL ``Cohort`` type: one activity's cohort of a parent (docs/api.md).

Its counts come from the parent's per-cohort summary or from rows already in
memory; its settings (window, failure budget, admission) from the parent
document. Kept apart from ``kinflow.schema.types`` so the cohort views can grow.
"""

from __future__ import annotations

from typing import Any

import strawberry

from kinflow.core.cohort import outcomes, tallies
from kinflow.core.cohort.aggregates import of_document as cohort_aggregates
from kinflow.core.cohort.registry import CohortCounts, Row, count
from kinflow.schema.admission import (
    Admission,
    CohortKeyConnection,
    admission_of,
    key_counts,
    keys_page,
)
from kinflow.schema.budget import FailureBudget, cohort_budget
from kinflow.schema.bulk import CohortFilter, cohort_closed
from kinflow.schema.cohort_page import CohortSource, page_of_rows
from kinflow.schema.context import KInfo
from kinflow.schema.evaluation import caller_key
from kinflow.schema.scalars import JSON, jsonable
from kinflow.schema.types import Subworkflow, SubworkflowConnection


@strawberry.type
class Cohort:
    parent_id: strawberry.ID
    activity: str
    counts: strawberry.Private[CohortCounts]
    selected: strawberry.Private[list[Row]]
    window: strawberry.Private[int | None] = None
    source: strawberry.Private[CohortSource | None] = None  # indexed: rows read by page
    # the parent as the answer was built from it (a verb's, an event's): read, not loaded
    parent: strawberry.Private[dict[str, Any] | None] = None

    @strawberry.field
    def total(self) -> int:
        return self.counts.total

    @strawberry.field
    def active(self) -> int:
        return self.counts.active

    @strawberry.field
    def done(self) -> int:
        return self.counts.done

    @strawberry.field
    def aborted(self) -> int:
        return self.counts.aborted

    @strawberry.field(description="Rows waiting in the window: registered, no child yet.")
    def queued(self) -> int:
        return self.counts.queued

    @strawberry.field(description="The window: at most this many ACTIVE rows; null = none.")
    def max_active(self) -> int | None:
        return self.window

    @strawberry.field(description="Rows whose latest attempt failed, was aborted or timed "
                      "out, except rows the failure budget or a complete cohort itself "
                      "skipped or aborted (abortReason failure-budget-exceeded or "
                      "cohort-complete): those count only in aborted.")
    def failed(self) -> int:
        return self.counts.failed

    @strawberry.field(description="The failure budget; null when none is declared or set.")
    async def budget(self, info: KInfo) -> FailureBudget | None:
        parent = await info.context.loaders.instance(str(self.parent_id))
        last = self.selected[-1] if self.selected else None
        return cohort_budget(parent, self.activity, last, self.counts)

    @strawberry.field(description="total > 0 and active == 0 and no row left to register")
    async def settled(self, info: KInfo) -> bool:
        return self.counts.settled and not await self.registering(info)

    @strawberry.field(description="Rows of the cohort are still being registered, a batch "
                      "at a time (a large lake forEach with maxActive).")
    async def registering(self, info: KInfo) -> bool:
        if not self.selected:
            return False
        parent = await info.context.loaders.instance(str(self.parent_id))
        visit = self.selected[-1].stage_entry
        settings = (parent or {}).get("cohorts") or []
        return any((s.get("activity"), s.get("stageEntry")) == (self.activity, visit)
                   and s.get("registration") is not None for s in settings)

    @strawberry.field(description="Rows CANCELLED (a cancellation skipped or ended them).")
    def cancelled(self) -> int:
        return self.counts.cancelled

    @strawberry.field(description="Queued rows waiting for an automatic retry (a retryAt); "
                      "they count in queued too.")
    def retrying(self) -> int:
        if self.source is not None:
            return sum(int(n) for key, n in self.source.entry.get("counts", {}).items()
                       if tallies.marked(key, tallies.RETRY_MARK))
        return sum(1 for r in self.selected if r.status == "queued" and r.retry_at)

    @strawberry.field(description="Rows whose latest attempt timed out (outcome timed-out); "
                      "they count in failed too.")
    def timed_out(self) -> int:
        if self.source is not None:
            return tallies.count_where(self.source.entry, None, [outcomes.TIMED_OUT])
        return sum(1 for r in self.selected if r.outcome == outcomes.TIMED_OUT)

    @strawberry.field(description="completeWhen held: the rows not started were skipped "
                      "(abortReason cohort-complete) and the cohort takes no redrive.")
    async def complete(self, info: KInfo) -> bool:
        if not self.selected:
            return False
        parent = await info.context.loaders.instance(str(self.parent_id))
        visit = self.selected[-1].stage_entry
        return any((s.get("activity"), s.get("stageEntry")) == (self.activity, visit)
                   and s.get("completedAt") is not None
                   for s in (parent or {}).get("cohorts") or [])

    @strawberry.field(description="The spawn's aggregate figures by name, kept as rows "
                      "finish (sum/count 0 and min/max/avg null over no rows); null when "
                      "the spawn declares none.")
    async def aggregates(self, info: KInfo) -> JSON | None:
        if not self.selected:
            return None
        parent = await info.context.loaders.instance(str(self.parent_id))
        return cohort_aggregates(parent or {}, self.activity, self.selected[-1].stage_entry)

    @strawberry.field(description="A cancelCohort or abortCohort without a filter closed "
                      "the cohort: its queued rows were skipped and a spawn that would add "
                      "rows to it is refused (cohort-closed).")
    async def closed(self, info: KInfo) -> bool:
        parent = await info.context.loaders.instance(str(self.parent_id))
        return cohort_closed(parent, self.activity, self.selected[-1] if self.selected else None)

    async def _admission(self, info: KInfo) -> Admission:
        parent = (self.parent if self.parent is not None
                  else await info.context.loaders.instance(str(self.parent_id)))
        return admission_of(parent, self.activity, self.selected[-1] if self.selected else None)

    @strawberry.field(description="pauseCohort (or onBudgetExceeded: pause) holds the "
                      "cohort: no queued row starts and no retry is admitted; live children "
                      "run on.")
    async def paused(self, info: KInfo) -> bool:
        return (await self._admission(info)).paused

    @strawberry.field(description="Why the cohort is paused (failure-budget-exceeded when its "
                      "budget paused it); null while it runs.")
    async def paused_reason(self, info: KInfo) -> str | None:
        return (await self._admission(info)).paused_reason

    @strawberry.field(description="At most this many ACTIVE rows per concurrencyKey; null = "
                      "no per-key window.")
    async def max_active_per_key(self, info: KInfo) -> int | None:
        return (await self._admission(info)).max_active_per_key

    @strawberry.field(description="{count, perSeconds}: at most count starts in any window "
                      "of perSeconds; null = no rate.")
    async def start_rate(self, info: KInfo) -> JSON | None:
        rate = (await self._admission(info)).start_rate
        return jsonable(rate) if rate is not None else None

    @strawberry.field(description="Live and queued rows per concurrencyKey, in key order "
                      "(from the counts kept with the cohort, only when it has a per-key "
                      "window).")
    async def keys(self, info: KInfo, first: int | None = 50, after: str | None = None
                   ) -> CohortKeyConnection:
        keyed = (await self._admission(info)).max_active_per_key is not None
        kept = tallies.keys_of(self.source.entry) if self.source is not None else None
        if keyed and kept is not None:  # no row read
            return keys_page(kept, 50 if first is None else first, after)
        rows = ([] if not keyed else self.selected if self.source is None
                else await self.source.rows())
        return keys_page(key_counts(rows), 50 if first is None else first, after)

    @strawberry.field(description="Every row of the cohort; prefer page on large cohorts.")
    async def rows(self) -> list[Subworkflow]:
        rows = self.selected if self.source is None else await self.source.rows()
        return [Subworkflow(row=r) for r in rows]

    @strawberry.field(description="A page of the cohort's rows in forEach order, filtered "
                      "by where; served from the cohort's summary and only the chunks "
                      "it needs.")
    async def page(self, info: KInfo, first: int | None = 100, after: str | None = None,
                   where: CohortFilter | None = None) -> SubworkflowConnection:
        first = 100 if first is None else first
        caller = caller_key(info.context.actor)  # a where filter runs in the caller's lane
        if self.source is not None:
            return SubworkflowConnection.of(await self.source.page(first, after, where, caller))
        return SubworkflowConnection.of(await page_of_rows(
            self.selected, first, after, where, info.context.services.engine.limits, caller))

    @classmethod
    def indexed(cls, source: CohortSource, last: Row, window: int | None = None) -> Cohort:
        """A cohort whose counts come from the parent's summary; ``selected`` holds only
        its last row (read ``counts``, or ``source.rows()`` for every row)."""
        return cls(parent_id=strawberry.ID(source.parent_id), activity=last.activity,
                   counts=tallies.counts(source.entry), selected=[last], window=window,
                   source=source)

    @classmethod
    def of(cls, parent_id: str, activity: str, rows: list[Row],
           window: int | None = None, parent: dict[str, Any] | None = None) -> Cohort:
        return cls(parent_id=strawberry.ID(parent_id), activity=activity, counts=count(rows),
                   selected=rows, window=window, parent=parent)  # fmt: skip
