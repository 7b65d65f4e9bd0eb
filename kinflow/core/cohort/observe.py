"""Keeping registry rows true to their children.

The rules are in docs/subworkflows.md#propagation-and-why-it-scales. This
module owns how what the shell observed about children lands on the
parent's rows, purely. An ``Observation`` is one child's status and stage as
read from its document (or ``missing`` when the document is gone). Applying
observations to a parent:

* a terminal child stamps ``resolved`` on its live row, once, with its
  ``outcome`` and ``outputs`` (``core/cohort/outcomes.py``, read from the child's
  ``result``) and a ``subworkflowResolved`` history row; a resolved row is
  never changed again;
* a live child refreshes the row's ``observed`` (what ``$subworkflows``
  reads for ``status``/``stage``), so parent gates never read child documents;
* a missing child resolves its live row as ``aborted`` with detail
  ``child-missing`` (docs/subworkflows.md#missing-children: no wedged gates),
  recorded once;
* a child with no row in this parent is recorded as ``subworkflowOrphaned``
  once per child, and changes no row.

It also answers which rows are condemned and still owed an abort, and which
children should be alive (``expected_live``: the shell counts them to notice
a missing child).
"""

from __future__ import annotations

from dataclasses import dataclass

from kinflow.core import readmodel
from kinflow.core.cohort import outcomes
from kinflow.core.cohort.chunks import replace_row
from kinflow.core.cohort.outcomes import Finished
from kinflow.core.cohort.sparse import is_sparse
from kinflow.core.context import PlanContext
from kinflow.core.history import record
from kinflow.core.state import Instance, ObservedChild, ResolvedRow, SubworkflowEntry

MISSING = "missing"
FINISHED = frozenset({"done", "aborted", "cancelled"})
"""Row statuses of a finished child."""


@dataclass(frozen=True, slots=True)
class Observation:
    """One child as last read: ``status`` is active/done/aborted, or ``missing``."""

    child_id: str
    status: str
    stage: str | None = None
    completed_at: str | None = None
    token: str | None = None  # the child's pending-propagation token this clears
    finished: Finished | None = None  # outcome and outputs, once the child finished
    cancelling: bool = False  # the live child is CANCELLING (its row stays active)
    place: int | None = None  # the child's row in its parent's registry (``rowPlace``)

    @classmethod
    def of(cls, document: dict[str, object]) -> Observation:
        completed = document.get("completedAt")
        status = readmodel.row_status(document)  # stage as projected: OBSERVATION_FIELDS
        stage = document.get("currentStage")
        token = document.get("propagateToken")
        return cls(str(document["_id"]), status, stage if isinstance(stage, str) else None,
                   completed if isinstance(completed, str) else None,
                   token if isinstance(token, str) else None, Finished.of(document),
                   readmodel.cancelling(document), _place(document.get("rowPlace")))

    @classmethod
    def missing(cls, child_id: str) -> Observation:
        return cls(child_id, MISSING)


def _place(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


OBSERVATION_FIELDS = {"_id": 1, "currentStage": 1, "completedAt": 1, "abortedAt": 1,
                      "propagateToken": 1, "result": 1, "cancellingAt": 1, "cancelledAt": 1,
                      "rowPlace": 1}


def rows_by_child(instance: Instance) -> dict[str, SubworkflowEntry]:
    return {row.child_id: row for row in instance.subworkflows}


def live_rows(instance: Instance) -> list[SubworkflowEntry]:
    """Unresolved rows whose child document should exist: a row still seeded while
    its parent materialises may not have its child yet, a queued row has none."""
    return [r for r in instance.subworkflows if expects_child(instance, r)]


def expects_child(instance: Instance, row: SubworkflowEntry) -> bool:
    """Whether ``row``'s child document should exist and be live (``live_rows``)."""
    return row.resolved is None and not row.queued \
        and not (instance.materialising and row.seed is not None)


def expected_live(instance: Instance, seen: list[Observation]) -> list[str]:
    """Ids of the children that should be active now: those of ``live_rows`` but the
    ones ``seen`` just finishing. Fewer active children in the lake than these means
    a child document is missing (the shell then looks for which)."""
    finishing = {o.child_id for o in seen if o.status in FINISHED}
    return [r.child_id for r in live_rows(instance) if r.child_id not in finishing]


def condemned(instance: Instance) -> list[SubworkflowEntry]:
    """Live rows owed an abort (``abortPending`` and no ``resolved``)."""
    return [r for r in instance.subworkflows if r.resolved is None and r.abortPending is not None]


def row_places(instance: Instance, uris: set[str]) -> dict[str, int]:
    """The registry places of the rows whose child has one of the GDR ``uris``, by child id.

    The uri -> place map is kept on the instance (``Instance._derived``) and
    extended for rows added since; a place is used only if its row still names
    that child (a redriven row names a new one), so a stale entry is never
    believed, only missed.
    """
    rows = instance.subworkflows
    kept: tuple[dict[str, int], int] | None = instance._derived.get("places")
    known, covered = kept if kept is not None and kept[1] <= len(rows) else ({}, 0)
    if covered < len(rows):
        known = {**known, **{row.ref.id: i for i, row in enumerate(rows[covered:], covered)}}
        instance._derived["places"] = (known, len(rows))
    found: dict[str, int] = {}
    for uri in uris:
        place = known.get(uri)
        if place is not None and place < len(rows) and rows[place].ref.id == uri:
            found[rows[place].child_id] = place
    return found


def sparse_places(instance: Instance, observations: list[Observation]) -> dict[str, int]:
    """The places of the observed children's rows on a sparse registry: each child knows
    its own (``rowPlace``), checked against the row (its chunk is read if not held)."""
    rows = instance.subworkflows
    found: dict[str, int] = {}
    for seen in observations:
        place = seen.place
        if place is not None and 0 <= place < len(rows) and (
                rows[place].child_id == seen.child_id):
            found[seen.child_id] = place
    return found


def apply_observations(instance: Instance, ctx: PlanContext,
                       observations: list[Observation]) -> list[tuple[str, str]]:
    """Stamp rows from observations; returns (child id, token) pairs now honoured."""
    # the rows of the observed children only (a round on a large cohort sees a few),
    # found by their GDR; every row by its child id if one is not found that way
    wanted = {ctx.gdr(seen.child_id) for seen in observations}
    places = (sparse_places(instance, observations) if is_sparse(instance)
              else row_places(instance, wanted))
    if len(places) < len(wanted):  # (a sparse registry reads every chunk for it)
        places = {row.child_id: index for index, row in enumerate(instance.subworkflows)}
    honoured: list[tuple[str, str]] = []
    for seen in observations:
        place = places.get(seen.child_id)
        row = instance.subworkflows[place] if place is not None else None
        if seen.token is not None:
            honoured.append((seen.child_id, seen.token))
        if row is None:
            if seen.status != MISSING:
                _orphan(instance, ctx, seen.child_id)
            continue
        if row.resolved is not None or place is None:
            continue
        limit = ctx.limits.row_output_bytes
        if seen.status == MISSING:
            replace_row(instance, place, resolved=ResolvedRow(
                at=ctx.now_iso, aborted=True, detail="child-missing"),
                **outcomes.MISSING.row_changes(limit))
            record(instance, ctx, "subworkflowResolved", activity=row.activity,
                   instanceRef=row.ref.to_json(), status="aborted", detail="child-missing")
            continue
        observed = ObservedChild(status=seen.status, stage=seen.stage, at=ctx.now_iso,
                                 cancelling=True if seen.cancelling else None)
        if seen.status not in FINISHED:
            replace_row(instance, place, observed=observed)
        else:
            finished = seen.finished or Finished(_FALLBACK.get(seen.status, outcomes.SUCCEEDED))
            replace_row(instance, place, observed=observed, resolved=ResolvedRow(
                at=seen.completed_at or ctx.now_iso, stage=seen.stage,
                aborted=True if seen.status == "aborted" else None,
                cancelled=True if seen.status == "cancelled" else None),
                **finished.row_changes(limit))
            record(instance, ctx, "subworkflowResolved", activity=row.activity,
                   instanceRef=row.ref.to_json(), status=seen.status)
    return honoured


_FALLBACK = {"aborted": outcomes.ABORTED, "cancelled": outcomes.CANCELLED}


def _orphan(instance: Instance, ctx: PlanContext, child_id: str) -> None:
    uri = ctx.gdr(child_id)
    for past in instance.history:
        if past.get("_type") == "subworkflowOrphaned" and (
                past.get("instanceRef") or {}).get("id") == uri:
            return
    record(instance, ctx, "subworkflowOrphaned", instanceRef={"id": uri},
           detail="the child names this instance as its parent but has no registry row here")
