"""Terminal output for the CLI: instance trees, results and errors, with rich."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from kinflow.errors import KinflowError

STATUS_STYLE = {
    "ACTIVE": "yellow",
    "COMPLETED": "green",
    "DONE": "green",
    "ABORTED": "red",
    "CANCELLING": "magenta",
    "CANCELLED": "magenta",
    "QUEUED": "dim",
    "queued": "dim",
    "active": "yellow",
    "done": "green",
    "skipped": "dim",
    "failed": "red",
    "succeeded": "green",
    "aborted": "red",
    "cancelled": "magenta",
}


def styled(status: str) -> str:
    style = STATUS_STYLE.get(status, "white")
    return f"[{style}]{status}[/{style}]"


def plural(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


def json_text(value: Any) -> str:
    """A JSON value as JSON (``null``, ``true``, ``{"words":400}``), compact."""
    return json.dumps(value, separators=(",", ":"), default=str, ensure_ascii=False)


def counts_line(rows: list[Mapping[str, Any]]) -> str:
    """``3 children: 1 active, 1 done, 0 aborted``, then any other status the rows have
    (queued rows waiting in a window, cancelled ones), so the counts add up to the total."""
    counts = Counter(str(r["status"]).upper() for r in rows)
    always = ("ACTIVE", "DONE", "ABORTED")
    parts = [f"{counts.get(s, 0)} {s.lower()}" for s in always]
    parts += [f"{n} {s.lower()}" for s, n in sorted(counts.items()) if s not in always]
    return f"{plural(len(rows), 'child', 'children')}: " + ", ".join(parts)


def instance_label(view: Mapping[str, Any]) -> str:
    return (
        f"[bold]{view['id']}[/bold]  {view['definition']} v{view['version']}  "
        f"{styled(view['status'])}  stage [cyan]{view['currentStage']}[/cyan]"
        + _parked(view.get("parked"))
    )


def _parked(parked: Any) -> str:
    """The heartbeat parked it: why, and until when (``kinflow tick`` un-parks it)."""
    if not isinstance(parked, Mapping):
        return ""
    return (f"  [red]parked: {parked.get('code')} until {parked.get('until')} "
            f"({parked.get('failures')} failures; tick to retry)[/red]")


def build_tree(
    view: Mapping[str, Any],
    children: Mapping[str, Mapping[str, Any]],
    tree: Tree | None = None,
    seen: set[str] | None = None,
) -> Tree:
    """A tree of the instance, its activities and cohorts, recursing into children.

    ``children`` maps child id to its view (already loaded, any depth).
    """
    seen = seen if seen is not None else set()
    seen.add(str(view["id"]))
    node = tree.add(instance_label(view)) if tree is not None else Tree(instance_label(view))
    for activity in view.get("activities", []):
        node.add(f"activity {activity['name']}: {styled(activity['status'])}")
    cohorts: dict[str, list[Mapping[str, Any]]] = {}
    for row in view.get("subworkflows", []):
        cohorts.setdefault(str(row["activity"]), []).append(row)
    for activity, rows in cohorts.items():
        cohort = node.add(f"cohort [bold]{activity}[/bold]: {counts_line(rows)}")
        for row in rows:
            child = children.get(str(row["childId"]))
            flags = _row_flags(row, str(view.get("status")))
            label = (
                f"row {row['rowKey']}: {styled(str(row['status']))} "
                f"stage {row.get('stage') or '-'}{_outcome(row)}{flags}"
            )
            if child is not None and str(child["id"]) not in seen:
                sub = cohort.add(label)
                build_tree(child, children, sub, seen)
            else:
                cohort.add(label + f"  [dim]{row['childId']}[/dim]")
    return node


def _outcome(row: Mapping[str, Any]) -> str:
    """A finished row's outcome, and its outputs (or why they are missing)."""
    outcome = row.get("outcome")
    if not outcome:
        return ""
    text = f" {styled(str(outcome))}"
    if row.get("outputsError"):
        text += f" [red](outputs: {row['outputsError']})[/red]"
    elif row.get("outputs") is not None:
        shown = json_text(row["outputs"])
        text += f" [dim]{escape(shown[:80] + ('…' if len(shown) > 80 else ''))}[/dim]"
    return text


def _row_flags(row: Mapping[str, Any], parent_status: str) -> str:
    """Why a row looks the way it does: an abort owed or done (with its reason), an old visit."""
    reason = row.get("abortReason")
    if row.get("condemned"):
        return f" [red](abort owed{': ' + str(reason) if reason else ''})[/red]"
    if str(row.get("status")).upper() == "ABORTED" and reason:
        return f" [red](aborted: {reason})[/red]"
    if not row.get("current", True) and parent_status == "ACTIVE":
        return " [dim](earlier visit)[/dim]"  # the parent has left the stage that spawned it
    return ""


def print_result(console: Console, result: Mapping[str, Any], verb: str) -> None:
    view = result["instance"]
    changed = "changed" if result.get("changed") else "no change"
    console.print(
        f"{verb}: {instance_label(view)}  "
        f"({changed}, {plural(int(result.get('cascaded') or 0), 'stage move', 'stage moves')})"
    )


def print_error(console: Console, error: KinflowError) -> None:
    console.print(f"[red]error[/red] [bold]{error.code}[/bold]: {escape(error.message)}")
    for key, value in error.details.items():
        if key == "issues" and isinstance(value, list):
            for issue in value:
                console.print(f"  - {escape(_issue_line(issue))}")
        elif value is not None:  # an unset detail (e.g. no version asked for) says nothing
            shown = value if isinstance(value, str) else json_text(value)
            console.print(f"  {key}: {escape(shown)}", highlight=False)


def _issue_line(issue: Any) -> str:
    if isinstance(issue, Mapping):
        where = " ".join(str(issue[k]) for k in ("definition", "path") if issue.get(k))
        message = issue.get("message") or issue.get("detail") or issue.get("reason") or issue
        return f"{where}: {message}" if where else str(message)
    return str(issue)
