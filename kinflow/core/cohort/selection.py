"""Cohort verbs on many rows at once: which rows, under which keys, what came of it (pure).

``redriveCohort`` (and next ``fireCohort``, ``cancelCohort``, ``abortCohort``)
select rows of one cohort by a ``CohortFilter`` and apply one operation per
row (docs/subworkflows.md#redrive-and-bulk-operations). This module owns the parts every
such verb shares and that need no I/O:

* ``CohortFilter``: the selection, checked before anything is applied (a
  ``where`` that does not parse is refused with the GROQ code), and its
  matcher over the row's ``$subworkflows`` object (``registry.row_view``);
* ``cohort``: the rows of an activity's latest spawning visit
  (``cohort-not-found`` when it never spawned);
* ``row_key``: each row's derived idempotency key ``<key>:<rowKey>``, and the
  marks that remember on the row itself which derived keys it was applied
  under (a row's child id changes on redrive; the row does not);
* ``BulkResult``/``BulkRefusal``: the counts the API returns.

The shell (``engine/bulk.py``) applies the operation in batched commits. On a
sparse parent (core/cohort/sparse.py) nothing walks the registry: the shell
selects a page of the cohort's chunks at a time (``select_page``, each row
with its place), ``merged`` keeps each row key's latest row, and the batches
(``chunk_batches``, a page of chunks each at most) name their rows' places.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kinflow import groq
from kinflow.core.cohort import sparse, tallies
from kinflow.core.cohort.registry import Row, row_view
from kinflow.core.cohort.window import latest_visit
from kinflow.core.conditions import SNAPSHOT_MAX_SCANNED
from kinflow.core.context import Limits, PlanContext
from kinflow.core.errors import CohortNotFound
from kinflow.core.state import BulkCall, Instance, ProcessedRequest, SubworkflowEntry
from kinflow.errors import InvalidInput
from kinflow.timestamps import iso, parse_iso

STATUSES = frozenset({"queued", "active", "done", "aborted", "cancelled"})
MARKS_KEPT = 8
"""Derived keys a row remembers (the newest; expired ones are dropped first)."""


@dataclass(frozen=True, slots=True)
class CohortFilter:
    """Which rows of a cohort a bulk verb is about; every given field must match.

    ``status`` uses the row statuses (``queued``, ``active``, ``done``,
    ``aborted``, ``cancelled``); ``where`` is a GROQ condition evaluated with the
    row's ``$subworkflows`` object as the current value (``outputs.wordCount >
    1000``), bounded like conditions are: an error or a non-boolean on one row
    means that row does not match.
    """

    status: tuple[str, ...] | None = None
    outcome: tuple[str, ...] | None = None
    row_keys: tuple[str, ...] | None = None
    stage: str | None = None
    where: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The filter as stored with a call (``Instance.bulkCalls``) and fingerprinted."""
        return {"status": list(self.status) if self.status is not None else None,
                "outcome": list(self.outcome) if self.outcome is not None else None,
                "rowKeys": list(self.row_keys) if self.row_keys is not None else None,
                "stage": self.stage, "where": self.where}

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> CohortFilter | None:
        if value is None:
            return None

        def listed(name: str) -> tuple[str, ...] | None:
            found = value.get(name)
            return tuple(found) if isinstance(found, list) else None

        return cls(status=listed("status"), outcome=listed("outcome"),
                   row_keys=listed("rowKeys"), stage=value.get("stage"),
                   where=value.get("where"))

    def check(self, limits: Limits) -> groq.Tree | None:
        """Refuse a filter that can never be applied, before anything is; the parsed
        ``where`` (``groq-syntax`` if it does not parse, ``groq-limit-exceeded`` if it
        is too long)."""
        for name, values in (("status", self.status), ("outcome", self.outcome),
                             ("rowKeys", self.row_keys)):
            if values is not None and not all(isinstance(v, str) for v in values):
                raise InvalidInput(f"where.{name} must be a list of strings",
                                   field=f"where.{name}", reason="type")
        unknown = sorted(set(self.status or ()) - STATUSES)
        if unknown:
            raise InvalidInput(f"where.status: unknown status {unknown[0]!r}",
                               field="where.status", value=unknown[0], reason="enum")
        if self.where is None:
            return None
        if not isinstance(self.where, str) or not self.where.strip():
            raise InvalidInput("where.where must be a non-empty GROQ condition",
                               field="where.where", reason="empty")
        groq.Budget(max_length=limits.groq_max_length).check_length(self.where)
        # no parameters: a filter names values literally (an undefined one is refused)
        return groq.parse(self.where, params={})

    def matches(self, view: Mapping[str, Any], tree: groq.Tree | None = None,
                now: datetime | None = None, budget: groq.Budget | None = None) -> bool:
        """Whether the row whose ``$subworkflows`` object is ``view`` is selected.

        ``tree`` is ``check``'s result (parsed once per call, not once per row).
        ``budget`` bounds a whole selection (every row's ``where`` charges it) and its
        ``groq-limit-exceeded`` refuses the call; without one each row gets a
        condition's bound and a row past it does not match.
        """
        if self.status is not None and view.get("status") not in self.status:
            return False
        if self.outcome is not None and view.get("outcome") not in self.outcome:
            return False
        if self.row_keys is not None and view.get("rowKey") not in self.row_keys:
            return False
        if self.stage is not None and view.get("stage") != self.stage:
            return False
        if self.where is None:
            return True
        found = tree if tree is not None else groq.parse(self.where, params={})
        own = budget if budget is not None else groq.Budget(max_scanned=SNAPSHOT_MAX_SCANNED)
        try:
            value = groq.evaluate(found, params={}, root=dict(view), now=now, budget=own)
        except (groq.GroqLimitExceeded, groq.GroqCancelled):
            if budget is not None:
                raise
            return False
        except groq.GroqError:
            return False
        return value is True


def row_object(row: Row) -> dict[str, Any]:
    """The ``$subworkflows`` object of an API ``registry.Row`` (what ``matches`` reads)."""
    return {"_id": row.child_id, "rowKey": row.row_key, "activity": row.activity,
            "action": row.action, "definition": row.definition, "current": row.current,
            "status": row.status, "stage": row.stage, "spawnedAt": row.spawned_at,
            "outcome": row.outcome, "outputs": row.outputs, "outputsError": row.outputs_error,
            "attempt": row.attempt, "previousChildIds": list(row.previous_child_ids)}


def matches_row(spec: CohortFilter | None, row: Row, tree: groq.Tree | None = None,
                budget: groq.Budget | None = None) -> bool:
    """``spec.matches`` over an API row; no filter selects every row."""
    return spec is None or spec.matches(row_object(row), tree, budget=budget)


# ---- the cohort ----


@dataclass(frozen=True, slots=True)
class Cohort:
    """The rows of one activity's latest spawning visit, as places in the registry."""

    activity: str
    stage_entry: str
    places: tuple[int, ...]


def cohort(instance: Instance, activity: str) -> Cohort:
    """The activity's cohort (its latest spawning visit); ``cohort-not-found`` if it
    never spawned."""
    visit = latest_visit(instance, activity)
    if visit is None:
        raise CohortNotFound(
            f"instance {instance.id_!r} never spawned a cohort for activity {activity!r}",
            parentId=instance.id_, activity=activity)
    if sparse.is_sparse(instance):  # its rows are read a page at a time (select_page)
        return Cohort(activity, visit, ())
    places = tuple(i for i, row in enumerate(instance.subworkflows)
                   if row.activity == activity and row.stageEntry == visit)
    return Cohort(activity, visit, places)


def cohort_chunks(instance: Instance, found: Cohort) -> list[int]:
    """The chunks holding a row of ``found``, from its summary entry (no row read)."""
    entry = tallies.entry_of(instance.cohortRows, found.activity, found.stage_entry)
    return tallies.candidate_chunks(entry, None, 0) if entry is not None else []


Seen = tuple[str, int, bool]
"""``(row key, place, selected)`` of one row of a page (``select_page``)."""


def select_page(instance: Instance, found: Cohort, chunks: Iterable[int],
                spec: CohortFilter | None, tree: groq.Tree | None, now: datetime,
                also: Callable[[SubworkflowEntry], bool] | None = None,
                budget: groq.Budget | None = None) -> list[Seen]:
    """Every row of ``found`` in ``chunks`` (held), in registry order, with whether
    ``spec`` selects it (as ``select`` decides, before a later row of its key
    supersedes it: ``merged``)."""
    entry = instance.open_entry()
    open_key = entry.key_ if entry is not None else None
    rows = instance.subworkflows
    seen: list[Seen] = []
    for chunk in sorted(set(chunks)):
        for place in range(chunk * sparse.CHUNK, min(len(rows), (chunk + 1) * sparse.CHUNK)):
            row = rows[place]
            if (row.activity, row.stageEntry) != (found.activity, found.stage_entry):
                continue
            chosen = spec is None or (also is not None and also(row)) \
                or spec.matches(row_view(row, open_key), tree, now, budget)
            seen.append((row.rowKey, place, chosen))
    return seen


def merged(pages: Iterable[list[Seen]]) -> tuple[list[str], dict[str, int]]:
    """The selected row keys in registry order and their places, from every page of a
    cohort: a row key counts once, by its latest row."""
    latest: dict[str, tuple[int, bool]] = {}
    for page in pages:
        for key, place, chosen in page:
            if key not in latest or latest[key][0] < place:
                latest[key] = (place, chosen)
    ordered = sorted((place, key) for key, (place, chosen) in latest.items() if chosen)
    return [key for _, key in ordered], {key: place for place, key in ordered}


def chunk_batches(keys: list[str], places: Mapping[str, int], size: int, chunks: int
                  ) -> list[list[str]]:
    """``keys`` in batches of at most ``size`` rows whose rows lie in at most ``chunks``
    chunks (a batch commit of a sparse parent reads those chunks)."""
    found: list[list[str]] = []
    batch: list[str] = []
    held: set[int] = set()
    for key in keys:
        chunk = places[key] // sparse.CHUNK
        if batch and (len(batch) >= max(1, size)
                      or (chunk not in held and len(held) >= max(1, chunks))):
            found.append(batch)
            batch, held = [], set()
        batch.append(key)
        held.add(chunk)
    if batch:
        found.append(batch)
    return found


def select(instance: Instance, found: Cohort, spec: CohortFilter | None,
           tree: groq.Tree | None, now: datetime,
           also: Callable[[SubworkflowEntry], bool] | None = None,
           budget: groq.Budget | None = None) -> list[str]:
    """Row keys of ``found``'s rows ``spec`` selects, in registry order (a row key
    respawned in the visit counts once: its latest row). ``also`` selects rows whatever
    the filter says (those a retried call already applied); ``budget`` bounds every
    row's ``where`` together, like one lake query (``Limits.groq_budget``)."""
    entry = instance.open_entry()
    open_key = entry.key_ if entry is not None else None
    latest = latest_rows(instance, found)
    keys: list[str] = []
    for place in found.places:
        row = instance.subworkflows[place]
        if latest.get(row.rowKey) != place:
            continue
        if spec is None or (also is not None and also(row)) \
                or spec.matches(row_view(row, open_key), tree, now, budget):
            keys.append(row.rowKey)
    return keys


def select_call(instance: Instance, found: Cohort, spec: CohortFilter | None,
                tree: groq.Tree | None, ctx: PlanContext, key: str, op: str) -> list[str]:
    """``select`` for a bulk call keyed ``key`` of verb ``op``: rows already applied under
    the call's key are selected whatever the filter says now (a replay reports them as
    skipped)."""
    return select(instance, found, spec, tree, ctx.now, also=_applied(ctx, key, op),
                  budget=ctx.limits.groq_budget())


def select_call_page(instance: Instance, found: Cohort, chunks: Iterable[int],
                     spec: CohortFilter | None, tree: groq.Tree | None, ctx: PlanContext,
                     key: str, op: str, budget: groq.Budget | None
                     ) -> tuple[list[int], list[Seen]]:
    """``select_call`` on a sparse parent, a page of chunks at a time: the cohort's chunks
    (``cohort_chunks``) and the rows of ``chunks`` with whether each is selected
    (``budget``: the call's one GROQ budget, shared by its pages)."""
    return cohort_chunks(instance, found), select_page(
        instance, found, chunks, spec, tree, ctx.now, also=_applied(ctx, key, op),
        budget=budget)


def _applied(ctx: PlanContext, key: str, op: str) -> Callable[[SubworkflowEntry], bool]:
    return lambda row: marked(row, ctx, row_key(key, row.rowKey), op)


def latest_rows(instance: Instance, found: Cohort) -> dict[str, int]:
    """Each row key's latest place in the cohort (older rows of a key are superseded)."""
    return {instance.subworkflows[place].rowKey: place for place in found.places}


# ---- derived keys and the marks rows keep ----


def row_key(key: str, row_key_value: str) -> str:
    """The idempotency key of one row's operation within a bulk call keyed ``key``."""
    return f"{key}:{row_key_value}"


def marked(row: SubworkflowEntry, ctx: PlanContext, derived: str, op: str) -> bool:
    """Whether ``row`` was applied ``op`` under ``derived`` (and the mark is live)."""
    for mark in marks(row):
        if mark.key == derived and mark.op == op and parse_iso(mark.expiresAt) > ctx.now:
            return True
    return False


def marks(row: SubworkflowEntry) -> list[ProcessedRequest]:
    return list(row.bulkKeys or [])


def with_mark(row: SubworkflowEntry, ctx: PlanContext, derived: str, op: str
              ) -> list[ProcessedRequest]:
    """The row's ``bulkKeys`` after applying ``op`` under ``derived``: live marks, the
    newest ``MARKS_KEPT``."""
    kept = [m for m in marks(row) if parse_iso(m.expiresAt) > ctx.now]
    ttl = timedelta(seconds=ctx.limits.idempotency_ttl_seconds)
    kept.append(ProcessedRequest.model_validate({
        "_key": ctx.new_key(), "key": derived, "op": op, "processedAt": ctx.now_iso,
        "expiresAt": iso(ctx.now + ttl)}))
    return kept[-MARKS_KEPT:]


# ---- calls interrupted between batches ----


def pending(instance: Instance, op: str, key: str) -> BulkCall | None:
    for call in instance.bulkCalls or []:
        if (call.op, call.key) == (op, key):
            return call
    return None


def begin_call(instance: Instance, ctx: PlanContext, call: BulkCall) -> None:
    """Record a call with batches still to commit, so the heartbeat can finish it."""
    if pending(instance, call.op, call.key) is None:
        instance.bulkCalls = [*(instance.bulkCalls or []), call]
    instance.owesBulk = True


def end_call(instance: Instance, op: str, key: str) -> None:
    """The call's last batch committed (or it can never finish): forget it."""
    left = [c for c in instance.bulkCalls or [] if (c.op, c.key) != (op, key)]
    instance.bulkCalls = left or None
    instance.owesBulk = True if left else None


# ---- results ----


@dataclass(frozen=True, slots=True)
class BulkRefusal:
    """A matched row whose operation was refused, with the refusal's code."""

    child_id: str
    row_key: str
    code: str
    message: str


@dataclass(slots=True)
class BulkResult:
    """``matched`` rows the filter selected; ``applied`` in this call; ``skipped`` not
    eligible or already applied under this key (a replay: ``applied == 0``)."""

    matched: int = 0
    applied: int = 0
    skipped: int = 0
    refusals: list[BulkRefusal] = field(default_factory=list)

    def add(self, other: BulkResult) -> None:
        self.applied += other.applied
        self.skipped += other.skipped
        self.refusals.extend(other.refusals)


def batches(keys: list[str], size: int) -> Iterable[list[str]]:
    size = max(1, size)
    for start in range(0, len(keys), size):
        yield keys[start:start + size]
