"""Whole-cohort condemnations of a sparse parent, a page of chunks per commit (pure).

An abort of a parent condemns every live row, an ``onExit: "abort"`` (or
``"cancel"``) stage exit every live row of the cohorts the visit spawned. On a
sparse parent (core/cohort/sparse.py) one commit may read only
``Limits.sparse_chunks`` chunks, so instead of walking the rows such a commit
records a **sweep** on the parent (``Instance.sweeps``): what condemns (the
parent's abort, or the exit of one stage visit), why, when, and ``next``, the
first chunk it has not condemned yet. The drain (``engine/sweeps.py``) then
condemns a page at a time (``page``: the next chunks holding an unfinished row
of the swept cohorts, by the summary's runs, each row given exactly what the
dense walk would give it), each page its own commit that moves ``next``, and
drops the sweep after its last page. A swept cohort never starts a queued
row meanwhile (``sparse.swept``), and its queued rows are skipped as the page
reaching them condemns them.

Where the condemned rows are: every parent that is or may load sparse keeps
``Instance.owedChunks``, per kind (``aborts``: a row condemned and not
resolved; ``cancels``: a row owing its child a cancel request), the chunks
holding such a row, as sorted runs (``places``). A commit updates it for the
chunks it rewrites only (``keep_owed``), so the drains read exactly the chunks
owed, a page at a time, and the flags ``owesAborts`` / ``owesCancels`` of a
sparse parent follow it without a walk.
"""

from __future__ import annotations

import heapq
from typing import Any

from kinflow.core import cancellation
from kinflow.core.cohort import outcomes, places, sparse, tallies
from kinflow.core.cohort.chunks import CHUNK, replace_row
from kinflow.core.context import PlanContext
from kinflow.core.history import record
from kinflow.core.state import AbortPending, Instance, ResolvedRow, SubworkflowEntry
from kinflow.define.models import WorkflowDefinition

ABORT = "abort"  # the parent was aborted: every live row, every cohort
EXIT = "exit"  # a stage visit was left: the live rows of its onExit abort/cancel cohorts
CANCEL = "cancel"  # the parent is cancelling: every live row gets its spawn's onCancel
QUORUM = "quorum"  # a cohort completed (completeWhen): its rows not finished are stopped
BUDGET = "budget"  # a cohort exceeded its failure budget: the rest skipped and stopped
BULK = "bulk"  # a closing abortCohort / cancelCohort: every unfinished row of its cohort
PARENT_ABORTED = "parent instance aborted"
ABORTS = "aborts"
CANCELS = "cancels"
DETACHED = cancellation.DETACHED
FINISHED = tallies.FINISHED


# ---------------------------------------------------------------- what condemns a row


def abort_row(instance: Instance, index: int, reason: str, at: str) -> None:
    """Condemn row ``index`` as a parent's abort does (not one a cancellation detached)."""
    row = instance.subworkflows[index]
    if row.resolved is None and row.abortPending is None and not row.detached:
        replace_row(instance, index, abortPending=AbortPending(at=at, reason=reason))


def exit_rules(definition: WorkflowDefinition, stage_name: str) -> dict[tuple[str, str], str]:
    """``(activity, action) -> "abort" | "cancel"``: the onExit rules of a stage's spawns."""
    stage = definition.stage(stage_name)
    activities = (stage.activities or []) if stage is not None else []
    return {
        (activity.name, action.name): action.spawn.onExit
        for activity in activities
        for action in activity.actions or []
        if action.spawn is not None and action.spawn.onExit in ("abort", "cancel")
    }


def exit_row(instance: Instance, ctx: PlanContext, index: int, rules: dict[tuple[str, str], str],
             stage_name: str, visit: str, at: str | None = None) -> None:
    """Give row ``index`` its onExit rule for the exit of ``visit`` (stage ``stage_name``)."""
    row = instance.subworkflows[index]
    rule = rules.get((row.activity, row.action))
    if rule is None or row.stageEntry != visit:
        return
    if row.resolved is not None or row.abortPending is not None:
        return
    said = (f'stage "{stage_name}" exited with the child still live (onExit: "{rule}" '
            f'on action "{row.action}" of activity "{row.activity}")')
    if rule == "cancel":
        cancellation.request_row(instance, ctx, index, said)
        return
    replace_row(instance, index, abortPending=AbortPending(at=at or ctx.now_iso, reason=said))


def quorum_row(instance: Instance, ctx: PlanContext, index: int, policy: str, reason: str
               ) -> str | None:
    """Stop row ``index`` of a complete cohort (core/cohort/quorum.py): a row not started
    is skipped, a live one follows ``policy``; ``"skipped"``, ``"stopped"`` or ``None``."""
    row = instance.subworkflows[index]
    if row.resolved is not None:
        return None
    if row.queued:
        replace_row(instance, index, queued=None, retryAt=None, outcome=outcomes.ABORTED,
                    abortReason=outcomes.COMPLETE_STOPPED, resolved=ResolvedRow(
                        at=ctx.now_iso, aborted=True, detail=outcomes.COMPLETE_STOPPED))
        record(instance, ctx, "subworkflowResolved", activity=row.activity,
               instanceRef=row.ref.to_json(), status="aborted",
               detail=outcomes.COMPLETE_STOPPED)
        return "skipped"
    if row.abortPending is not None or row.cancelPending is not None:
        return None
    if policy == "abort":  # (quorum.ABORT)
        replace_row(instance, index, abortReason=outcomes.COMPLETE_STOPPED,
                    abortPending=AbortPending(at=ctx.now_iso, reason=reason))
        return "stopped"
    if policy == "cancel":  # (quorum.CANCEL; "continue" lets it finish)
        cancellation.request_row(instance, ctx, index, reason)
        replace_row(instance, index, abortReason=outcomes.COMPLETE_STOPPED)
        return "stopped"
    return None


def budget_row(instance: Instance, ctx: PlanContext, index: int, policy: str) -> None:
    """Stop row ``index`` of a cohort over its failure budget (core/cohort/budget.py): a row
    not started is skipped, a live one condemned (``abort-rest``) or asked to cancel
    (``cancel-rest``)."""
    row = instance.subworkflows[index]
    stopped = outcomes.BUDGET_STOPPED
    said = (f'the failure budget of activity "{row.activity}" was exceeded '
            f"(onBudgetExceeded: {policy})")
    if row.resolved is not None:
        return
    if row.queued:
        replace_row(instance, index, queued=None, outcome=outcomes.ABORTED, abortReason=stopped,
                    resolved=ResolvedRow(at=ctx.now_iso, aborted=True, detail=stopped))
        record(instance, ctx, "subworkflowResolved", activity=row.activity,
               instanceRef=row.ref.to_json(), status="aborted", detail=stopped)
    elif policy == "abort-rest" and row.abortPending is None:
        replace_row(instance, index, abortReason=stopped, abortPending=AbortPending(
            at=ctx.now_iso, reason=said))
    elif policy == "cancel-rest" and row.abortPending is None and row.cancelPending is None:
        cancellation.request_row(instance, ctx, index, said)
        replace_row(instance, index, abortReason=stopped)


def bulk_row(instance: Instance, ctx: PlanContext, index: int, op: str, reason: str,
             detail: str) -> bool:
    """``abortCohort`` (``op``) or ``cancelCohort`` on row ``index`` (core/cohort/bulk.py):
    a live row condemned or asked to cancel, a queued one skipped; whether it applied (not a
    finished, condemned or detached row, nor one already asked to cancel by a cancel)."""
    row = instance.subworkflows[index]
    if row.resolved is not None or row.abortPending is not None or row.detached or (
            op != "abortCohort" and row.cancelPending is not None):
        return False
    if op != "abortCohort":
        cancellation.request_row(instance, ctx, index, reason)  # a queued row: CANCELLED
    elif row.queued:
        replace_row(instance, index, queued=None, outcome=outcomes.ABORTED, abortReason=detail,
                    resolved=ResolvedRow(at=ctx.now_iso, aborted=True, detail=detail))
        record(instance, ctx, "subworkflowResolved", activity=row.activity,
               instanceRef=row.ref.to_json(), status="aborted", detail=detail)
    else:
        replace_row(instance, index, abortReason=detail,
                    abortPending=AbortPending(at=ctx.now_iso, reason=reason))
    return True


# ---------------------------------------------------------------- sweeps


def begin(instance: Instance, ctx: PlanContext, kind: str, *, reason: str | None = None,
          stage: str | None = None, visit: str | None = None, activity: str | None = None,
          policy: str | None = None, detail: str | None = None) -> None:
    """Record a sweep instead of walking every row (the drain pages it): over the rows
    registered now (``end``) of the cohorts of ``visit`` (every cohort without one; only
    ``activity``'s when given)."""
    visits = [visit] if visit is not None else sorted(
        {str(e.get("stageEntry")) for e in instance.cohortRows or []})
    entry: dict[str, Any] = {"kind": kind, "at": ctx.now_iso, "next": 0, "visits": visits,
                             "end": len(instance.subworkflows)}
    for name, value in (("reason", reason), ("stage", stage), ("visit", visit),
                        ("activity", activity), ("policy", policy), ("detail", detail)):
        if value is not None:
            entry[name] = value
    instance.sweeps = [*(instance.sweeps or []), entry]


def pages(instance: Instance) -> bool:
    """Whether whole-cohort condemnations of this parent go by sweeps: it is sparse and
    keeps the index of owed chunks its drains page through."""
    return sparse.is_sparse(instance) and instance.owedChunks is not None


def _candidates(instance: Instance, entry: dict[str, Any], at_most: int) -> list[int]:
    """The first ``at_most`` chunks from the sweep's ``next`` on holding an unfinished row
    of the cohorts it condemns (by the summary's runs)."""
    start = int(entry.get("next") or 0)
    end = (int(entry["end"]) + CHUNK - 1) // CHUNK
    lanes = [places.expand(runs, start) for cohort in instance.cohortRows or []
             if cohort.get("stageEntry") in entry["visits"]
             and entry.get("activity") in (None, cohort.get("activity"))
             for name, runs in (cohort.get("chunks") or {}).items()
             if tallies.split(name)[0] not in FINISHED]
    found: list[int] = []
    for chunk in heapq.merge(*lanes):  # read lazily: a million-row cohort is a few runs
        if chunk >= end or len(found) >= at_most:
            break
        if not found or found[-1] != chunk:
            found.append(chunk)
    return found


def page(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext,
         at_most: int) -> list[int]:
    """Condemn the next page (at most ``at_most`` chunks) of the first sweep, as the dense
    walk would; move its ``next`` on, or drop it after its last page. The chunks paged."""
    if not instance.sweeps:
        return []
    entry = dict(instance.sweeps[0])
    chunks = _candidates(instance, entry, at_most + 1)
    more, chunks = len(chunks) > at_most, chunks[:at_most]
    rows = sparse.rows_of(instance)
    rows.need(chunks)
    rules = exit_rules(definition, str(entry.get("stage"))) if entry["kind"] == EXIT else {}
    visits = set(entry["visits"])
    for chunk in chunks:
        for index in range(chunk * CHUNK, min((chunk + 1) * CHUNK, int(entry["end"]))):
            if rows[index].stageEntry not in visits or entry.get("activity") not in (
                    None, rows[index].activity):
                continue
            if entry["kind"] == EXIT:
                exit_row(instance, ctx, index, rules, str(entry["stage"]),
                         str(entry["visit"]), entry.get("at"))
            elif entry["kind"] == CANCEL:
                cancellation.on_cancel_row(instance, definition, ctx, index)
            elif entry["kind"] == QUORUM:
                quorum_row(instance, ctx, index, str(entry["policy"]), str(entry["reason"]))
            elif entry["kind"] == BUDGET:
                budget_row(instance, ctx, index, str(entry["policy"]))
            elif entry["kind"] == BULK:
                bulk_row(instance, ctx, index, str(entry["policy"]), str(entry["reason"]),
                         str(entry["detail"]))
            else:
                abort_row(instance, index, str(entry.get("reason") or PARENT_ABORTED),
                          str(entry["at"]))
    rest = list(instance.sweeps[1:])
    if more:
        entry["next"] = chunks[-1] + 1
        rest.insert(0, entry)
    instance.sweeps = rest or None
    return chunks


# ---------------------------------------------------------------- where owed rows are


def owes_abort(row: SubworkflowEntry) -> bool:
    return row.resolved is None and row.abortPending is not None


def _owed_in(rows: list[SubworkflowEntry]) -> dict[str, bool]:
    return {ABORTS: any(owes_abort(r) for r in rows),
            CANCELS: any(cancellation.owes(r) for r in rows)}


def keep_owed(instance: Instance, base: Any, chunks: list[int], threshold: int) -> None:
    """Keep ``owedChunks`` after a commit rewrote ``chunks`` (``base``: the rows before
    it): by difference on a sparse parent that keeps it, whole on a dense one with
    ``threshold`` rows or more (its next load may be sparse); a small parent keeps none.
    ``detached`` counts the unresolved rows a cancellation detached (its end needs it)."""
    rows = instance.subworkflows
    owed: dict[str, Any]
    if sparse.is_sparse(instance):
        if instance.owedChunks is None:
            return  # (stored before the index existed: its drains walk the rows)
        owed = {kind: list(instance.owedChunks.get(kind) or []) for kind in (ABORTS, CANCELS)}
        owed[DETACHED] = int(instance.owedChunks.get(DETACHED) or 0)
        held = sparse.rows_of(instance).held
        before = base.held if isinstance(base, sparse.SparseRows) else {}
        for chunk in chunks:
            flags = _owed_in(held.get(chunk, []))
            for kind in (ABORTS, CANCELS):
                (places.add if flags[kind] else places.remove)(owed[kind], chunk)
            owed[DETACHED] += (sum(map(cancellation.detached, held.get(chunk, [])))
                               - sum(map(cancellation.detached, before.get(chunk, []))))
    elif len(rows) >= threshold:
        owed = {ABORTS: [], CANCELS: [], DETACHED: sum(map(cancellation.detached, rows))}
        for chunk in range((len(rows) + CHUNK - 1) // CHUNK):
            flags = _owed_in(rows[chunk * CHUNK:(chunk + 1) * CHUNK])
            for kind in (ABORTS, CANCELS):
                if flags[kind]:
                    places.add(owed[kind], chunk)
    else:
        return
    if not owed[DETACHED]:
        del owed[DETACHED]
    instance.owedChunks = owed


def owed_pages(instance: Instance, kind: str, at_most: int) -> list[int]:
    """The first ``at_most`` chunks holding a row owed ``kind`` (``aborts``, ``cancels``)."""
    found: list[int] = []
    for chunk in places.expand(list((instance.owedChunks or {}).get(kind) or [])):
        if len(found) >= at_most:
            break
        found.append(chunk)
    return found


def owes(instance: Instance, kind: str) -> bool:
    """Whether a paging parent owes ``kind`` (an abort sweep still to page owes aborts)."""
    if kind == ABORTS and instance.sweeps:
        return True
    return bool((instance.owedChunks or {}).get(kind))
