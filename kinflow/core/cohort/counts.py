"""``$cohort`` and ``$cohorts``: a cohort's counts in constant time (pure; no I/O).

docs/subworkflows.md#cohort-and-aggregates. The counts come from the parent's
per-cohort summary (``Instance.cohortRows``, core/cohort/tallies.py), never
from walking the rows, so a gate on ``$cohort.settled`` costs the same over
ten rows or a million. Inside a commit the stored summary describes the rows
as loaded; the rows the plan replaced since (``chunks.REPLACED``) or appended
(past ``rowCount``) correct it (``live_entry``), so a hop sees what its own
commit stamped. ``cohort_object`` is what ``$cohort`` binds and what a
quorum (``completeWhen``) reads.

The flags come from the cohort's stored setting (``Instance.cohorts``):
``registering`` while registration has a next batch, ``paused`` while
``pausedAt`` is set, ``complete`` once ``completedAt`` is.
"""

from __future__ import annotations

from typing import Any

from kinflow.core.cohort import aggregates, tallies
from kinflow.core.cohort.chunks import REPLACED, REPLACES
from kinflow.core.state import CohortWindow, Instance
from kinflow.define.models import WorkflowDefinition

_MEMO = "cohortSummary"


def of_entry(entry: dict[str, Any] | None, setting: CohortWindow | None) -> dict[str, Any]:
    """The counts of one summary entry with its setting's flags (no ``aggregates``)."""
    def n(*statuses: str) -> int:
        return tallies.count_where(entry, statuses, None)

    total = tallies.total(entry)
    active, queued = n("active"), n("queued")
    registering = setting is not None and setting.registration is not None
    return {
        "total": total,
        "registering": registering,
        "active": active,
        "queued": queued,
        "done": n("done"),
        "succeeded": tallies.count_where(entry, None, ["succeeded"]),
        "failed": tallies.failed(entry),
        "aborted": n("aborted"),
        "cancelled": n("cancelled"),
        "timedOut": tallies.count_where(entry, None, [tallies.outcomes.TIMED_OUT]),
        "retrying": sum(int(v) for key, v in (entry or {}).get("counts", {}).items()
                        if tallies.marked(key, tallies.RETRY_MARK)),
        "paused": setting is not None and setting.pausedAt is not None,
        "complete": setting is not None and setting.completedAt is not None,
        "settled": total > 0 and not registering and active == 0 and queued == 0,
    }


def setting(instance: Instance, activity: str, stage_entry: str) -> CohortWindow | None:
    for entry in instance.cohorts or []:
        if (entry.activity, entry.stageEntry) == (activity, stage_entry):
            return entry
    return None


def live_summary(instance: Instance) -> tallies.Summary:
    """``instance.cohortRows`` brought up to the rows in hand: the stored counts, less
    the rows as they were for every row replaced since, plus those rows now and every
    row past ``rowCount`` (none when fewer rows are in hand than stored), with ``first``
    and ``last`` widened to them. A summary missing or of an unreadable scheme is computed
    from the rows (once per state of them)."""
    rows = instance.subworkflows
    replaced = instance._derived.get(REPLACED)
    changes = replaced[1] if replaced is not None and replaced[0] == id(instance) else {}
    stored = instance.cohortRows
    base = instance.rowCount or 0
    key = (id(stored), len(rows), len(changes), instance._derived.get(REPLACES, 0))
    memo = instance._derived.get(_MEMO)
    if memo is not None and memo[0] == key and memo[1] == id(instance):
        return memo[2]
    if stored is None or any(not tallies.current(e) or "counts" not in e for e in stored):
        summary = tallies.summarise(rows)
        if stored is None:  # the registry's first rows: every one is this plan's
            _fold_live(instance, summary, [(None, row) for row in rows])
    else:
        found = {(e["activity"], e["stageEntry"]): {**e, "counts": dict(e["counts"])}
                 for e in stored}
        pairs = [(old, rows[i]) for i, old in changes.items() if i < min(base, len(rows))]
        pairs += [(None, rows[i]) for i in range(base, len(rows))]
        for old, new in pairs:
            if old is not None:
                counted = found.get((old.activity, old.stageEntry))
                if counted is not None:
                    name = tallies.tally(old)
                    counted["counts"][name] = counted["counts"].get(name, 0) - 1
            entry = found.setdefault((new.activity, new.stageEntry), {
                "activity": new.activity, "stageEntry": new.stageEntry, "counts": {},
                "tallies": tallies.SCHEME})
            name = tallies.tally(new)
            entry["counts"][name] = entry["counts"].get(name, 0) + 1
        for i in range(base, len(rows)):  # the registry places rows added since span
            entry = found[(rows[i].activity, rows[i].stageEntry)]
            entry["first"] = min(int(entry.get("first", i)), i)
            entry["last"] = max(int(entry.get("last", i)), i)
        for entry in found.values():
            entry["counts"] = {k: v for k, v in entry["counts"].items() if v > 0}
        summary = list(found.values())
        _fold_live(instance, summary, pairs)
    instance._derived[_MEMO] = (key, id(instance), summary)
    return summary


def _fold_live(instance: Instance, summary: tallies.Summary,
               pairs: list[tuple[Any, Any]]) -> None:
    """The aggregate states of ``summary`` with this plan's changed rows folded; a cohort
    new in this plan is folded from its rows (all of them are among the changes)."""
    if not pairs:
        return
    definition = instance.definition_model()
    if not aggregates.declares(definition):
        return
    stored = {(e["activity"], e["stageEntry"]) for e in instance.cohortRows or []}
    by_key = {(e["activity"], e["stageEntry"]): e for e in summary}
    grouped: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
    for old, new in pairs:
        grouped.setdefault((new.activity, new.stageEntry), []).append((old, new))
    for key, changes in grouped.items():
        entry = by_key.get(key)
        if entry is None or (key in stored and aggregates.FIELD not in entry):
            continue  # a summary computed whole has no states until the commit folds it
        new = changes[0][1]
        figures = aggregates.specs(definition, new.cohortStage, new.activity, new.action)
        if figures:
            aggregates.apply(entry, figures, changes)


def cohort_object(instance: Instance, activity: str, stage_entry: str,
                  definition: WorkflowDefinition | None = None) -> dict[str, Any]:
    """``$cohort`` of the cohort ``activity`` spawned in the visit ``stage_entry``: the
    counts, the flags and ``aggregates`` (each figure by name; ``{}`` without any)."""
    entry = tallies.entry_of(live_summary(instance), activity, stage_entry)
    found = of_entry(entry, setting(instance, activity, stage_entry))
    found["aggregates"] = _aggregates(instance, entry, activity, stage_entry, definition)
    return found


def _aggregates(instance: Instance, entry: dict[str, Any] | None, activity: str,
                stage_entry: str, definition: WorkflowDefinition | None) -> dict[str, Any]:
    visit = next((s for s in instance.stages if s.key_ == stage_entry), None)
    if visit is None:
        return {}
    definition = definition or instance.definition_model()
    found = definition.activity(visit.name, activity)
    for action in (found.actions or []) if found is not None else []:
        if action.spawn is not None and action.spawn.aggregate:
            return aggregates.values(entry, aggregates.specs(definition, visit.name,
                                                             activity, action.name))
    return {}


def spawning(definition: WorkflowDefinition, stage: str, activity: str) -> bool:
    """Whether ``activity`` of ``stage`` has an action that spawns."""
    found = definition.activity(stage, activity)
    return found is not None and any(a.spawn is not None for a in found.actions or [])


def own_cohort(instance: Instance, definition: WorkflowDefinition, activity: str,
               stage_entry: str) -> dict[str, Any] | None:
    """``$cohort`` at a site of ``activity``: null when the activity spawns nothing."""
    visit = next((s for s in instance.stages if s.key_ == stage_entry), None)
    if visit is None:
        return None
    if not spawning(definition, visit.name, activity) and not any(
            (e["activity"], e["stageEntry"]) == (activity, stage_entry)
            for e in live_summary(instance)):
        return None
    return cohort_object(instance, activity, stage_entry, definition)


def cohorts_object(instance: Instance, definition: WorkflowDefinition) -> dict[str, Any]:
    """``$cohorts``: ``$cohort`` of every activity of the open visit that spawns, by name
    (zero counts until it spawned)."""
    visit = instance.open_entry()
    if visit is None:
        return {}
    stage = definition.stage(visit.name)
    names = [a.name for a in (stage.activities or [])
             if spawning(definition, visit.name, a.name)] if stage is not None else []
    names += [e["activity"] for e in live_summary(instance)
              if e["stageEntry"] == visit.key_ and e["activity"] not in names]
    return {name: cohort_object(instance, name, visit.key_, definition) for name in names}


def largest(instance: Instance) -> tuple[str, str, int] | None:
    """``(activity, stage entry, rows)`` of the parent's largest cohort (any visit), from
    the summary as ``live_summary`` brings it up to the rows in hand."""
    best: tuple[str, str, int] | None = None
    for entry in live_summary(instance):
        size = tallies.total(entry)
        if best is None or size > best[2]:
            best = (entry["activity"], entry["stageEntry"], size)
    return best
