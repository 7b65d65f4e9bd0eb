"""A parent ``p`` that spawns children ``c``: the definitions the subworkflow tests share."""

from __future__ import annotations

import copy
from typing import Any

from tests.engine.definitions import simple

SETTLED = ("count($subworkflows[activity == 'translate' && current && status == 'active'])"
           " == 0")
WAITING = ("count($subworkflows[activity == 'translate' && current"
           " && status in ['active', 'queued']]) == 0")
"""The gate of a windowed cohort: no row active, and none still queued for the window."""


def child(name: str = "c", *, auto: bool = False, required: bool = False) -> dict[str, Any]:
    """``C``: input field ``item``; ``finish`` completes it (``auto``: it completes at once)."""
    work: dict[str, Any] = {"name": "work", "activities": [
        {"name": "task", "actions": [{"name": "finish", "status": "done"},
                                     {"name": "step", "status": "done"}]}],
        "transitions": [{"name": "to-done", "to": "done"}]}
    if auto:
        work = {"name": "work", "transitions": [{"name": "to-done", "to": "done",
                                                  "when": "true"}]}
    return simple(name, [work, {"name": "done"}], lifecycle="child", fields=[
        {"name": "item", "type": "string", "required": required,
         "initialValue": {"type": "input"}}])


def parent(for_each: str = "$fields.items[].name", *, name: str = "p", on_exit: str | None = None,
           child_name: str = "c", extra_actions: list[dict[str, Any]] | None = None,
           settled: str = SETTLED, caller_fired: bool = False) -> dict[str, Any]:
    """``P``: ``review`` spawns one ``C`` per row of ``items``; ``all-done`` is the gate."""
    spawn: dict[str, Any] = {"forEach": for_each, "definition": {"name": child_name},
                             "with": {"item": "$row"}}
    if on_exit:
        spawn["onExit"] = on_exit
    fan_out: dict[str, Any] = {"name": "fan-out", "spawn": spawn}
    if not caller_fired:
        fan_out["when"] = "true"
    actions = [fan_out, *(extra_actions or []), {"name": "all-done", "when": settled,
                                                 "status": "done"}]
    if caller_fired:
        actions = [fan_out, *(extra_actions or [])]
    return simple(name, [
        {"name": "start", "activities": [{"name": "go", "actions": [
            {"name": "go", "status": "done"}]}],
         "transitions": [{"name": "to-review", "to": "review"}]},
        {"name": "review", "activities": [{"name": "translate", "actions": actions}],
         "transitions": [
             {"name": "to-next", "to": "next"},
             {"name": "to-elsewhere", "to": "elsewhere", "when": "false"}]},
        {"name": "next", "activities": [{"name": "edit", "actions": [
            {"name": "back", "status": "done"}]}],
         "transitions": [{"name": "to-review-again", "to": "review"}]},
        {"name": "elsewhere"},
    ], fields=[{"name": "items", "type": "array", "of": [{"name": "name", "type": "string"}],
                "initialValue": {"type": "input"}, "editable": True}])


def with_item(definition: dict[str, Any], text: str) -> dict[str, Any]:
    out = copy.deepcopy(definition)
    for stage in out["stages"]:
        for activity in stage.get("activities") or []:
            for action in activity["actions"]:
                if "spawn" in action:
                    action["spawn"]["with"] = {"item": text}
    return out


def with_window(definition: dict[str, Any], max_active: Any) -> dict[str, Any]:
    """``definition`` with ``maxActive: max_active`` on every spawn (changed in place)."""
    for stage in definition["stages"]:
        for activity in stage.get("activities") or []:
            for action in activity["actions"]:
                if "spawn" in action:
                    action["spawn"]["maxActive"] = max_active
    return definition


def windowed(max_active: Any, **kwargs: Any) -> dict[str, Any]:
    """``P`` (``parent(**kwargs)``) with a window of ``max_active``, its gate ``WAITING``."""
    return with_window(parent(settled=WAITING, **kwargs), max_active)


def items(*names: str) -> dict[str, Any]:
    """The ``fields`` to start ``p`` with: one record per row key."""
    return {"items": [{"name": n} for n in names]}
