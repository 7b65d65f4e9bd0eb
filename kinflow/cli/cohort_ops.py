"""What ``kinflow cohort`` reads and runs, on the lake or against a server.

With ``--url`` it sends the ``cohort`` query and the verb's mutation
(``fireCohort``, ``cancelCohort``, ``abortCohort``, ``redriveCohort``,
``pauseCohort``, ``resumeCohort``: operator role); on the lake it reads and runs
the same through ``cohort_local.py`` (the engine, imported only then). Both
answer the query's shape, so the command prints one way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kinflow.errors import InvalidInput

if TYPE_CHECKING:
    from kinflow.cli.backends import Backend

QUERY = """query($p: ID!, $a: String!, $first: Int, $w: CohortFilter) {
  cohort(parentId: $p, activity: $a) {
    total active queued done aborted failed cancelled maxActive closed
    retrying timedOut complete
    paused pausedReason maxActivePerKey startRate
    keys(first: 20) { totalCount nodes { key active queued } }
    budget { count percent used exceeded stopped }
    page(first: $first, where: $w) { totalCount pageInfo { hasNextPage }
      nodes { rowKey status outcome outputs outputsError childId attempt
        startedAt deadlineAt retryAt priority key } } } }"""
BULK = """mutation($p: ID!, $a: String!, $w: CohortFilter%s) {
  %s(parentId: $p, activity: $a, where: $w%s) {
    matched applied skipped refusals { childId rowKey code message } } }"""
PAUSING = """mutation($p: ID!, $a: String!%s) {
  %s(parentId: $p, activity: $a%s) { paused pausedReason } }"""
STATUSES = ("queued", "active", "done", "aborted", "cancelled")  # the ChildStatus values


def parse_statuses(statuses: list[str]) -> list[str] | None:
    """``--status`` values (any case) as row statuses; ``invalid-input`` otherwise."""
    if not statuses:
        return None
    known = {s: s for s in STATUSES}
    found = []
    for text in statuses:
        status = known.get(text.strip().lower())
        if status is None:
            raise InvalidInput(f"--status {text!r} is not one of {', '.join(known)}",
                               argument="--status", value=text, allowed=sorted(known))
        found.append(status)
    return found


async def cohort_on(backend: Backend, parent_id: str, activity: str, first: int,
                    statuses: list[str] | None) -> dict[str, Any]:
    """The cohort's counts, settings and first page, as the ``cohort`` query answers them."""
    if backend.remote:
        from kinflow.cli.remote import RemoteBackend

        assert isinstance(backend, RemoteBackend)
        variables = {"p": parent_id, "a": activity, "first": first,
                     "w": {"status": [s.upper() for s in statuses]} if statuses else None}
        return dict((await backend.call(QUERY, variables))["cohort"])
    from kinflow.cli.cohort_local import local_cohort

    return await local_cohort(backend, parent_id, activity, first, statuses)


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
                  statuses: list[str] | None) -> dict[str, Any]:
    """The verb's BulkResult (matched, applied, skipped, refusals) on the rows of
    ``statuses`` (every row without them)."""
    if backend.remote:
        from kinflow.cli.remote import RemoteBackend

        assert isinstance(backend, RemoteBackend)
        variables: dict[str, Any] = {
            "p": parent_id, "a": activity,
            "w": {"status": [s.upper() for s in statuses]} if statuses else None}
        extra = ("", "")
        if verb.op == "fireCohort":
            extra = (", $c: String!, $x: String!, $params: JSON",
                     ", childActivity: $c, action: $x, params: $params")
            variables.update(c=verb.child_activity, x=verb.action, params=verb.params)
        mutation = BULK % (extra[0], verb.op, extra[1])
        return dict((await backend.call(mutation, variables))[verb.op])
    from kinflow.cli.cohort_local import local_bulk

    return await local_bulk(backend, verb, parent_id, activity, statuses)


def parse_pausing(pause: bool, resume: bool, reason: str | None) -> str | None:
    """``pauseCohort`` or ``resumeCohort`` as ``--pause``/``--resume`` ask (at most one;
    ``--reason`` goes with ``--pause``); ``invalid-input`` otherwise."""
    if pause and resume:
        raise InvalidInput("--pause and --resume cannot be combined; give one",
                           argument="--resume")
    if reason is not None and not pause:
        raise InvalidInput("--reason goes with --pause", argument="--reason")
    return "pauseCohort" if pause else "resumeCohort" if resume else None


async def pausing_on(backend: Backend, op: str, parent_id: str, activity: str,
                     reason: str | None) -> dict[str, Any]:
    """Run ``pauseCohort`` or ``resumeCohort``; the cohort's ``paused`` and ``pausedReason``."""
    if backend.remote:
        from kinflow.cli.remote import RemoteBackend

        assert isinstance(backend, RemoteBackend)
        extra = ((", $r: String", ", reason: $r") if op == "pauseCohort" else ("", ""))
        variables: dict[str, Any] = {"p": parent_id, "a": activity}
        if op == "pauseCohort":
            variables["r"] = reason
        mutation = PAUSING % (extra[0], op, extra[1])
        return dict((await backend.call(mutation, variables))[op])
    from kinflow.cli.cohort_local import local_pausing

    return await local_pausing(backend, op, parent_id, activity, reason)
