"""A large parent's registry without its rows in memory (pure; no I/O).

From ``Limits.sparse_rows`` registered rows on (10,000 by default, the size
from which ``$subworkflows`` is refused anyway), a parent loads without its
registry: ``Instance.subworkflows`` is a ``SparseRows``, a sequence of
``rowCount`` rows of which only the chunks (``chunks.CHUNK`` rows each) that
this commit asked for are held. Reading or replacing a row of a chunk not
held raises ``NeedsChunks``: the shell (``engine/transact.py``) reads those
chunks into the state and plans again from scratch, as it does for every
other lake read a plan asks for. The hot paths name their chunks before
planning (``wanted``) so that replay is rare; a path that walks every row
(iterating the registry) asks for every chunk, which the shell grants up to
``Limits.sparse_chunks`` chunks and refuses beyond (``registry-too-large``),
so nothing ever loads a million rows silently.

The history entries stored with a held chunk stay with it (``bound``, each
with ``n``, its place in the whole history); the instance's own ``history``
holds only its inline entries and this commit's new ones, and
``Instance.historyCount`` says how long the whole history is.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container, Iterable, Iterator
from typing import Any, overload

from kinflow.core.cohort import places, priority, tallies
from kinflow.core.context import NeedsChunks
from kinflow.core.state import Instance, SubworkflowEntry

CHUNK = 32  # = chunks.CHUNK (chunks imports this module)
KEPT_CHUNKS = 16
"""Chunks a sparse parent kept between commits holds at most (``trimmed``)."""


class SparseRows:
    """``count`` registry rows of which the chunks in ``held`` are in memory."""

    __slots__ = ("bound", "count", "held", "read")

    def __init__(self, count: int, held: dict[int, list[SubworkflowEntry]] | None = None,
                 bound: dict[int, list[dict[str, Any]]] | None = None) -> None:
        self.count = count
        self.read = 0  # chunks read from the lake into this copy (the shell's bound)
        self.held: dict[int, list[SubworkflowEntry]] = held if held is not None else {}
        self.bound: dict[int, list[dict[str, Any]]] = bound if bound is not None else {}

    # ------------------------------------------------------------ the sequence

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def _chunk(self, index: int) -> list[SubworkflowEntry]:
        found = self.held.get(index // CHUNK)
        if found is None:
            raise NeedsChunks({index // CHUNK})
        return found

    @overload
    def __getitem__(self, index: int) -> SubworkflowEntry: ...

    @overload
    def __getitem__(self, index: slice) -> list[SubworkflowEntry]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(self.count)
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            if stop <= start:
                return []
            self.need(range(start // CHUNK, (stop - 1) // CHUNK + 1))
            out: list[SubworkflowEntry] = []
            for chunk in range(start // CHUNK, (stop - 1) // CHUNK + 1):
                lo = chunk * CHUNK
                out.extend(self.held[chunk][max(start, lo) - lo:min(stop, lo + CHUNK) - lo])
            return out
        if index < 0:
            index += self.count
        if not 0 <= index < self.count:
            raise IndexError(index)
        return self._chunk(index)[index % CHUNK]

    def __setitem__(self, index: int, row: SubworkflowEntry) -> None:
        if not 0 <= index < self.count:
            raise IndexError(index)
        self._chunk(index)[index % CHUNK] = row

    def __iter__(self) -> Iterator[SubworkflowEntry]:
        """Every row: a walk of the whole registry asks for every chunk it lacks."""
        self.need(range(self.chunk_count()))
        for chunk in range(self.chunk_count()):
            yield from self.held[chunk]

    def append(self, row: SubworkflowEntry) -> None:
        """Add a row at the end (the last chunk is needed unless the row opens one)."""
        chunk = self.count // CHUNK
        if self.count % CHUNK:
            self._chunk(self.count - 1).append(row)
        else:
            self.held[chunk] = [row]
            self.bound.setdefault(chunk, [])
        self.count += 1

    # ------------------------------------------------------------ chunks

    def chunk_count(self) -> int:
        return (self.count + CHUNK - 1) // CHUNK

    def need(self, chunks: Iterable[int]) -> None:
        """Raise ``NeedsChunks`` for those of ``chunks`` not held."""
        missing = {c for c in chunks if c not in self.held}
        if missing:
            raise NeedsChunks(missing)

    def loaded(self) -> Iterator[tuple[int, SubworkflowEntry]]:
        """``(place, row)`` of every held row, in registry order."""
        for chunk in sorted(self.held):
            yield from enumerate(self.held[chunk], chunk * CHUNK)

    def copy(self) -> SparseRows:
        """A copy whose chunks are new lists of the same (frozen) rows (and which counts
        the chunks read so far: a plan's copy knows what its commit may still read)."""
        copied = SparseRows(self.count, {c: list(rows) for c, rows in self.held.items()},
                            dict(self.bound))
        copied.read = self.read
        return copied

    def add(self, chunk: int, rows: list[SubworkflowEntry], bound: list[dict[str, Any]]
            ) -> None:
        """Hold chunk ``chunk`` as read (its rows and its history entries)."""
        self.held[chunk] = rows
        self.bound[chunk] = bound
        self.read += 1

    def trimmed(self, keep: Iterable[int], at_most: int | None = None) -> None:
        """Hold at most ``at_most`` chunks: the last one, then those of ``keep`` in its
        order; the others are dropped (read again when a commit needs them)."""
        at_most = KEPT_CHUNKS if at_most is None else at_most
        chosen: list[int] = []
        last = self.chunk_count() - 1
        for chunk in [last, *keep]:
            if chunk in self.held and chunk not in chosen and len(chosen) < at_most:
                chosen.append(chunk)
        self.held = {c: self.held[c] for c in sorted(chosen)}
        self.bound = {c: self.bound.get(c, []) for c in chosen}


def is_sparse(instance: Instance) -> bool:
    return isinstance(instance.subworkflows, SparseRows)


def rows_of(instance: Instance) -> SparseRows:
    rows = instance.subworkflows
    assert isinstance(rows, SparseRows)
    return rows


def held_rows(instance: Instance) -> Iterator[tuple[int, SubworkflowEntry]]:
    """``(place, row)`` of the rows in memory: every row of a dense registry, the held
    chunks' of a sparse one."""
    rows = instance.subworkflows
    if isinstance(rows, SparseRows):
        return rows.loaded()
    return enumerate(rows)


def changed_places(base: SparseRows, rows: SparseRows) -> list[int]:
    """Places of ``rows`` that are not ``base``'s very rows: replaced or appended."""
    out: list[int] = []
    for chunk in sorted(rows.held):
        old = base.held.get(chunk, [])
        for offset, row in enumerate(rows.held[chunk]):
            if offset >= len(old) or old[offset] is not row:
                out.append(chunk * CHUNK + offset)
    return out


# ---------------------------------------------------------------- what a commit needs


def queued_chunks(entry: dict[str, Any], at_most: int, skip: Container[int] = ()
                  ) -> list[int]:
    """The first ``at_most`` chunks holding queued rows of a summary entry, in order,
    but those in ``skip`` (read lazily from the runs: a million-row tail is one run)."""
    lanes = [places.expand(runs, 0) for name, runs in (entry.get("chunks") or {}).items()
             if name.startswith("queued:")]
    found: list[int] = []
    for chunk in heapq.merge(*lanes):
        if len(found) >= at_most:
            break
        if chunk not in skip and (not found or found[-1] != chunk):
            found.append(chunk)
    return found


def window_room(instance: Instance, entry: dict[str, Any], cap: int | None) -> int:
    """How many queued rows of a cohort its window could start now (its cap less its live
    rows, by the stored counts); a cohort without a window could start every one."""
    counts = entry.get("counts") or {}
    queued = sum(int(v) for k, v in counts.items() if k.startswith("queued:"))
    if cap is None:
        return queued
    live = sum(int(v) for k, v in counts.items() if k.startswith("active:"))
    return max(0, min(queued, cap - live))


def wanted(instance: Instance, places_seen: Iterable[int], caps: dict[tuple[str, str], int | None],
           bound: int | None = None) -> set[int]:
    """The chunks a commit of a sparse parent reads before planning: the last one (a
    registration batch appends there), those of the rows ``places_seen`` names (a round's
    observed children), and per cohort with rows queued the first chunks holding them,
    enough to fill its window's room (``caps``: each cohort's window); for a prioritised
    cohort, those of its highest priority levels (``priority.chunks_for``), at most half
    the commit's chunk ``bound``."""
    count = instance.rowCount or 0
    chunks = {(count - 1) // CHUNK} if count else set()
    chunks.update(place // CHUNK for place in places_seen if 0 <= place < count)
    for entry in instance.cohortRows or []:  # (a full window may empty in this commit)
        key = (str(entry.get("activity")), str(entry.get("stageEntry")))
        if swept(instance, key):
            continue  # its queued rows never start (core/cohort/sweep.py)
        room = window_room(instance, entry, caps.get(key))
        if priority.levels(entry) is not None:
            at_most = room // CHUNK + 2
            if bound is not None:  # (the rows observed come first)
                reading = sum(1 for c in chunks if c not in rows_of(instance).held)
                at_most = max(0, min(priority.pre_read(bound), bound - reading))
            chunks.update(priority.chunks_for(entry, max(room, 1), at_most, chunks))
            continue
        chunks.update(queued_chunks(entry, room // CHUNK + 2 if room > 0 else 1))
    return chunks


def live_chunks(instance: Instance) -> list[int]:
    """The chunks the summary says hold a row whose child should be live (neither
    finished nor queued), in order: where a missing child can be."""
    found: set[int] = set()
    for entry in instance.cohortRows or []:
        for name, runs in (entry.get("chunks") or {}).items():
            if name.split(":", 1)[0] not in ("done", "aborted", "cancelled", "queued"):
                found.update(places.expand(runs))
    return sorted(found)


def swept(instance: Instance, cohort: tuple[str, str]) -> bool:
    """Whether a sweep (core/cohort/sweep.py) still to page condemns ``cohort`` (activity,
    visit): an abort or a cancellation every cohort then, an exit its visit's, a quorum
    its own cohort."""
    return any(cohort[1] in (s.get("visits") or ()) and s.get("activity") in (None, cohort[0])
               for s in instance.sweeps or [])


def barriers(instance: Instance) -> dict[tuple[str, str], int]:
    """Per cohort started in registry order, the first chunk holding queued rows that is
    not held: a held queued row past it may not start before that chunk's rows."""
    rows = rows_of(instance)
    found: dict[tuple[str, str], int] = {}
    for entry in instance.cohortRows or []:
        if priority.levels(entry) is not None:
            continue  # its rows start in priority order (priority.Frontier)
        first = queued_chunks(entry, 1, skip=rows.held)
        if first:
            found[tallies.cohort_of(entry)] = first[0]
    return found


# ---------------------------------------------------------------- history


def history_start(before: dict[str, Any], start: int, instance: Instance) -> int:
    """The whole-history place of a commit's first new entry: ``start`` (its place in
    the history held) on a dense parent, the stored ``historyCount`` on a sparse one."""
    if is_sparse(instance):
        return int(before.get("historyCount") or start)
    return start


def count_history(instance: Instance, total: int, threshold: int) -> None:
    """Keep ``historyCount`` on a parent that is or may load sparse (``total``: its whole
    history's length after this commit)."""
    if is_sparse(instance) or (instance.rowCount or 0) >= threshold:
        instance.historyCount = total


# ---------------------------------------------------------------- row identity


def identity_rows(instance: Instance, activity: str, visit: str, batch: bool,
                  key_chunks: Callable[[], Iterable[int]] | None = None
                  ) -> Iterator[tuple[int, SubworkflowEntry]]:
    """The rows a spawn must compare its row keys with (adoption, child-id collisions).

    Every row of a dense registry. On a sparse one only rows with one of the spawn's
    keys matter (a row is adopted by its key, and a child id derives from its row's key),
    so the held rows suffice once the chunks holding such a row are held: for a
    registration batch, when the summary counts no live row of another visit of the same
    activity, none can (its keys come after every key its cohort read: rows are keyed by
    ``_id``, read in ``_id`` order); otherwise ``key_chunks`` names them (a lake query
    over the chunks' keys, no row read), and without it every row is read.
    """
    if not is_sparse(instance):
        return enumerate(instance.subworkflows)
    if batch and not _other_live(instance, activity, visit):
        return held_rows(instance)
    if key_chunks is None:
        return enumerate(instance.subworkflows)
    rows = rows_of(instance)
    rows.need(c for c in key_chunks() if 0 <= c < rows.chunk_count())
    return held_rows(instance)


def _other_live(instance: Instance, activity: str, visit: str) -> bool:
    for entry in instance.cohortRows or []:
        if entry.get("activity") != activity or entry.get("stageEntry") == visit:
            continue
        if any(int(n) and not name.startswith(("done:", "aborted:", "cancelled:"))
               for name, n in (entry.get("counts") or {}).items()):
            return True
    return False
