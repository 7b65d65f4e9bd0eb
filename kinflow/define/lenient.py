"""Parse a definition that failed strict parsing, patched just enough to check its meaning.

Deploy promises every problem in one ``definition-invalid``. Strict parsing
stops at the shape: without a model there is nothing to check semantics on,
so a missing ``title`` would hide a bad ``initialStage`` until the next round.
Here each structural error is patched in a copy of the stored JSON (an
unknown key is dropped; a missing or ill-typed value becomes a placeholder of
the declared type: ``""``, ``0``, ``[]``, the first literal, a minimal object)
and parsing is retried a few times. The caller then runs the semantic checks
on the patched model and drops issues that touch a patched path (the path
itself, inside it, or an element holding it), since those may be artefacts
of the placeholders. The patched model is never stored.
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Iterable
from typing import Any, Literal, Union

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from kinflow.define.models import WorkflowDefinition

MAX_ROUNDS = 6
Path = tuple[str | int, ...]


def parse_leniently(
    stored: Any, first: ValidationError
) -> tuple[WorkflowDefinition | None, list[Path]]:
    """The model of ``stored`` with its structural errors patched, and the patched paths.

    ``None`` when the patches do not converge (the caller keeps the structural
    issues only).
    """
    if not isinstance(stored, dict):
        return None, []
    data = copy.deepcopy(stored)
    patched: list[Path] = []
    error: ValidationError | None = first
    for _ in range(MAX_ROUNDS):
        assert error is not None
        progress = False
        for err in error.errors():
            path = data_path(data, err["loc"])
            if _patch(data, path, err.get("type", "")):
                progress = True
            patched.append(path)
        if not progress:
            return None, patched
        try:
            return WorkflowDefinition.model_validate(data), patched
        except ValidationError as exc:
            error = exc
    return None, patched


def data_path(data: Any, loc: Iterable[Any]) -> Path:
    """The path in the JSON that a pydantic ``loc`` points at (union tags skipped)."""
    parts = list(loc)
    out: list[str | int] = []
    cur = data
    for i, part in enumerate(parts):
        if isinstance(cur, dict) and isinstance(part, str) and part in cur:
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, dict) and isinstance(part, str) and i == len(parts) - 1:
            out.append(part)  # a key that is missing
    return tuple(out)


def format_path(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class Patched:
    """The patched paths, indexed so that checking one issue costs its path's depth."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self.paths = {format_path(p) for p in paths}
        self.holders = {prefix for p in self.paths for prefix in _prefixes(p)}

    def touches(self, issue_path: str) -> bool:
        """Whether ``issue_path`` is a patched path, lies inside one, or holds one."""
        if issue_path in self.paths or (issue_path and issue_path in self.holders):
            return True
        return any(prefix in self.paths for prefix in _prefixes(issue_path))


def _prefixes(path: str) -> list[str]:
    """Proper, non-empty prefixes of a formatted path: ``a.b[0]`` -> ``a``, ``a.b``."""
    return [path[:i] for i, ch in enumerate(path) if ch in ".[" and i > 0]


# --------------------------------------------------------------------------- patching


def _patch(data: Any, path: Path, kind: str) -> bool:
    """Patch ``data`` at ``path``; False when nothing could be changed."""
    if not path:
        return False
    parent = data
    for part in path[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return False
    last = path[-1]
    if kind == "extra_forbidden":
        if isinstance(parent, dict) and last in parent:
            del parent[last]
            return True
        return False
    value = placeholder(slot_type(data, path), missing=kind == "missing")
    if isinstance(parent, dict) and isinstance(last, str):
        if last in parent and parent[last] == value:
            return False
        parent[last] = value
        return True
    if isinstance(parent, list) and isinstance(last, int) and 0 <= last < len(parent):
        if parent[last] == value:
            return False
        parent[last] = value
        return True
    return False


def slot_type(data: Any, path: Path) -> Any:
    """The declared type of the value at ``path`` (``Any`` when unknown)."""
    tp: Any = WorkflowDefinition
    cur = data
    for part in path:
        tp = _resolve(tp, cur)
        tp = _child_type(tp, part)
        try:
            cur = cur[part]
        except (KeyError, IndexError, TypeError):
            cur = None
    return tp


def _child_type(tp: Any, part: str | int) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if isinstance(part, int) and origin is list and args:
        return args[0]
    if isinstance(part, str) and origin is dict and len(args) == 2:
        return args[1]
    if isinstance(part, str) and isinstance(tp, type) and issubclass(tp, BaseModel):
        for name, info in tp.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
    return Any


def _resolve(tp: Any, value: Any) -> Any:
    """Strip ``Annotated`` and ``Optional``; pick a discriminated union's member by tag."""
    discriminator = None
    while typing.get_origin(tp) is typing.Annotated:
        args = typing.get_args(tp)
        for meta in args[1:]:
            if isinstance(meta, FieldInfo) and isinstance(meta.discriminator, str):
                discriminator = meta.discriminator
        tp = args[0]
    if not _is_union(tp):
        return tp
    members = [m for m in typing.get_args(tp) if m is not type(None)]
    if len(members) == 1:
        return _resolve(members[0], value)
    if discriminator and isinstance(value, dict):
        for member in members:
            info = getattr(member, "model_fields", {}).get(discriminator)
            if info is not None and value.get(discriminator) in typing.get_args(info.annotation):
                return member
    return tp


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def placeholder(tp: Any, *, missing: bool = False) -> Any:
    """A value of type ``tp`` that carries no meaning; ``None`` for an optional slot."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if _is_union(tp):
        members = typing.get_args(tp)
        if type(None) in members and not missing:
            return None
        concrete = [m for m in members if m is not type(None)]
        return placeholder(concrete[0], missing=True) if concrete else None
    origin = typing.get_origin(tp)
    if origin is Literal:
        return typing.get_args(tp)[0]
    if origin is list or tp is list:
        return []
    if origin is dict or tp is dict:
        return {}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return {info.alias or name: placeholder(info.annotation, missing=True)
                for name, info in tp.model_fields.items() if info.is_required()}
    simple: dict[Any, Any] = {str: "", int: 0, float: 0.0, bool: False}
    return simple.get(tp)
