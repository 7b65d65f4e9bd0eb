"""``kinflow cohort PARENT ACTIVITY [--status S] [--pause [--reason R] | --resume]
[--fire ACT/ACTION [--params JSON] | --cancel | --abort | --redrive]``: a cohort's counts,
window, budget and admission and a page of its rows, optionally after a pause or resume
and a bulk verb on the rows ``--status`` selects (all rows without it).

It prints what the ``cohort`` query answers, read on the lake or through a server
(cohort_ops.py, imported when the command runs).
"""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from kinflow.cli.console import out, run, run_sync_parse, target
from kinflow.cli.render import json_text

COUNTS = ("total", "active", "queued", "done", "aborted", "failed", "cancelled")


def _shown(node: dict[str, Any]) -> str:
    if node.get("outputsError"):
        return f"({node['outputsError']})"
    return json_text(node["outputs"]) if node.get("outputs") is not None else ""


def settlement_line(found: dict[str, Any]) -> str:
    """Retries waiting, rows timed out and whether a quorum completed the cohort."""
    return (f"retrying {found.get('retrying', 0):,}  timedOut {found.get('timedOut', 0):,}  "
            f"complete {json_text(bool(found.get('complete')))}")


def clock(node: dict[str, Any]) -> str:
    """A row's time: a queued row's retry time, a live one's deadline."""
    if node.get("retryAt"):
        return f"retry at {node['retryAt']}"
    if node.get("deadlineAt") and node.get("status") == "ACTIVE":
        return f"deadline {node['deadlineAt']}"
    return ""


def control_line(found: dict[str, Any]) -> str:
    """The window, the failure budget and whether the cohort is closed, as the query's
    ``maxActive``, ``budget`` and ``closed`` read (JSON values: null, true, false)."""
    budget = found.get("budget")
    shown = ("  ".join(f"{k} {json_text(v)}" for k, v in budget.items()) if budget
             else "null")
    return (f"maxActive {json_text(found.get('maxActive'))}  budget: {shown}  "
            f"closed {json_text(bool(found.get('closed')))}")


def admission_line(found: dict[str, Any]) -> str:
    """Pause (with its reason), the per-key window, the start rate and the first keys."""
    paused = (f"paused ({found.get('pausedReason')})" if found.get("paused")
              and found.get("pausedReason") else
              "paused" if found.get("paused") else "running")
    line = (f"{paused}  maxActivePerKey {json_text(found.get('maxActivePerKey'))}  "
            f"startRate {json_text(found.get('startRate'))}")
    keys = found.get("keys") or {}
    if keys.get("nodes"):
        shown = ", ".join(f"{n['key']} {n['active']}/{n['queued']}" for n in keys["nodes"])
        more = keys["totalCount"] - len(keys["nodes"])
        line += f"  keys (active/queued): {shown}" + (f" +{more:,} more" if more > 0 else "")
    return line


def print_cohort(found: dict[str, Any], parent_id: str, activity: str) -> None:
    from rich.table import Table

    counts = "  ".join(f"{name} {found[name]:,}" for name in COUNTS)
    out.print(f"cohort {activity} of {parent_id}: {counts}", highlight=False)
    out.print(control_line(found), highlight=False)
    out.print(settlement_line(found), highlight=False)
    out.print(escape(admission_line(found)), highlight=False)
    table = Table(show_edge=False)
    for column in ("row", "status", "outcome", "outputs", "attempt", "when", "child"):
        table.add_column(column)
    page = found["page"]
    for node in page["nodes"]:
        table.add_row(escape(node["rowKey"]), node["status"], node.get("outcome") or "",
                      escape(_shown(node)), str(node.get("attempt") or 1), clock(node),
                      node["childId"])
    out.print(table)
    more = page["totalCount"] - len(page["nodes"])
    if more > 0:
        out.print(f"... {more:,} more matching rows (of {page['totalCount']:,})",
                  highlight=False)


def print_bulk(label: str, result: dict[str, Any]) -> None:
    out.print(f"{label}: matched {result['matched']}  applied {result['applied']}  "
              f"skipped {result['skipped']}  refused {len(result['refusals'])}",
              highlight=False)
    for refusal in result["refusals"]:
        out.print(f"  {refusal['rowKey']} ({refusal['childId']}): {refusal['code']} "
                  f"{refusal['message']}", highlight=False)


def cohort(
    parent: str = typer.Argument(..., help="The parent instance's id."),
    activity: str = typer.Argument(..., help="The spawning activity."),
    status: list[str] = typer.Option([], "--status", metavar="S",
                                     help="Only rows with this status (queued, active, done, "
                                          "aborted, cancelled); repeat for several."),
    fire: str | None = typer.Option(None, "--fire", metavar="ACT/ACTION",
                                    help="Fire this action on each matching live child "
                                         "first, and print what it did."),
    params: str | None = typer.Option(None, "--params", metavar="JSON",
                                      help="The fired action's params, a JSON object."),
    cancel: bool = typer.Option(False, "--cancel",
                                help="Cancel the matching children gracefully first (without "
                                     "--status this closes the cohort), and print what it "
                                     "did."),
    abort: bool = typer.Option(False, "--abort",
                               help="Abort the matching children first (without --status "
                                    "this closes the cohort), and print what it did."),
    redrive: bool = typer.Option(False, "--redrive",
                                 help="Redrive the matching failed, aborted or cancelled "
                                      "rows first, and print what it did."),
    pause: bool = typer.Option(False, "--pause",
                               help="Pause the cohort first: no queued row starts and no "
                                    "retry is admitted; live children run on."),
    resume: bool = typer.Option(False, "--resume",
                                help="Resume a paused cohort first."),
    reason: str | None = typer.Option(None, "--reason", help="Why, with --pause."),
    first: int = typer.Option(50, "--first", help="Rows to print (at most 1000)."),
    url: str | None = typer.Option(None, "--url",
                                   help="Talk to a running server instead of the lake "
                                        "(default KINFLOW_URL)."),
    token: str | None = typer.Option(None, "--token",
                                     help="API token for --url (an operator's for a verb; "
                                          "default KINFLOW_TOKEN)."),
) -> None:
    """A cohort's counts, window, budget and rows (rowKey, status, outcome, outputs, child)."""
    from kinflow.cli.backends import open_backend
    from kinflow.cli.cohort_ops import (
        bulk_on,
        cohort_on,
        parse_pausing,
        parse_statuses,
        parse_verb,
        pausing_on,
    )

    statuses = run_sync_parse(lambda: parse_statuses(status))
    verb = run_sync_parse(lambda: parse_verb(fire, params, cancel, abort, redrive))
    pausing = run_sync_parse(lambda: parse_pausing(pause, resume, reason))
    url, token = target(url, token)

    async def work() -> tuple[dict[str, Any] | None, dict[str, Any]]:
        async with open_backend(url, token) as backend:
            if pausing is not None:
                await pausing_on(backend, pausing, parent, activity, reason)
            bulk = await bulk_on(backend, verb, parent, activity, statuses) if verb else None
            return bulk, await cohort_on(backend, parent, activity, first, statuses)

    bulk, found = run(work)
    if bulk is not None and verb is not None:
        print_bulk(verb.label, bulk)
    print_cohort(found, parent, activity)
