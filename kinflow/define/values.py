"""Does a value fit a field's kind?

This module owns the value shapes of field kinds (the kinds kinflow
keeps) and answers one question with a human-readable problem or ``None``.
Deploy uses it for literal initial values; the engine uses it for every field
write (ops, edits, start inputs, effect outputs). ``None`` is an acceptable
value for every singular kind (an empty field); list kinds take ``[]``.

References are checked for the stored shape ``{id: "lake:<dataset>:<id>",
type}``; converting a bare id into that shape is the writer's job, because
only the writer knows which dataset the id belongs to.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Protocol

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ACTOR_KINDS = frozenset({"person", "agent", "system"})


class Shaped(Protocol):
    """What a kind check needs from a field entry or shape."""

    @property
    def type(self) -> str: ...
    @property
    def fields(self) -> Any: ...
    @property
    def of(self) -> Any: ...


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_reference(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and value["id"].startswith("lake:")
        and value["id"].count(":") >= 2
        and isinstance(value.get("type", ""), str)
    )


def _is_datetime(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in value


def _is_actor(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("kind") in _ACTOR_KINDS
        and isinstance(value.get("id"), str)
    )


def _is_assignee(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    if value.get("type") == "user":
        return isinstance(value.get("id"), str)
    return value.get("type") == "role" and isinstance(value.get("role"), str)


def kind_problem(shape: Shaped, value: Any) -> str | None:
    """``None`` if ``value`` fits ``shape``; else why not."""
    kind = shape.type
    if value is None:
        return None
    ok: bool
    if kind in ("string", "text", "url"):
        ok = isinstance(value, str)
    elif kind == "number":
        ok = _is_number(value)
    elif kind == "boolean":
        ok = isinstance(value, bool)
    elif kind == "date":
        ok = isinstance(value, str) and bool(_DATE.match(value))
    elif kind == "datetime":
        ok = _is_datetime(value)
    elif kind in ("doc.ref", "subject"):
        ok = is_reference(value)
    elif kind == "doc.refs":
        ok = isinstance(value, list) and all(is_reference(v) for v in value)
    elif kind == "actor":
        ok = _is_actor(value)
    elif kind in ("assignee", "assignees"):
        ok = isinstance(value, list) and all(_is_assignee(v) for v in value)
    elif kind == "object":
        return _record_problem(shape.fields or [], value, "object")
    elif kind == "array":
        if not isinstance(value, list):
            return "expected an array of records"
        for i, row in enumerate(value):
            problem = _record_problem(shape.of or [], row, "row")
            if problem:
                return f"row {i}: {problem}"
        return None
    else:
        return f"unknown field kind {kind!r}"
    return None if ok else f"expected a {kind} value, got {_describe(value)}"


def _record_problem(shapes: list[Any], value: Any, what: str) -> str | None:
    if not isinstance(value, dict):
        return f"expected an {what} (a JSON object), got {_describe(value)}"
    declared = {s.name: s for s in shapes}
    for key, inner in value.items():
        if key == "_key":
            continue
        if key not in declared:
            return f"{what} key {key!r} is not declared"
        problem = kind_problem(declared[key], inner)
        if problem:
            return f"{key}: {problem}"
    return None


def empty_value(kind: str) -> Any:
    """The value of a field nothing has written yet."""
    return [] if kind in ("doc.refs", "array", "assignee", "assignees") else None


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if _is_number(value):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
