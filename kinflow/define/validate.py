"""Deploy validation: every problem of a definition, found at once.

This module owns the rules a definition must satisfy before it is stored
(the invariants docs/engine.md#definitions lists,
plus GROQ syntax and per-site variable checks). It is pure: it takes the
authored JSON and returns the parsed definition together with a list of
``Issue`` rows; it never raises for a bad definition. The caller
(``kinflow.define.deploy``) turns a non-empty list into one
``definition-invalid`` error, so an author fixes everything in one round.

How it works: expand the shorthand, strict-parse with pydantic (structural
problems become issues with their JSON path), then walk the parsed tree once,
collecting invariant violations and, for every expression, the problems of
its site (syntax, lake scans where not allowed, unbound variables, static
``$fields`` reads outside the site's window). When the shape is wrong, the
walk runs on a leniently patched copy (``lenient``), so structural and
semantic problems are reported together. Stage lookups go through a name
index: validation is linear in the definition's size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from kinflow.define import lenient
from kinflow.define.expand import expand_definition
from kinflow.define.invariants import InvariantChecker, Issue
from kinflow.define.models import WorkflowDefinition

__all__ = ["Checked", "Issue", "check_definition", "format_loc"]


@dataclass(slots=True)
class Checked:
    """The outcome of validating one authored definition."""

    name: str
    stored: dict[str, Any] | None
    model: WorkflowDefinition | None
    issues: list[Issue] = field(default_factory=list)
    digest: str | None = None  # content hash of ``stored``, once the batch is valid


def check_definition(authored: Any, index: int = 0) -> Checked:
    """Expand, parse and check one authored definition."""
    label = authored.get("name") if isinstance(authored, dict) else None
    name = label if isinstance(label, str) and label else f"#{index}"
    if not isinstance(authored, dict):
        return Checked(name, None, None, [Issue(name, "", "a definition must be a JSON object")])
    stored = expand_definition(authored)
    try:
        model = WorkflowDefinition.model_validate(stored)
    except ValidationError as exc:
        issues = [Issue(name, format_loc(err["loc"]), _message(err)) for err in exc.errors()]
        return Checked(name, stored, None, issues + _semantic_issues_despite(stored, exc, name))
    checker = InvariantChecker(model)
    checker.run()
    return Checked(name, model.to_json(), model, checker.issues)


def _semantic_issues_despite(stored: Any, error: ValidationError, name: str) -> list[Issue]:
    """The semantic issues of a definition whose shape is wrong, so none waits a round.

    Checked on a patched copy (``kinflow.define.lenient``); issues touching a
    patched path are left out, as the placeholders may have caused them.
    """
    model, patched = lenient.parse_leniently(stored, error)
    if model is None:
        return []
    checker = InvariantChecker(model, label=name)
    checker.run()
    index = lenient.Patched(patched)
    return [i for i in checker.issues if not index.touches(i.path)]


def format_loc(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _message(error: Any) -> str:
    if error.get("type") == "extra_forbidden":
        return "unknown key"
    if error.get("type") == "missing":
        return "required key is missing"
    return str(error.get("msg", "invalid"))
