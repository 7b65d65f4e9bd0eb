"""``kinflow cohort`` on the lake: what the ``cohort`` query reads (the parent's summary
and only the chunks of the page, schema/cohort_page.py) and the bulk verbs, run with the
CLI's engine. Answers in the query's and the mutations' shapes (cohort_ops.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kinflow.cli.local import CLI_ACTOR, LocalBackend
from kinflow.core.cohort import outcomes, tallies
from kinflow.core.cohort.registry import Row, count
from kinflow.core.definitions import parse_snapshot
from kinflow.core.errors import CohortNotFound, InstanceNotFound
from kinflow.engine.registry_cache import registry_rows
from kinflow.jsonvalues import jsonable
from kinflow.schema.admission import admission_of, key_counts, keys_page
from kinflow.schema.budget import cohort_budget
from kinflow.schema.bulk import CohortFilter, cohort_closed
from kinflow.schema.cohort_page import RowsPage, counts_of, indexed, page_of_rows
from kinflow.schema.cohorts import cohort_rows, cohort_window
from kinflow.schema.instance_parts import ChildStatus

if TYPE_CHECKING:
    from kinflow.cli.backends import Backend
    from kinflow.cli.cohort_ops import BulkVerb

COUNTS = ("total", "active", "queued", "done", "aborted", "failed", "cancelled")
BUDGET = ("count", "percent", "used", "exceeded", "stopped")


def _filter(statuses: list[str] | None) -> CohortFilter | None:
    return CohortFilter(status=[ChildStatus(s) for s in statuses]) if statuses else None


def _node(row: Row) -> dict[str, Any]:
    outputs = jsonable(row.outputs) if row.outputs is not None else None
    return {"rowKey": row.row_key, "status": row.status.upper(), "outcome": row.outcome,
            "outputs": outputs, "outputsError": row.outputs_error,
            "childId": row.child_id, "attempt": row.attempt, "startedAt": row.started_at,
            "deadlineAt": row.deadline_at, "retryAt": row.retry_at,
            "priority": row.priority, "key": row.key}


async def admission_fields(parent: dict[str, Any], activity: str, last: Row | None,
                           rows: Callable[[], Awaitable[list[Row]]]) -> dict[str, Any]:
    """Pause, the per-key window, the rate and the first keys, as the query reads them
    (the keys read the cohort's rows, only when it has a per-key window)."""
    admitted = admission_of(parent, activity, last)
    keys = (keys_page(key_counts(await rows()), 20, None)
            if admitted.max_active_per_key is not None
            else None)
    return {"paused": admitted.paused, "pausedReason": admitted.paused_reason,
            "maxActivePerKey": admitted.max_active_per_key, "startRate": admitted.start_rate,
            "keys": {"totalCount": keys.total_count if keys else 0,
                     "nodes": [{"key": n.key, "active": n.active, "queued": n.queued}
                               for n in (keys.nodes if keys else [])]}}


async def local_pausing(backend: Backend, op: str, parent_id: str, activity: str,
                        reason: str | None) -> dict[str, Any]:
    """``pauseCohort`` / ``resumeCohort`` run on the lake: the cohort's pause after it."""
    assert isinstance(backend, LocalBackend)
    engine = backend.engine
    if op == "pauseCohort":
        parent = await engine.pause_cohort(parent_id, activity, reason=reason, actor=CLI_ACTOR)
    else:
        parent = await engine.resume_cohort(parent_id, activity, actor=CLI_ACTOR)
    rows = cohort_rows(registry_rows(parent.to_json()), activity)
    admitted = admission_of(parent.to_json(), activity, rows[-1] if rows else None)
    return {"paused": admitted.paused, "pausedReason": admitted.paused_reason}


def settlement(parent: dict[str, Any], activity: str, last: Row | None,
               entry: dict[str, Any] | None, rows: list[Row] | None) -> dict[str, Any]:
    """``retrying``, ``timedOut`` and ``complete`` as the ``cohort`` query reads them."""
    if entry is not None:
        retrying = sum(int(n) for key, n in entry.get("counts", {}).items()
                       if tallies.marked(key, tallies.RETRY_MARK))
        timed_out = tallies.count_where(entry, None, [outcomes.TIMED_OUT])
    else:
        retrying = sum(1 for r in rows or [] if r.status == "queued" and r.retry_at)
        timed_out = sum(1 for r in rows or [] if r.outcome == outcomes.TIMED_OUT)
    complete = last is not None and any(
        (s.get("activity"), s.get("stageEntry")) == (activity, last.stage_entry)
        and s.get("completedAt") for s in parent.get("cohorts") or [])
    return {"retrying": retrying, "timedOut": timed_out, "complete": complete}


def check_declared(parent: dict[str, Any], activity: str) -> None:
    """``cohort-not-found`` for an activity the parent's definition does not have (as
    the ``cohort`` query refuses it)."""
    snapshot = parent.get("definitionSnapshot")
    if not isinstance(snapshot, str):
        return
    known = {a.name for stage in parse_snapshot(snapshot).stages
             for a in stage.activities or []}
    if activity not in known:
        raise CohortNotFound(f"{parent.get('definition')} has no activity {activity!r}",
                             parentId=parent.get("_id"), activity=activity,
                             activities=sorted(known))


async def local_cohort(backend: Backend, parent_id: str, activity: str, first: int,
                       statuses: list[str] | None) -> dict[str, Any]:
    """What the ``cohort`` query answers, read on the lake."""
    assert isinstance(backend, LocalBackend)
    where = _filter(statuses)
    engine = backend.engine
    parent = await engine.document(parent_id)
    if parent is None:
        raise InstanceNotFound(f"no instance {parent_id!r}", instanceId=parent_id)
    found = await indexed(engine.rows, engine.limits, parent, activity)
    last: Row | None
    rows: list[Row] | None = None
    if found is not None:
        source, last = found
        counts = counts_of(source.entry)
        window = cohort_window(parent, activity, [last])
        page: RowsPage = await source.page(first, None, where)
    else:  # a parent stored before summaries, or a cohort never spawned (total 0)
        check_declared(parent, activity)
        rows = cohort_rows(registry_rows(await engine.assemble(parent)), activity)
        counts = count(rows)
        last = rows[-1] if rows else None
        window = cohort_window(parent, activity, rows)
        page = await page_of_rows(rows, first, None, where, engine.limits)
    budget = cohort_budget(parent, activity, last, counts)

    async def every_row() -> list[Row]:
        return rows if rows is not None else await source.rows()

    admitted = await admission_fields(parent, activity, last, every_row)
    return {**{name: getattr(counts, name) for name in COUNTS},
            **settlement(parent, activity, last, source.entry if found else None, rows),
            "maxActive": window, "closed": cohort_closed(parent, activity, last), **admitted,
            "budget": {name: getattr(budget, name) for name in BUDGET} if budget else None,
            "page": {"totalCount": await page.total_count(),
                     "pageInfo": {"hasNextPage": page.has_next},
                     "nodes": [_node(r) for r in page.rows]}}


async def local_bulk(backend: Backend, verb: BulkVerb, parent_id: str, activity: str,
                     statuses: list[str] | None) -> dict[str, Any]:
    """The verb's BulkResult (matched, applied, skipped, refusals), run on the lake."""
    assert isinstance(backend, LocalBackend)
    chosen = _filter(statuses)
    where = chosen.to_core() if chosen is not None else None
    engine = backend.engine
    if verb.op == "fireCohort":
        result = await engine.fire_cohort(parent_id, activity, verb.child_activity or "",
                                          verb.action or "", where=where, params=verb.params,
                                          actor=CLI_ACTOR)
    elif verb.op == "abortCohort":
        result = await engine.abort_cohort(parent_id, activity, where=where, actor=CLI_ACTOR)
    elif verb.op == "cancelCohort":
        result = await engine.cancel_cohort(parent_id, activity, where=where, actor=CLI_ACTOR)
    else:
        result = await engine.redrive_cohort(parent_id, activity, where=where,
                                             actor=CLI_ACTOR)
    return {"matched": result.matched, "applied": result.applied, "skipped": result.skipped,
            "refusals": [{"childId": r.child_id, "rowKey": r.row_key, "code": r.code,
                          "message": r.message} for r in result.refusals]}
