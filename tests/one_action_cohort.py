"""A parent that spawns one one-action child per content document of a type: the cohort the
observability tests and the cohort benchmarks drive.

For a ``prefix`` (``obs``, ``bench``): ``{prefix}-parent``'s ``fan-out`` spawns one
``{prefix}-child`` per ``{prefix}-item`` document (a ``*`` query through the lake, the
document's id handed to the child's ``item``); each child finishes with its one action
(``task.finish``); the parent's ``all-done`` fires once no child of the current visit is
active; with a window (``max_active``), once none is active or still queued. The
benchmarks import it too (``bench/_cohort_definitions.py``), so it imports no kinflow and
no test fixture.
"""

from __future__ import annotations

from typing import Any

from tests.engine.cohort_defs import SETTLED, WAITING


def one_action_child(prefix: str, title: str) -> dict[str, Any]:
    """``{prefix}-child``: its ``item`` field from the spawn, one action that finishes it."""
    return {
        "name": f"{prefix}-child", "title": f"{title} child", "lifecycle": "child",
        "initialStage": "work",
        "fields": [{"name": "item", "type": "string", "initialValue": {"type": "input"}}],
        "stages": [
            {"name": "work", "activities": [{"name": "task", "actions": [
                {"name": "finish", "status": "done"}]}],
             "transitions": [{"name": "to-done", "to": "done"}]},
            {"name": "done"},
        ],
    }


def fan_out_parent(prefix: str, title: str, max_active: int | None = None) -> dict[str, Any]:
    """``{prefix}-parent``: spawns a ``{prefix}-child`` per ``{prefix}-item`` as it starts
    (at most ``max_active`` live at once, when given), and moves on once none of them is
    active (nor queued, with a window: an explicit condition, not a reliance on the
    window's fill order)."""
    spawn: dict[str, Any] = {"forEach": f"*[_type == '{prefix}-item']._id",
                             "definition": {"name": f"{prefix}-child"}, "with": {"item": "$row"}}
    if max_active is not None:
        spawn["maxActive"] = max_active
    return {
        "name": f"{prefix}-parent", "title": f"{title} parent", "initialStage": "fan",
        "fields": [],
        "stages": [
            {"name": "fan", "activities": [{"name": "translate", "actions": [
                {"name": "fan-out", "when": "true", "spawn": spawn},
                {"name": "all-done", "status": "done",
                 "when": SETTLED if max_active is None else WAITING},
            ]}], "transitions": [{"name": "to-over", "to": "over"}]},
            {"name": "over"},
        ],
    }
