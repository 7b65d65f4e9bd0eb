"""Spawning a cohort: one child workflow per ``forEach`` row (docs/subworkflows.md#spawning).

This module owns what a spawn means, as data; it plans children but never
runs one (that is ``commit.settle_child``), so it imports neither the
cascade nor the commit planner:

1. refuse past the depth limit (``spawn-depth-exceeded``);
2. resolve the child definition *before* reading rows
   (``spawn-definition-unresolved``);
3. discover rows: ``forEach`` with ``*`` reads the lake (through the
   ``NeedsLakeQuery`` handshake), otherwise it is evaluated in memory over
   workflow-scope variables; array = rows, null = none, else one row;
   more than ``limits.fan_out`` rows is ``fan-out-limit``;
4. key the rows (``row_key``; ``spawn-row-identity`` on a missing or
   duplicate identity);
5. adopt live rows of the same (activity, action, definition) whose key is
   rediscovered into the open visit;
6. for every other key, a ``ChildSeed``: the child's id, definition,
   projected ``with`` and ``context`` values and ancestors (``plan_spawn``).

The spawner (``actions.Spawner``) turns each seed into a settled child and
``register`` adds its row, carrying what ``$subworkflows`` reads
(``observed``, and ``resolved`` when the child finished at once).

Child ids are deterministic (``child_id``): a hash of (parent id, stage entry
key, activity, action, row key), so a retried or repaired spawn can never
create a second child for a row. Their shape is the engine's alone
(``owned.derived_child``: a caller may not start an instance with such an id).
The child documents go on the mutation (``Mutation.creates``); the shell writes them
in the parent's transaction."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from kinflow import groq
from kinflow.core.cohort import admission, batches, outcomes, window
from kinflow.core.cohort.chunks import replace_row
from kinflow.core.cohort.sparse import identity_rows
from kinflow.core.conditions import SNAPSHOT_MAX_SCANNED, Renderer, evaluate_expression
from kinflow.core.context import Actor, BatchRequest, PlanContext, RowBatch
from kinflow.core.errors import (
    CohortClosed,
    FanOutLimit,
    SpawnDefinitionUnresolved,
    SpawnDepthExceeded,
    SpawnHandoffInvalid,
    SpawnRowIdentity,
)
from kinflow.core.history import record
from kinflow.core.owned import CHILD_HASH_DIGITS, CHILD_PREFIX
from kinflow.core.state import (
    INSTANCE_TYPE,
    Instance,
    ObservedChild,
    ResolvedRow,
    SpawnSeed,
    SubworkflowEntry,
)
from kinflow.define import sites
from kinflow.define.models import Action, SpawnBlock, WorkflowDefinition
from kinflow.gdr import is_gdr

FIRST_READS = 8
"""Batches a spawn reads at most for its first rows (core/cohort/batches.py)."""


@dataclass(frozen=True, slots=True)
class ChildSeed:
    """One child a spawn plans: enough to create it and to register its row."""

    child_id: str
    definition_doc: dict[str, Any]  # the deployed child definition document
    inputs: dict[str, Any]  # the ``with`` values
    context: dict[str, Any]
    ancestors: list[dict[str, Any]]
    row_key: str
    activity: str
    action: str
    definition: str  # the child definition's name (the row's ``definition``)
    entry_key: str  # the parent's stage visit the row is bound to
    stage: str  # that visit's stage (the row's ``cohortStage``)
    seeded: bool  # too many children for one transaction: the row keeps the seed
    # the row's ``priority`` / ``concurrencyKey`` (core/cohort/admission.py), put on its row
    admission: dict[str, Any] = field(default_factory=dict)


# ---- identity ----


def row_key(value: Any) -> str:
    """The identity of one ``forEach`` row."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    if isinstance(value, dict):
        for key in ("_key", "_id"):
            found = value.get(key)
            if isinstance(found, str) and found:
                return found
        if is_gdr(value.get("id")) and "type" in value:
            return str(value["id"])
    raise SpawnRowIdentity(
        "a forEach row needs an identity: a string, number or boolean, or an object with "
        "_key or _id (project one, e.g. {_id, title})",
        row=json.dumps(value, default=str)[:200], reason="missing-identity",
    )


def child_id(parent_id: str, entry_key: str, activity: str, action: str, key: str,
             taken: set[str] | frozenset[str] = frozenset(), attempt: int = 1) -> str:
    """Deterministic child id; a same-visit respawn of a resolved key gets the next suffix,
    a redriven row's later attempts ``attempt_id`` of it."""
    material = "\x1f".join((parent_id, entry_key, activity, action, key)).encode()
    base = CHILD_PREFIX + hashlib.sha256(material).hexdigest()[:CHILD_HASH_DIGITS]
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return attempt_id(candidate, attempt)


def attempt_id(first: str, attempt: int) -> str:
    """The child id of a row's ``attempt`` (redrive), from its first child's id: the first
    attempt keeps it, later ones add ``-a<attempt>``."""
    return first if attempt <= 1 else f"{first}-a{attempt}"


def keyed_rows(rows: list[Any]) -> list[tuple[str, Any]]:
    """Rows with their keys; a key seen twice is ``spawn-row-identity``."""
    seen: set[str] = set()
    out: list[tuple[str, Any]] = []
    for value in rows:
        key = row_key(value)
        if key in seen:
            raise SpawnRowIdentity(f"two forEach rows share the identity {key!r}",
                                   rowKey=key, reason="duplicate")
        seen.add(key)
        out.append((key, value))
    return out


# ---- the spawn step of an action ----


def plan_spawn(instance: Instance, definition: WorkflowDefinition, ctx: PlanContext,
               activity: str, action: Action) -> list[ChildSeed]:
    """The children ``action.spawn`` asks for; live rows rediscovered are adopted."""
    block = action.spawn
    assert block is not None
    depth = len(instance.ancestors) + 1
    if depth > ctx.limits.spawn_depth:
        raise SpawnDepthExceeded(
            f"instance {instance.id_!r} is {len(instance.ancestors)} levels deep; spawning "
            f"would exceed the depth limit of {ctx.limits.spawn_depth}",
            instanceId=instance.id_, depth=depth, limit=ctx.limits.spawn_depth,
        )
    entry = instance.open_entry()
    if entry is None:
        raise SpawnHandoffInvalid("spawning needs an open stage visit", instanceId=instance.id_)
    version = block.definition.version if isinstance(block.definition.version, int) else None
    child_doc = ctx.definition(block.definition.name, version)
    if child_doc is None:
        raise SpawnDefinitionUnresolved(
            f"child definition {block.definition.name!r} is not deployed",
            definition=block.definition.name, version=version,
        )
    renderer = Renderer(instance, definition, ctx)
    cap = window_of(instance, definition, entry.key_, entry.name, activity, action.name)
    text, params = query_of(instance, renderer, block)
    point: dict[str, Any] | None = None
    if cap is not None and "*" in text and batches.batchable(text):
        # a windowed lake cohort is registered a batch at a time (core/cohort/batches.py)
        values, batch = first_batch(text, params, ctx)
        if not batch.done:
            point = batches.checkpoint(after=batch.last, at=batch.at, params=params,
                                       action=action.name, actor=ctx.actor, rows=0,
                                       version=int(child_doc.get("version", 1)))
            point["scale"] = batch.scale
    else:
        values = discover(instance, renderer, block, ctx)
    rows = keyed_rows(values)
    check_size(len(rows), cap, ctx, activity, action.name)
    seeds = fresh_seeds(instance, renderer, ctx, activity, action.name, block, child_doc,
                        rows, ctx.actor)
    if point is not None:
        point["rows"] = len(rows)
        batches.set_registration(instance, (activity, entry.key_), point)
    return seeds


def first_batch(text: str, params: dict[str, Any], ctx: PlanContext
                ) -> tuple[list[Any], RowBatch]:
    """The spawn's first rows and the batch read last (where the next resumes, whether it
    was the last, the membership moment: the lake's clock at the first read). Batches are
    read until one has a row (at most ``FIRST_READS``), so a spawn whose first documents
    do not match still starts rows."""
    request = BatchRequest(text, params, None, None, ctx.limits.registration_batch)
    for _ in range(FIRST_READS):
        batch = ctx.row_batch(request)
        if batch.rows or batch.done:
            break
        request = BatchRequest(text, params, batch.last, batch.at, request.size, batch.scale)
    return batch.rows, batch


def fresh_seeds(instance: Instance, renderer: Renderer, ctx: PlanContext, activity: str,
                action: str, block: SpawnBlock, child_doc: dict[str, Any],
                rows: list[tuple[str, Any]], actor: Actor, batch: bool = False) -> list[ChildSeed]:
    """Adopt the live rows ``rows`` rediscover into the open visit; a seed for each other."""
    entry = instance.open_entry()
    assert entry is not None
    known = list(identity_rows(instance, activity, entry.key_, batch,
                               lambda: ctx.key_chunks(instance.id_, [key for key, _ in rows])))
    live = {row.rowKey: index for index, row in known
            if row.activity == activity and row.action == action
            and row.definition == block.definition.name and row.resolved is None
            and row.abortPending is None}
    for key, _ in rows:
        place = live.get(key)
        row = instance.subworkflows[place] if place is not None else None
        if place is not None and row is not None and row.stageEntry != entry.key_:
            replace_row(instance, place, stageEntry=entry.key_, cohortStage=entry.name)
            record(instance, ctx, "subworkflowAdopted", activity=activity,
                   instanceRef=row.ref.to_json(), rowKey=key)
    fresh = [(key, value) for key, value in rows if key not in live]
    if not fresh:
        return []
    refuse_if_closed(instance, activity, entry.key_)
    context = _context_values(renderer, block, activity, ctx)
    # every child a row ever had, earlier attempts too: a redriven row's first id is free
    # in no registry column, yet its child still exists
    taken = {child for _, row in known for child in (row.child_id, *(row.previousChildIds or ()))}
    seeded = len(fresh) > ctx.limits.spawn_txn if ctx.limits.spawn_txn else False
    ancestors = _ancestors(instance, ctx)
    shared = renderer.variables(sites.SPAWN_WITH, activity, actor=actor,
                                text=" ".join((block.with_ or {}).values()))
    seeds = []
    for key, value in fresh:
        new_id = child_id(instance.id_, entry.key_, activity, action, key, taken)
        taken.add(new_id)
        seeds.append(ChildSeed(
            child_id=new_id, definition_doc=child_doc,
            inputs=_with_values(renderer, block, activity, value, actor, child_doc, shared),
            context=context, ancestors=ancestors, row_key=key, activity=activity,
            action=action, definition=block.definition.name, entry_key=entry.key_,
            stage=entry.name, seeded=seeded,
            admission=admission.row_values(renderer, block, activity, value),
        ))
    return seeds


def window_of(instance: Instance, definition: WorkflowDefinition, entry_key: str, stage: str,
              activity: str, action: str) -> int | None:
    """The ``maxActive`` of the cohort a spawn adds to (the operator's, else the block's)."""
    own = window.setting(instance, (activity, entry_key))
    if own is not None and own.maxActive is not None:
        return own.maxActive
    return window.declared_max(definition, stage, activity, action)


def check_size(rows: int, max_active: int | None, ctx: PlanContext, activity: str,
               action: str) -> None:
    """``fan-out-limit``: past ``limits.fan_out`` rows, or, for a cohort without a window
    (it starts every row at once), past ``limits.max_active_children``."""
    if max_active is None and rows > ctx.limits.max_active_children:
        raise FanOutLimit(
            f"forEach returned {rows} rows and the cohort has no maxActive: it would start "
            f"them all at once; the limit is {ctx.limits.max_active_children} "
            "(set spawn.maxActive for more)", rows=rows, limit=ctx.limits.max_active_children,
            activity=activity, action=action, reason="no-window")
    if rows > ctx.limits.fan_out:
        raise FanOutLimit(f"forEach returned {rows} rows; the limit is {ctx.limits.fan_out}",
                          rows=rows, limit=ctx.limits.fan_out, activity=activity,
                          action=action, reason="fan-out")


def refuse_if_closed(instance: Instance, activity: str, entry_key: str) -> None:
    """A closed cohort never grows: a spawn that would add rows to it is refused."""
    for own in instance.cohorts or []:
        if (own.activity, own.stageEntry) == (activity, entry_key) and own.closedAt:
            raise CohortClosed(
                f"the cohort of activity {activity!r} was closed by {own.closedBy}; "
                "it takes no more rows", instanceId=instance.id_, activity=activity,
                stageEntry=entry_key, closedBy=own.closedBy, closedAt=own.closedAt)


def _ancestors(parent: Instance, ctx: PlanContext) -> list[dict[str, Any]]:
    return [*(a.to_json() for a in parent.ancestors),
            {"id": ctx.gdr(parent.id_), "type": INSTANCE_TYPE}]


def query_of(instance: Instance, renderer: Renderer, block: SpawnBlock
             ) -> tuple[str, dict[str, Any]]:
    """The ``forEach`` text and the variables it reads, as this commit sees them."""
    text = block.forEach
    variables = renderer.variables(sites.SPAWN_FOR_EACH, text=text)  # (the rows if it reads them)
    try:
        read = groq.free_parameters(text)
    except groq.GroqError:
        read = set(variables)
    return text, {name: variables[name] for name in read if name in variables}


def discover(instance: Instance, renderer: Renderer, block: SpawnBlock,
             ctx: PlanContext) -> list[Any]:
    """The rows ``forEach`` yields: array = rows, null = none, anything else = one row."""
    text, params = query_of(instance, renderer, block)
    if "*" in text:
        value = ctx.lake_query(text, params)
    else:
        try:
            value = groq.evaluate(text, params=params, root=instance.to_json(), now=ctx.now,
                                  budget=groq.Budget(max_scanned=SNAPSHOT_MAX_SCANNED))
        except groq.GroqError:
            value = None
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _with_values(renderer: Renderer, block: SpawnBlock, activity: str, row: Any,
                 actor: Actor, child_doc: dict[str, Any],
                 shared: dict[str, Any] | None = None) -> dict[str, Any]:
    """One row's ``with`` values; ``shared``: the variables every row sees, built once."""
    declared = {f.get("name"): f for f in child_doc.get("fields") or []
                if isinstance(f, dict)}
    values: dict[str, Any] = {}
    for name, text in (block.with_ or {}).items():
        entry = declared.get(name)
        source = (entry or {}).get("initialValue") or {}
        if entry is None or source.get("type") != "input":
            raise SpawnHandoffInvalid(
                f"with.{name}: the child has no input field {name!r}", field=name,
                reason="unconsumable-field",
            )
        if shared is None:
            value = renderer.value(text, sites.SPAWN_WITH, activity, actor=actor, row=row)
        else:
            try:
                value = evaluate_expression(text, {**shared, "row": row}, renderer.ctx.now)
            except groq.GroqError:
                value = None
        if value is not None:
            values[name] = value
    return values


def _context_values(renderer: Renderer, block: SpawnBlock, activity: str,
                    ctx: PlanContext) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, text in (block.context or {}).items():
        value = renderer.value(text, sites.SPAWN_CONTEXT, activity, actor=ctx.actor)
        if value is None:
            continue
        if isinstance(value, dict) and is_gdr(value.get("id")):
            value = {"id": value["id"], "type": value.get("type")}
        elif not isinstance(value, str | int | float | bool):
            raise SpawnHandoffInvalid(
                f"context.{name} must be a scalar or a reference {{id, type}}",
                name=name, reason="context-kind",
            )
        values[name] = value
    return values


def reseed(parent: Instance, row: SubworkflowEntry, child_doc: dict[str, Any],
           ctx: PlanContext) -> ChildSeed:
    """The seed a registered row of a large spawn keeps, to create its child later."""
    assert row.seed is not None
    return ChildSeed(
        child_id=row.child_id, definition_doc=child_doc, inputs=row.seed.fields,
        context=row.seed.context, ancestors=_ancestors(parent, ctx), row_key=row.rowKey,
        activity=row.activity, action=row.action, definition=row.definition,
        entry_key=row.stageEntry, stage=row.cohortStage, seeded=True,
    )


def register_queued(instance: Instance, ctx: PlanContext, seed: ChildSeed) -> None:
    """Add the row of a planned child that waits in its cohort's window (core/cohort/window.py):
    its id and seed, and no child document until ``start_row``."""
    row = SubworkflowEntry.model_validate({
        "_key": ctx.new_key(), "activity": seed.activity, "action": seed.action,
        "definition": seed.definition, "stageEntry": seed.entry_key,
        "cohortStage": seed.stage, "rowKey": seed.row_key,
        "ref": {"id": ctx.gdr(seed.child_id), "type": INSTANCE_TYPE},
        "spawnedAt": ctx.now_iso, "queued": True, **seed.admission,
    })
    row = row.model_copy(update={"seed": SpawnSeed(
        version=int(seed.definition_doc.get("version", 1)), fields=seed.inputs,
        context=seed.context)})
    instance.subworkflows.append(row)
    record(instance, ctx, "spawned", activity=seed.activity, instanceRef=row.ref.to_json(),
           rowKey=seed.row_key, actor=ctx.actor.to_json(), queued=True)


def start_row(instance: Instance, ctx: PlanContext, index: int, child: Instance) -> None:
    """Row ``index`` left the window's queue: its child ``child`` now exists."""
    row = instance.subworkflows[index]
    status, stage = child.observable
    changes: dict[str, Any] = {
        "queued": None, "observed": ObservedChild(status=status, stage=stage, at=ctx.now_iso)}
    if child.terminal:
        changes["resolved"] = ResolvedRow(at=child.completedAt or ctx.now_iso,
                                          stage=child.currentStage,
                                          aborted=True if child.abortedAt else None)
    changes.update(outcomes.row_changes_of(child, ctx.limits.row_output_bytes))
    replace_row(instance, index, **changes)
    record(instance, ctx, "subworkflowStarted", activity=row.activity,
           instanceRef=row.ref.to_json(), rowKey=row.rowKey)
    if child.terminal:
        record(instance, ctx, "subworkflowResolved", activity=row.activity,
               instanceRef=row.ref.to_json(), status=status)


def register(instance: Instance, ctx: PlanContext, seed: ChildSeed, child: Instance) -> None:
    """Add the registry row of a planned child, stamped with what the child is now."""
    status, stage = child.observable
    row = SubworkflowEntry.model_validate({
        "_key": ctx.new_key(), "activity": seed.activity, "action": seed.action,
        "definition": seed.definition, "stageEntry": seed.entry_key,
        "cohortStage": seed.stage, "rowKey": seed.row_key,
        "ref": {"id": ctx.gdr(child.id_), "type": INSTANCE_TYPE}, "spawnedAt": ctx.now_iso,
        **seed.admission,
    })
    changes: dict[str, Any] = {
        "observed": ObservedChild(status=status, stage=stage, at=ctx.now_iso)}
    handoff = SpawnSeed(version=int(seed.definition_doc.get("version", 1)),
                        fields=seed.inputs, context=seed.context)
    # the large spawn's seed, else the same values as the handoff redrive rebuilds from
    changes["seed" if seed.seeded else "handoff"] = handoff
    if child.terminal:
        changes["resolved"] = ResolvedRow(at=child.completedAt or ctx.now_iso,
                                          stage=child.currentStage,
                                          aborted=True if child.abortedAt else None)
    changes.update(outcomes.row_changes_of(child, ctx.limits.row_output_bytes))
    row = row.model_copy(update=changes)
    instance.subworkflows.append(row)
    record(instance, ctx, "spawned", activity=seed.activity, instanceRef=row.ref.to_json(),
           rowKey=seed.row_key, actor=ctx.actor.to_json())
    if child.terminal:
        record(instance, ctx, "subworkflowResolved", activity=seed.activity,
               instanceRef=row.ref.to_json(), status=status)
