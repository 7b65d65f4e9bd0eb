"""Where a parent's registry lives: in chunk documents of its own (pure; no I/O).

A cohort parent used to hold every registry row and every ``spawned`` /
``subworkflowResolved`` history entry in its own document: 1.1 KB per child,
11 MB for 10,000 children, and the embedded lake rewrites a document whole
on every write, so each round on a large parent stalled the whole lake
(docs/subworkflows.md, "Where registry rows live"). Now:

* the rows live in the dataset's ``rows`` side collection, ``CHUNK`` rows per
  document (``<parent>.<n>`` holds rows ``n*CHUNK`` to ``n*CHUNK+CHUNK-1``),
  indexed by ``(parent, chunk)``; the instance keeps ``rowCount``;
* the history entries about one row (``row_history.ROW_HISTORY``) are stored in that
  row's chunk, each with ``n``, its place in the instance's whole history; the
  instance document keeps the others (``row_history.inline_history``), and
  ``merge_history`` rebuilds the one ordered history;
* a commit rewrites exactly the chunks holding a row it added or changed.

Why chunks and not one document per row: the embedded lake stalls on a
transaction that writes thousands of documents (measured: 10,000 row
documents of ~1 KB in one spawn transaction never commit within 30 s, while
300 documents of 32 KB commit in well under a second), and a spawn, an abort
or a stage exit writes every row of a cohort at once. 32 rows per chunk keep
every such transaction to a few hundred documents and a round's rewrite to a
few KB per stamped row.

In memory nothing changes: a loaded instance has every row and its whole
history, as before. Rows are frozen and shared with the process's cache of
the parent, so a plan replaces the rows it changes (``replace_row``) and
``row_writes`` finds them by identity.

``assemble`` gives readers the document shape they always had.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import compress
from operator import is_not
from typing import Any

from kinflow.core.cohort import sparse, tallies
from kinflow.core.cohort.row_history import history_index, row_of_entry
from kinflow.core.state import Instance, SubworkflowEntry

CHUNK_TYPE = "kinflow.registryChunk"
CHUNK = 32
"""Registry rows per chunk document."""


# ---------------------------------------------------------------- documents


def chunk_id(parent_id: str, chunk: int) -> str:
    return f"{parent_id}.{chunk}"


def chunk_document(parent_id: str, chunk: int, rows: list[SubworkflowEntry],
                   history: list[dict[str, Any]]) -> dict[str, Any]:
    """The stored chunk ``chunk`` of a registry (its history entries carry ``n``)."""
    return {"_id": chunk_id(parent_id, chunk), "_type": CHUNK_TYPE, "parent": parent_id,
            "chunk": chunk, "rows": [row.to_json() for row in rows], "history": history,
            "cohorts": tallies.chunk_summary(rows, chunk * CHUNK)}


def rows_of_chunks(docs: list[dict[str, Any]]
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(rows in registry order, their history entries)`` of a registry's chunks."""
    ordered = sorted(docs, key=lambda d: int(d.get("chunk", 0)))
    return ([row for d in ordered for row in d.get("rows") or []],
            [entry for d in ordered for entry in d.get("history") or []])


# ---------------------------------------------------------------- changes


@dataclass(slots=True)
class RowWrites:
    """The chunk documents one commit writes whole beside the instance."""

    chunks: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.chunks)


REPLACED = "replacedRows"
"""``Instance._derived`` key: ``(id of the instance, {place: the row as first replaced})``,
the rows a plan replaced since its summary (``cohortRows``) was made; the ``$cohort``
counts correct the summary with them (core/cohort/counts.py). ``Commit.finish`` drops it
once the summary follows the rows."""
REPLACES = "rowReplaces"
"""``Instance._derived`` key: how many rows were replaced so far (a memo's version)."""


def replace_row(instance: Instance, index: int, **changes: Any) -> SubworkflowEntry:
    """Replace row ``index`` of ``instance``'s registry by a copy with ``changes``."""
    old = instance.subworkflows[index]
    new = old.model_copy(update=changes)
    instance.subworkflows[index] = new
    kept: tuple[int, dict[int, SubworkflowEntry]] | None = instance._derived.get(REPLACED)
    if kept is None or kept[0] != id(instance):  # a copy's memo is its source's
        kept = instance._derived[REPLACED] = (id(instance), {})
    kept[1].setdefault(index, old)
    instance._derived[REPLACES] = instance._derived.get(REPLACES, 0) + 1
    return new


def changed_places(base: list[SubworkflowEntry], rows: list[SubworkflowEntry]) -> list[int]:
    """Places of the rows in ``rows`` that are not the very rows of ``base`` (rows are
    frozen, so that is every row replaced or appended)."""
    if isinstance(rows, sparse.SparseRows):
        assert isinstance(base, sparse.SparseRows)
        return sparse.changed_places(base, rows)
    changed = list(compress(range(len(base)), map(is_not, base, rows)))  # at C speed
    return changed + list(range(len(base), len(rows)))


def row_writes(instance: Instance, base: list[SubworkflowEntry],
               history: list[dict[str, Any]], history_start: int) -> RowWrites:
    """The chunks to write for a commit of ``instance``.

    ``base`` is the registry stored beside it; ``history`` the commit's new
    entries, the first of which takes place ``history_start`` in the whole history
    (``instance.history``, which ends with them); the touched chunks' entries are
    found through the history's index (``row_history.history_index``).
    """
    rows = instance.subworkflows
    if isinstance(rows, sparse.SparseRows):
        assert isinstance(base, sparse.SparseRows)
        return _sparse_writes(instance.id_, base, rows, history, history_start)
    places = changed_places(base, rows)
    touched = {i // CHUNK for i in places}
    named = {child for child in map(row_of_entry, history) if child is not None}
    named -= {rows[i].child_id for i in places}
    if named:  # an entry about a row this commit did not change (rare)
        touched |= {i // CHUNK for i, row in enumerate(rows) if row.child_id in named}
    if not touched:
        return RowWrites()
    members: dict[str, int] = {}  # the touched rows' GDR uris (and their redriven ones)
    redriven: dict[str, int] = {}
    for chunk in touched:
        for row in rows[chunk * CHUNK:(chunk + 1) * CHUNK]:
            members[row.ref.id] = chunk
            prefix = row.ref.id[:len(row.ref.id) - len(row.child_id)]
            for old in row.previousChildIds or ():
                redriven[prefix + old] = chunk
    members = {**redriven, **members}
    on_rows = history_index(instance).on_rows
    places_of: dict[int, list[int]] = {chunk: [] for chunk in touched}
    for uri, chunk in members.items():
        places_of[chunk].extend(on_rows.get(uri, ()))
    history = instance.history
    bound = {chunk: [{**history[n], "n": n} for n in sorted(places)]
             for chunk, places in places_of.items()}
    return RowWrites([
        chunk_document(instance.id_, chunk, rows[chunk * CHUNK:(chunk + 1) * CHUNK],
                       bound[chunk])
        for chunk in sorted(touched)])


def _sparse_writes(parent_id: str, base: sparse.SparseRows, rows: sparse.SparseRows,
                   history: list[dict[str, Any]], history_start: int) -> RowWrites:
    """``row_writes`` of a sparse parent: a touched chunk keeps the entries it was read
    with (``bound``) and gets this commit's entries about its rows, the first new entry
    being place ``history_start`` of the whole history. The chunks' new ``bound`` lists
    are kept on ``rows`` (the state kept after the commit)."""
    touched = {i // CHUNK for i in sparse.changed_places(base, rows)}
    members: dict[str, int] = {}
    for chunk, held in rows.held.items():
        for row in held:
            members[row.child_id] = chunk
            for old in row.previousChildIds or ():
                members.setdefault(old, chunk)
    fresh: dict[int, list[dict[str, Any]]] = {}
    for offset, entry in enumerate(history):
        child = row_of_entry(entry)
        place = members.get(child) if child is not None else None
        if place is not None:  # (an entry about a row not held is not kept: never seen)
            fresh.setdefault(place, []).append({**entry, "n": history_start + offset})
            touched.add(place)
    if not touched:
        return RowWrites()
    writes = []
    for chunk in sorted(touched):
        bound = [*base.bound.get(chunk, []), *fresh.get(chunk, [])]
        rows.bound[chunk] = bound
        writes.append(chunk_document(parent_id, chunk, rows.held[chunk], bound))
    return RowWrites(writes)


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


def assemble(instance_doc: dict[str, Any], chunk_docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The instance as readers see it: ``subworkflows`` in registry order and the whole
    ``history``, from its document and its registry's chunks."""
    rows, bound = rows_of_chunks(chunk_docs)
    doc = dict(instance_doc)
    if has_rows(doc) or not doc.get("subworkflows"):  # else stored before rows moved
        doc["subworkflows"] = rows
    doc["history"] = merge_history(list(doc.get("history") or []), bound)
    return doc


def has_rows(instance_doc: dict[str, Any]) -> bool:
    """Whether an instance document has registry rows stored beside it."""
    return bool(instance_doc.get("rowCount"))
