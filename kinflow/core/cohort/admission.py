"""Admission: which queued row of a cohort starts next, and when (pure, no I/O).

docs/subworkflows.md#admission. ``window.fill`` runs in every commit of a
parent and asks this module, per cohort with rows waiting, what may start:

* **pause** (``pausedAt`` on the cohort's setting): nothing starts, retries
  included; live children run on. ``pauseCohort``/``resumeCohort`` and the
  budget's ``onBudgetExceeded: "pause"`` set and clear it (``pause``,
  ``resume``);
* **the window** (``maxActive``) bounds live children, as before;
* **keys** (``concurrencyKey`` + ``maxActivePerKey``): a row whose key already
  has that many live children is passed over for the next eligible row, so
  a busy key never blocks the others;
* **the start rate** (``startRate {count, perSeconds}``): starts are logged on
  the setting (``recentStarts``, ``[at, n]`` pairs, one per commit that
  started rows) and a commit starts no more than the log leaves room for in
  the sliding window ``(now - perSeconds, now]``; ``due`` is when the log
  next frees a start, folded into the parent's ``nextEvaluationAt``;
* **retries**: a queued row with a ``retryAt`` still to come is not eligible;
* **order**: eligible rows start highest ``priority`` first, ties in
  registration order.

Operator settings (``updateCohort``) win over the spawn block's values.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import compress
from operator import is_not
from typing import Any

from pydantic import ValidationError

from kinflow.core.cohort import sparse
from kinflow.core.context import PlanContext, iso, parse_iso
from kinflow.core.history import record
from kinflow.core.state import CohortWindow, Instance, SubworkflowEntry
from kinflow.define import sites
from kinflow.define.models import SpawnBlock, StartRate, WorkflowDefinition, find_action
from kinflow.errors import InvalidInput

Cohort = tuple[str, str]  # (activity, stage entry key), as core/cohort/window.py

BUDGET_REASON = "failure-budget-exceeded"
"""``pausedReason`` of a cohort its failure budget paused (``onBudgetExceeded: "pause"``)."""
MAX_LOG = 64
"""Entries kept in ``recentStarts``: past it the two oldest merge into the newer time,
which only ever counts a start for longer (never lets the rate be exceeded)."""


# ---- the cohort's settings ----


def setting(instance: Instance, cohort: Cohort) -> CohortWindow | None:
    for entry in instance.cohorts or []:
        if (entry.activity, entry.stageEntry) == cohort:
            return entry
    return None


def update_setting(instance: Instance, cohort: Cohort, **changes: Any) -> None:
    """Update (or add) the cohort's stored setting with ``changes``."""
    kept = [entry for entry in instance.cohorts or []
            if (entry.activity, entry.stageEntry) != cohort]
    own = setting(instance, cohort)
    updated = (own.model_copy(update=changes) if own is not None
               else CohortWindow(activity=cohort[0], stageEntry=cohort[1], **changes))
    instance.cohorts = [*kept, updated]


def spawn_block(definition: WorkflowDefinition, stage: str, activity: str,
                action: str | None = None) -> SpawnBlock | None:
    """The spawn block of a cohort: the named action's, else the activity's first."""
    found = definition.activity(stage, activity)
    if found is None:
        return None
    named = find_action(found, action) if action is not None else None
    if named is not None and named.spawn is not None:
        return named.spawn
    return next((a.spawn for a in found.actions or [] if a.spawn is not None), None)


def stage_of(instance: Instance, entry_key: str) -> str | None:
    return next((e.name for e in instance.stages if e.key_ == entry_key), None)


def paused(instance: Instance, cohort: Cohort) -> bool:
    """Whether ``cohort`` is paused (``$cohort.paused``, ``Cohort.paused``)."""
    own = setting(instance, cohort)
    return own is not None and own.pausedAt is not None


def rate_of(own: CohortWindow | None, block: SpawnBlock | None) -> StartRate | None:
    if own is not None and own.startRate:
        return StartRate.model_validate(own.startRate)
    return block.startRate if block is not None else None


def per_key_of(own: CohortWindow | None, block: SpawnBlock | None) -> int | None:
    if own is not None and own.maxActivePerKey is not None:
        return own.maxActivePerKey
    return block.maxActivePerKey if block is not None else None


def regulated(block: SpawnBlock | None, own: CohortWindow | None) -> bool:
    """Whether a spawn into the cohort must register every row queued and let the fill
    choose (priority, keys, a rate or a pause decide which rows start first)."""
    if own is not None and (own.pausedAt or own.startRate or own.maxActivePerKey):
        return True
    return block is not None and (block.priority is not None
                                  or block.concurrencyKey is not None
                                  or block.startRate is not None)


def pause(instance: Instance, ctx: PlanContext, cohort: Cohort, reason: str | None) -> bool:
    """Pause ``cohort`` (history ``cohortPaused``); whether it was running."""
    if paused(instance, cohort):
        return False
    update_setting(instance, cohort, pausedAt=ctx.now_iso, pausedReason=reason)
    record(instance, ctx, "cohortPaused", activity=cohort[0], stageEntry=cohort[1],
           reason=reason, actor=ctx.actor.to_json())
    return True


def resume(instance: Instance, ctx: PlanContext, cohort: Cohort) -> bool:
    """Resume ``cohort`` (history ``cohortResumed``); whether it was paused. The commit's
    fill then starts what the window, keys and rate admit, with their current values."""
    if not paused(instance, cohort):
        return False
    update_setting(instance, cohort, pausedAt=None, pausedReason=None)
    record(instance, ctx, "cohortResumed", activity=cohort[0], stageEntry=cohort[1],
           actor=ctx.actor.to_json())
    return True


# ---- a row's values, at registration ----


def row_values(renderer: Any, block: SpawnBlock, activity: str, row: Any) -> dict[str, Any]:
    """The row's ``priority`` and ``concurrencyKey`` (GROQ over ``$row``), as stored.

    A priority that is not a finite number reads 0; a key that is a number or a
    boolean is its text, and one that is null (or anything else) leaves the row
    without a key: only ``maxActive`` bounds it.
    """
    values: dict[str, Any] = {}
    if block.priority is not None:
        value = renderer.value(block.priority, sites.SPAWN_ROW, activity, row=row)
        number = (float(value) if isinstance(value, int | float) and not isinstance(value, bool)
                  else 0.0)
        values["priority"] = number if math.isfinite(number) else 0.0
    if block.concurrencyKey is not None:
        value = renderer.value(block.concurrencyKey, sites.SPAWN_ROW, activity, row=row)
        values["concurrencyKey"] = _key_text(value)
    return values


def _key_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and math.isfinite(value):
        return str(int(value)) if float(value).is_integer() else str(value)
    return None


# ---- the start rate ----


def started_within(log: Iterable[list[Any]], since: datetime) -> int:
    """Starts logged strictly after ``since``."""
    return sum(int(n) for at, n in log if parse_iso(at) > since)


def allowance(log: list[list[Any]] | None, rate: StartRate, now: datetime) -> int:
    """How many more may start at ``now`` without exceeding ``rate``."""
    since = now - timedelta(seconds=rate.perSeconds)
    return max(0, rate.count - started_within(log or [], since))


def next_slot(log: list[list[Any]] | None, rate: StartRate, now: datetime) -> datetime | None:
    """When the log next leaves room for a start (``None``: there is room now)."""
    since = now - timedelta(seconds=rate.perSeconds)
    inside = sorted((parse_iso(at), int(n)) for at, n in log or [] if parse_iso(at) > since)
    excess = sum(n for _, n in inside) - rate.count + 1  # starts that must leave the window
    if excess <= 0:
        return None
    for at, n in inside:
        excess -= n
        if excess <= 0:
            return at + timedelta(seconds=rate.perSeconds)
    return None  # unreachable: the sum covers the excess


def logged(log: list[list[Any]] | None, rate: StartRate | None, now: datetime,
           n: int) -> list[list[Any]]:
    """``log`` with ``n`` starts at ``now`` added and entries out of the window dropped."""
    kept = list(log or [])
    if rate is not None:
        since = now - timedelta(seconds=rate.perSeconds)
        kept = [[at, k] for at, k in kept if parse_iso(at) > since]
    if n:
        kept.append([iso(now), n])
    while len(kept) > MAX_LOG:
        kept[0:2] = [[kept[1][0], int(kept[0][1]) + int(kept[1][1])]]
    return kept


def parse_rate(value: Any) -> dict[str, Any]:
    """An operator's ``startRate`` (``updateCohort``), as stored; ``invalid-input`` if bad."""
    problem = "startRate must be an object {count, perSeconds}"
    if isinstance(value, dict):
        try:
            return StartRate.model_validate(value).to_json()
        except ValidationError as exc:
            problem = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                                for e in exc.errors())
    raise InvalidInput(f"startRate is invalid: {problem}", field="startRate", value=value,
                       reason="shape")


# ---- one fill's gates ----


@dataclass(slots=True)
class Gate:
    """What one cohort still admits during one fill."""

    room: float  # places left in the window (inf: no window)
    per_key: int | None
    keyed: dict[str, int]  # live children per key
    rate: StartRate | None
    rate_left: float  # starts the rate still allows (inf: no rate)
    started: int = 0
    prioritised: bool = False
    log: list[list[Any]] | None = field(default=None)

    @property
    def full(self) -> bool:
        return self.room <= 0 or self.rate_left <= 0

    def admits(self, row: SubworkflowEntry, now: datetime) -> bool:
        if row.retryAt is not None and parse_iso(row.retryAt) > now:
            return False
        key = row.concurrencyKey
        return self.per_key is None or key is None or self.keyed.get(key, 0) < self.per_key

    def took(self, row: SubworkflowEntry, live: bool, created: bool) -> None:
        if created:
            self.started += 1
            self.rate_left -= 1
        if live:
            self.room -= 1
            if row.concurrencyKey is not None:
                self.keyed[row.concurrencyKey] = self.keyed.get(row.concurrencyKey, 0) + 1


def gate(instance: Instance, definition: WorkflowDefinition, cohort: Cohort,
         stage: str | None, cap: int | None, active: int, keyed: dict[str, int],
         now: datetime) -> Gate | None:
    """The cohort's gate for this fill (``stage``: its visit's stage); ``None`` while it
    is paused."""
    own = setting(instance, cohort)
    if own is not None and own.pausedAt is not None:
        return None
    block = spawn_block(definition, stage, cohort[0]) if stage is not None else None
    rate = rate_of(own, block)
    log = own.recentStarts if own is not None else None
    return Gate(room=math.inf if cap is None else cap - active,
                per_key=per_key_of(own, block), keyed=keyed, rate=rate,
                rate_left=math.inf if rate is None else allowance(log, rate, now),
                prioritised=block is not None and block.priority is not None, log=log)


def record_starts(instance: Instance, ctx: PlanContext, gates: dict[Cohort, Gate | None]
                  ) -> None:
    """Log this fill's starts on each rated cohort's setting (``recentStarts``)."""
    for cohort, found in gates.items():
        if found is None or found.rate is None or not found.started:
            continue
        update_setting(instance, cohort,
                       recentStarts=logged(found.log, found.rate, ctx.now, found.started))


def order(instance: Instance, places: Iterable[int], prioritised: bool) -> Iterator[int]:
    """Queued places in start order: highest priority first, ties in registration order.

    With priorities the order is kept on the instance with the rows it was made from
    (``Instance._derived``, as ``window.occupancy`` keeps its counts) and updated for
    the rows replaced or added since, so a fill on a long queue does not sort it again.
    """
    if not prioritised:
        yield from sorted(places)
        return
    rows = instance.subworkflows
    if sparse.is_sparse(instance):  # the held rows (core/cohort/priority.py: the rest)
        yield from sorted(places, key=lambda place: _queue_key(rows[place], place))
        return
    kept: tuple[list[SubworkflowEntry], list[tuple[float, int]]] | None = (
        instance._derived.get("queue"))
    seen, queue = ([], []) if kept is None or len(kept[0]) > len(rows) else kept
    shared = len(seen)
    gone: set[tuple[float, int]] = set()
    added: list[tuple[float, int]] = []
    for place in [*compress(range(shared), map(is_not, seen, rows)), *range(shared, len(rows))]:
        if place < shared and _waits(seen[place]):
            gone.add(_queue_key(seen[place], place))
        if _waits(rows[place]):
            added.append(_queue_key(rows[place], place))
    if gone or added:  # a new list: the kept one may be shared with another copy
        if len(gone) > 32:
            queue = [entry for entry in queue if entry not in gone]
        else:
            queue = list(queue)
            for entry in gone:
                at = bisect_left(queue, entry)
                if at < len(queue) and queue[at] == entry:
                    del queue[at]
        if len(added) > 32:
            queue = sorted([*queue, *added])
        else:
            for entry in added:
                insort(queue, entry)
    instance._derived["queue"] = (list(rows), queue)
    for _, place in queue:
        yield place


def _waits(row: SubworkflowEntry) -> bool:
    return bool(row.queued) and row.resolved is None


def _queue_key(row: SubworkflowEntry, place: int) -> tuple[float, int]:
    return -(row.priority or 0.0), place


# ---- the parent's due time ----


def rated(instance: Instance, definition: WorkflowDefinition) -> bool:
    """Whether any cohort of ``instance`` may have a start rate (else no due time)."""
    if any(entry.startRate for entry in instance.cohorts or []):
        return True
    return any(action.spawn is not None and action.spawn.startRate is not None
               for stage in definition.stages for activity in stage.activities or []
               for action in activity.actions or [])


def due(instance: Instance, definition: WorkflowDefinition, waiting: Iterable[Cohort],
        now: datetime) -> datetime | None:
    """When a rated cohort with rows waiting may next start one (its rate's next slot),
    the earliest over ``waiting``; paused cohorts owe nothing."""
    soonest: datetime | None = None
    for cohort in waiting:
        own = setting(instance, cohort)
        if own is not None and own.pausedAt is not None:
            continue
        stage = stage_of(instance, cohort[1])
        block = spawn_block(definition, stage, cohort[0]) if stage is not None else None
        rate = rate_of(own, block)
        if rate is None:
            continue
        slot = next_slot(own.recentStarts if own is not None else None, rate, now)
        if slot is not None and (soonest is None or slot < soonest):
            soonest = slot
    return soonest
