"""Where a parent's registry lives: one row document per child (pure; no I/O).

A cohort parent used to hold every registry row and every ``spawned`` /
``subworkflowResolved`` history entry in its own document: 1.1 KB per child,
11 MB for 10,000 children, and the embedded lake rewrites a document whole
on every write, so each round on a large parent stalled the whole lake
(docs/subworkflows.md, "Where registry rows live"). Now:

* each row is a document of its own in the dataset's ``rows`` side collection
  (``_id`` = the child's id, so a retried spawn cannot register a child twice),
  with ``parent`` and ``seq`` (its place in the registry) for the indexed read
  of a parent's rows in order; the instance keeps ``rowCount``;
* the history entries about one row (``state.ROW_HISTORY``) are stored on that
  row's document, each with ``n``, its place in the instance's whole history;
  the instance document keeps the others (``state.inline_history``), and
  ``merge_history`` rebuilds the one ordered history;
* in memory nothing changes: a loaded instance has every row and its whole
  history, as before. Rows are frozen and shared with the process's cache of
  the parent, so a plan replaces the rows it changes (``replace_row``) and
  ``row_writes`` finds them by identity: a round writes the rows it stamped
  and nothing else.

``assemble`` gives readers the document shape they always had.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kinflow.core.state import Instance, SubworkflowEntry, row_of_entry

ROW_TYPE = "kinflow.subworkflow"
_ROW_KEYS = ("_id", "_type", "_rev", "_createdAt", "_updatedAt", "parent", "seq", "history")


# ---------------------------------------------------------------- documents


def row_document(parent_id: str, seq: int, row: SubworkflowEntry,
                 history: list[dict[str, Any]]) -> dict[str, Any]:
    """The stored document of a new row (its history entries carry ``n``)."""
    return {**row.to_json(), "_id": row.child_id, "_type": ROW_TYPE, "parent": parent_id,
            "seq": seq, "history": history}


def row_from_document(doc: dict[str, Any]) -> SubworkflowEntry:
    """The registry row a stored row document holds."""
    return SubworkflowEntry.model_validate({k: v for k, v in doc.items() if k not in _ROW_KEYS})


def row_update(old: SubworkflowEntry | None, new: SubworkflowEntry,
               history: list[dict[str, Any]]) -> dict[str, Any]:
    """Update operators turning the stored row ``old`` into ``new`` (``history`` appended)."""
    before = old.to_json() if old is not None else {}
    after = new.to_json()
    update: dict[str, Any] = {}
    sets = {k: v for k, v in after.items() if before.get(k) != v}
    unsets = {k: "" for k in before if k not in after}
    if sets:
        update["$set"] = sets
    if unsets:
        update["$unset"] = unsets
    if history:
        update["$push"] = {"history": {"$each": history}}
    return update


# ---------------------------------------------------------------- changes


@dataclass(slots=True)
class RowWrites:
    """What one commit writes beside the instance: new rows, changed rows."""

    inserts: list[dict[str, Any]] = field(default_factory=list)
    updates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (row id, update)

    def __bool__(self) -> bool:
        return bool(self.inserts or self.updates)


def replace_row(instance: Instance, index: int, **changes: Any) -> SubworkflowEntry:
    """Replace row ``index`` of ``instance``'s registry by a copy with ``changes``."""
    new = instance.subworkflows[index].model_copy(update=changes)
    instance.subworkflows[index] = new
    return new


def changed_rows(base: list[SubworkflowEntry], rows: list[SubworkflowEntry]
                 ) -> tuple[list[tuple[SubworkflowEntry, SubworkflowEntry]],
                            list[SubworkflowEntry]]:
    """``(replaced (old, new) pairs, appended rows)`` of ``rows`` against ``base``.

    Rows are frozen, so a row that is not the very object it was is a change.
    """
    replaced = [(old, new) for old, new in zip(base, rows, strict=False) if old is not new]
    return replaced, rows[len(base):]


def row_writes(instance: Instance, base: list[SubworkflowEntry],
               history: list[dict[str, Any]], history_start: int) -> RowWrites:
    """The row documents to insert and update for a commit of ``instance``.

    ``base`` is the registry stored beside it; ``history`` the commit's new
    entries, the first of which takes place ``history_start`` in the whole history.
    """
    bound: dict[str, list[dict[str, Any]]] = {}
    for offset, entry in enumerate(history):
        child = row_of_entry(entry)
        if child is not None:
            bound.setdefault(child, []).append({**entry, "n": history_start + offset})
    replaced, appended = changed_rows(base, instance.subworkflows)
    writes = RowWrites()
    first = len(base)
    for seq, row in enumerate(appended, start=first):
        writes.inserts.append(row_document(instance.id_, seq, row, bound.pop(row.child_id, [])))
    for old, new in replaced:
        writes.updates.append((new.child_id, row_update(old, new, bound.pop(new.child_id, []))))
    for child, entries in bound.items():  # an entry about an unchanged row (rare)
        writes.updates.append((child, {"$push": {"history": {"$each": entries}}}))
    return writes


# ---------------------------------------------------------------- reading


def merge_history(inline: list[dict[str, Any]], bound: list[dict[str, Any]]
                  ) -> list[dict[str, Any]]:
    """The whole history, in order: ``bound`` entries (with ``n``) at their places,
    the ``inline`` ones filling the rest in their order."""
    if not bound:
        return list(inline)
    placed = sorted(bound, key=lambda e: e.get("n", 0))
    merged: list[dict[str, Any]] = []
    rest = iter(inline)
    for entry in placed:
        place = int(entry.get("n", 0))
        while len(merged) < place:
            nxt = next(rest, None)
            if nxt is None:
                break
            merged.append(nxt)
        merged.append({k: v for k, v in entry.items() if k != "n"})
    merged.extend(rest)
    return merged


def assemble(instance_doc: dict[str, Any], row_docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The instance as readers see it: ``subworkflows`` in registry order and the whole
    ``history``, from its document and its row documents."""
    ordered = sorted(row_docs, key=lambda d: d.get("seq", 0))
    bound = [entry for d in ordered for entry in d.get("history") or []]
    doc = dict(instance_doc)
    if has_rows(doc) or not doc.get("subworkflows"):  # else stored before rows moved
        doc["subworkflows"] = [{k: v for k, v in d.items() if k not in _ROW_KEYS}
                               for d in ordered]
    doc["history"] = merge_history(list(doc.get("history") or []), bound)
    return doc


def has_rows(instance_doc: dict[str, Any]) -> bool:
    """Whether an instance document has registry rows stored beside it."""
    return bool(instance_doc.get("rowCount"))
