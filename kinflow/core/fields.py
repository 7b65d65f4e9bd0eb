"""Resolved fields: materialising declared fields and writing values into them.

This module owns the life of a ``ResolvedField``:
creating entries when a scope materialises (workflow scope at start, stage
and activity scopes at stage entry) from their ``initialValue`` source, and
every later write, which is checked against the entry's kind. Entries are
self-describing (kind, sub-shapes, ``types``) so a write can be validated
without the definition.

References are normalised on the way in: a bare id, a GDR string or
``{id|_id, type|_type}`` becomes the stored ``{id: "lake:<dataset>:<id>",
type}``, rooted at the instance's dataset.
"""

from __future__ import annotations

from typing import Any

from kinflow.core.context import PlanContext
from kinflow.core.errors import FieldValueInvalid
from kinflow.core.state import Instance, ResolvedField
from kinflow.define.models import (
    FieldEntry,
    FieldReadSource,
    InputSource,
    LiteralSource,
    QuerySource,
)
from kinflow.define.values import empty_value, kind_problem
from kinflow.errors import GdrError
from kinflow.gdr import to_ref

SINGLE_REFERENCE = frozenset({"doc.ref", "subject"})


def normalise(kind: str, value: Any, dataset: str) -> Any:
    """Convert reference values to the stored shape; other kinds pass through."""
    if value is None:
        return None
    if kind in SINGLE_REFERENCE:
        return to_ref(value, dataset)
    if kind == "doc.refs" and isinstance(value, list):
        return [to_ref(item, dataset) for item in value]
    return value


def checked_value(field: ResolvedField | FieldEntry, value: Any, dataset: str) -> Any:
    """``value`` normalised for ``field``, or ``FieldValueInvalid`` saying why it does not fit."""
    kind = field.type_ if isinstance(field, ResolvedField) else field.type
    try:
        value = normalise(kind, value, dataset)
    except GdrError as exc:
        raise FieldValueInvalid(
            f"field {field.name!r}: {exc.message}", field=field.name, kind=kind
        ) from exc
    problem = kind_problem(_Shape(field), value)
    if problem:
        raise FieldValueInvalid(f"field {field.name!r}: {problem}", field=field.name, kind=kind)
    if value is None:
        return empty_value(kind)
    return value


class _Shape:
    """Adapter giving a resolved field the attributes ``kind_problem`` reads."""

    def __init__(self, field: ResolvedField | FieldEntry) -> None:
        self.type = field.type_ if isinstance(field, ResolvedField) else field.type
        self.fields = _shapes(field.fields)
        self.of = _shapes(field.of)


def _shapes(items: Any) -> list[Any] | None:
    if not items:
        return None
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            out.append(_DictShape(item))
        else:
            out.append(item)
    return out


class _DictShape:
    def __init__(self, data: dict[str, Any]) -> None:
        self.name = data.get("name")
        self.type = data.get("type")
        self.fields = _shapes(data.get("fields"))
        self.of = _shapes(data.get("of"))


def new_field(entry: FieldEntry, value: Any, ctx: PlanContext, query: bool = False
              ) -> ResolvedField:
    """A self-describing resolved entry for ``entry`` holding ``value``."""
    return ResolvedField.model_validate({
        "_key": ctx.new_key(),
        "_type": entry.type,
        "name": entry.name,
        "value": value,
        "title": entry.title,
        "resolvedAt": ctx.now_iso if query else None,
        "fields": [f.to_json() for f in entry.fields] if entry.fields else None,
        "of": [f.to_json() for f in entry.of] if entry.of else None,
        "types": entry.types,
    })


def read_path(value: Any, path: str | None) -> Any:
    for part in (path or "").split("."):
        if not part:
            continue
        value = value.get(part) if isinstance(value, dict) else None
    return value


def materialise(
    entries: list[FieldEntry],
    ctx: PlanContext,
    *,
    visible: dict[str, Any],
    inputs: dict[str, Any] | None = None,
    query_params: dict[str, Any] | None = None,
) -> list[ResolvedField]:
    """Resolve one scope's declared fields, in order (later sources may read earlier ones).

    ``visible`` maps the names of already-resolved wider-scope fields to their values
    (for ``fieldRead``); ``inputs`` are the caller's or parent's values for
    ``{type: input}`` entries.
    """
    resolved: list[ResolvedField] = []
    seen = dict(visible)
    for entry in entries:
        source = entry.initialValue
        is_query = False
        if isinstance(source, InputSource):
            raw = (inputs or {}).get(entry.name)
        elif isinstance(source, LiteralSource):
            raw = source.value
        elif isinstance(source, FieldReadSource):
            raw = read_path(seen.get(source.field), source.path)
        elif isinstance(source, QuerySource):
            params = {**(query_params or {}), "fields": dict(seen)}
            raw = ctx.lake_query(source.query, params)
            is_query = True
        else:
            raw = None
        value = checked_value(entry, raw, ctx.dataset)
        resolved.append(new_field(entry, value, ctx, query=is_query))
        seen[entry.name] = value
    return resolved


def find_field(
    instance: Instance, scope: str, name: str, activity: str | None = None
) -> ResolvedField | None:
    """The live entry for ``scope``/``name`` (stage/activity scopes: the open visit)."""
    if scope == "workflow":
        pool = instance.fields
    else:
        entry = instance.open_entry()
        if entry is None:
            return None
        if scope == "stage":
            pool = entry.fields
        else:
            found = entry.activity(activity) if activity else None
            pool = found.fields if found is not None else []
    for field in pool:
        if field.name == name:
            return field
    return None


def reference_ids(instance: Instance) -> list[str]:
    """GDR URIs of content documents the instance's fields reference (its watch-set)."""
    pools = [instance.fields]
    entry = instance.open_entry()
    if entry is not None:
        pools.append(entry.fields)
        pools.extend(a.fields for a in entry.activities)
    out: list[str] = []
    for pool in pools:
        for field in pool:
            values = field.value if field.type_ == "doc.refs" else [field.value]
            if field.type_ not in ("doc.ref", "doc.refs", "subject") or not isinstance(
                values, list
            ):
                continue
            for value in values:
                if isinstance(value, dict) and isinstance(value.get("id"), str):
                    if value["id"] not in out:
                        out.append(value["id"])
    return out
