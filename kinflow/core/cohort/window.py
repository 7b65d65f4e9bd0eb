"""A cohort's window of active children (``spawn.maxActive``; pure, no I/O).

A cohort is the rows one activity spawned in one stage visit (``activity``,
``stageEntry``). With a window, a spawn creates children up to the limit and
registers the rest as *queued*: the row carries its deterministic child id and
its ``seed`` (the ``with`` and ``context`` values, the pinned child version)
and no child document exists. Every commit of the parent ends by filling its
windows (``Commit.finish`` calls ``fill``): while a cohort has fewer live
children than its limit, its next queued rows start in registry (``forEach``)
order. Rows only change in the parent's fenced commit, so concurrent finishes
and several workers can never start a row twice or overfill a window, and a
stamp that resolves a row starts its successor in the same transaction.

The limit is the operator's setting for the cohort (``Instance.cohorts``,
written by ``updateCohort``), else the spawn block's ``maxActive``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress
from operator import is_not
from typing import Any

from kinflow.core.cohort import admission, priority, sparse, tallies
from kinflow.core.cohort import counts as cohort_counts
from kinflow.core.cohort.chunks import REPLACED, replace_row
from kinflow.core.context import PlanContext
from kinflow.core.history import record
from kinflow.core.state import Instance, ResolvedRow, SubworkflowEntry
from kinflow.define.models import WorkflowDefinition, find_action

Cohort = tuple[str, str]  # (activity, stage entry key)

DEFERRED = "fillDeferred"
"""``Instance._derived`` key: a prioritised cohort of a sparse registry still had room and
rows waiting when its commit's chunk bound was spent (the commit owes the parent another
evaluation, which goes on)."""
SKIPPED = "queued-skipped"
"""``resolved.detail`` of a queued row condemned before its child existed."""


def cohort_of(row: SubworkflowEntry) -> Cohort:
    return row.activity, row.stageEntry


def declared_max(definition: WorkflowDefinition, stage: str, activity: str,
                 action: str | None = None) -> int | None:
    """The ``maxActive`` the definition declares for a cohort (the action's spawn block,
    else the first spawning action of the activity that declares one)."""
    found = definition.activity(stage, activity)
    if found is None:
        return None
    if action is not None:
        named = find_action(found, action)
        if named is not None and named.spawn is not None:
            return named.spawn.maxActive
    for candidate in found.actions or []:
        if candidate.spawn is not None and candidate.spawn.maxActive is not None:
            return candidate.spawn.maxActive
    return None


setting = admission.setting  # the cohort's stored setting (one reading for every rule)


def limit(instance: Instance, definition: WorkflowDefinition, row: SubworkflowEntry
          ) -> int | None:
    """The window of ``row``'s cohort: ``None`` is no window."""
    own = setting(instance, cohort_of(row))
    if own is not None and own.maxActive is not None:
        return own.maxActive
    return declared_max(definition, row.cohortStage, row.activity, row.action)


def occupies(row: SubworkflowEntry) -> bool:
    """Whether a row holds a place in its window: a child that exists and is live."""
    return row.resolved is None and not row.queued


def active_counts(instance: Instance) -> dict[Cohort, int]:
    if sparse.is_sparse(instance):
        return dict(_sparse_occupancy(instance).active)
    counts: dict[Cohort, int] = {}
    for row in instance.subworkflows:
        if occupies(row):
            key = cohort_of(row)
            counts[key] = counts.get(key, 0) + 1
    return counts


@dataclass(slots=True)
class Occupancy:
    """The registry's windows at a glance: queued places (those already condemned
    apart), live children and queued rows per cohort, live children per key."""

    queued: set[int]
    condemned: set[int]  # queued places whose row is condemned (they never start)
    active: dict[Cohort, int]
    waiting: dict[Cohort, int]
    keyed: dict[Cohort, dict[str, int]] = field(default_factory=dict)

    def count(self, row: SubworkflowEntry, place: int, sign: int) -> None:
        if row.resolved is not None:
            return
        key = (row.activity, row.stageEntry)
        if not row.queued:
            _add(self.active, key, sign)
            if row.concurrencyKey is not None:
                _add(self.keyed.setdefault(key, {}), row.concurrencyKey, sign)
            return
        _add(self.waiting, key, sign)
        if sign > 0:
            self.queued.add(place)
            if row.abortPending is not None or row.cancelPending is not None:
                self.condemned.add(place)
        else:
            self.queued.discard(place)
            self.condemned.discard(place)

    def copy(self) -> Occupancy:
        return Occupancy(set(self.queued), set(self.condemned), dict(self.active),
                         dict(self.waiting), {k: dict(v) for k, v in self.keyed.items()})


def _add(counts: dict[Any, int], key: Any, n: int) -> None:
    left = counts.get(key, 0) + n
    if left:
        counts[key] = left
    else:
        counts.pop(key, None)


def occupancy(instance: Instance) -> Occupancy:
    """The ``Occupancy`` of ``instance``'s registry.

    Every commit of a windowed parent fills its windows twice, and a round on
    10,000 rows changes a few dozen of them, so the counts are kept on the
    instance with the rows they describe (``Instance._derived``) and updated
    for the rows replaced or added since (found by identity at C speed).
    """
    rows = instance.subworkflows
    if sparse.is_sparse(instance):
        return _sparse_occupancy(instance)
    kept: tuple[list[SubworkflowEntry], Occupancy] | None = instance._derived.get("window")
    if kept is None or len(kept[0]) > len(rows):
        seen: list[SubworkflowEntry] = []
        counts = Occupancy(set(), set(), {}, {})
    else:
        seen, counts = kept[0], kept[1].copy()
    shared = len(seen)
    for place in [*compress(range(shared), map(is_not, seen, rows)), *range(shared, len(rows))]:
        if place < shared:
            counts.count(seen[place], place, -1)
        counts.count(rows[place], place, 1)
    instance._derived["window"] = (list(rows), counts.copy())
    return counts


def _sparse_occupancy(instance: Instance) -> Occupancy:
    """The ``Occupancy`` of a sparse registry: live and waiting rows per cohort from the
    cohorts' counts (corrected by this commit's rows), queued places among the chunks
    held; per-key counts need every live row, so a keyed cohort walks them all."""
    found = Occupancy(set(), set(), {}, {})
    for entry in cohort_counts.live_summary(instance):
        key = tallies.cohort_of(entry)
        for name, n in entry.get("counts", {}).items():
            status = tallies.split(name)[0]
            if status == "queued":
                _add(found.waiting, key, int(n))
            elif status not in FINISHED_STATUSES:
                _add(found.active, key, int(n))
    keyed = any(e.get("keys") for e in instance.cohortRows or [])
    for place, row in sparse.held_rows(instance):
        keyed = keyed or row.concurrencyKey is not None
        if row.queued and row.resolved is None:
            found.queued.add(place)
            if row.abortPending is not None or row.cancelPending is not None:
                found.condemned.add(place)
    if keyed:
        found.keyed = _sparse_keys(instance)
    return found


def _sparse_keys(instance: Instance) -> dict[Cohort, dict[str, int]]:
    """Live children per key of a sparse registry: the summary's ``keys`` corrected by the
    rows this commit replaced or added; every row walked when a cohort's entry does not
    keep them (an older scheme)."""
    keyed: dict[Cohort, dict[str, int]] = {}
    for entry in instance.cohortRows or []:
        kept = tallies.keys_of(entry)
        if kept is None:
            for row in instance.subworkflows:  # every chunk (bounded by the shell)
                if occupies(row) and row.concurrencyKey is not None:
                    _add(keyed.setdefault(cohort_of(row), {}), row.concurrencyKey, 1)
            return keyed
        key = tallies.cohort_of(entry)
        for name, pair in kept.items():
            _add(keyed.setdefault(key, {}), name, int(pair[0]))
    rows = instance.subworkflows
    replaced = instance._derived.get(REPLACED)
    changes = replaced[1] if replaced is not None and replaced[0] == id(instance) else {}
    base = instance.rowCount or 0
    pairs: list[tuple[SubworkflowEntry | None, SubworkflowEntry]] = [
        (old, rows[i]) for i, old in changes.items() if i < base]
    pairs += [(None, rows[i]) for i in range(base, len(rows))]
    for old, new in pairs:
        for one, sign in ((old, -1), (new, 1)):
            if one is not None and occupies(one) and one.concurrencyKey is not None:
                _add(keyed.setdefault(cohort_of(one), {}), one.concurrencyKey, sign)
    return keyed


FINISHED_STATUSES = frozenset({"done", "aborted", "cancelled"})


def _more_queued(instance: Instance, ctx: PlanContext,
                 gates: dict[Cohort, admission.Gate | None], open_: set[Cohort],
                 refused: set[Cohort], frontiers: dict[Cohort, priority.Frontier | None]
                 ) -> None:
    """On a sparse registry, ask for the next chunks holding queued rows of each cohort
    whose window still has room after every held queued row was offered to it (a
    prioritised cohort's next levels, within the commit's chunk bound)."""
    rows = sparse.rows_of(instance)
    wanted: set[int] = set()
    for entry in instance.cohortRows or []:
        key = tallies.cohort_of(entry)
        gate = gates.get(key)
        if key not in open_ or key in refused or gate is None or gate.full:
            continue
        if key in frontiers:
            front = frontiers[key]
            if front is not None:
                wanted.update(_next_levels(instance, ctx, entry, gate, front))
            continue
        wanted.update(sparse.queued_chunks(entry, 2, skip=rows.held))
    rows.need(wanted)


def _next_levels(instance: Instance, ctx: PlanContext, entry: dict[str, Any],
                 gate: admission.Gate, front: priority.Frontier) -> list[int]:
    """The chunks a prioritised cohort of a sparse registry reads next: its frontier's,
    then those its levels name for the room left, as many as the commit's chunk bound
    still allows (none: the next commit goes on)."""
    rows = sparse.rows_of(instance)
    budget = priority.read_budget(rows.read, ctx.limits.sparse_chunks)
    if budget <= 0:
        instance._derived[DEFERRED] = True
        return []
    room = int(min(gate.room, gate.rate_left, tallies.total(entry)))
    more = priority.chunks_for(entry, max(room, 1), budget, {*rows.held, front.chunk})
    return [front.chunk, *more][:budget]


def _frontiers(instance: Instance, gates: dict[Cohort, admission.Gate | None]
               ) -> dict[Cohort, priority.Frontier | None]:
    """Each prioritised cohort of a sparse registry whose summary keeps its levels: its
    first waiting row not held (``priority.frontier``). A prioritised cohort of an older
    summary reads every row (bounded by the shell)."""
    found: dict[Cohort, priority.Frontier | None] = {}
    rows = sparse.rows_of(instance)
    for entry in instance.cohortRows or []:
        key = tallies.cohort_of(entry)
        gate = gates.get(key)
        if gate is None or not gate.prioritised:
            continue
        if priority.levels(entry) is None:
            rows.need(range(rows.chunk_count()))
        found[key] = priority.frontier(entry, rows.held)
    return found


def _gates(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext,
           found: Occupancy) -> dict[Cohort, admission.Gate | None]:
    """Each waiting cohort's admission gate; ``None`` for a cohort being swept (its
    rows are condemned a page at a time, core/cohort/sweep.py, and none may start)."""
    gates: dict[Cohort, admission.Gate | None] = {}
    for key in found.waiting:
        if sparse.swept(instance, key):
            gates[key] = None
            continue
        stage = admission.stage_of(instance, key[1])
        own = setting(instance, key)
        cap = (own.maxActive if own is not None and own.maxActive is not None
               else declared_max(definition, stage, key[0]) if stage is not None else None)
        gates[key] = admission.gate(instance, definition, key, stage, cap,
                                    found.active.get(key, 0), found.keyed.get(key, {}),
                                    ctx.now)
    return gates


def fill(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext,
         start: Callable[[int], bool]) -> int:
    """Start queued rows while their cohort admits them; returns how many started.

    ``start(index)`` creates row ``index``'s child and returns whether it still
    occupies the window (a child that finished at creation does not). A queued row
    already condemned (its visit left with ``onExit: abort``, its parent aborted)
    never starts: it is resolved as aborted at once, with no child to drain, first.
    Then the rows of each cohort that is not paused start, highest priority first
    (ties in registry order), while its window, its keys and its start rate admit
    them (core/cohort/admission.py); the walk stops once every waiting cohort is full,
    so a full window costs nothing per row.
    """
    rows = instance.subworkflows
    found = occupancy(instance)
    if not found.queued and not (found.waiting and sparse.is_sparse(instance)):
        return 0
    for index in sorted(found.condemned):
        row = rows[index]
        if row.queued and row.resolved is None:
            skip(instance, ctx, index, detail=SKIPPED, cancelled=row.abortPending is None)
    gates = _gates(instance, definition, ctx, found)
    open_ = {key for key, found in gates.items() if found is not None and not found.full}
    if not open_:
        return 0
    prioritised = any(found is not None and found.prioritised for found in gates.values())
    started = 0
    refused: set[Cohort] = set()
    barriers = sparse.barriers(instance) if sparse.is_sparse(instance) else {}
    frontiers = _frontiers(instance, gates) if sparse.is_sparse(instance) else {}
    for index in admission.order(instance, found.queued - found.condemned, prioritised):
        if not open_:
            break
        row = rows[index]
        key = cohort_of(row)
        gate = gates[key]
        if key not in open_ or gate is None or not row.queued or row.resolved is not None:
            continue
        if key in barriers and index // sparse.CHUNK > barriers[key]:  # earlier rows first
            sparse.rows_of(instance).need({barriers[key]})
        front = frontiers.get(key)
        if front is not None and front.blocks(row.priority, index):  # a row before it waits
            sparse.rows_of(instance).need(_next_levels(instance, ctx, _entry(instance, key),
                                                       gate, front))
            open_.discard(key)  # the bound is spent: the next commit goes on
            continue
        if not gate.admits(row, ctx.now):
            refused.add(key)
            continue
        started += 1
        live = start(index)
        gate.took(row, live, created=rows[index].observed is not None)
        if gate.full:
            open_.discard(key)
    if open_ and sparse.is_sparse(instance):
        _more_queued(instance, ctx, gates, open_, refused, frontiers)
    admission.record_starts(instance, ctx, gates)
    return started


def _entry(instance: Instance, key: Cohort) -> dict[str, Any]:
    found = tallies.entry_of(instance.cohortRows, *key)
    assert found is not None  # (a frontier is made from the cohort's entry)
    return found


def skip(instance: Instance, ctx: PlanContext, index: int, *, detail: str,
         cancelled: bool = False) -> None:
    """Resolve a queued row as aborted (as cancelled, when a cancellation skips it)
    without ever creating its child."""
    row = instance.subworkflows[index]
    status = "cancelled" if cancelled else "aborted"  # = outcomes.CANCELLED / ABORTED
    replace_row(instance, index, queued=None, outcome=status, resolved=ResolvedRow(
        at=ctx.now_iso, aborted=None if cancelled else True, cancelled=cancelled or None,
        detail=detail))
    record(instance, ctx, "subworkflowResolved", activity=row.activity,
           instanceRef=row.ref.to_json(), status=status, detail=detail)


def set_max_active(instance: Instance, cohort: Cohort, max_active: int) -> None:
    """Store an operator's window for ``cohort`` on the parent (``updateCohort``)."""
    admission.update_setting(instance, cohort, maxActive=max_active)


def latest_visit(instance: Instance, activity: str) -> str | None:
    """The stage entry key of the activity's latest spawning visit, ``None`` if it never
    spawned."""
    order = {entry.key_: place for place, entry in enumerate(instance.stages)}
    if sparse.is_sparse(instance):  # the cohorts' summary names every visit that spawned
        visits = {str(e["stageEntry"]) for e in instance.cohortRows or []
                  if e.get("activity") == activity}
    else:
        visits = {row.stageEntry for row in instance.subworkflows if row.activity == activity}
    if not visits:
        return None
    return max(visits, key=lambda key: order.get(key, -1))


def refill_batch(instance: Instance, definition: WorkflowDefinition) -> int | None:
    """How many finished children make the parent's next round worth running at once:
    half the smallest window that has rows queued (``None``: no window waits).

    Read from the cohorts' counts (``tallies``), so it costs per cohort, not per row.
    """
    rows = instance.subworkflows
    smallest: int | None = None
    for entry in instance.cohortRows or []:
        first = int(entry.get("first", -1))
        if not entry.get("counts", {}).get("queued:") or not 0 <= first < len(rows):
            continue
        if sparse.is_sparse(instance):  # the row itself may not be held
            cap = entry_cap(instance, definition, entry)
        else:
            cap = limit(instance, definition, rows[first])
        if cap is not None and (smallest is None or cap < smallest):
            smallest = cap
    return None if smallest is None else max(1, smallest // 2)


def entry_cap(instance: Instance, definition: WorkflowDefinition, entry: dict[str, Any]
              ) -> int | None:
    """The window of the cohort a summary entry describes, read without its rows."""
    key = tallies.cohort_of(entry)
    own = setting(instance, key)
    if own is not None and own.maxActive is not None:
        return own.maxActive
    stage = admission.stage_of(instance, key[1])
    return declared_max(definition, stage, key[0]) if stage is not None else None


def caps(instance: Instance, definition: WorkflowDefinition) -> dict[Cohort, int | None]:
    """Every cohort's window, from the summary (``sparse.wanted`` sizes its reads by it)."""
    return {(str(e["activity"]), str(e["stageEntry"])): entry_cap(instance, definition, e)
            for e in instance.cohortRows or []}


def live_children(instance: Instance) -> int:
    """Rows whose child should exist and be live, by the cohorts' counts (a sparse
    registry's missing-child check compares it with the live children the lake counts)."""
    return sum(int(n) for entry in cohort_counts.live_summary(instance)
               for name, n in entry.get("counts", {}).items()
               if tallies.split(name)[0] not in FINISHED_STATUSES | {"queued"})
