"""Per-cohort counts and where each kind of row lives (pure; no I/O).

A cohort page or a cohort's counts must not read every row of a 10,000-row
cohort (docs/subworkflows.md, "Paged cohorts"). So every commit that writes
rows also keeps, on the parent (``Instance.cohortRows``), one small entry per
cohort (the spawning activity and the stage visit that spawned it):

* ``first``/``last``: the cohort's first and last registry place;
* ``counts``: one number per ``status:outcome`` pair (``done:failed``,
  ``queued:`` ...), so every Cohort count and the total of a status/outcome
  filter are sums over a few numbers; rows the failure budget stopped get a
  pair of their own (``aborted:aborted:budget``, ``cancelled:cancelled:budget``),
  since they count as aborted (or cancelled) but not as failed
  (``outcomes.counts_as_failed``);
* ``chunks``: per pair, the chunks holding such a row, so a page (filtered or
  not) fetches exactly the chunks that can contribute, by id. They are kept as
  sorted runs (``places``): a lone chunk as its number, a run of neighbours as
  ``[first, last]``, since rows of one kind sit together (the queued tail, the
  finished head) and a million-row cohort would otherwise keep 31,250 numbers
  per pair on its parent. An entry written as plain numbers reads the same.

The entry is updated by difference over the chunks a commit rewrites (the
rows it replaced, against the rows stored before), so its cost follows the
commit, not the cohort. Chunk documents also carry their own ``cohorts``
counts (``chunk_summary``) for tools reading a chunk alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kinflow.core.cohort import outcomes, places
from kinflow.core.cohort.registry import CohortCounts, outcome_view, row_state
from kinflow.core.state import SubworkflowEntry

CHUNK = 32  # = chunks.CHUNK (chunks imports this module)
SCHEME = 4
"""``tallies`` of an entry whose pairs also mark rows waiting for a retry (``:retrying``)
and rows a complete cohort stopped (``:complete``). Scheme 2 told the budget's stopped rows
apart and is read and updated as is (no row of its time could wait for a retry or be
stopped by a quorum, and a timed-out row is a pair of its own, ``aborted:timed-out``); an
entry without a scheme counted the budget's rows under ``aborted:aborted`` (or
``cancelled:cancelled``) and is computed again."""
READABLE = frozenset({2, 3, SCHEME})
"""Scheme 4 also keeps ``keys``: per ``concurrencyKey``, ``[live, queued]`` unresolved rows
(left out when none), so ``Cohort.keys`` and a per-key window need no row; an entry of an
older scheme is updated without them (``keys_of`` reads ``None``: unknown)."""
PRIORITIES = "priorities"
"""A prioritised cohort's entry (its first row has a ``priority``) also keeps, per priority
value (``priority_text``), ``[n, runs]``: its ``n`` rows waiting to start (queued,
unresolved) and the chunks holding them as runs, so a sparse parent's fill reads the chunks
of the highest priorities first (core/cohort/priority.py). An entry without it (an older
one, or a cohort without priorities) does not know: its fill reads every row. Past
``MAX_LEVELS`` distinct values the entry stops keeping them (``None``: unknown), so a
priority computed per row (a revenue) cannot grow the parent without bound."""
MAX_LEVELS = 64
BUDGET_MARK = "budget"
QUORUM_MARK = "complete"
"""Rows a complete cohort skipped or stopped (``outcomes.stopped_by_quorum``): aborted only."""
RETRY_MARK = "retrying"
"""Queued rows waiting for an automatic retry (``retryAt`` set: core/cohort/retry.py)."""

Summary = list[dict[str, Any]]


def tally(row: SubworkflowEntry) -> str:
    """The ``status:outcome`` pair a row counts under (as ``registry.row_view`` reads it),
    with ``:budget`` after it for a row the failure budget stopped."""
    outcome = outcome_view(row)["outcome"]
    key = f"{row_state(row)[0]}:{outcome or ''}"
    if outcomes.stopped_by_budget(outcome, row.abortReason):
        key = f"{key}:{BUDGET_MARK}"
    elif outcomes.stopped_by_quorum(outcome, row.abortReason):
        key = f"{key}:{QUORUM_MARK}"
    elif row.queued and row.retryAt is not None and row.resolved is None:
        key = f"{key}:{RETRY_MARK}"
    return key


def marked(key: str, mark: str) -> bool:
    """Whether a tally key carries ``mark`` (``budget``, ``complete``, ``retrying``)."""
    return key.count(":") == 2 and key.rsplit(":", 1)[1] == mark


def split(key: str) -> tuple[str, str | None]:
    """``(status, outcome)`` of a tally key."""
    status, _, rest = key.partition(":")
    outcome = rest.partition(":")[0]
    return status, outcome or None


def stopped(key: str) -> bool:
    """Whether a tally key counts rows the failure budget stopped."""
    return key.count(":") == 2 and key.rsplit(":", 1)[1] == BUDGET_MARK


def current(entry: dict[str, Any]) -> bool:
    """Whether an entry's counts tell budget-stopped rows apart (``SCHEME``); an older
    one without any aborted or cancelled row counts the same either way."""
    return entry.get("tallies") in READABLE or not any(
        split(key) in (("aborted", outcomes.ABORTED), ("cancelled", outcomes.CANCELLED))
        for key in entry.get("counts", {}))


def summarise(rows: Sequence[SubworkflowEntry], offset: int = 0) -> Summary:
    """The cohorts present in ``rows`` (row ``i`` being registry row ``offset + i``), in
    order of first appearance: ``{activity, stageEntry, first, last, counts, chunks}``."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for i, row in enumerate(rows, offset):
        _add(found, row, i)
    return list(found.values())


def chunk_summary(rows: Sequence[SubworkflowEntry], offset: int) -> Summary:
    """What a chunk document says of its cohorts (``summarise`` without ``chunks``)."""
    return [{k: v for k, v in entry.items()
             if k not in ("chunks", "tallies", "keys", PRIORITIES)}
            for entry in summarise(rows, offset)]


def _add(found: dict[tuple[str, str], dict[str, Any]], row: SubworkflowEntry, index: int
         ) -> None:
    key = (row.activity, row.stageEntry)
    entry = found.get(key)
    if entry is None:
        entry = found[key] = {"activity": row.activity, "stageEntry": row.stageEntry,
                              "first": index, "last": index, "counts": {}, "chunks": {},
                              "tallies": SCHEME}
        if row.priority is not None:
            entry[PRIORITIES] = {}
    entry["first"] = min(entry["first"], index)
    entry["last"] = max(entry["last"], index)
    name = tally(row)
    entry["counts"][name] = entry["counts"].get(name, 0) + 1
    places.add(entry["chunks"].setdefault(name, []), index // CHUNK)
    count_key(entry, row, 1)
    levels = entry.get(PRIORITIES)
    if waits(row) and levels is not None:
        level = levels.setdefault(priority_text(row.priority), [0, []])
        level[0] += 1
        places.add(level[1], index // CHUNK)
        if len(levels) > MAX_LEVELS:
            entry[PRIORITIES] = None


def waits(row: SubworkflowEntry) -> bool:
    """Whether a row waits to start (queued, unresolved: a retry's wait included)."""
    return bool(row.queued) and row.resolved is None


def priority_text(priority: float | None) -> str:
    """The summary's key of a priority (``None`` reads 0, as admission orders it)."""
    return repr(float(priority or 0.0) + 0.0)  # (+ 0.0: -0.0 is 0.0)


def count_key(entry: dict[str, Any], row: SubworkflowEntry, sign: int) -> None:
    """Count ``row`` in (``sign`` 1) or out of (-1) its key's ``[live, queued]`` pair, on an
    entry that keeps them (``SCHEME``)."""
    if row.concurrencyKey is None or row.resolved is not None or entry.get("tallies") != SCHEME:
        return
    keys = entry.setdefault("keys", {})
    pair = keys.setdefault(row.concurrencyKey, [0, 0])
    pair[1 if row.queued else 0] += sign
    if pair == [0, 0]:
        del keys[row.concurrencyKey]
    if not keys:
        del entry["keys"]


def keys_of(entry: dict[str, Any] | None) -> dict[str, list[int]] | None:
    """Per key, ``[live, queued]`` rows of the cohort; ``None`` when the entry does not keep
    them (an older scheme: read the rows)."""
    if entry is None or entry.get("tallies") != SCHEME:
        return None
    return {key: list(pair) for key, pair in (entry.get("keys") or {}).items()}


def updated(summary: Summary | None, base: Sequence[SubworkflowEntry],
            rows: Sequence[SubworkflowEntry], chunks: Iterable[int]) -> Summary:
    """The parent's summary after a commit rewrote ``chunks``: ``base`` is the registry
    the stored ``summary`` describes, ``rows`` the registry now. Without a stored
    summary (rows written before summaries existed) or with one of an older tally scheme
    it is computed whole, once."""
    if summary is None or any("chunks" not in e or e.get("tallies") not in READABLE
                              for e in summary):
        return summarise(rows)
    found = {(e["activity"], e["stageEntry"]): _editable(e) for e in summary}
    for chunk in chunks:
        lo, hi = chunk * CHUNK, (chunk + 1) * CHUNK
        _leave(found, chunk, base[lo:hi])
        for index, row in enumerate(rows[lo:hi], lo):  # its new rows come back
            _add(found, row, index)
    return list(found.values())


def _editable(entry: dict[str, Any]) -> dict[str, Any]:
    """A copy of a stored summary entry whose counts, places and levels may be edited."""
    return {
        **entry, "counts": dict(entry["counts"]),
        "chunks": {k: list(v) for k, v in entry["chunks"].items()},
        **({"keys": {k: list(v) for k, v in entry["keys"].items()}} if entry.get("keys") else {}),
        **({PRIORITIES: {k: [v[0], list(v[1])] for k, v in entry[PRIORITIES].items()}
            if entry[PRIORITIES] is not None else None} if PRIORITIES in entry else {})}


def _leave(found: dict[tuple[str, str], dict[str, Any]], chunk: int,
           old: Sequence[SubworkflowEntry]) -> None:
    """Take a rewritten chunk's old rows out of the counts, the places and the levels."""
    left_places: set[tuple[tuple[str, str], str]] = set()
    left_levels: set[tuple[tuple[str, str], str]] = set()
    for row in old:
        key = (row.activity, row.stageEntry)
        entry = found.get(key)
        if entry is None:
            continue
        name = tally(row)
        count_key(entry, row, -1)
        left = entry["counts"].get(name, 0) - 1
        if left > 0:
            entry["counts"][name] = left
        else:
            entry["counts"].pop(name, None)
        left_places.add((key, name))
        if waits(row) and entry.get(PRIORITIES) is not None:
            level = entry[PRIORITIES].get(priority_text(row.priority))
            if level is not None:
                level[0] -= 1
                left_levels.add((key, priority_text(row.priority)))
    for key, name in left_places:
        runs = found[key]["chunks"].get(name) or []
        places.remove(runs, chunk)
        if not runs:
            found[key]["chunks"].pop(name, None)
    for key, name in left_levels:
        kept = found[key][PRIORITIES]
        places.remove(kept[name][1], chunk)
        if kept[name][0] <= 0:
            del kept[name]


# ---------------------------------------------------------------- reading


FINISHED = frozenset({"done", "aborted", "cancelled"})  # a row's status once it has ended


def unfinished(entry: dict[str, Any] | None) -> int:
    """The rows of a cohort's summary entry that have not ended (queued or active)."""
    return sum(int(n) for key, n in ((entry or {}).get("counts") or {}).items()
               if split(key)[0] not in FINISHED)


def total(entry: dict[str, Any] | None) -> int:
    return sum((entry or {}).get("counts", {}).values())


def failed(entry: dict[str, Any] | None) -> int:
    """``Cohort.failed`` and a budget's ``used``: rows whose outcome is failed, aborted or
    timed-out, the rows the budget or a quorum stopped left out
    (``outcomes.counts_as_failed``)."""
    return sum(int(value) for key, value in (entry or {}).get("counts", {}).items()
               if split(key)[1] in outcomes.FAILING and not stopped(key)
               and not marked(key, QUORUM_MARK))


def counts(entry: dict[str, Any] | None) -> CohortCounts:
    """Every count the API shows of a cohort, from its summary entry (no row read);
    equal to ``registry.count`` over the cohort's rows."""
    def n(status: str) -> int:
        return count_where(entry, [status], None)

    found = (entry or {}).get("counts", {})
    return CohortCounts(total=total(entry), active=n("active"), done=n("done"),
                        aborted=n("aborted"), queued=n("queued"), failed=failed(entry),
                        cancelled=n("cancelled"),
                        stopped=sum(int(v) for key, v in found.items() if stopped(key)))


def count_where(entry: dict[str, Any] | None, statuses: Iterable[str] | None,
                outcomes: Iterable[str] | None) -> int:
    """Rows of the cohort whose status is one of ``statuses`` and whose outcome is one
    of ``outcomes`` (``None``: any)."""
    wanted_status = set(statuses) if statuses is not None else None
    wanted_outcome = set(outcomes) if outcomes is not None else None
    n = 0
    for key, value in (entry or {}).get("counts", {}).items():
        status, outcome = split(key)
        if wanted_status is not None and status not in wanted_status:
            continue
        if wanted_outcome is not None and outcome not in wanted_outcome:
            continue
        n += int(value)
    return n


def cohort_of(entry: dict[str, Any]) -> tuple[str, str]:
    """The ``(activity, stage entry)`` a summary entry counts."""
    return str(entry["activity"]), str(entry["stageEntry"])


def entry_of(summary: Summary | None, activity: str, stage_entry: str
             ) -> dict[str, Any] | None:
    """The entry of the cohort ``activity`` spawned in the visit ``stage_entry``."""
    return next((e for e in summary or []
                 if (e.get("activity"), e.get("stageEntry")) == (activity, stage_entry)), None)


def find(summary: Summary | None, activity: str, open_key: str | None
         ) -> dict[str, Any] | None:
    """The cohort a question about ``activity`` means: the one the open stage visit
    spawned, else the last visit's that spawned (as ``schema.cohorts.cohort_rows``)."""
    mine = [e for e in summary or [] if e["activity"] == activity]
    for entry in mine:
        if entry["stageEntry"] == open_key:
            return entry
    return max(mine, key=lambda e: int(e["last"]), default=None)


def candidate_chunks(entry: dict[str, Any], tallies: Iterable[str] | None, start: int
                     ) -> list[int]:
    """The chunks from registry place ``start`` on holding a row of the cohort counted
    under one of ``tallies`` (``None``: any), in order."""
    chosen = entry["chunks"].keys() if tallies is None else tallies
    found: set[int] = set()
    for name in chosen:
        found.update(places.expand(entry["chunks"].get(name) or [], start // CHUNK))
    return sorted(found)
