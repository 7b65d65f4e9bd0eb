"""GraphQL of the bulk cohort verbs: the ``CohortFilter`` input and ``BulkResult``.

Thin: the selection and the counts are ``kinflow.core.cohort.selection``'s; this module
only converts between them and the contract's GraphQL shapes
(docs/subworkflows.md#redrive-and-bulk-operations). ``Cohort.page(where:)`` reads the
same input, and ``Cohort.closed`` reads ``cohort_closed``.
"""

from __future__ import annotations

from typing import Any

import strawberry

from kinflow.core.cohort import selection
from kinflow.core.cohort.registry import Row
from kinflow.schema.instance_parts import ChildStatus


@strawberry.input(description="Rows of one cohort; every given field must match.")
class CohortFilter:
    status: list[ChildStatus] | None = None
    outcome: list[str] | None = None
    row_keys: list[str] | None = None
    stage: str | None = strawberry.field(
        default=None, description="The child's current (or final) stage.")
    where: str | None = strawberry.field(
        default=None, description="A GROQ condition evaluated with the row as the current "
        "value, e.g. \"outputs.wordCount > 1000\".")

    def to_core(self) -> selection.CohortFilter:
        return selection.CohortFilter(
            status=tuple(s.value for s in self.status) if self.status is not None else None,
            outcome=tuple(self.outcome) if self.outcome is not None else None,
            row_keys=tuple(self.row_keys) if self.row_keys is not None else None,
            stage=self.stage, where=self.where)


@strawberry.type(description="A matched row whose child refused the operation.")
class BulkRefusal:
    child_id: strawberry.ID
    row_key: str
    code: str
    message: str


@strawberry.type(description="What a bulk cohort verb did: matched = applied + skipped + "
                 "refusals; a replay under the same key applies nothing.")
class BulkResult:
    matched: int
    applied: int
    skipped: int
    refusals: list[BulkRefusal]

    @classmethod
    def of(cls, result: selection.BulkResult) -> BulkResult:
        return cls(matched=result.matched, applied=result.applied, skipped=result.skipped,
                   refusals=[BulkRefusal(child_id=strawberry.ID(r.child_id), row_key=r.row_key,
                                         code=r.code, message=r.message)
                             for r in result.refusals])


def cohort_closed(parent: dict[str, Any] | None, activity: str, last: Row | None) -> bool:
    """Whether a cancel or abort without a filter closed the cohort ``last`` belongs to
    (else the parent's latest visit): its setting on the parent has ``closedAt``."""
    if parent is None:
        return False
    entries = parent.get("stages") or []
    visit = last.stage_entry if last is not None else (
        entries[-1].get("_key") if entries else None)
    return any((s.get("activity"), s.get("stageEntry")) == (activity, visit)
               and s.get("closedAt") for s in parent.get("cohorts") or [])
