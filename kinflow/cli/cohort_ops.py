"""What ``kinflow cohort`` reads and runs, on the lake or against a server.

On the lake directly it reads what the ``cohort`` query reads (the parent's
summary and only the chunks of the page, schema/cohort_page.py) and runs the
verb on the engine; with ``--url`` it sends that query and the verb's
mutation (``fireCohort``, ``cancelCohort``, ``abortCohort``, ``redriveCohort``:
operator role). Both answer the query's shape, so the command prints one way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kinflow.cli.backends import CLI_ACTOR, Backend, LocalBackend, RemoteBackend
from kinflow.core.cohort.registry import Row, count
from kinflow.core.definitions import parse_snapshot
from kinflow.core.errors import CohortNotFound, InstanceNotFound
from kinflow.engine.registry_cache import registry_rows
from kinflow.errors import InvalidInput
from kinflow.schema.budget import cohort_budget
from kinflow.schema.bulk import CohortFilter, cohort_closed
from kinflow.schema.cohort_page import RowsPage, counts_of, indexed, page_of_rows
from kinflow.schema.cohorts import cohort_rows, cohort_window
from kinflow.schema.instance_parts import ChildStatus
from kinflow.schema.scalars import jsonable

QUERY = """query($p: ID!, $a: String!, $first: Int, $w: CohortFilter) {
  cohort(parentId: $p, activity: $a) {
    total active queued done aborted failed cancelled maxActive closed
    budget { count percent used exceeded stopped }
    page(first: $first, where: $w) { totalCount pageInfo { hasNextPage }
      nodes { rowKey status outcome outputs outputsError childId attempt } } } }"""
BULK = """mutation($p: ID!, $a: String!, $w: CohortFilter%s) {
  %s(parentId: $p, activity: $a, where: $w%s) {
    matched applied skipped refusals { childId rowKey code message } } }"""
COUNTS = ("total", "active", "queued", "done", "aborted", "failed", "cancelled")
BUDGET = ("count", "percent", "used", "exceeded", "stopped")


def parse_statuses(statuses: list[str]) -> list[ChildStatus] | None:
    """``--status`` values (any case) as row statuses; ``invalid-input`` otherwise."""
    if not statuses:
        return None
    known = {s.value: s for s in ChildStatus}
    found = []
    for text in statuses:
        status = known.get(text.strip().lower())
        if status is None:
            raise InvalidInput(f"--status {text!r} is not one of {', '.join(known)}",
                               argument="--status", value=text, allowed=sorted(known))
        found.append(status)
    return found


def _node(row: Row) -> dict[str, Any]:
    outputs = jsonable(row.outputs) if row.outputs is not None else None
    return {"rowKey": row.row_key, "status": row.status.upper(), "outcome": row.outcome,
            "outputs": outputs, "outputsError": row.outputs_error,
            "childId": row.child_id, "attempt": row.attempt}


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


async def _local_cohort(backend: LocalBackend, parent_id: str, activity: str, first: int,
                        where: CohortFilter | None) -> dict[str, Any]:
    engine = backend.engine
    parent = await engine.document(parent_id)
    if parent is None:
        raise InstanceNotFound(f"no instance {parent_id!r}", instanceId=parent_id)
    found = await indexed(engine.rows, engine.limits, parent, activity)
    last: Row | None
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
    return {**{name: getattr(counts, name) for name in COUNTS},
            "maxActive": window, "closed": cohort_closed(parent, activity, last),
            "budget": {name: getattr(budget, name) for name in BUDGET} if budget else None,
            "page": {"totalCount": await page.total_count(),
                     "pageInfo": {"hasNextPage": page.has_next},
                     "nodes": [_node(r) for r in page.rows]}}


async def cohort_on(backend: Backend, parent_id: str, activity: str, first: int,
                    statuses: list[ChildStatus] | None) -> dict[str, Any]:
    """The cohort's counts and first page, as the ``cohort`` query answers them."""
    where = CohortFilter(status=statuses) if statuses else None
    if isinstance(backend, RemoteBackend):
        variables = {"p": parent_id, "a": activity, "first": first,
                     "w": {"status": [s.name for s in statuses]} if statuses else None}
        return dict((await backend.call(QUERY, variables))["cohort"])
    assert isinstance(backend, LocalBackend)
    return await _local_cohort(backend, parent_id, activity, first, where)


@dataclass(frozen=True, slots=True)
class BulkVerb:
    """The bulk verb a ``kinflow cohort`` call runs before printing: its mutation's name
    and, for ``--fire``, the child's activity, action and params."""

    op: str  # redriveCohort | fireCohort | cancelCohort | abortCohort
    child_activity: str | None = None
    action: str | None = None
    params: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return {"redriveCohort": "redrive", "fireCohort": "fire", "cancelCohort": "cancel",
                "abortCohort": "abort"}[self.op]


def parse_verb(fire: str | None, params: str | None, cancel: bool, abort: bool,
               redrive: bool) -> BulkVerb | None:
    """The verb the options ask for (at most one); ``invalid-input`` otherwise."""
    chosen = [name for name, on in (("--fire", fire is not None), ("--cancel", cancel),
                                    ("--abort", abort), ("--redrive", redrive)) if on]
    if len(chosen) > 1:
        raise InvalidInput(f"{' and '.join(chosen)} cannot be combined; give one",
                           argument=chosen[1])
    if params is not None and fire is None:
        raise InvalidInput("--params goes with --fire", argument="--params")
    if redrive:
        return BulkVerb("redriveCohort")
    if abort:
        return BulkVerb("abortCohort")
    if cancel:
        return BulkVerb("cancelCohort")
    if fire is None:
        return None
    activity, _, action = fire.partition("/")
    if not activity.strip() or not action.strip():
        raise InvalidInput(f"--fire {fire!r} is not ACTIVITY/ACTION", argument="--fire",
                           value=fire)
    parsed: Any = None
    if params is not None:
        try:
            parsed = json.loads(params)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"--params is not JSON: {exc.msg}", argument="--params") from None
        if not isinstance(parsed, dict):
            raise InvalidInput("--params must be a JSON object", argument="--params")
    return BulkVerb("fireCohort", activity.strip(), action.strip(), parsed)


async def bulk_on(backend: Backend, verb: BulkVerb, parent_id: str, activity: str,
                  statuses: list[ChildStatus] | None) -> dict[str, Any]:
    """The verb's BulkResult (matched, applied, skipped, refusals) on the rows of
    ``statuses`` (every row without them)."""
    if isinstance(backend, RemoteBackend):
        variables: dict[str, Any] = {
            "p": parent_id, "a": activity,
            "w": {"status": [s.name for s in statuses]} if statuses else None}
        extra = ("", "")
        if verb.op == "fireCohort":
            extra = (", $c: String!, $x: String!, $params: JSON",
                     ", childActivity: $c, action: $x, params: $params")
            variables.update(c=verb.child_activity, x=verb.action, params=verb.params)
        mutation = BULK % (extra[0], verb.op, extra[1])
        return dict((await backend.call(mutation, variables))[verb.op])
    assert isinstance(backend, LocalBackend)
    where = CohortFilter(status=statuses).to_core() if statuses else None
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
