"""The parent and child workflows the cohort benchmarks drive (one child per ``bench-item``).

The parent's ``fan-out`` spawns a child per item; each child finishes with one
action; the parent's ``all-done`` fires once no child of the current visit is
active. Shared by ``cohort.py`` (the engine called directly) and
``cohort_api.py`` (through ``kinflow serve``), so both measure the same cohort.
"""

from __future__ import annotations

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
