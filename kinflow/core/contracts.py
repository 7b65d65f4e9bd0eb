"""The spawn contract check: every parent-to-child handoff of a deploy batch, judged at once.

A spawn hands its child the values of ``with``, and the child starts only if
those values fill its inputs. Deploy checks what can be known before any row
exists, so a broken handoff is refused when the definition is deployed rather
than on every later start: the child must resolve (in the batch or deployed),
every ``with`` key must name one of the child's input fields, every required
input of the child must be handed a value, and a constant value must fit the
field's kind. Every problem of the batch goes into one ``spawn-contracts-invalid``
whose issues name parent, stage, activity, action, child and field. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kinflow import groq
from kinflow.core.errors import SpawnContractsInvalid
from kinflow.core.fields import checked_value
from kinflow.define.models import FieldEntry, SpawnBlock, WorkflowDefinition
from kinflow.errors import KinflowError
from kinflow.groq import nodes as n

# the dataset a constant reference is resolved in while judging its kind (any name does)
_PROBE_DATASET = "production"

Resolver = Callable[[str, Any], "dict[str, Any] | None"]


@dataclass(frozen=True, slots=True)
class SpawnSite:
    """Where one spawn block sits in its parent definition."""

    stage: str
    activity: str
    action: str
    path: str
    spawn: SpawnBlock


def spawn_sites(model: WorkflowDefinition) -> Iterator[SpawnSite]:
    for si, stage in enumerate(model.stages):
        for ai, activity in enumerate(stage.activities or []):
            for xi, action in enumerate(activity.actions or []):
                if action.spawn is not None:
                    path = f"stages[{si}].activities[{ai}].actions[{xi}].spawn"
                    yield SpawnSite(stage.name, activity.name, action.name, path, action.spawn)


def check_contracts(models: Mapping[str, WorkflowDefinition], resolve: Resolver) -> None:
    """Raise one ``spawn-contracts-invalid`` listing every bad handoff of ``models``.

    ``resolve(name, version)`` gives the child definition a spawn reference
    names (the batch's own first when unpinned), or ``None``.
    """
    issues: list[dict[str, Any]] = []
    for name, model in models.items():
        for site in spawn_sites(model):
            issues.extend(_site_issues(name, site, resolve))
    if issues:
        more = f"; and {len(issues) - 1} more" if len(issues) > 1 else ""
        raise SpawnContractsInvalid(
            f"{len(issues)} bad parent-to-child handoff(s): {issues[0]['detail']}{more}",
            issues=issues,
        )


def _site_issues(parent: str, site: SpawnSite, resolve: Resolver) -> list[dict[str, Any]]:
    ref = site.spawn.definition
    child = resolve(ref.name, ref.version)

    def issue(reason: str, field: str | None, detail: str) -> dict[str, Any]:
        where = f"{parent} -> {ref.name} (stage {site.stage}, action {site.action})"
        return {"reason": reason, "parent": parent, "from": parent, "stage": site.stage,
                "activity": site.activity, "action": site.action, "child": ref.name,
                "field": field, "path": site.path, "detail": f"{where}: {detail}"}

    if child is None:
        pinned = f" v{ref.version}" if isinstance(ref.version, int) else ""
        return [issue("unresolved-definition", None,
                      f"{ref.name!r}{pinned} is neither in this batch nor deployed")]
    fields = {f.get("name"): f for f in child.get("fields") or [] if isinstance(f, dict)}
    handed = site.spawn.with_ or {}
    out: list[dict[str, Any]] = []
    for key, text in handed.items():
        entry = fields.get(key)
        if entry is None:
            out.append(issue("unconsumable-field", key,
                             f"with.{key}: {ref.name!r} declares no workflow field {key!r}"))
        elif (entry.get("initialValue") or {}).get("type") != "input":
            out.append(issue("unconsumable-field", key,
                             f"with.{key}: {ref.name}.{key} is not input-sourced"))
        else:
            problem = _constant_problem(entry, text)
            if problem is not None:
                out.append(issue("wrong-type", key, f"with.{key}: {problem}"))
    for name, entry in fields.items():
        if entry.get("required") and name not in handed:
            out.append(issue("missing-required-input", name,
                             f"with leaves out {ref.name}.{name}, a required input"))
    return out


def _constant_problem(entry: dict[str, Any], text: str) -> str | None:
    """Why a ``with`` value that is a constant cannot fill the field, or ``None``.

    Only constants are judged: anything reading ``$row``, ``$fields`` or the
    lake is known only when the spawn runs, and is checked then.
    """
    try:
        tree = groq.parse(text)
    except groq.GroqError:
        return None  # a syntax error is definition validation's to report
    if tree.params_read or not _constant(tree.root):
        return None
    try:
        value = groq.evaluate(tree)
        shape = FieldEntry.model_validate(entry)
    except (groq.GroqError, ValueError):
        return None
    if value is None:
        if entry.get("required"):
            return f"the constant null leaves the required input {shape.name!r} empty"
        return None
    try:
        checked_value(shape, value, _PROBE_DATASET)
    except KinflowError as exc:
        return f"the constant {text} does not fit a {shape.type} field ({exc.message})"
    return None


def _constant(node: n.Node) -> bool:
    """Whether ``node`` evaluates to the same value wherever it runs."""
    if isinstance(node, n.Value):
        return True
    if isinstance(node, n.Group | n.Neg | n.Pos | n.Not):
        return _constant(node.base)
    if isinstance(node, n.OpCall | n.And | n.Or):
        return _constant(node.left) and _constant(node.right)
    if isinstance(node, n.ArrayNode):
        return all(_constant(e.value) for e in node.elements)
    if isinstance(node, n.ObjectNode):
        return all(isinstance(e, n.ObjAttr) and _constant(e.value) for e in node.entries)
    return False
