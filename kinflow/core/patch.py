"""Targeted writes: turn (loaded document, planned document) into update operators.

A cohort parent holds thousands of registry rows and history rows; rewriting
it whole on every propagation round would send and store the whole document
each time. This module owns the smallest faithful update instead:

* an unchanged top-level key is left alone; a removed one is ``$unset``;
* an array that only grew (``history``, new registry rows) gets ``$push``
  with ``$each`` of the new elements;
* an array of keyed rows (``_key``) with the same rows in the same order gets
  one ``$set`` per changed row, addressed with an array filter on the row's
  ``_key`` (immutable, so the server's filter re-evaluation cannot skip it);
* anything else is ``$set`` whole.

The shell applies the update fenced on the loaded ``_rev``, so it lands on
exactly the document the plan was made from. Pure; no I/O.
"""

from __future__ import annotations

from typing import Any

SYSTEM = frozenset({"_id", "_rev", "_createdAt", "_updatedAt"})
_ABSENT = object()
MAX_FILTERS = 64  # beyond this many changed rows, one $set of the array is cheaper


def diff(before: dict[str, Any], after: dict[str, Any], *, positional: bool = True
         ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Update operators and array filters that turn ``before`` into ``after``."""
    sets: dict[str, Any] = {}
    unsets: dict[str, str] = {}
    pushes: dict[str, Any] = {}
    filters: list[dict[str, Any]] = []
    for key in sorted((before.keys() | after.keys()) - SYSTEM):
        old, new = before.get(key, _ABSENT), after.get(key, _ABSENT)
        if new is _ABSENT:
            unsets[key] = ""
            continue
        if old == new:
            continue
        if isinstance(old, list) and isinstance(new, list) and old and len(new) >= len(old):
            if new[:len(old)] == old:
                pushes[key] = {"$each": new[len(old):]}
                continue
            changed = _changed_rows(old, new)
            if changed is not None and len(new) == len(old) and (
                    len(filters) + len(changed) <= MAX_FILTERS):
                for index, row in changed:
                    if positional:
                        sets[f"{key}.{index}"] = row
                        continue
                    name = f"r{len(filters)}"
                    sets[f"{key}.$[{name}]"] = row
                    filters.append({f"{name}._key": row["_key"]})
                continue
        sets[key] = new
    update: dict[str, Any] = {}
    if sets:
        update["$set"] = sets
    if unsets:
        update["$unset"] = unsets
    if pushes:
        update["$push"] = pushes
    return update, filters


def _changed_rows(old: list[Any], new: list[Any]) -> list[tuple[int, dict[str, Any]]] | None:
    """The changed rows when both arrays hold the same ``_key``ed rows in order."""
    changed = []
    for index, (a, b) in enumerate(zip(old, new, strict=False)):
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return None
        key = a.get("_key")
        if not isinstance(key, str) or b.get("_key") != key:
            return None
        if a != b:
            changed.append((index, b))
    return changed
