"""A cohort's ``aggregate`` figures, kept as rows finish (pure; no I/O).

``spawn.aggregate`` names figures over the cohort's finished rows (the latest
attempt of each: a row is its latest attempt). They are never computed by
reading the rows again: the parent's per-cohort summary entry
(``Instance.cohortRows``, core/cohort/tallies.py) keeps a small state per
figure under ``aggregates``, and the commit that changes a row folds the row
as it was out and the row as it is in (``fold``). Only a finished row
(``resolved``) counts, so a row re-queued by a redrive or a retry takes its
old attempt out in the commit that re-queues it, and its new attempt comes in
when that finishes.

States (JSON, on the entry):

* ``sum``: ``{"s": total}``; ``count``: ``{"n": rows}``; ``avg``: ``{"s", "n"}``;
* ``min`` / ``max``: ``{"n": numeric rows, "kept": [[value, rows], ...], "h": horizon}``:
  the ``KEPT`` most extreme distinct values with how many rows hold each, and
  the horizon, the most extreme value left out of ``kept`` (every numeric row
  not in ``kept`` lies at or beyond it; ``null`` while ``kept`` holds them all).
  Taking out the current extreme takes the next kept value. Only when re-queues
  take out every kept value while other numeric rows remain is the figure
  unknown: it reads ``null`` until a row finishes at or before the horizon
  (docs/subworkflows.md#cohort-and-aggregates).

Over no rows ``sum`` and ``count`` read 0, ``min``, ``max`` and ``avg`` ``null``;
``sum/min/max/avg`` skip a row whose path is not a number; ``count(cond)``
counts finished rows whose condition, GROQ over the row's ``$subworkflows``
object, is exactly ``true``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from kinflow import groq
from kinflow.core.cohort import tallies
from kinflow.core.cohort.registry import row_view
from kinflow.core.definitions import parse_snapshot
from kinflow.core.state import Instance, SubworkflowEntry
from kinflow.define.cohort_keys import AggregateSpec, aggregate_specs
from kinflow.define.models import WorkflowDefinition, find_action

KEPT = 16
"""Distinct extreme values a ``min`` or ``max`` keeps."""
FIELD = "aggregates"
_MAX_SCANNED = 10_000  # a count condition reads one row: this only bounds a pathological one


@lru_cache(maxsize=256)
def _tree(text: str) -> Any:
    return groq.parse(text)


def specs(definition: WorkflowDefinition, stage: str, activity: str, action: str
          ) -> list[AggregateSpec]:
    """The ``aggregate`` figures of the spawn that made a cohort (none: ``[]``)."""
    found = definition.activity(stage, activity)
    named = find_action(found, action) if found is not None else None
    if named is None or named.spawn is None or not named.spawn.aggregate:
        return []
    return aggregate_specs(named.spawn)


def declares(definition: WorkflowDefinition) -> bool:
    """Whether any spawn of ``definition`` has an ``aggregate``."""
    return any(action.spawn is not None and action.spawn.aggregate
               for stage in definition.stages for activity in stage.activities or []
               for action in activity.actions or [])


# ---------------------------------------------------------------- one figure


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _at(view: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = view
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def contribution(spec: AggregateSpec, view: dict[str, Any]) -> float | int | None:
    """What one finished row brings: a number, or ``None`` (it brings nothing)."""
    if spec.function == "count":
        if spec.condition is None:
            return 1
        try:
            held = groq.evaluate(_tree(spec.condition), root=view,
                                 budget=groq.Budget(max_scanned=_MAX_SCANNED))
        except groq.GroqError:
            return None
        return 1 if held is True else None
    return _number(_at(view, spec.path))


def empty(spec: AggregateSpec) -> dict[str, Any]:
    if spec.function in ("sum", "avg"):
        return {"s": 0, "n": 0}
    if spec.function == "count":
        return {"n": 0}
    return {"n": 0, "kept": [], "h": None}


def fold(spec: AggregateSpec, state: dict[str, Any], value: float | int, sign: int
         ) -> dict[str, Any]:
    """``state`` with one row of ``value`` added (``sign`` 1) or taken out (-1)."""
    out = dict(state)
    out["n"] = out.get("n", 0) + sign
    if spec.function in ("sum", "avg"):
        out["s"] = out.get("s", 0) + sign * value
        if out["n"] == 0:
            out["s"] = 0  # no float residue over no rows
        return out
    if spec.function == "count":
        return out
    low = spec.function == "min"  # keep the smallest values for min, the largest for max
    key = value if low else -value
    kept = [list(pair) for pair in out.get("kept", [])]
    keys = [pair[0] if low else -pair[0] for pair in kept]
    at = bisect.bisect_left(keys, key)
    there = at < len(kept) and keys[at] == key
    horizon = out.get("h")
    if sign > 0:
        if there:
            kept[at][1] += 1
        elif len(kept) < KEPT or at < len(kept):
            kept.insert(at, [value, 1])
            if len(kept) > KEPT:
                horizon = _nearer(kept.pop()[0], horizon, low)
        else:  # beyond every kept value: only the horizon remembers it
            horizon = _nearer(value, horizon, low)
    elif there:
        kept[at][1] -= 1
        if kept[at][1] == 0:
            del kept[at]
    if sum(pair[1] for pair in kept) == out["n"]:  # kept holds every row again
        horizon = None
    out["kept"], out["h"] = kept, horizon
    return out


def _nearer(value: float, horizon: float | None, low: bool) -> float:
    """The horizon once ``value`` is left out of ``kept``: the more extreme of the two."""
    if horizon is None:
        return value
    return min(value, horizon) if low else max(value, horizon)


def _beyond(value: float, horizon: float, low: bool) -> bool:
    """Whether ``value`` lies strictly beyond ``horizon`` (larger for min, smaller for max)."""
    return value > horizon if low else value < horizon


def value(spec: AggregateSpec, state: dict[str, Any] | None) -> Any:
    """The figure ``$cohort.aggregates`` shows for ``state``."""
    state = state or empty(spec)
    n = int(state.get("n", 0))
    if spec.function == "count":
        return n
    if spec.function == "sum":
        return state.get("s", 0)
    if n <= 0:
        return None
    if spec.function == "avg":
        return state.get("s", 0) / n
    kept = state.get("kept") or []
    if not kept:
        return None  # every kept extreme left: unknown until one comes back
    best = kept[0][0]
    horizon = state.get("h")
    if horizon is not None and _beyond(best, horizon, spec.function == "min"):
        return None
    return best


# ---------------------------------------------------------------- over rows


def row_values(specs_: Sequence[AggregateSpec], row: SubworkflowEntry
               ) -> list[float | int | None]:
    """Each figure's contribution of ``row`` (all ``None`` while it is not finished)."""
    if row.resolved is None:
        return [None] * len(specs_)
    view = row_view(row, row.stageEntry)
    return [contribution(spec, view) for spec in specs_]


def apply(entry: dict[str, Any], specs_: Sequence[AggregateSpec],
          changes: Iterable[tuple[SubworkflowEntry | None, SubworkflowEntry | None]]
          ) -> None:
    """Fold ``(row before, row after)`` pairs of ``entry``'s cohort into its states (a
    missing state starts empty)."""
    states = dict(entry.get(FIELD) or {})
    for spec in specs_:
        states.setdefault(spec.name, empty(spec))
    for old, new in changes:
        if old is new:
            continue
        for sign, row in ((-1, old), (1, new)):
            if row is None:
                continue
            for spec, brought in zip(specs_, row_values(specs_, row), strict=True):
                if brought is not None:
                    states[spec.name] = fold(spec, states[spec.name], brought, sign)
    entry[FIELD] = states


def values(entry: dict[str, Any] | None, specs_: Sequence[AggregateSpec]) -> dict[str, Any]:
    """``$cohort.aggregates`` / ``Cohort.aggregates``: each figure by name."""
    states = (entry or {}).get(FIELD) or {}
    return {spec.name: value(spec, states.get(spec.name)) for spec in specs_}


def of_document(parent: dict[str, Any], activity: str, stage_entry: str) -> Any:
    """``Cohort.aggregates``: the figures of a stored parent's cohort from its summary (a
    JSON object), or ``None`` when the spawn declares none."""
    visit = next((s.get("name") for s in parent.get("stages") or []
                  if s.get("_key") == stage_entry), None)
    snapshot = parent.get("definitionSnapshot")
    if not isinstance(visit, str) or not isinstance(snapshot, str):
        return None
    definition = parse_snapshot(snapshot)
    found = definition.activity(visit, activity)
    for action in (found.actions or []) if found is not None else []:
        if action.spawn is not None and action.spawn.aggregate:
            entry = tallies.entry_of(parent.get("cohortRows"), activity, stage_entry)
            return values(entry, specs(definition, visit, activity, action.name))
    return None


def refresh(instance: Instance, definition: WorkflowDefinition,
            base: Sequence[SubworkflowEntry], chunks: Iterable[int], chunk: int) -> None:
    """Bring the states on ``instance.cohortRows`` up to its rows after a commit that
    rewrote ``chunks`` (``base``: the rows stored before): the rows it replaced or
    added are folded; a cohort whose entry has no state yet (a new cohort, a summary
    computed whole) is folded from its rows once."""
    if not instance.cohortRows or not declares(definition):
        return
    rows = instance.subworkflows
    entries = {(e["activity"], e["stageEntry"]): e for e in instance.cohortRows}
    fresh: set[tuple[str, str]] = set()
    figures: dict[tuple[str, str], list[AggregateSpec]] = {}
    for key, entry in entries.items():
        first = rows[int(entry["first"])] if int(entry["first"]) < len(rows) else None
        figures[key] = specs(definition, first.cohortStage, first.activity, first.action) \
            if first is not None else []
        if figures[key] and FIELD not in entry:
            fresh.add(key)
            apply(entry, figures[key], ((None, row) for row in
                                        rows[int(entry["first"]):int(entry["last"]) + 1]
                                        if (row.activity, row.stageEntry) == key))
    pairs: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
    for number in chunks:
        for i in range(number * chunk, min((number + 1) * chunk, len(rows))):
            old = base[i] if i < len(base) else None
            new = rows[i]
            key = (new.activity, new.stageEntry)
            if old is new or key in fresh or not figures.get(key):
                continue
            pairs.setdefault(key, []).append((old, new))
    for key, changes in pairs.items():
        apply(entries[key], figures[key], changes)
