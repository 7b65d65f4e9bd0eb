"""Deploy planning: a batch of authored definitions -> documents to create.

This module owns the deploy pipeline (docs/engine.md#definitions) minus the I/O:
validate every definition (all problems into one ``definition-invalid``),
check duplicate names, order the batch children-first over unpinned spawn
references (refusing cycles), check the spawn contracts against the batch and
what is already deployed (``kinflow.core.contracts``: all bad handoffs into one
``spawn-contracts-invalid``), then version by content hash. It is pure: the
shell loads the deployed heads it asks for and writes the plan's documents
in one transaction. A refused batch produces no plan, so nothing is written.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kinflow.core.contracts import Resolver, check_contracts
from kinflow.core.definitions import DEFINITION_TYPE as DEFINITION_TYPE
from kinflow.core.definitions import definition_id as definition_id
from kinflow.core.errors import DefinitionInvalid, DefinitionTooLarge
from kinflow.define.hashing import content_hash
from kinflow.define.models import SpawnBlock, WorkflowDefinition
from kinflow.define.validate import Checked, Issue, check_definition

MODEL_VERSION = 1

# (name, None) -> the latest deployed document of that name; (name, n) -> version n.
Deployed = Mapping[tuple[str, int | None], dict[str, Any]]


@dataclass(slots=True)
class DeployResult:
    name: str
    version: int
    status: str  # "created" | "unchanged"
    content_hash: str


@dataclass(slots=True)
class DeployPlan:
    results: list[DeployResult] = field(default_factory=list)
    creates: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def validate_batch(batch: list[Any], *, max_bytes: int | None = None) -> list[Checked]:
    """Validate every definition; raise one ``definition-invalid`` listing every issue.

    With ``max_bytes``, a definition whose JSON is larger is refused first
    (``definition-too-large``, every oversized one listed) without being validated:
    validation time grows with size, and an instance pins its whole definition.
    CPU-bound for large batches: the shell calls this in a worker thread.
    """
    if not isinstance(batch, list):
        raise DefinitionInvalid(
            "deploy takes a list of definitions",
            issues=[{"definition": "", "path": "", "message": "expected a list"}],
        )
    if max_bytes is not None:
        _check_sizes(batch, max_bytes)
    checked = [check_definition(item, i) for i, item in enumerate(batch)]
    issues = [issue for c in checked for issue in c.issues]
    seen: set[str] = set()
    for c in checked:
        if c.model is not None and c.name in seen:
            issues.append(Issue(c.name, "name", f"{c.name!r} appears twice in this batch"))
        seen.add(c.name)
    if not issues:
        issues.extend(_cycle_issues([c.model for c in checked if c.model is not None]))
    if issues:
        raise DefinitionInvalid(
            f"{len(issues)} problem(s) in the submitted definitions",
            issues=[i.to_dict() for i in issues],
        )
    for c in checked:  # hashing a large definition takes a while: here, not at plan time
        if c.stored is not None:
            c.digest = content_hash(c.stored)
    return checked


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON (what a client sends, give or take)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, RecursionError):  # circular or absurdly deep: too large to deploy
        return sys.maxsize
    return len(text.encode("utf-8", "surrogatepass"))


def _check_sizes(batch: list[Any], max_bytes: int) -> None:
    oversized = []
    for i, item in enumerate(batch):
        size = json_size(item)
        if size > max_bytes:
            label = item.get("name") if isinstance(item, dict) else None
            oversized.append({"definition": label if isinstance(label, str) else f"#{i}",
                              "index": i, "bytes": size})
    if oversized:
        raise DefinitionTooLarge(
            f"{len(oversized)} definition(s) larger than {max_bytes} bytes",
            limit=max_bytes, definitions=oversized,
        )


def spawn_refs(model: WorkflowDefinition) -> list[tuple[str, SpawnBlock]]:
    """Every spawn block of a definition with its path."""
    out: list[tuple[str, SpawnBlock]] = []
    for si, stage in enumerate(model.stages):
        for ai, activity in enumerate(stage.activities or []):
            for xi, action in enumerate(activity.actions or []):
                if action.spawn is not None:
                    out.append((f"stages[{si}].activities[{ai}].actions[{xi}].spawn", action.spawn))
    return out


def referenced_names(batch: list[Checked]) -> set[str]:
    """Names whose deployed heads the planner needs (batch names and spawn targets)."""
    names = {c.name for c in batch}
    for c in batch:
        if c.model is not None:
            names |= {spawn.definition.name for _, spawn in spawn_refs(c.model)}
    return names


def pinned_refs(batch: list[Checked]) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for c in batch:
        for _, spawn in spawn_refs(c.model) if c.model else []:
            if isinstance(spawn.definition.version, int):
                out.add((spawn.definition.name, spawn.definition.version))
    return out


def plan_deploy(batch: list[Checked], deployed: Deployed, now_iso: str) -> DeployPlan:
    """Order, contract-check and version a validated batch."""
    models = {c.name: c.model for c in batch if c.model is not None}
    # validation already dumped each model: reuse that rather than dump again
    stored_forms = {c.name: c.stored if c.stored is not None else c.model.to_json()
                    for c in batch if c.model is not None}
    digests = {c.name: c.digest for c in batch if c.digest is not None}
    check_contracts(models, _resolver(models, deployed))
    plan = DeployPlan()
    for name in _children_first(models):
        stored = stored_forms[name]
        digest = digests.get(name) or content_hash(stored)
        latest = deployed.get((name, None))
        if latest is not None and latest.get("contentHash") == digest:
            plan.results.append(DeployResult(name, int(latest["version"]), "unchanged", digest))
            continue
        version = int(latest["version"]) + 1 if latest is not None else 1
        plan.results.append(DeployResult(name, version, "created", digest))
        plan.creates.append(
            {
                "_id": definition_id(name, version),
                "_type": DEFINITION_TYPE,
                **stored,
                "version": version,
                "contentHash": digest,
                "modelVersion": MODEL_VERSION,
                "deployedAt": now_iso,
            }
        )
    return plan


def _unpinned_edges(models: Mapping[str, WorkflowDefinition]) -> dict[str, list[str]]:
    edges: dict[str, list[str]] = {}
    for name, model in models.items():
        edges[name] = [
            spawn.definition.name
            for _, spawn in spawn_refs(model)
            if not isinstance(spawn.definition.version, int) and spawn.definition.name in models
        ]
    return edges


def _children_first(models: Mapping[str, WorkflowDefinition]) -> list[str]:
    edges = _unpinned_edges(models)
    order: list[str] = []
    done: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        done.add(name)
        for child in edges.get(name, []):
            visit(child)
        order.append(name)

    for name in models:
        visit(name)
    return order


def _cycle_issues(models: list[WorkflowDefinition]) -> list[Issue]:
    by_name = {m.name: m for m in models}
    edges = _unpinned_edges(by_name)
    issues: list[Issue] = []
    state: dict[str, int] = {}
    reported: set[frozenset[str]] = set()

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for child in edges.get(name, []):
            if state.get(child) == 1:
                cycle = [*trail[trail.index(child):], child] if child in trail else [name, child]
                if frozenset(cycle) not in reported:
                    reported.add(frozenset(cycle))
                    issues.append(Issue(name, "stages", "dependency cycle involving "
                                        + " -> ".join(cycle)))
            elif state.get(child) is None:
                visit(child, [*trail, child])
        state[name] = 2

    for model in models:
        if state.get(model.name) is None:
            visit(model.name, [model.name])
    return issues


def _resolver(models: Mapping[str, WorkflowDefinition], deployed: Deployed) -> Resolver:
    """The child a spawn reference names: the batch's own when unpinned, else deployed."""

    def resolve(ref_name: str, version: Any) -> dict[str, Any] | None:
        if not isinstance(version, int) and ref_name in models:
            return models[ref_name].to_json()
        return deployed.get((ref_name, version if isinstance(version, int) else None))

    return resolve
