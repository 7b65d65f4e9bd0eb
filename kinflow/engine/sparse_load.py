"""How the shell holds a sparse parent (the I/O side of ``core/cohort/sparse.py``).

A parent with ``Limits.sparse_rows`` rows or more (and the ``historyCount``
every commit keeps on it from then on) is loaded without its rows; each
commit reads the chunks ``wanted`` names before planning, and the ones a plan
asks for after (``NeedsChunks``), at most ``Limits.sparse_chunks`` in all.
The process keeps such a parent between commits with a few chunks only
(``kept_copy``), and every commit plans on a private copy (``private``), so
chunks read for one plan never grow the kept state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from kinflow.core.cohort import sparse, window
from kinflow.core.context import Limits
from kinflow.core.errors import RegistryTooLarge
from kinflow.core.state import Instance


def loads_sparse(document: dict[str, Any], limits: Limits) -> bool:
    """Whether a stored parent loads without its rows."""
    return (int(document.get("rowCount") or 0) >= limits.sparse_rows
            and isinstance(document.get("historyCount"), int)
            and isinstance(document.get("cohortRows"), list))


def turns_sparse(state: Instance, limits: Limits) -> bool:
    """A dense parent whose next load will be sparse (it crossed the threshold)."""
    return (not sparse.is_sparse(state) and (state.rowCount or 0) >= limits.sparse_rows
            and state.historyCount is not None and state.cohortRows is not None)


def make_sparse(state: Instance) -> None:
    """``state``'s registry as a ``SparseRows`` holding no chunk yet (its ``history`` is
    the document's: the inline entries only)."""
    state.subworkflows = cast(Any, sparse.SparseRows(state.rowCount or 0))


def private(state: Instance) -> Instance:
    """A copy of a sparse parent whose rows a plan may read chunks into (a dense one is
    returned as is: planners never modify the state they are given)."""
    if not sparse.is_sparse(state):
        return state
    copy = state.model_copy()
    rows = sparse.rows_of(state).copy()
    rows.read = 0  # (what a commit reads into it)
    copy.subworkflows = cast(Any, rows)
    copy.history = list(state.history)
    return copy


def kept_copy(state: Instance) -> Instance:
    """What the process keeps of a sparse parent: its last chunk, its first two chunks with
    queued rows in start order (the highest priority first, then registry order: the
    window's next starts), then the newest others it held, at most ``sparse.KEPT_CHUNKS``."""
    copy = private(state)
    copy._derived = {}  # a memo made from every row (a priority order) would keep them all
    rows = sparse.rows_of(copy)
    first = {c: min(-(r.priority or 0.0) for r in held if r.queued)
             for c, held in rows.held.items() if any(r.queued for r in held)}
    queued = sorted(first, key=lambda c: (first[c], c))
    rows.trimmed([*queued[:2], *sorted(rows.held, reverse=True)])  # the window's next starts
    return copy


def wanted(state: Instance, seen: Iterable[int | None], limits: Limits) -> set[int]:
    """The chunks a commit of ``state`` reads before planning (``sparse.wanted``)."""
    caps = window.caps(state, state.definition_model())
    return sparse.wanted(state, [p for p in seen if p is not None], caps, limits.sparse_chunks)


def check_bound(state: Instance, chunks: Iterable[int], limits: Limits) -> None:
    """Refuse a commit that would read more than ``limits.sparse_chunks`` chunks (those the
    process kept from the last commit are not read again)."""
    rows = sparse.rows_of(state)
    total = rows.read + len(set(chunks) - set(rows.held))
    if total > limits.sparse_chunks:
        raise RegistryTooLarge(
            f"instance {state.id_!r} has {rows.count} registry rows; this commit would read "
            f"{total} chunks of them (at most {limits.sparse_chunks})",
            instanceId=state.id_, chunks=total, limit=limits.sparse_chunks)
