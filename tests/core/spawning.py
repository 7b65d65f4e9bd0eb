"""A parent that spawns ``c`` children, and plan contexts that know ``c`` (pure tests)."""

from __future__ import annotations

from typing import Any

from kinflow.core.context import PlanContext
from tests.core.support import ctx, definition, deployed


def child(*, finishes: bool = False, spawns: bool = False) -> dict[str, Any]:
    """Child ``c``: waits in ``work`` for ``do.finish``, or finishes at once (no
    activities: the default gate holds), or also spawns ``g`` per lake row."""
    activities: list[dict[str, Any]] = [] if finishes else [
        {"name": "do", "actions": [{"name": "finish", "status": "done"}]}]
    if spawns:
        activities.append({"name": "fan", "actions": [{
            "name": "spawn-g", "when": "true",
            "spawn": {"forEach": "*[_type == 'item'][]._id", "definition": {"name": "g"}}}]})
    work = {"name": "work", "activities": activities,
            "transitions": [{"name": "to-done", "to": "done"}]}
    return definition("c", [work, {"name": "done"}], fields=[
        {"name": "label", "type": "string", "initialValue": {"type": "input"}}])


def parent(rows: str = '["x", "y"]', *, when: str | None = None) -> dict[str, Any]:
    """Parent ``p``: its ``fan`` action spawns one ``c`` per row (caller-fired unless ``when``)."""
    action: dict[str, Any] = {"name": "fan", "spawn": {
        "forEach": rows, "definition": {"name": "c"}, "with": {"label": "$row"}}}
    if when is not None:
        action["when"] = when
    return definition("p", [{"name": "review", "activities": [
        {"name": "translate", "actions": [action]}],
        "transitions": [{"name": "to-done", "to": "done"}]}, {"name": "done"}])


def knowing(*children: dict[str, Any], **kw: Any) -> PlanContext:
    """A plan context that has the child definitions deployed (as latest and as v1)."""
    known = {(c["name"], version): deployed(c) for c in children for version in (None, 1)}
    return ctx(definitions=known, **kw)
