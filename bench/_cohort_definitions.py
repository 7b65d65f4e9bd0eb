"""The parent and child workflows the cohort benchmarks drive (one child per ``bench-item``).

The parent's ``fan-out`` spawns a child per item; each child finishes with one
action; the parent's ``all-done`` fires once no child of the current visit is
active. ``windowed_parent(n)`` is the same parent with ``maxActive: n`` on its
spawn (its window). Shared by ``cohort.py`` (the engine called directly) and
``cohort_api.py`` (through ``kinflow serve``), so both measure the same cohort.
"""

from __future__ import annotations

import copy
from typing import Any

CHILD: dict[str, Any] = {
    "name": "bench-child", "title": "Bench child", "lifecycle": "child",
    "initialStage": "work",
    "fields": [{"name": "item", "type": "string", "initialValue": {"type": "input"}}],
    "stages": [
        {"name": "work", "activities": [{"name": "task", "actions": [
            {"name": "finish", "status": "done"}]}],
         "transitions": [{"name": "to-done", "to": "done"}]},
        {"name": "done"},
    ],
}
PARENT: dict[str, Any] = {
    "name": "bench-parent", "title": "Bench parent", "initialStage": "fan",
    "fields": [],
    "stages": [
        {"name": "fan", "activities": [{"name": "translate", "actions": [
            {"name": "fan-out", "when": "true", "spawn": {
                "forEach": "*[_type == 'bench-item']._id",
                "definition": {"name": "bench-child"}, "with": {"item": "$row"}}},
            {"name": "all-done", "status": "done", "when":
                "count($subworkflows[activity == 'translate' && current && "
                "status == 'active']) == 0"},
        ]}], "transitions": [{"name": "to-over", "to": "over"}]},
        {"name": "over"},
    ],
}


def windowed_parent(max_active: int) -> dict[str, Any]:
    """``PARENT`` with a window of ``max_active`` children; its gate also waits for queued
    rows (an explicit condition, not a reliance on the window's fill order)."""
    parent = copy.deepcopy(PARENT)
    actions = parent["stages"][0]["activities"][0]["actions"]
    actions[0]["spawn"]["maxActive"] = max_active
    actions[1]["when"] = ("count($subworkflows[activity == 'translate' && current && "
                          "status in ['active', 'queued']]) == 0")
    return parent
